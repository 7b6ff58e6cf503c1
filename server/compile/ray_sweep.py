"""Compile sweeps on Ray (issue 19): `asap verify CONFIG --proposals --ray [ADDRESS]` fans each (config, mesh) compile
out as a Ray task and keeps each result in ASAP's store as it comes back, under the key a local compile uses
(server/compile/verify.py's cache_key, or verify_maxtext.cache_key with MaxText), so the verdicts are then read
exactly as a local `asap verify` reads them: the same figures, and a later local verify answers from the cache.

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
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from server.common import store
from server.common.childproc import default_max_memory
from server.common.codes import DiagCode
from server.common.findings import Severity
from server.common.progress import CancelToken, Progress
from server.compile import verify as verify_mod
from server.config import resolve as config_mod
from server.config.mesh import check
from server.config.slices import Slice

# The table and column verify.py keeps compiles in (verify._CACHE): the same rows a local compile writes.
_CACHE = store.BlobCache("verifications", "result")
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


@dataclass
class SweepReport:
    """What a sweep did: compiles run on the cluster, kept, already cached, failed (label -> why), and whether it
    was cancelled."""

    compiled: int = 0
    cached: int = 0
    failed: dict[str, str] = field(default_factory=dict)
    mismatched: dict[str, str] = field(default_factory=dict)  # label -> the cluster's versions, when not ours
    cancelled: bool = False
    task_s: list[float] = field(default_factory=list)  # each task's own compile time, as the task measured it
    wall_s: float = 0.0


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
    """The compile `verify.verify` would run for this target, or None when it would run none (an invalid mesh, a
    model the reference cannot build, no compiler): verify then says why, locally and at once."""
    cfg = config_mod.load(config)
    if overrides:
        cfg = config_mod.with_overrides(cfg, overrides)
    chk = check(cfg, slice_name)
    sl = chk.slice
    if sl is None or not chk.consistent:
        return None
    if any(f.severity == Severity.ERROR and f.code != DiagCode.AXIS_NOT_PLACEABLE for f in chk.findings):
        return None
    allow_split = cfg.get("allow_split_physical_axes", False) is True
    if maxtext_python:
        from server.compile import verify_maxtext

        vers = verify_maxtext.versions(maxtext_python)
        if vers.get("maxtext") is None:
            return None
        job = verify_mod.mesh_job(chk, allow_split)
        mesh_axes = [(a, i * d) for a, i, d in zip(job["axes"], job["ici"], job["dcn"], strict=True)]
        key = verify_maxtext.cache_key(config, sl, overrides, vers)
        layers = cfg.model.num_decoder_layers if cfg.model is not None else 0
        args = (maxtext_python, str(config), sl, overrides, mesh_axes, timeout_s, layers, vers)
        return Unit(label, config, overrides, key, "maxtext", args)
    try:
        spec = verify_mod.ref_spec(cfg, sl)
    except verify_mod.VerifyError:
        return None
    job = {
        "topology": verify_mod.topology_job(sl),
        "mesh": verify_mod.mesh_job(chk, allow_split),
        "model": spec.to_json(),
        "layers": verify_mod.layer_plan(spec.layers, max_layers),
    }
    key = verify_mod.cache_key(job, verify_mod.versions())
    return Unit(label, config, overrides, key, "reference", (job, timeout_s))


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
    keep = (run.error is None or run.error.get("kind") in ("oom", "placement")) and bool(run.runs or run.error)
    keep = keep and run.returncode in (0, 3) and not run.timed_out
    return {
        "key": v.cache_key(job, vers),
        "value": {"runs": run.runs, "error": run.error, "versions": run.versions},
        "keep": keep,
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
) -> dict[str, Any]:
    """MaxText's train_compile of the saved config in this worker (verify_maxtext.run)."""
    from server.compile import verify_maxtext

    cancel = CancelToken()
    t0 = time.monotonic()
    try:
        out = verify_maxtext.run(python, Path(config), sl, overrides, mesh_axes, timeout_s, None, cancel)
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
        "value": {"runs": runs, "error": error, "versions": versions},
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
        raise RayUnavailable(f"cannot reach the Ray cluster at {address or 'auto'}: {e}") from e
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
) -> None:
    """Run `units` as Ray tasks; keep each result in `db` as its task returns (progress: n of N done)."""
    memory = int(max_memory or default_max_memory())
    opts = {"num_cpus": num_cpus, "memory": memory, "max_retries": 1, "retry_exceptions": False}
    ref_task = ray.remote(**opts)(compile_reference)
    mt_task = ray.remote(**opts)(compile_maxtext)
    pending: dict[Any, Unit] = {}
    for u in units:
        ref = ref_task.remote(*u.args, max_memory) if u.kind == "reference" else mt_task.remote(*u.args)
        pending[ref] = u
    total, done = len(units), 0

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
        progress(f"compiling on the Ray cluster: 0 of {total} done", 0.0)
    try:
        while pending:
            if cancel is not None and cancel.cancelled:
                report.cancelled = True
                cancel_all()
                return
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
            for r in ready:
                u = pending.pop(r)
                done += 1
                _keep(ray, r, u, db, report)
                if progress is not None:
                    progress(f"compiling on the Ray cluster: {done} of {total} done ({u.label})", done / total)
    except KeyboardInterrupt:
        report.cancelled = True
        cancel_all()
        raise


def _keep(ray: Any, ref: Any, u: Unit, db: Any, report: SweepReport) -> None:
    try:
        out = ray.get(ref)
    except Exception as e:  # the worker died twice (WorkerCrashedError), the node went, the task raised
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        report.failed[u.label] = f"the Ray task failed after one retry: {type(e).__name__}" + (
            f": {first[:300]}" if first else ""
        )
        return
    report.task_s.append(float(out["task_s"]))
    if out["key"] != u.key or out.get("versions_differ"):
        report.mismatched[u.label] = (
            f"compiled under the cluster's versions {out['value'].get('versions')}: kept under their own key"
        )
    if out["keep"]:
        _CACHE.put(db, out["key"], out["value"])
        report.compiled += 1
    else:
        report.failed[u.label] = out["why"]


def prefill(
    ray: Any,
    config: Path,
    targets: list[tuple[str, dict[str, Any]]],
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
) -> None:
    """Compile on the cluster every target (label, overrides) of `config` the cache does not hold yet."""
    units: list[Unit] = []
    for label, overrides in targets:
        u = plan(config, label, overrides, slice_name, max_layers, timeout_s, maxtext_python)
        if u is None:
            continue
        if _CACHE.get(db, u.key) is not None:
            report.cached += 1
            continue
        units.append(u)
    if units:
        run_units(ray, units, db, report, progress, cancel, max_memory)
