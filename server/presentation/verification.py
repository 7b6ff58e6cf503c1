"""Compiler verification of a config and its proposals (issue 8): which meshes to compile, one compile at
a time across every ASAP process on the machine (the TPU compiler takes most of a small machine's cores),
and the results side by side. The compiling itself is server/compile/verify.py.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import filelock

from server.agents.report import AnalysisReport
from server.agents.tools import mesh_overrides
from server.common import store
from server.common.codes import DiagCode
from server.common.findings import Finding, Severity, Span
from server.common.progress import CancelToken, Progress
from server.compile import verify as verify_mod
from server.compile.verify import VerifyStatus
from server.config.resolve import Config
from server.services.analysis import Analysis

_THREAD_LOCK = threading.Lock()


@dataclass(frozen=True)
class Target:
    label: str  # "current mesh" or "proposal N"
    overrides: dict[str, Any]  # mesh keys (and batch/remat changes) over the config's
    rank: int | None = None  # the proposal's rank


def targets(analysis: AnalysisReport | None, include_current: bool = True) -> list[Target]:
    """The current mesh, then each proposal of an `asap analyze --json` document that changes it."""
    out = [Target("current mesh", {})] if include_current else []
    for p in analysis.proposals if analysis is not None else []:
        if p.keep_current:
            continue
        overrides = {**mesh_overrides(p.ici, p.dcn), **p.other_changes}
        out.append(Target(f"proposal {p.rank}", overrides, p.rank))
    return out


@contextlib.contextmanager
def one_at_a_time(wait: Progress | None = None) -> Iterator[None]:
    """Hold the machine-wide compile lock (a file lock in ASAP's cache directory, and a lock for this
    process's threads). `wait` hears about it when another compile holds the lock."""
    with _THREAD_LOCK:
        path = store.cache_dir() / "verify.lock"
        lock = filelock.FileLock(path)
        contended = False
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            lock.acquire(blocking=False)
        except filelock.Timeout:  # before OSError: filelock's Timeout is a TimeoutError
            contended = True
        except OSError:  # an unwritable cache: this process's lock alone
            yield
            return
        if contended:
            if wait is not None:
                wait("waiting for another ASAP compile to finish", None)
            lock.acquire()
        try:
            yield
        finally:
            lock.release()


@dataclass(frozen=True)
class VerifiedTarget:
    """One target compiled: its label, the proposal's rank (None: the config's own mesh), the mesh keys it set,
    and the verifier's result."""

    label: str
    rank: int | None
    overrides: dict[str, Any]
    result: verify_mod.VerifyResult

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "rank": self.rank, "overrides": self.overrides, "result": self.result.to_json()}


def verify_all(
    source: Config | Path,
    todo: list[Target],
    slice_name: str | None = None,
    max_layers: int = verify_mod.DEFAULT_MAX_LAYERS,
    timeout_s: float = verify_mod.DEFAULT_TIMEOUT_S,
    progress: Progress | None = None,
    cancel: CancelToken | None = None,
    maxtext_python: str | None = None,
) -> list[VerifiedTarget]:
    """Each target compiled in turn (cached ones answer at once).
    With `maxtext_python`, MaxText's own train_compile of the saved config is compiled instead of ASAP's
    reference program."""
    out: list[VerifiedTarget] = []
    for i, t in enumerate(todo):
        if cancel is not None and cancel.cancelled:
            break

        def report(message: str, frac: float | None, t: Target = t, i: int = i) -> None:
            if progress is not None:
                done = (i + (frac or 0.0)) / len(todo)
                progress(f"{t.label}: {message}", done)

        with one_at_a_time(report):
            res = verify_mod.verify(
                source,
                t.overrides or None,
                slice_name=slice_name,
                max_layers=max_layers,
                timeout_s=timeout_s,
                progress=report,
                cancel=cancel,
                maxtext_python=maxtext_python,
            )
        out.append(VerifiedTarget(t.label, t.rank, t.overrides, res))
    return out


# -- what the editor shows -------------------------------------------------------------------------------
VERIFIED = DiagCode.COMPILER_VERIFIED
DOES_NOT_FIT = DiagCode.COMPILER_DOES_NOT_FIT
DISAGREES = DiagCode.COMPILER_DISAGREES
UNAVAILABLE = DiagCode.COMPILER_UNAVAILABLE
STALE = "[stale: the config changed since this compile; verify again] "


def _mesh_anchor(an: Analysis) -> tuple[str | None, Span]:
    e = an.config.mesh_anchor()
    return (e.key, e.key_span) if e is not None else (None, Span.point(0))


def current_entry(results: list[VerifiedTarget]) -> VerifiedTarget | None:
    return next((e for e in results if e.rank is None), None)


def findings(results: list[VerifiedTarget], an: Analysis, stale: bool) -> list[Finding]:
    """The current mesh's verification as diagnostics on the mesh block: verified (ASAP400), does not fit
    (ASAP401), each disagreement with the estimate (ASAP402), or why it could not run (ASAP403). An
    unplaceable mesh already has its static error (ASAP106)."""
    entry = current_entry(results)
    if entry is None:
        return []
    r = entry.result
    key, span = _mesh_anchor(an)
    prefix = STALE if stale else ""

    def at(code: DiagCode, sev: Severity, msg: str) -> Finding:
        return Finding(code, sev, prefix + msg, key, an.config.path, span, data={"verify": str(r.status)})

    st = r.status
    if st in (VerifyStatus.UNPLACEABLE, VerifyStatus.INVALID, VerifyStatus.CANCELLED):
        return []
    if st in (VerifyStatus.UNAVAILABLE, VerifyStatus.ERROR):
        return [at(UNAVAILABLE, Severity.INFORMATION, f"TPU compiler: {r.message}")]
    out = [
        at(DOES_NOT_FIT, Severity.ERROR, f"TPU compiler: {r.message}")
        if st == VerifyStatus.DOES_NOT_FIT
        else at(VERIFIED, Severity.INFORMATION, r.message[:1].upper() + r.message[1:])
    ]
    for d in r.disagreements:
        out.append(at(DISAGREES, Severity.WARNING, f"Estimate vs TPU compiler: {d['message']}"))
    return out


def summary(r: verify_mod.VerifyResult) -> str:
    """A proposal's verification in a few words: 'fits, 12.3 of 15.75 GiB' / 'does not fit' / ..."""
    c = r.compiled
    if r.status == VerifyStatus.OK and c:
        mem, limit = round(c.memory_per_chip_bytes), round(c.hbm_limit_bytes)  # as the JSON has them
        return f"fits, {mem / 2**30:.1f} of {limit / 2**30:.2f} GiB"
    if r.status == VerifyStatus.DOES_NOT_FIT:
        need, have = r.needs_bytes, r.available_bytes
        return f"does not fit, needs {need / 2**30:.1f} of {have / 2**30:.2f} GiB" if need and have else "does not fit"
    return str(r.status)
