"""The agents' tools: deterministic functions over one analysed config, shared by the offline engine and by
Claude (as tool use). Every result is plain JSON. `evaluate` is the checker every proposal passes through,
whichever backend made it: it applies a mesh (and batch or remat changes) to the config, runs the static
mesh checks, and prices the result with the performance model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from server.common.findings import Severity
from server.config.axes import AXES
from server.config.mesh import check
from server.config.resolve import Config, with_overrides
from server.kb.store import KnowledgeStore
from server.perf.enumeration import Enumeration, enumerate_meshes, one_per_mesh
from server.perf.estimate import Estimate, EstimateError, estimate, inputs
from server.profiles.profile import Report
from server.services.analysis import Analysis

AXIS_NAMES = tuple(a.name for a in AXES)
OTHER_KEYS = ("per_device_batch_size", "remat_policy", "gradient_accumulation_steps", "allow_split_physical_axes")


@dataclass
class Evaluation:
    """A candidate as the deterministic engine sees it."""

    ici: dict[str, int]
    dcn: dict[str, int]
    other_changes: dict[str, Any]
    valid: bool
    errors: list[str] = field(default_factory=list)
    estimate: Estimate | None = None
    config: Config | None = None

    @property
    def fits(self) -> bool:
        return self.estimate is not None and self.estimate.memory.launches

    def to_json(self, current: Estimate | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ici": self.ici,
            "dcn": self.dcn,
            "other_changes": self.other_changes,
            "valid": self.valid,
            "errors": self.errors,
        }
        e = self.estimate
        if e is not None:
            kind, margin, _ = e.time.bottleneck()
            out.update(
                step_s=e.time.step_s,
                tokens_per_s=e.tokens_per_s,
                mfu=e.mfu,
                bottleneck=kind,
                margin=margin,
                hbm_bytes=e.memory.total,
                hbm_usable_bytes=e.memory.usable,
                fits=e.memory.fits,
                exposed_comm_by_axis=e.time.exposed_by_axis,
            )
            if current is not None:
                out["speedup"] = e.tokens_per_s / current.tokens_per_s
        return out


def compact(degrees: dict[str, int]) -> dict[str, int]:
    return {a: int(v) for a, v in degrees.items() if int(v) != 1}


def mesh_overrides(ici: dict[str, int], dcn: dict[str, int]) -> dict[str, int]:
    """Every ici_*/dcn_* key set explicitly: axes not named are 1, so the proposal is the full assignment."""
    out: dict[str, int] = {}
    for a in AXES:
        out[a.ici_key] = int(ici.get(a.name, 1))
        out[a.dcn_key] = int(dcn.get(a.name, 1))
    return out


@dataclass
class Context:
    """One analysed config and everything the tools read."""

    analysis: Analysis
    report: Report | None = None
    kb: KnowledgeStore | None = None
    _enum: dict[tuple[Any, ...], Enumeration] = field(default_factory=dict)

    @property
    def cfg(self) -> Config:
        return self.analysis.config

    @property
    def current(self) -> Estimate | None:
        return self.analysis.estimate

    def evaluate(self, ici: dict[str, int], dcn: dict[str, int], other: dict[str, Any] | None = None) -> Evaluation:
        other = {k: v for k, v in (other or {}).items() if k in OTHER_KEYS}
        unknown = [a for a in [*ici, *dcn] if a not in AXIS_NAMES]
        if unknown:
            return Evaluation(
                ici, dcn, other, False, [f"unknown mesh axis {u!r}; axes: {', '.join(AXIS_NAMES)}" for u in unknown]
            )
        cfg = with_overrides(self.cfg, {**mesh_overrides(ici, dcn), **other})
        sl = self.analysis.check.slice
        chk = check(cfg, sl.name if sl else None)
        errors = [f"{f.code} {f.message}" for f in chk.findings if f.severity == Severity.ERROR]
        if errors or not chk.consistent:
            return Evaluation(compact(ici), compact(dcn), other, False, errors or ["mesh inconsistent with the slice"])
        try:
            est = estimate(cfg, chk)
        except EstimateError as e:
            return Evaluation(compact(ici), compact(dcn), other, False, [str(e)])
        resolved_ici = chk.degrees("ici")
        resolved_dcn = chk.degrees("dcn")
        return Evaluation(compact(resolved_ici), compact(resolved_dcn), other, True, [], est, cfg)

    def enumeration(self, other: dict[str, Any] | None = None) -> Enumeration:
        """Every valid mesh of the slice for the config (with `other` key changes), priced and ranked, including
        those that split a physical axis (`Candidate.needs_split`: they need `allow_split_physical_axes: true`,
        which a proposal then sets)."""
        key = tuple(sorted((other or {}).items()))
        if key not in self._enum:
            cfg = with_overrides(self.cfg, dict(other or {})) if other else self.cfg
            sl = self.analysis.check.slice
            assert sl is not None
            self._enum[key] = enumerate_meshes(inputs(cfg), sl, allow_split=True)
        return self._enum[key]

    # -- the tools, as exposed to a model ----------------------------------------------------------------
    def tool_profile_kpis(self) -> dict[str, Any]:
        if self.report is None:
            return {"available": False, "why": "no profile linked to this config"}
        return {"available": True, "kpis": self.report.kpis.to_json(), "verdict": self.report.verdict.to_json()}

    def tool_top_ops(self, n: int = 5) -> dict[str, Any]:
        if self.report is None:
            return {"available": False}
        return {
            "available": True,
            "top_ops": [o.to_json() for o in self.report.top_ops[:n]],
            "top_categories": [{"category": c, "fraction": f} for c, f in self.report.top_categories],
            "implausible_ops": [o.flag_json() for o in self.report.implausible_ops],
        }

    def tool_collectives(self) -> dict[str, Any]:
        if self.report is None:
            return {"available": False}
        return {"available": True, **self.report.collectives.to_json()}

    def tool_estimate_mesh(
        self, ici: dict[str, int], dcn: dict[str, int] | None = None, other_changes: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        return self.evaluate(ici, dcn or {}, other_changes).to_json(self.current)

    def tool_validate_mesh(self, ici: dict[str, int], dcn: dict[str, int] | None = None) -> dict[str, Any]:
        ev = self.evaluate(ici, dcn or {})
        return {"valid": ev.valid, "errors": ev.errors, "fits": ev.fits if ev.valid else None}

    def tool_enumerate_meshes(self, top: int = 10, other_changes: dict[str, Any] | None = None) -> dict[str, Any]:
        en = self.enumeration(other_changes)
        cur = self.current
        out = []
        for c, same in one_per_mesh(en.ranked, cur.layout if cur is not None else None)[: max(1, min(top, 30))]:
            e = c.estimate
            out.append(
                {
                    "ici": compact(c.layout.ici),
                    "dcn": compact(c.layout.dcn),
                    "step_s": e.time.step_s,
                    "mfu": e.mfu,
                    "bottleneck": e.time.bottleneck()[0],
                    "hbm_bytes": e.memory.total,
                    "speedup": (e.tokens_per_s / cur.tokens_per_s) if cur else None,
                    "needs_allow_split_physical_axes": c.needs_split
                    and not bool(self.cfg.get("allow_split_physical_axes", False)),
                    "equivalent": [{"ici": compact(o.layout.ici), "dcn": compact(o.layout.dcn)} for o in same],
                }
            )
        return {"candidates": out, "valid_and_fitting": len(en.ranked), "over_hbm": len(en.too_big)}

    def tool_kb_search(self, query: str, generation: str | None = None, axis: str | None = None) -> dict[str, Any]:
        if self.kb is None:
            return {"available": False}
        return {"available": True, "results": [r.to_json() for r in self.kb.search(query, 4, generation, None, axis)]}
