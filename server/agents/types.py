"""What the agents exchange and return: an experiment, the Analyzer's diagnosis, the Proposal agent's
proposals, and the result `asap analyze --json` prints. The result's JSON shape is typed once, in
server/agents/report.py (`Result.report()`), and published as schema/analyze.schema.json."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from server.agents.report import AnalysisReport
from server.config.run_flags import FlagSource
from server.perf.estimate import Estimate
from server.profiles.profile import Report


@dataclass(frozen=True)
class Experiment:
    """One analysis request: a config (its buffer text when open in an editor), an optional slice for
    configs that declare none, an optional profile path overriding the config's link."""

    config: Path
    text: str | None = None
    slice: str | None = None
    profile: Path | None = None
    workspace: Path | None = None
    profile_search_paths: tuple[Path, ...] = ()  # asap.profileSearchPaths / --profile-search-path
    xla_flags: FlagSource | None = None  # --xla-flags / asap.xlaFlags (the config's own comment is in its text)


@dataclass(frozen=True)
class Evidence:
    text: str
    source: str  # "profile: hlo_stats ...", "estimate: server/perf/steptime.py", "spec: v5e peak (gcp-v5e)"

    def to_json(self) -> dict[str, str]:
        return {"text": self.text, "source": self.source}


@dataclass
class Diagnosis:
    bottleneck: str  # compute | hbm | communication | input | host | memory | unknown
    confidence: float
    evidence: list[Evidence]
    keys: list[str]  # the config keys implicated
    source: str  # "profile" | "estimate"
    summary: str
    gap: dict[str, Any] | None = None  # measured vs expected, when a profile matches the config

    def to_json(self) -> dict[str, Any]:
        return {
            "bottleneck": self.bottleneck,
            "confidence": round(self.confidence, 2),
            "evidence": [e.to_json() for e in self.evidence],
            "keys": self.keys,
            "source": self.source,
            "summary": self.summary,
            "gap": self.gap,
        }


@dataclass
class Proposal:
    rank: int
    ici: dict[str, int]
    dcn: dict[str, int]
    other_changes: dict[str, Any]
    step_s: float
    mfu: float
    speedup: float  # throughput (tokens/s) against the current config
    hbm_bytes: float
    hbm_usable_bytes: float
    tradeoffs: list[str]
    rationale: str
    references: list[str]
    confidence: float
    confidence_basis: str
    keep_current: bool = False
    # meshes the model prices identically to this one (same step time and memory): one candidate, written once
    equivalent: list[dict[str, dict[str, int]]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "keep_current": self.keep_current,
            "ici": self.ici,
            "dcn": self.dcn,
            "other_changes": self.other_changes,
            "expected": {
                "step_s": self.step_s,
                "mfu": self.mfu,
                "speedup": None if self.speedup != self.speedup else self.speedup,  # NaN: no current to compare
            },
            "memory": {"hbm_bytes": self.hbm_bytes, "usable_bytes": self.hbm_usable_bytes},
            "tradeoffs": self.tradeoffs,
            "confidence": round(self.confidence, 2),
            "confidence_basis": self.confidence_basis,
            "rationale": self.rationale,
            "references": self.references,
            "equivalent": self.equivalent,
        }


@dataclass
class Backend:
    name: str  # "offline" | "claude"
    fallback_reason: str | None = None
    model: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "fallback_reason": self.fallback_reason, "model": self.model}


@dataclass
class Result:
    config: Path
    slice: dict[str, Any] | None
    mesh: dict[str, Any] | None
    findings: list[dict[str, Any]]
    estimate: Estimate | None
    diagnosis: Diagnosis | None
    proposals: list[Proposal]
    backend: Backend
    profile: Report | None = None
    calibration: str | None = None
    notes: list[str] = field(default_factory=list)
    xla_flags: dict[str, Any] | None = None  # RunFlags.to_json(): the flags the estimates were priced under

    def to_json(self) -> dict[str, Any]:
        return {
            "config": str(self.config),
            "slice": self.slice,
            "mesh": self.mesh,
            "findings": self.findings,
            "estimate": self.estimate.to_json() if self.estimate else None,
            "xla_flags": self.xla_flags,
            "profile": None if self.profile is None else self.profile.to_json(),
            "diagnosis": self.diagnosis.to_json() if self.diagnosis else None,
            "calibration": self.calibration,
            "proposals": [p.to_json() for p in self.proposals],
            "backend": self.backend.to_json(),
            "notes": self.notes,
        }

    def report(self) -> AnalysisReport:
        """The result as the typed `asap analyze --json` document (checked against its models)."""
        return AnalysisReport.from_json(self.to_json())
