"""Compiler verification of a config and its proposals (issue 8): which meshes to compile, one compile at
a time across every ASAP process on the machine (the TPU compiler takes most of a small machine's cores),
and the results side by side. The compiling itself is server/perf/verify.py.
"""

from __future__ import annotations

import contextlib
import fcntl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from server import store
from server.agents.tools import mesh_overrides
from server.perf import verify as verify_mod
from server.perf.config import Config
from server.perf.profile_convert import CancelToken, Progress

_THREAD_LOCK = threading.Lock()


@dataclass(frozen=True)
class Target:
    label: str  # "current mesh" or "proposal N"
    overrides: dict[str, Any]  # mesh keys (and batch/remat changes) over the config's
    rank: int | None = None  # the proposal's rank


def targets(analysis: dict[str, Any] | None, include_current: bool = True) -> list[Target]:
    """The current mesh, then each proposal of an `asap analyze --json` document that changes it."""
    out = [Target("current mesh", {})] if include_current else []
    for p in (analysis or {}).get("proposals", []):
        if p.get("keep_current"):
            continue
        overrides = {**mesh_overrides(p["ici"], p["dcn"]), **p.get("other_changes", {})}
        out.append(Target(f"proposal {p['rank']}", overrides, p["rank"]))
    return out


@contextlib.contextmanager
def one_at_a_time(wait: Progress | None = None) -> Iterator[None]:
    """Hold the machine-wide compile lock (an flock in ASAP's cache directory, and a lock for this
    process's threads). `wait` hears about it when another compile holds the lock."""
    with _THREAD_LOCK:
        path = store.cache_dir() / "verify.lock"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            f = path.open("a+")
        except OSError:  # an unwritable cache: this process's lock alone
            yield
            return
        with f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if wait is not None:
                    wait("waiting for another ASAP compile to finish", None)
                fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)


def verify_all(
    source: Config | Path,
    todo: list[Target],
    slice_name: str | None = None,
    max_layers: int = verify_mod.DEFAULT_MAX_LAYERS,
    timeout_s: float = verify_mod.DEFAULT_TIMEOUT_S,
    progress: Progress | None = None,
    cancel: CancelToken | None = None,
) -> list[dict[str, Any]]:
    """Each target compiled in turn (cached ones answer at once): [{label, rank, overrides, result}]."""
    out: list[dict[str, Any]] = []
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
            )
        out.append({"label": t.label, "rank": t.rank, "overrides": t.overrides, "result": res.to_json()})
    return out
