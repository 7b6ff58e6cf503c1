"""Compile sweeps on Ray (issue 19): `asap verify CONFIG --proposals --ray [ADDRESS]` fans each (config, mesh) compile
out as a Ray task and keeps each result in ASAP's store as it comes back, under the key a local compile uses
(server/compile/verify.py's compile_key and keep_verdict: the same code computes the key and keeps the value), so the
verdicts are then read exactly as a local `asap verify` reads them: the same figures, and a later local verify
answers from the cache. Several configs are one sweep: every (config, mesh) of every config is a task at once.

How it runs: waves. The first wave is the config's current mesh and every proposal; then the advice is computed from
the cache (verification.verify_advice with cached_only); a proposal the compiler rejected brings the engine's next
candidates, which are not compiled yet: they are the next wave, until no target is left uncompiled.

Each task asks for `num_cpus` (1: the TPU compiler's backend keeps about one core busy) and `memory` (the compile
child's limit), is retried once when its worker dies (max_retries=1) and reported as failed after that. Cancelling
(a CancelToken, Ctrl-C) cancels every pending task (first politely, so a running task kills its compile child, then
with force=True); a result is kept only once its task returned whole, so nothing is half-written.

The environment: the driver's `server` package travels with every task (runtime_env py_modules), the cluster's
Python must have ASAP's dependencies and jax/libtpu installed (the same versions as here: they are part of the cache
key; a task reports its own, and a result compiled under other versions is kept under its own key and said so).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from server.common.childproc import default_max_memory
from server.common.progress import CancelToken, Progress
from server.compile import verify as verify_mod
from server.config.slices import Slice
from server.perf.layout import Layout

CANCEL_GRACE_S = 3.0  # after a polite cancel, how long running tasks have to kill their compile child
MAX_WAVES = 4
PROBE_TIMEOUT_S = 5.0


class RayUnavailable(RuntimeError):
    """Ray is not installed, or the cluster cannot be reached."""


@dataclass(frozen=True)
class Unit:
    """One compile to run on the cluster: what it is (label, config file, overrides), the key it is kept under
    here, and the task's arguments."""

    label: str
    config: Path
    overrides: dict[str, Any]
    key: str
    kind: str  # "reference" or "maxtext"
    args: tuple[Any, ...]

    @property
    def target(self) -> tuple[str, str]:
        return target_key(self.config, self.overrides)


def target_key(config: Path | str, overrides: dict[str, Any]) -> tuple[str, str]:
    """A (config, mesh) target, as SweepReport.failed_targets keys it."""
    return str(config), repr(sorted(overrides.items()))


@dataclass
class SweepReport:
    """What a sweep did: compiles run on the cluster, kept, already cached, failed (label -> why), and whether it
    was cancelled."""

    compiled: int = 0
    cached: int = 0
    twins: int = 0  # targets whose job another target of the same wave compiles (two configs, one model and mesh)
    failed: dict[str, str] = field(default_factory=dict)
    failed_targets: dict[tuple[str, str], str] = field(default_factory=dict)  # target_key -> why
    mismatched: dict[str, str] = field(default_factory=dict)  # label -> the cluster's versions, when not ours
    cancelled: bool = False
    task_s: list[float] = field(default_factory=list)  # each task's own compile time, as the task measured it
    wall_s: float = 0.0
    done: int = 0  # tasks returned, over every wave (the progress' n of N)
    total: int = 0  # tasks started, over every wave


# A target's result is known (its task returned, or the cache already held it): the target, and why it has no
# verdict when its task failed (None: its verdict is in the store now). How a caller shows each verdict as it comes.
Results = Callable[[Unit, str | None], None]


# -- planning (on the driver) ---------------------------------------------------------------------------------
def plan(
    config: Path,
    label: str,
    overrides: dict[str, Any],
    slice_name: str | None,
    max_layers: int,
    timeout_s: float,
    maxtext_python: str | None,
) -> Unit | None:
    """The compile `verify.verify` would run for this target (verify.compile_key: the same key), or None when it
    would run none (an invalid mesh, a model the reference cannot build, no MaxText): verify then says why, locally
    and at once."""
    planned = verify_mod.compile_key(
        config, overrides or None, slice_name=slice_name, max_layers=max_layers, maxtext_python=maxtext_python
    )
    if planned is None:
        return None
    if planned.program == "maxtext":
        assert maxtext_python is not None
        args = (maxtext_python, str(config), planned.slice, overrides, planned.mesh_axes, timeout_s, planned.layers,
                planned.versions, planned.layout)  # fmt: skip
        return Unit(label, config, overrides, planned.key, "maxtext", args)
    return Unit(label, config, overrides, planned.key, "reference", (planned.job, timeout_s))


# -- the tasks (on the cluster) ---------------------------------------------------------------------------------
def compile_reference(job: dict[str, Any], timeout_s: float, max_memory: int | None) -> dict[str, Any]:
    """The reference program's compile of `job` in this worker (verify.run_worker: one child, depths in turn)."""
    from server.compile import verify as v

    cancel = CancelToken()
    t0 = time.monotonic()
    try:
        run = v.run_worker(job, None, cancel, timeout_s, max_memory, parallel=False)
    except KeyboardInterrupt:  # ray.cancel: kill the compile child before going
        cancel.cancel()
        raise
    vers = v.versions()
    return {
        "key": v.cache_key(job, vers),
        "value": v.verdict_value(run.runs, run.error, run.versions),
        "keep": v.worth_keeping(run),
        "why": _why(run.timed_out, run.returncode, run.stderr, timeout_s),
        "task_s": time.monotonic() - t0,
    }


def compile_maxtext(
    python: str,
    config: str,
    sl: Slice,
    overrides: dict[str, Any],
    mesh_axes: list[tuple[str, int]],
    timeout_s: float,
    layers: int,
    vers: dict[str, str | None],
    layout: Layout | None = None,
) -> dict[str, Any]:
    """MaxText's train_compile of the saved config in this worker (verify_maxtext.run), its compiled step simulated
    on `layout` (the mesh on the slice) as a local verify does."""
    from server.compile import verify_maxtext

    cancel = CancelToken()
    t0 = time.monotonic()
    try:
        out = verify_maxtext.run(python, Path(config), sl, overrides, mesh_axes, timeout_s, None, cancel, layout=layout)
    except KeyboardInterrupt:
        cancel.cancel()
        raise
    here = verify_maxtext.versions(python)
    runs = [{**out["run"], "layers": layers}] if "run" in out else []
    error = out.get("error")
    keep = not out["cancelled"] and not out["timed_out"]
    keep = keep and bool(runs or (error is not None and error.get("kind") in ("oom", "placement")))
    versions = {"jax": here.get("jax"), "libtpu": here.get("libtpu")}
    return {
        "key": verify_maxtext.cache_key(Path(config), sl, overrides, here),
        "value": verify_mod.verdict_value(runs, error, versions),
        "keep": keep,
        "why": _why(out["timed_out"], 0, out.get("tail", ""), timeout_s),
        "task_s": time.monotonic() - t0,
        "versions_differ": here != vers,
    }


def _why(timed_out: bool, returncode: int, stderr: str, timeout_s: float) -> str:
    if timed_out:
        return f"the compile took longer than {timeout_s:.0f} s and was stopped"
    tail = stderr.strip().splitlines()[-1:] if stderr.strip() else []
    return f"the compile stopped without a result (exit {returncode})" + (f": {tail[0][:300]}" if tail else "")


# -- the sweep --------------------------------------------------------------------------------------------------
@contextlib.contextmanager
def connected(address: str | None) -> Iterator[Any]:
    """Ray, connected to the cluster at `address` (None or "auto": the one `ray start` runs here) for the block,
    with this checkout's `server` package shipped to the workers; disconnected after it (when this opened it).
    Ray's driver prints the cluster's notices (a worker that died) on stdout: they go to stderr meanwhile, so that
    `--json` output stays JSON."""
    with contextlib.redirect_stdout(sys.stderr):
        ray, owned = connect(address)
        try:
            yield ray
        finally:
            if owned:
                ray.shutdown()


def connect(address: str | None) -> tuple[Any, bool]:
    """Ray, connected to the cluster at `address` (None or "auto": the one `ray start` runs here), with this
    checkout's `server` package shipped to the workers; and whether this call connected it."""
    try:
        import ray
    except ImportError as e:
        raise RayUnavailable("Ray is not installed: pip install 'asap[team]' (or '.[team]' in a checkout)") from e
    import server

    if ray.is_initialized():  # the caller's connection (a test, a notebook): used, and left open
        return ray, False
    pkg = str(Path(server.__file__).resolve().parent)
    if address and address != "auto":
        _probe(address)
    try:
        ray.init(
            address=address or "auto",
            runtime_env={"py_modules": [pkg]},
            logging_level=logging.ERROR,
            log_to_driver=False,
        )
    except (ConnectionError, RuntimeError, ValueError) as e:
        if not address or address == "auto":
            # Ray's own words name its `--address` flag and RAY_ADDRESS, not ASAP's ways to give one
            raise RayUnavailable(
                "no Ray cluster runs on this machine: start one (`ray start --head`) or give the cluster's head as "
                "--ray HOST:PORT (the editor: asap.verifyCluster)"
            ) from e
        raise RayUnavailable(f"cannot reach the Ray cluster at {address}: {e}") from e
    return ray, True


def _probe(address: str) -> None:
    """Raise RayUnavailable at once when nothing listens at `address` (host:port): Ray's own connect retries for
    minutes before it gives up."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise RayUnavailable(f"--ray {address}: expected HOST:PORT (the head node's GCS port, 6379 by default)")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=PROBE_TIMEOUT_S):
            pass
    except OSError as e:
        raise RayUnavailable(
            f"cannot reach the Ray cluster at {address} ({e.strerror or e}): is `ray start --head` running there?"
        ) from None


def run_units(
    ray: Any,
    units: list[Unit],
    db: Any,
    report: SweepReport,
    progress: Progress | None = None,
    cancel: CancelToken | None = None,
    max_memory: int | None = None,
    num_cpus: float = 1,
    same: dict[str, list[Unit]] | None = None,
    on_result: Results | None = None,
) -> None:
    """Run `units` as Ray tasks; keep each result in `db` as its task returns (progress: n of N done), then tell
    `on_result` of it (and of its twins). `same`: by key, the other targets a unit's compile answers (another
    config's target with the same job), which share its failure when it fails."""
    memory = int(max_memory or default_max_memory())
    opts = {"num_cpus": num_cpus, "memory": memory, "max_retries": 1, "retry_exceptions": False}
    ref_task = ray.remote(**opts)(compile_reference)
    mt_task = ray.remote(**opts)(compile_maxtext)
    pending: dict[Any, Unit] = {}
    for u in units:
        ref = ref_task.remote(*u.args, max_memory) if u.kind == "reference" else mt_task.remote(*u.args)
        pending[ref] = u
    report.total += len(units)  # n of N over every wave of the sweep

    def cancel_all() -> None:
        refs = list(pending)
        for r in refs:
            with contextlib.suppress(Exception):
                ray.cancel(r, force=False)  # a running task gets KeyboardInterrupt and kills its compile child
        with contextlib.suppress(Exception):
            ray.wait(refs, num_returns=len(refs), timeout=CANCEL_GRACE_S)
        for r in refs:
            with contextlib.suppress(Exception):
                ray.cancel(r, force=True)

    if progress is not None:
        progress(f"compiling on the Ray cluster: {report.done} of {report.total} done", report.done / report.total)
    try:
        while pending:
            if cancel is not None and cancel.cancelled:
                report.cancelled = True
                cancel_all()
                return
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
            for r in ready:
                u = pending.pop(r)
                report.done += 1
                _keep(ray, r, u, db, report)
                twins = (same or {}).get(u.key, [])
                if u.label in report.failed:
                    for twin in twins:
                        _failed(report, twin, report.failed[u.label])
                if on_result is not None:
                    for t in [u, *twins]:
                        on_result(t, report.failed_targets.get(t.target))
                if progress is not None:
                    n, total = report.done, report.total
                    progress(f"compiling on the Ray cluster: {n} of {total} done ({u.label})", n / total)
    except KeyboardInterrupt:
        report.cancelled = True
        cancel_all()
        raise


def _keep(ray: Any, ref: Any, u: Unit, db: Any, report: SweepReport) -> None:
    try:
        out = ray.get(ref)
    except Exception as e:  # the worker died twice (WorkerCrashedError), the node went, the task raised
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        _failed(
            report,
            u,
            f"the Ray task failed after one retry: {type(e).__name__}" + (f": {first[:300]}" if first else ""),
        )
        return
    report.task_s.append(float(out["task_s"]))
    if out["key"] != u.key or out.get("versions_differ"):
        report.mismatched[u.label] = (
            f"compiled under the cluster's versions {out['value'].get('versions')}: kept under their own key"
        )
    if out["keep"]:
        verify_mod.keep_verdict(db, out["key"], out["value"])
        report.compiled += 1
    else:
        _failed(report, u, out["why"])


def _failed(report: SweepReport, u: Unit, why: str) -> None:
    report.failed[u.label] = why
    report.failed_targets[u.target] = why


def prefill_targets(
    ray: Any,
    targets: list[tuple[Path, str, dict[str, Any]]],
    db: Any,
    report: SweepReport,
    *,
    slice_name: str | None,
    max_layers: int,
    timeout_s: float,
    maxtext_python: str | None,
    progress: Progress | None = None,
    cancel: CancelToken | None = None,
    max_memory: int | None = None,
    on_result: Results | None = None,
) -> None:
    """Compile on the cluster, all at once, every target (config, label, overrides) the cache does not hold yet:
    the targets of several configs are one batch of tasks, not one config after another. `on_result` hears of each
    target whose verdict is known: at once for those the cache holds, then as their tasks return."""
    units: list[Unit] = []
    same: dict[str, list[Unit]] = {}  # key -> the other targets of this batch with that compile
    held: list[Unit] = []  # the targets the cache answers
    for config, label, overrides in targets:
        u = plan(config, label, overrides, slice_name, max_layers, timeout_s, maxtext_python)
        if u is None:
            continue
        if verify_mod.read_verdict(db, u.key) is not None:
            report.cached += 1
            held.append(u)
            continue
        if any(x.key == u.key for x in units):  # the same job as another target's (two configs, one model): once
            same.setdefault(u.key, []).append(u)
            report.twins += 1
            continue
        units.append(u)
    if on_result is not None:
        for u in held:
            on_result(u, None)
    if units:
        run_units(ray, units, db, report, progress, cancel, max_memory, same=same, on_result=on_result)
