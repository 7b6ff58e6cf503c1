"""The agents' worker process: the language server runs the agents in a process of its own
(server/editor/server.py `agent_pool`), so that their CPU-bound pricing never holds the server's GIL. This module is
what the pool starts each worker with (`init`) and what it runs there (`run_report`); it imports nothing but the
standard library, so the server sends work to it without importing the coordinator, and the worker imports only
what a report needs (the coordinator, on its first run).

With ASAP_WORKER_REPORT naming a file (off by default; bench/soak.py and the tests set it), the worker also writes
a report of its memory there after each run (JSON, replaced whole): its resident memory, at its start too, the
modules it has imported, and the resident memory the first import of each package's modules added (by top-level
package, ASAP's by subpackage; exclusive of the packages they imported in turn). What neither accounts for is the
data the runs keep: tables warmed up, caches, and anything that leaks.
"""

from __future__ import annotations

import builtins
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the worker imports them on its first run
    from server.agents.report import AnalysisReport
    from server.agents.types import Experiment

REPORT_ENV = "ASAP_WORKER_REPORT"

_PAGE_MB = os.sysconf("SC_PAGE_SIZE") / 2**20 if hasattr(os, "sysconf") else 0.0
_imported_mb: dict[str, float] = {}  # package -> resident MiB its modules' first imports added (exclusive)
_start_mb = 0.0  # resident MiB when the pool started the worker (the interpreter, multiprocessing)
_runs = 0


def rss_mb() -> float:
    """This process' resident memory in MiB (0 where /proc is not available)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * _PAGE_MB
    except (OSError, ValueError, IndexError):
        return 0.0


def init() -> None:
    """The pool's initializer: with ASAP_WORKER_REPORT set, meter the imports from here on."""
    global _start_mb
    if os.environ.get(REPORT_ENV):
        _start_mb = rss_mb()
        _meter_imports()


def run_report(
    exp: Experiment, llm: str, progress: Any, client: Any, kb_path: Path | None
) -> tuple[AnalysisReport, bool]:
    """`server.agents.coordinator.run_report`, in the worker; then the memory report when one is asked for."""
    global _runs
    from server.agents import coordinator

    try:
        return coordinator.run_report(exp, llm, progress, client, kb_path)
    finally:
        _runs += 1
        if path := os.environ.get(REPORT_ENV):
            write_report(Path(path))


def report() -> dict[str, Any]:
    """What `write_report` writes: {"pid", "runs", "rss_mb", "start_mb", "imported_mb": {package: MiB}, "modules":
    [...]}."""
    return {
        "pid": os.getpid(),
        "runs": _runs,
        "rss_mb": round(rss_mb(), 1),
        "start_mb": round(_start_mb, 1),
        "imported_mb": {k: round(v, 2) for k, v in sorted(_imported_mb.items(), key=lambda kv: -kv[1])},
        "modules": sorted(sys.modules),
    }


def write_report(path: Path) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(report()), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:  # a report is a debugging aid: never the agents' failure
        pass


def _meter_imports() -> None:
    """Wrap `__import__` (every import statement and unpickling goes through it): the first import of a top-level
    package is timed in resident memory, less what the packages it imports in turn added (counted as theirs)."""
    if getattr(builtins.__import__, "_asap_meter", False):
        return
    real: Callable[..., Any] = builtins.__import__
    nested: list[float] = []  # per metered import in progress: what the imports inside it added

    def metered(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        new = None if level else _first_new(name, fromlist)
        if new is None:  # nothing new, or relative (counted with the import it is part of)
            return real(name, globals, locals, fromlist, level)
        nested.append(0.0)
        before = rss_mb()
        try:
            return real(name, globals, locals, fromlist, level)
        finally:
            added = rss_mb() - before
            inner = nested.pop()
            key = _package(new)
            _imported_mb[key] = _imported_mb.get(key, 0.0) + added - inner
            if nested:
                nested[-1] += added

    metered._asap_meter = True  # type: ignore[attr-defined]
    builtins.__import__ = metered


def _first_new(name: str, fromlist: Any) -> str | None:
    """The module an import statement loads first, when it loads one: `name`, else one of `from name import ...`."""
    if name and name not in sys.modules:
        return name
    for item in fromlist or ():
        if isinstance(item, str) and item != "*" and f"{name}.{item}" not in sys.modules:
            return f"{name}.{item}"
    return None


def _package(module: str) -> str:
    """What a module's memory is counted under: its top-level package; ASAP's by subpackage (server.perf, ...)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "server" else parts[0]
