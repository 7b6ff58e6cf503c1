"""`asap verify --proposals --ray`: the editor's Verify (verification.verify_advice) with every compile run on a Ray
cluster (server/compile/ray_sweep.py). Waves: the current mesh and the proposals first; then the advice is read from
the cache, and the engine's next candidates for a withdrawn proposal (not compiled yet) are the next wave. The advice
returned is verify_advice's own, read from the cache the waves filled, so it is what a local verify would say; a
target whose task failed keeps the cluster's reason (an error result in place of "not compiled yet").

Several configs (`asap verify A.yml B.yml --proposals --ray`) are one sweep: each wave holds the targets of every
config, so the cluster runs them side by side instead of one config after another (verify_advices_on_ray).

Meanwhile (the editor): `on_result` hears of each target as its task returns, and verdicts_so_far reads from the
cache what a local verify shows at that point (its own on_verdict: the current mesh and the proposals compiled so
far, the verdicts marked on the report), so a Verify on Ray shows each verdict as it comes, as a local one does."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
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


def mesh_key(overrides: dict[str, Any]) -> str:
    """A target's mesh (and batch/remat changes) over its config's, as verdicts_so_far's `failed` keys it."""
    return ray_sweep.target_key("", overrides)[1]


@dataclass(frozen=True)
class SweepConfig:
    """One config of a sweep: its analysis, the agents' report of it (its proposals), and its text (to log the
    revised advice in the experiment log, as a local verify does; None: not logged)."""

    an: Analysis
    report: AnalysisReport | None
    text: str | None = None


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
    on_result: ray_sweep.Results | None = None,
) -> tuple[verification.Advice, ray_sweep.SweepReport]:
    """The advice with its compiles run on the Ray cluster at `address`; and what the sweep did. `on_result` hears
    of each target whose verdict is known (its task returned, or the cache held it)."""
    advices, sweep = verify_advices_on_ray(address, [SweepConfig(an, report, text)], slice_name, max_layers=max_layers,
                                           timeout_s=timeout_s, progress=progress, cancel=cancel,
                                           maxtext_python=maxtext_python, max_memory=max_memory,
                                           on_result=on_result)  # fmt: skip
    return advices[0], sweep


def verify_advices_on_ray(
    address: str | None,
    configs: list[SweepConfig],
    slice_name: str | None = None,
    *,
    max_layers: int = verify_mod.DEFAULT_MAX_LAYERS,
    timeout_s: float = verify_mod.DEFAULT_TIMEOUT_S,
    progress: Progress | None = None,
    cancel: CancelToken | None = None,
    maxtext_python: str | None = None,
    max_memory: int | None = None,
    on_result: ray_sweep.Results | None = None,
) -> tuple[list[verification.Advice], ray_sweep.SweepReport]:
    """Each config's advice (in the order given) with every compile of every config run on the Ray cluster at
    `address` in one sweep: each wave is the targets of all the configs at once; and what the sweep did. With
    several configs a task's label names its config."""
    for c in configs:
        if c.an.config.path is None:
            raise ray_sweep.RayUnavailable("a sweep on Ray compiles a saved config file: save it first")
    with ray_sweep.connected(address) as ray:
        return _on_ray(ray, configs, slice_name, max_layers, timeout_s, progress, cancel, maxtext_python, max_memory,
                       on_result)  # fmt: skip


def _on_ray(
    ray: Any,
    configs: list[SweepConfig],
    slice_name: str | None,
    max_layers: int,
    timeout_s: float,
    progress: Progress | None,
    cancel: CancelToken | None,
    maxtext_python: str | None,
    max_memory: int | None,
    on_result: ray_sweep.Results | None,
) -> tuple[list[verification.Advice], ray_sweep.SweepReport]:
    paths = [Path(c.an.config.path) for c in configs if c.an.config.path is not None]
    assert len(paths) == len(configs)
    db = store.connect()
    sweep = ray_sweep.SweepReport()
    t0 = time.monotonic()
    todo = [[(t.label, t.overrides) for t in verification.targets(c.report)] for c in configs]
    tried: list[set[str]] = [set() for _ in configs]
    advices = [verification.Advice() for _ in configs]

    def named(path: Path, label: str) -> str:
        return f"{path}: {label}" if len(configs) > 1 else label

    def advice_of(c: SweepConfig, text: str | None = None) -> verification.Advice:
        return verification.verify_advice(c.an, c.report, slice_name, max_layers=max_layers, timeout_s=timeout_s,
                                          maxtext_python=maxtext_python, cached_only=True, text=text)  # fmt: skip

    for _ in range(ray_sweep.MAX_WAVES):
        wave: list[tuple[Path, str, dict[str, Any]]] = []
        for i, path in enumerate(paths):
            fresh = [(label, o) for label, o in todo[i] if mesh_key(o) not in tried[i]]
            tried[i] |= {mesh_key(o) for _, o in fresh}
            wave += [(path, named(path, label), o) for label, o in fresh]
        if not wave:
            break
        ray_sweep.prefill_targets(ray, wave, db, sweep, slice_name=slice_name, max_layers=max_layers,
                                  timeout_s=timeout_s, maxtext_python=maxtext_python, progress=progress,
                                  cancel=cancel, max_memory=max_memory, on_result=on_result)  # fmt: skip
        if sweep.cancelled:
            for a in advices:
                a.cancelled = True
            sweep.wall_s = time.monotonic() - t0
            return advices, sweep
        advices = [advice_of(c) for c in configs]
        todo = [
            [
                (e.label, e.overrides)
                for e in [*a.entries, *a.withdrawn]
                if e.result.status == VerifyStatus.UNAVAILABLE and mesh_key(e.overrides) not in tried[i]
            ]
            for i, a in enumerate(advices)
        ]
    # the final advice, logged as a local verify logs it
    advices = [advice_of(c, c.text) for c in configs]
    for path, a in zip(paths, advices, strict=True):
        a.entries = [_failed(e, path, sweep) for e in a.entries]
        a.withdrawn = [_failed(e, path, sweep) for e in a.withdrawn]
    sweep.wall_s = time.monotonic() - t0
    return advices, sweep


def _failed(e: verification.VerifiedTarget, path: Path, sweep: ray_sweep.SweepReport) -> verification.VerifiedTarget:
    """A target the cache has no verdict for because its task failed: an error with the cluster's reason."""
    return with_reason(e, sweep.failed_targets.get(ray_sweep.target_key(path, e.overrides)))


def with_reason(e: verification.VerifiedTarget, why: str | None) -> verification.VerifiedTarget:
    """`e` as an error with the cluster's reason when its task failed (`why`) and the cache has no verdict."""
    if why is None or e.result.status != VerifyStatus.UNAVAILABLE:
        return e
    res = replace(e.result, status=VerifyStatus.ERROR, message=f"on the Ray cluster: {why}")
    return replace(e, result=res)


def verdicts_so_far(
    an: Analysis,
    report: AnalysisReport | None,
    slice_name: str | None = None,
    *,
    failed: Mapping[str, str] | None = None,
    max_layers: int = verify_mod.DEFAULT_MAX_LAYERS,
    timeout_s: float = verify_mod.DEFAULT_TIMEOUT_S,
    maxtext_python: str | None = None,
) -> tuple[list[verification.VerifiedTarget], AnalysisReport | None]:
    """What a local verify shows once the compiles the cache now holds have ended (its last on_verdict): the
    current mesh and the report's own proposals that have a verdict (from the cache, or the cluster's reason when
    their task failed: `failed`, mesh_key -> why), and the report with those verdicts marked on its proposals
    (nothing withdrawn yet: the advice at the sweep's end withdraws, with the next candidates in place). Compiles
    nothing, logs nothing. Worker thread."""
    told: list[tuple[list[verification.VerifiedTarget], AnalysisReport | None]] = []
    # max_compiles=1: no next candidate of a rejected proposal is looked up (a local on_verdict tells none either)
    verification.verify_advice(an, report, slice_name, max_layers=max_layers, timeout_s=timeout_s,
                               maxtext_python=maxtext_python, cached_only=True, max_compiles=1,
                               on_verdict=lambda entries, marked: told.append((entries, marked)))  # fmt: skip
    if not told:
        return [], None
    entries, marked = told[-1]
    why = failed or {}
    known = [with_reason(e, why.get(mesh_key(e.overrides))) for e in entries]
    return [e for e in known if e.result.status != VerifyStatus.UNAVAILABLE], marked
