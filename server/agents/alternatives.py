"""The proposal engine's next candidates once some meshes are ruled out (issue 18): when the TPU compiler rejects a
proposal (it does not fit in HBM, or does not compile), the offline engine (server/agents/proposal.py) is asked
again with those meshes taken out of its enumeration, so the family and kind of mesh they stood for is represented
by its next-ranked member. Same diagnosis, same calibration on the linked profile, same confidence model as the
analysis the report came from; the report itself is not changed here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from server.agents.proposal import Calibration, calibration, propose
from server.agents.report import AnalysisReport, ProposalView
from server.agents.tools import Context, compact
from server.agents.types import Diagnosis, Evidence
from server.perf.enumeration import Enumeration
from server.services import experiments
from server.services.analysis import Analysis

MeshKey = tuple[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...], tuple[tuple[str, str], ...]]


def _run_changes(other: dict[str, Any] | None) -> tuple[tuple[str, str], ...]:
    """Run changes as a key (allow_split_physical_axes, which a proposal sets only to place its mesh, left out)."""
    run = {k: v for k, v in (other or {}).items() if k != "allow_split_physical_axes"}
    return tuple(sorted((k, str(v).lower() if isinstance(v, bool) else str(v)) for k, v in run.items()))


def mesh_key(ici: dict[str, int], dcn: dict[str, int], other: dict[str, Any] | None = None) -> MeshKey:
    """A proposal's identity: its mesh (axes of degree 1 dropped) and its run changes."""
    return tuple(sorted(compact(ici).items())), tuple(sorted(compact(dcn).items())), _run_changes(other)


def key_of(p: ProposalView) -> MeshKey:
    return mesh_key(p.ici, p.dcn, dict(p.other_changes))


@dataclass(frozen=True)
class RuledOut:
    """A proposal taken out of the engine's choice: its mesh, and how the engine priced it (per-chip HBM and
    calibrated step time), so that the meshes it prices identically (other spellings of the same candidate, e.g.
    fsdp=16 and fsdp=4 x fsdp_transpose=4, which the engine merges into one) go with it."""

    key: MeshKey
    hbm_bytes: float
    step_s: float

    @classmethod
    def of(cls, p: ProposalView) -> RuledOut:
        return cls(key_of(p), float(p.memory.hbm_bytes), float(p.expected.step_s))

    def matches(self, key: MeshKey, hbm_bytes: float, step_s: float) -> bool:
        if key == self.key:
            return True
        same_run = key[2] == self.key[2]
        return (
            same_run and round(hbm_bytes) == round(self.hbm_bytes) and math.isclose(step_s, self.step_s, rel_tol=1e-9)
        )


@dataclass
class _Without(Context):
    """The engine's context with some candidates taken out of every enumeration it prices."""

    ruled_out: tuple[RuledOut, ...] = ()
    cal: Calibration = field(default_factory=Calibration)

    def enumeration(self, other: dict[str, Any] | None = None) -> Enumeration:
        en = super().enumeration(other)
        if not self.ruled_out:
            return en

        def out(c: Any) -> bool:
            key = mesh_key(c.layout.ici, c.layout.dcn, other)
            total, step = c.estimate.memory.total, self.cal.step(c.estimate)
            return any(r.matches(key, total, step) for r in self.ruled_out)

        return Enumeration([c for c in en.ranked if not out(c)], en.too_big, en.generated, en.rejected)


def _diagnosis(report: AnalysisReport) -> Diagnosis | None:
    d = report.diagnosis
    if d is None:
        return None
    gap = d.gap.to_json() if d.gap is not None else None
    return Diagnosis(
        d.bottleneck, float(d.confidence), [Evidence(e.text, e.source) for e in d.evidence], list(d.keys), d.source,
        d.summary, gap,
    )  # fmt: skip


def _calibration(an: Analysis, report: AnalysisReport) -> Calibration:
    """The calibration the analysis priced with: on the linked profile when it is of this config's mesh."""
    est = an.estimate
    prof = report.profile
    if est is None or prof is None or prof.comparison is None:
        return Calibration()
    return calibration(est, prof.comparison.to_json())


def next_proposals(an: Analysis, report: AnalysisReport, ruled_out: Iterable[RuledOut]) -> list[ProposalView]:
    """The engine's proposals for `an` (the analysis `report` is of) with the `ruled_out` candidates taken out, best
    first, ranked 1..n as the engine ranks them; [] when the engine has nothing (or the report has no diagnosis).
    Their confidence goes through ASAP's track record as the analysis' did (experiments.calibrator)."""
    diag = _diagnosis(report)
    if diag is None or an.check.slice is None:
        return []
    cal = _calibration(an, report)
    ctx = _Without(an, None, None, ruled_out=tuple(ruled_out), cal=cal)
    out = []
    track = experiments.calibrator()
    for p in propose(ctx, diag, cal):
        if p.keep_current:
            continue
        view = ProposalView.from_json(p.to_json())
        view.stated_confidence = view.confidence
        if track.active:
            view.confidence = round(track(view.confidence), 2)
            view.confidence_basis = f"{view.confidence_basis}; {track.note}"
        if view.expected.speedup is not None and math.isnan(view.expected.speedup):
            view.expected.speedup = None
        out.append(view)
    return out
