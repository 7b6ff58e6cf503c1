"""`asap verify --proposals --ray`: the editor's Verify (verification.verify_advice) with every compile run on a Ray
cluster (server/compile/ray_sweep.py). Waves: the current mesh and the proposals first; then the advice is read from
the cache, and the engine's next candidates for a withdrawn proposal (not compiled yet) are the next wave. The advice
returned is verify_advice's own, read from the cache the waves filled, so it is what a local verify would say; a
target whose task failed keeps the cluster's reason (an error result in place of "not compiled yet")."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from server.agents.report import AnalysisReport
from server.common import store
from server.common.progress import CancelToken, Progress
from server.compile import ray_sweep
from server.compile import verify as verify_mod
from server.compile.verify import VerifyStatus
from server.presentation import verification
from server.services.analysis import Analysis


def _key(overrides: dict[str, Any]) -> str:
    return repr(sorted(overrides.items()))


def verify_advice_on_ray(
    address: str | None,
    an: Analysis,
    report: AnalysisReport | None,
    slice_name: str | None = None,
    *,
    max_layers: int = verify_mod.DEFAULT_MAX_LAYERS,
    timeout_s: float = verify_mod.DEFAULT_TIMEOUT_S,
    progress: Progress | None = None,
    cancel: CancelToken | None = None,
    maxtext_python: str | None = None,
    text: str | None = None,
    max_memory: int | None = None,
) -> tuple[verification.Advice, ray_sweep.SweepReport]:
    """The advice with its compiles run on the Ray cluster at `address`; and what the sweep did."""
    config = an.config.path
    if config is None:
        raise ray_sweep.RayUnavailable("a sweep on Ray compiles a saved config file: save it first")
    with ray_sweep.connected(address) as ray:
        return _on_ray(ray, an, report, slice_name, max_layers, timeout_s, progress, cancel, maxtext_python, text,
                       max_memory)  # fmt: skip


def _on_ray(
    ray: Any,
    an: Analysis,
    report: AnalysisReport | None,
    slice_name: str | None,
    max_layers: int,
    timeout_s: float,
    progress: Progress | None,
    cancel: CancelToken | None,
    maxtext_python: str | None,
    text: str | None,
    max_memory: int | None,
) -> tuple[verification.Advice, ray_sweep.SweepReport]:
    config = an.config.path
    assert config is not None
    db = store.connect()
    sweep = ray_sweep.SweepReport()
    t0 = time.monotonic()
    todo = [(t.label, t.overrides) for t in verification.targets(report)]
    tried: set[str] = set()
    advice = verification.Advice()
    for _ in range(ray_sweep.MAX_WAVES):
        fresh = [(label, o) for label, o in todo if _key(o) not in tried]
        if not fresh:
            break
        tried |= {_key(o) for _, o in fresh}
        ray_sweep.prefill(ray, Path(config), fresh, db, sweep, slice_name=slice_name, max_layers=max_layers,
                          timeout_s=timeout_s, maxtext_python=maxtext_python, progress=progress, cancel=cancel,
                          max_memory=max_memory)  # fmt: skip
        if sweep.cancelled:
            advice.cancelled = True
            sweep.wall_s = time.monotonic() - t0
            return advice, sweep
        advice = verification.verify_advice(an, report, slice_name, max_layers=max_layers, timeout_s=timeout_s,
                                            maxtext_python=maxtext_python, cached_only=True)  # fmt: skip
        todo = [
            (e.label, e.overrides)
            for e in [*advice.entries, *advice.withdrawn]
            if e.result.status == VerifyStatus.UNAVAILABLE and _key(e.overrides) not in tried
        ]
    # the final advice, logged as a local verify logs it
    advice = verification.verify_advice(an, report, slice_name, max_layers=max_layers, timeout_s=timeout_s,
                                        maxtext_python=maxtext_python, cached_only=True, text=text)  # fmt: skip
    failed = {_key(o): why for label, o in _targets_by_label(report, advice) if (why := sweep.failed.get(label))}
    if failed:
        advice.entries = [_failed(e, failed) for e in advice.entries]
        advice.withdrawn = [_failed(e, failed) for e in advice.withdrawn]
    sweep.wall_s = time.monotonic() - t0
    return advice, sweep


def _targets_by_label(report: AnalysisReport | None, advice: verification.Advice) -> list[tuple[str, dict[str, Any]]]:
    return [(t.label, t.overrides) for t in verification.targets(report)] + [
        (e.label, e.overrides) for e in [*advice.entries, *advice.withdrawn]
    ]


def _failed(e: verification.VerifiedTarget, failed: dict[str, str]) -> verification.VerifiedTarget:
    why = failed.get(_key(e.overrides))
    if why is None or e.result.status != VerifyStatus.UNAVAILABLE:
        return e
    res = replace(e.result, status=VerifyStatus.ERROR, message=f"on the Ray cluster: {why}")
    return replace(e, result=res)
