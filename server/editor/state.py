"""What the language server holds for one open document, in one place: its analysis, its linked profile's result,
the agents' report, the TPU compiler's results, and the background jobs working on it. Closing the document drops
all of it and cancels its jobs (`DocumentState.close`).

Each result remembers the document version it was computed for: a result of an older version is stale (shown
marked as such, or not at all) and never applied to the text as it is now. The analysis also remembers the
generation it was started in: invalidating it (a parent, the settings or the disk changed) starts a new generation,
and a result of an older one is dropped even for the same version. At most one analysis of a document runs at a
time (`running`; a thread cannot be stopped, so a newer version waits for it instead of running beside it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from server.agents.report import AnalysisReport
from server.common.findings import Finding
from server.presentation.verification import VerifiedTarget
from server.services.analysis import Analysis
from server.services.experiments import Outcome
from server.services.profile_analysis import ProfileResult

T = TypeVar("T")


@dataclass(frozen=True)
class Versioned(Generic[T]):
    """A result and the document version it is of."""

    version: int | None
    value: T

    def fresh(self, version: int | None) -> T | None:
        """The result when it is of `version`, else None."""
        return self.value if self.version == version else None


@dataclass(frozen=True)
class Running:
    """The analysis of a document in flight: the version and generation it is of, and its future."""

    version: int | None
    generation: int
    future: asyncio.Future[Analysis]


@dataclass
class DocumentState:
    analysis: Versioned[Analysis] | None = None  # static checks and estimate, of the current generation
    last: Versioned[Analysis] | None = None  # the last analysis completed, of any version (code lens placement)
    generation: int = 0  # bumped when the analysis of the same text must be redone
    running: Running | None = None  # the one analysis of this document in flight
    failed: tuple[int | None, int] | None = None  # (version, generation) whose analysis raised: not retried
    size: Versioned[Finding | None] | None = None  # the size-limit finding of a version (None: within the limits)
    lens_waiting: bool = False  # a code lens was answered before the analysis was ready: refresh when it is
    profile: ProfileResult | None = None  # the linked profile's result (for the last analysis)
    refreshed: tuple[int | None, int] | None = None  # (version, generation) whose analysis and profile were published
    agents: Versioned[AnalysisReport] | None = None  # the agents' diagnosis and proposals
    # A launch file's: the agents' report of each run, by its 1-based index in the file (server/launch/)
    run_agents: dict[int, Versioned[AnalysisReport]] = field(default_factory=dict)
    run_verified: dict[int, Versioned[list[VerifiedTarget]]] = field(default_factory=dict)  # and the compiler's
    verified: Versioned[list[VerifiedTarget]] | None = None  # the TPU compiler's, per target
    new_outcome: Outcome | None = None  # an outcome recorded by itself, to announce once
    jobs: dict[str, asyncio.Task[None]] = field(default_factory=dict, repr=False)  # "refresh", "agents", "verify"

    def ready(self, version: int | None) -> Analysis | None:
        """The analysis of `version`, of the current generation, when it has completed; else None."""
        return self.analysis.fresh(version) if self.analysis is not None else None

    def publishable(self, version: int | None) -> Analysis | None:
        """The analysis of `version` once its refresh has published it with the profile's findings: what another
        producer (the agents, the compiler) publishes again with its own. Before that, the refresh publishes."""
        return self.ready(version) if self.refreshed == (version, self.generation) else None

    def invalidate(self) -> None:
        """The text's analysis must be redone (its parents, the settings or the disk changed)."""
        self.generation += 1
        self.analysis = None
        self.failed = None

    def analysed(self, version: int | None, generation: int, future: asyncio.Future[Analysis]) -> None:
        """An analysis finished (a done-callback, on the event loop): keep it unless it is of an older
        generation or an older version than the one kept (latest version wins)."""
        if future.cancelled() or future.exception() is not None:
            if generation == self.generation and not future.cancelled():
                self.failed = (version, generation)
            return
        an = Versioned(version, future.result())
        if self.last is None or not _older(version, self.last.version):
            self.last = an
        if generation != self.generation:
            return
        if self.analysis is not None and _older(version, self.analysis.version):
            return
        self.analysis = an

    def restart(self, job: str, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run `work` as this document's `job`, cancelling the run of it still in flight (its result is stale)."""
        old = self.jobs.pop(job, None)
        if old is not None:
            old.cancel()
        task = self.jobs[job] = asyncio.ensure_future(work)
        return task

    def close(self) -> None:
        """Cancel every job on this document (their results are not wanted any more)."""
        for t in self.jobs.values():
            t.cancel()


def _older(version: int | None, than: int | None) -> bool:
    return version is not None and than is not None and version < than
