"""What the language server holds for one open document, in one place: its analysis, its linked profile's result,
the agents' report, the TPU compiler's results, and the background jobs working on it. Closing the document drops
all of it and cancels its jobs (`DocumentState.close`).

Each result remembers the document version it was computed for: a result of an older version is stale (shown
marked as such, or not at all) and never applied to the text as it is now.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from server.agents.report import AnalysisReport
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


@dataclass
class DocumentState:
    analysis: Versioned[Analysis] | None = None  # static checks and estimate
    profile: ProfileResult | None = None  # the linked profile's result (for the last analysis)
    agents: Versioned[AnalysisReport] | None = None  # the agents' diagnosis and proposals
    verified: Versioned[list[VerifiedTarget]] | None = None  # the TPU compiler's, per target
    new_outcome: Outcome | None = None  # an outcome recorded by itself, to announce once
    jobs: dict[str, asyncio.Task[None]] = field(default_factory=dict, repr=False)  # "refresh", "agents", "verify"

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
