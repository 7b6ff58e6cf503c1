"""The offline Proposal engine: candidates from the mesh enumeration (valid and fitting only), batch and remat
variants where the diagnosis calls for them, priced by the performance model (calibrated on the profile when
one matches the config), three diverse proposals with their rationale, trade-offs, knowledge-base sources and
confidence, or "keep the current mesh" when nothing is clearly better.

Diversity: candidates are grouped by what changes the collectives (tensor, expert, context and pipeline
degrees, the FSDP degree whichever of fsdp / fsdp_transpose carries it, the DCN assignment, the batch and
remat changes); one proposal per group. Within a group, ties are broken by closeness to the current config,
so a user's fsdp_transpose or -1 stays as written when the model cannot tell them apart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from server.agents.tools import Context, compact
from server.agents.types import Diagnosis, Proposal
from server.config.axes import mesh_label
from server.kb.store import Situation
from server.perf.estimate import Estimate
from server.perf.layout import Layout

GiB = 1024**3
CLEARLY_BETTER = 1.03  # below a 3% throughput gain the model's error (bench/mfu_references.py) can flip the order
MAX_PROPOSALS = 3


@dataclass(frozen=True)
class Calibration:
    """Scales the model's parts to what the profile measured: step = kc x (compute + memory) + kx x exposed comm."""

    kc: float = 1.0
    kx: float = 1.0
    note: str | None = None

    def step(self, est: Estimate) -> float:
        t = est.time
        return self.kc * (t.step_s - t.exposed_comm_s) + self.kx * t.exposed_comm_s


def calibration(est: Estimate, gap: dict[str, Any] | None) -> Calibration:
    if not gap:
        return Calibration()
    measured, comm_share = float(gap["measured_step_s"]), float(gap["measured_comm_share"])
    t = est.time
    exposed, rest = t.exposed_comm_s, t.step_s - t.exposed_comm_s
    # A CPU-only profile's collective time is mostly device threads waiting for one another (server/perf/
    # host_trace.py), not communication: splitting on it would charge the waits to the collectives, so such a
    # profile scales the whole step by one factor.
    split = not gap.get("host_only")
    if split and exposed > 0.02 * t.step_s and comm_share > 0.01:
        kx = measured * comm_share / exposed
        kc = measured * (1 - comm_share) / rest if rest > 0 else 1.0
    else:
        kc = kx = measured / t.step_s
    note = (
        f"calibrated on the profile: measured step {measured * 1e3:,.1f} ms vs {t.step_s * 1e3:,.1f} ms estimated; "
        f"compute and memory-bound time x{kc:.2f}, exposed communication x{kx:.2f} for every candidate"
        + ("" if split else " (CPU-only profile: its collective times are mostly waits, so one factor for the step)")
    )
    return Calibration(kc, kx, note)


def _family(lay: Layout, other: dict[str, Any]) -> tuple[Any, ...]:
    t = {a: lay.ici.get(a, 1) * lay.dcn.get(a, 1) for a in {*lay.ici, *lay.dcn}}
    fsdp = t.get("fsdp", 1) * t.get("fsdp_transpose", 1)
    return (
        t.get("tensor", 1),
        t.get("tensor_sequence", 1),
        t.get("expert", 1),
        t.get("context", 1),
        t.get("pipeline", 1),
        fsdp,
        tuple(sorted(compact(lay.dcn).items())),
        tuple(sorted(other.items())),
    )


CANONICAL = frozenset({"data", "fsdp", "tensor", "expert", "context", "pipeline"})


def _distance(lay: Layout, written: dict[str, dict[str, int]]) -> tuple[int, int, int, int]:
    """How far a layout is from the config as written: changed keys, axes newly brought in, variant axes
    (fsdp_transpose, tensor_sequence, ...) the user does not use, axes in use. Ties in step time go to the
    closest: the user's -1 or fsdp_transpose stays when nothing is gained, and fsdp is not respelled."""
    changed = new_axes = variants = 0
    for part, degrees in (("ici", lay.ici), ("dcn", lay.dcn)):
        mine = written.get(part, {})
        for k in {*degrees, *mine}:
            now, before = degrees.get(k, 1), mine.get(k, 1)
            if before != -1 and now != before:
                changed += 1
                new_axes += before == 1
            if now != 1 and before == 1 and k not in CANONICAL:
                variants += 1
    used = sum(v != 1 for v in lay.ici.values()) + sum(v != 1 for v in lay.dcn.values())
    return changed, new_axes, variants, used


def _variants(ctx: Context, diag: Diagnosis) -> list[dict[str, Any]]:
    """Batch and remat changes worth pricing for this diagnosis (the mesh-only variant always)."""
    cfg = ctx.cfg
    out: list[dict[str, Any]] = [{}]
    pdbs = cfg.get("per_device_batch_size", 12)
    remat = str(cfg.get("remat_policy", "full"))
    est = ctx.current
    headroom = est.memory.usable - est.memory.total if est is not None else 0.0
    if diag.bottleneck in ("hbm", "compute", "communication") and isinstance(pdbs, (int, float)) and headroom > 0:
        out.append({"per_device_batch_size": pdbs * 2 if pdbs >= 1 else min(1, pdbs * 2)})
    if diag.bottleneck in ("compute", "hbm") and remat == "full" and headroom > 0:
        out.append({"remat_policy": "minimal"})
    if diag.bottleneck == "memory":
        if remat != "full":
            out.append({"remat_policy": "full"})
        if isinstance(pdbs, (int, float)) and pdbs > 1:
            out.append({"per_device_batch_size": max(1, pdbs // 2)})
    return out


@dataclass
class _Cand:
    est: Estimate
    other: dict[str, Any]
    step: float
    speedup: float
    family: tuple[Any, ...]
    distance: tuple[int, int, int, int]


def candidates(ctx: Context, diag: Diagnosis, cal: Calibration) -> tuple[list[_Cand], float | None]:
    """The best candidate of every family, fastest first, and the current config's calibrated throughput."""
    cur = ctx.current
    chk = ctx.analysis.check
    written = {
        "ici": {d.axis.name: int(d.raw) for d in chk.ici if isinstance(d.raw, int)},
        "dcn": {d.axis.name: int(d.raw) for d in chk.dcn if isinstance(d.raw, int)},
    }
    cur_tput = (cur.tokens_per_step / cal.step(cur)) if cur is not None and cur.memory.launches else None
    # a current mesh at or over the HBM limit: no proposal may need more memory than it does
    hbm_cap = cur.memory.total if cur is not None and cur.memory.verdict != "fits" else math.inf
    best: dict[tuple[Any, ...], _Cand] = {}
    for other in _variants(ctx, diag):
        try:
            en = ctx.enumeration(other)
        except Exception:  # a variant the model cannot price (e.g. an unknown remat policy): skip it
            continue
        for c in en.ranked:
            e = c.estimate
            if e.memory.total > hbm_cap:
                continue
            step = cal.step(e)
            tput = e.tokens_per_step / step
            fam = _family(c.layout, other)
            cand = _Cand(e, other, step, tput / cur_tput if cur_tput else math.nan, fam, _distance(c.layout, written))
            old = best.get(fam)
            tie = old is not None and abs(cand.step - old.step) <= 1e-9 * old.step
            if old is None or (cand.step < old.step and not tie) or (tie and cand.distance < old.distance):
                best[fam] = cand
    # A batch or remat change alters the run (global batch, memory), so it must clearly beat the same mesh
    # without it to be proposed.
    plain = {f[:-1]: c for f, c in best.items() if not c.other}
    keep = [
        c
        for c in best.values()
        if not c.other
        or c.family[:-1] not in plain
        or (c.est.tokens_per_step / c.step)
        > CLEARLY_BETTER * (plain[c.family[:-1]].est.tokens_per_step / plain[c.family[:-1]].step)
    ]
    ranked = sorted(keep, key=lambda c: (-(c.est.tokens_per_step / c.step), c.distance))
    return ranked, cur_tput


def _addresses(c: _Cand, cur: Estimate | None, diag: Diagnosis) -> bool:
    if cur is None:
        return True
    if diag.bottleneck == "communication":
        return c.est.time.exposed_comm_s / c.est.time.step_s < cur.time.exposed_comm_s / cur.time.step_s
    if diag.bottleneck == "hbm":
        return c.est.time.hbm_s / c.est.tokens_per_step < cur.time.hbm_s / cur.tokens_per_step
    if diag.bottleneck == "memory":
        return c.est.memory.fits
    return True


def _change_words(c: _Cand, cur: Estimate | None) -> str:
    words = mesh_label(c.est.layout.ici, c.est.layout.dcn, ici_prefix="ICI ")
    for k, v in c.other.items():
        old = cur.pdbs if (k == "per_device_batch_size" and cur is not None) else None
        words += f"; {k} {old:g} -> {v}" if old is not None else f"; {k} -> {v}"
    return words


def _why(c: _Cand, cur: Estimate | None, cal: Calibration) -> str:
    """What the change buys, component by component (the performance model's parts, calibrated)."""
    if cur is None:
        return "The current mesh does not launch on this slice. "
    e, parts = c.est, []
    step = cal.step(cur)
    for axis, before in sorted(cur.time.exposed_by_axis.items(), key=lambda kv: -kv[1]):
        after = e.time.exposed_by_axis.get(axis, 0.0)
        if before - after > 0.05 * cur.time.step_s:
            verb = "removes" if after < 0.01 * before else "cuts"
            parts.append(
                f"{verb} the exposed {axis} collectives ({before * cal.kx * 1e3:,.0f} -> {after * cal.kx * 1e3:,.0f} "
                f"ms per step, {before * cal.kx / step:.0%} of today's step)"
            )
    if e.time.compute_s < 0.95 * cur.time.compute_s * (e.tokens_per_step / cur.tokens_per_step):
        parts.append(
            f"spends less time in matmuls per token ({cur.time.compute_s * 1e3:,.0f} -> "
            f"{e.time.compute_s * 1e3:,.0f} ms per step)"
        )
    hbm_now, hbm_new = cur.time.hbm_s / cur.tokens_per_step, e.time.hbm_s / e.tokens_per_step
    if hbm_new < 0.9 * hbm_now:
        parts.append(f"moves {1 - hbm_new / hbm_now:.0%} fewer HBM bytes per token in memory-bound work")
    if not parts:
        return "Small gains spread over the step. "
    return "It " + "; ".join(parts) + ". "


def _tradeoffs(c: _Cand, cur: Estimate | None) -> list[str]:
    e = c.est
    out = [f"HBM {e.memory.total / GiB:.1f} of {e.memory.usable / GiB:.1f} GiB per chip"]
    if cur is not None:
        out[0] += f" (now {cur.memory.total / GiB:.1f})"
        for axis, secs in e.time.comm_by_axis.items():
            before = cur.time.comm_by_axis.get(axis, 0.0)
            if secs > before * 1.2 and secs > 0.02 * e.time.step_s:
                hidden = e.time.exposed_by_axis.get(axis, 0.0) < 0.5 * secs
                out.append(
                    f"more {axis} traffic: {before * 1e3:,.0f} -> {secs * 1e3:,.0f} ms per step"
                    + (" (mostly hidden behind compute)" if hidden else "")
                )
    if "per_device_batch_size" in c.other:
        out.append("changes the global batch: retune the learning rate schedule")
    if c.other.get("remat_policy") == "minimal":
        out.append("saves more activations: less recompute, more memory")
    return out


def _confidence(c: _Cand, cur: Estimate | None, cal: Calibration, diag: Diagnosis) -> tuple[float, str]:
    if math.isnan(c.speedup):
        conf = 0.8
        basis = ["the current mesh does not launch; ranked by estimated step time among valid meshes"]
    else:
        gain = c.speedup - 1
        conf = 0.45 + 0.45 * min(1.0, max(0.0, gain) / 0.3)
        basis = [f"expected gain {gain:+.0%} against a model error of about 3% of step time"]
    if cal.note:
        conf *= 0.95
        basis.append("priced with the model calibrated on the profile")
    else:
        conf *= 0.85
        basis.append("model only (no matching profile)")
    if c.est.layout.slice.num_slices > 1 and cur is not None and compact(c.est.layout.dcn) != compact(cur.layout.dcn):
        conf *= 0.85
        basis.append("changes DCN traffic, the model's least certain part")
    t_new = c.est.layout.degree("tensor")
    if cur is not None and t_new != cur.layout.degree("tensor"):
        conf *= 0.9
        basis.append("changes tensor parallelism (collective/compute overlap is assumed, not measured)")
    if c.other:
        conf *= 0.9
        basis.append("changes batch or remat, which the profile did not exercise")
    return max(0.05, min(0.95, conf)), "; ".join(basis)


def _references(ctx: Context, c: _Cand, cur: Estimate | None, diag: Diagnosis) -> list[str]:
    if ctx.kb is None:
        return []
    sl = c.est.layout.slice
    changed = sorted(
        {
            a
            for a in {*c.est.layout.ici, *(cur.layout.ici if cur else {})}
            if cur is None or c.est.layout.degree(a) != cur.layout.degree(a)
        }
    )
    query = f"{diag.bottleneck}-bound {' '.join(changed)} parallelism {sl.chip.generation} " + " ".join(c.other)
    refs = [f"kb/{r.source}#{r.heading}" for r in ctx.kb.search(query, 2, sl.chip.generation, kind="doc")]
    p = ctx.analysis.estimate.params.total(ctx.analysis.estimate.shape.layers) / 1e9 if ctx.analysis.estimate else 0
    if p:
        mesh = {k: v for k, v in {**{f"ici_{a}_parallelism": d for a, d in compact(c.est.layout.ici).items()}}.items()}
        sim = ctx.kb.similar_history(Situation(p, sl.name, diag.bottleneck, mesh, sl.num_slices), 1)
        refs += [f"kb/history/{r.id}.yaml" for r, score, _ in sim if score >= 0.6]
    return refs


def propose(ctx: Context, diag: Diagnosis, cal: Calibration) -> list[Proposal]:
    cur = ctx.current
    ranked, cur_tput = candidates(ctx, diag, cal)
    if not ranked:
        return []
    cur_fam = _family(cur.layout, {}) if cur is not None else None
    out: list[Proposal] = []
    best = ranked[0]
    keep = cur is not None and cur.memory.launches and cur_tput is not None and best.speedup < CLEARLY_BETTER
    if keep and cur is not None:
        step = cal.step(cur)
        out.append(
            Proposal(
                1,
                compact(cur.layout.ici),
                compact(cur.layout.dcn),
                {},
                step,
                cur.mfu * cur.time.step_s / step,
                1.0,
                cur.memory.total,
                cur.memory.usable,
                ["none: the mesh stays as it is"],
                f"Keep the current mesh: no valid mesh of {cur.layout.slice.name} that fits in HBM is expected to be "
                f"more than {CLEARLY_BETTER - 1:.0%} faster (best alternative x{best.speedup:.2f}, within the model's "
                f"error). {diag.summary}.",
                [],
                0.7 if cal.note else 0.6,
                "no candidate clears the model's error",
                keep_current=True,
            )
        )
    # Distinct meshes first; a batch or remat variant of a mesh already proposed only fills remaining slots.
    picked: list[_Cand] = []
    meshes: set[tuple[Any, ...]] = set()
    for c in ranked:
        if cur_fam is not None and c.family == cur_fam and not c.other:
            continue  # the current mesh spelled differently
        if not _addresses(c, cur, diag) and c.speedup < CLEARLY_BETTER:
            continue
        if keep and not c.speedup >= 1.0:
            continue  # next to "keep the current mesh", only alternatives that are not slower
        if c.family[:-1] in meshes:
            continue
        meshes.add(c.family[:-1])
        picked.append(c)
    rest = [c for c in ranked if c not in picked and (not keep or c.speedup >= 1.0) and c.family != cur_fam]
    picked += rest[: max(0, MAX_PROPOSALS - len(out) - len(picked))]
    picked.sort(key=lambda c: -(c.est.tokens_per_step / c.step))
    for c in picked:
        if len(out) >= MAX_PROPOSALS:
            break
        conf, basis = _confidence(c, cur, cal, diag)
        e = c.est
        mfu = e.mfu * e.time.step_s / c.step
        speed = "" if math.isnan(c.speedup) else f" (x{c.speedup:.2f} throughput)"
        now = _why(c, cur, cal)
        refs = _references(ctx, c, cur, diag)
        rationale = (
            f"{now}Proposed: {_change_words(c, cur)}. Expected step {c.step * 1e3:,.0f} ms, MFU {mfu:.1%}{speed}; "
            f"the step would be {e.time.bottleneck()[0]}-bound." + (f" Background: {', '.join(refs)}." if refs else "")
        )
        out.append(
            Proposal(
                len(out) + 1,
                compact(e.layout.ici),
                compact(e.layout.dcn),
                dict(c.other),
                c.step,
                mfu,
                c.speedup,
                e.memory.total,
                e.memory.usable,
                _tradeoffs(c, cur),
                rationale,
                refs,
                conf,
                basis,
            )
        )
    return out
