"""The roofline chart of an analysis, as one Vega-Lite spec: the declared chip's HBM roofline with its HBM and
ICI ridge points, the estimate's components for the current mesh, one point per mesh (the current one, "now", and
each proposal: the whole step's FLOPs over its HBM bytes, at the FLOP rate its modelled step time gives) with an
arrow from now to each proposal, and the profile's measured top ops when one is linked. A mesh whose compiled
program ASAP: Verify simulated (its verdict's `schedule`) gets a second, hollow point: the same intensity, at the
same FLOPs over the simulated step, joined to its estimate point by a thin line. The same spec renders in the
editor's webview (vega-embed) and to SVG/PNG for `asap analyze --plot` (vl-convert, no browser).

Axes are log-log: operational intensity (FLOP per HBM byte) against attained FLOP/s per device. The chart is laid
out here at a fixed plot size (PLOT_W x PLOT_H pixels, explicit scale domains) so that labels are placed where no
two overlap and none covers a point (server/presentation/label_layout.py); a label with no free spot is left out
and its point's tooltip names it. Every point's tooltip (`tip`) names the point, its mesh and its numbers with
units, and the source of those numbers (ASAP's estimate, the simulated schedule, or the XProf profile row).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from server.agents.report import AnalysisReport, CompilerVerdictView, EstimateView, ProfileView, ProposalView
from server.config import axes
from server.presentation.label_layout import Layout, Placement
from server.services.analysis import Analysis

THEMES = ("light", "dark")
PLOT_W, PLOT_H = 440, 300
MESH_SOURCE = "meshes (estimate)"
COMPILED_SOURCE = "meshes (compiled, simulated)"
COMPILED_TITLE = "Compiled (simulated step)"
SCHEDULE_SOURCE = "the TPU compiler's schedule, simulated: server/compile/schedule_sim.py"
_PROGRAMS = {"reference": "ASAP's reference train step", "maxtext": "MaxText's own train step"}
COMPONENT_GROUP = "parts of now's step (ASAP estimate)"
PROFILE_GROUP = "XProf ops (measured)"
_MESH_R, _OP_R, _HEAD_R = 8.0, 5.0, 5.0  # marker radii in pixels, for label placement
_MESH_SIZE, _OP_SIZE = 170, 50  # marker areas in square pixels (Vega's size)
_MESH_FONT, _LABEL_FONT = 13, 11  # label font sizes in pixels
# Colours per theme. Both palettes keep every mark above 3:1 contrast against their background, text above 4.5:1.
_PALETTE: dict[str, dict[str, Any]] = {
    "light": {
        "background": "#ffffff",
        "text": "#1f1f1f",
        "grid": "#e4e4e4",
        "roof": "#555555",
        "rule": "#8a8a8a",
        "now": "#1f1f1f",
        "component": "#7a7a7a",
        "profile": "#5e3c99",
        "range": ["#1f6fb4", "#b35806", "#1b7837", "#c51b7d", "#7b3294"],
    },
    "dark": {
        "background": "#1e1e1e",
        "text": "#e0e0e0",
        "grid": "#3a3a3a",
        "roof": "#bdbdbd",
        "rule": "#9e9e9e",
        "now": "#f0f0f0",
        "component": "#a0a0a0",
        "profile": "#b2abd2",
        "range": ["#6cb6ff", "#fdb863", "#7fd88f", "#f1a7d0", "#c2a5cf"],
    },
}


def _si(v: float, unit: str) -> str:
    """1.31e14, 'FLOP/s' -> '131 TFLOP/s' (three significant figures)."""
    for exp, prefix in ((15, "P"), (12, "T"), (9, "G"), (6, "M"), (3, "k")):
        if abs(v) >= 10**exp:
            return f"{v / 10**exp:.3g} {prefix}{unit}"
    return f"{v:.3g} {unit}"


def _oi(v: float) -> str:
    return f"{v:,.0f} FLOP/B" if v >= 10 else f"{v:.2g} FLOP/B"


def _ms(s: float) -> str:
    if s == 0:
        return "0 ms"
    return f"{s * 1e3:,.0f} ms" if s >= 0.01 else f"{s * 1e3:.2f} ms"


def _program_point(est: EstimateView, name: str, source: str, mesh: str) -> dict[str, Any] | None:
    """One mesh as a single point: the step's FLOPs per device over its HBM bytes per device (the estimate's
    roofline components summed), at FLOPs / modelled step time (communication and bubbles included)."""
    pts = est.roofline.points
    flops = sum(p.flops for p in pts)
    nbytes = sum(p.hbm_bytes for p in pts)
    step = est.time.step_s
    if flops <= 0 or nbytes <= 0 or step <= 0:
        return None
    return {
        "name": name,
        "intensity": flops / nbytes,
        "flops": flops / step,
        "source": source,
        "mesh": mesh,
        "step_s": step,
        "exposed_comm_s": est.time.exposed_comm_s,
        "tokens_per_s": est.tokens_per_s,
        "mfu": est.mfu,
        "basis": f"ASAP's step-time estimate: {flops:.3g} FLOP and {nbytes:.3g} B of HBM traffic per device a step",
    }


def current_mesh_label(est: EstimateView) -> str:
    return axes.mesh_label(est.mesh.ici, est.mesh.dcn)


def mesh_points(
    est: EstimateView | None, proposals: Sequence[ProposalView], an: Analysis | None
) -> list[dict[str, Any]]:
    """The current mesh ("now") and each proposal (re-priced by the estimate for `an`'s config) as program
    points; a proposal's `speedup` is its tokens/s over the current mesh's."""
    out: list[dict[str, Any]] = []
    if est is None:
        return out
    now = _program_point(est, "now", MESH_SOURCE, current_mesh_label(est))
    if now:
        out.append(now)
    if an is None or an.estimate is None:
        return out
    from server.agents.tools import Context
    from server.presentation.agent_findings import mesh_label

    ctx = Context(an)
    for prop in proposals:
        if prop.keep_current:
            continue
        ev = ctx.evaluate(prop.ici, prop.dcn, prop.other_changes)
        if ev.estimate is None:
            continue
        priced = EstimateView.from_json(ev.estimate.to_json())
        p = _program_point(priced, f"P{prop.rank}", MESH_SOURCE, mesh_label(prop))
        if p:
            p["rank"] = prop.rank
            if est.tokens_per_s > 0:
                p["speedup"] = priced.tokens_per_s / est.tokens_per_s
            out.append(p)
    return out


def _mesh_tip(m: dict[str, Any], now: dict[str, Any] | None, peak: float) -> dict[str, str]:
    is_now = m["name"] == "now"
    tip = {
        "point": "now (the current mesh)" if is_now else f"{m['name']} (proposal {m.get('rank', '?')})",
        "mesh": m["mesh"],
        "operational intensity": _oi(m["intensity"]),
        "attained": f"{_si(m['flops'], 'FLOP/s')} per device ({m['flops'] / peak:.0%} of peak)",
        "step time": f"{_ms(m['step_s'])} (MFU {m['mfu']:.1%})",
    }
    if not is_now and now is not None and m.get("speedup"):
        tip["against now"] = (
            f"x{m['speedup']:.2f} tokens/s: step {_ms(now['step_s'])} \u2192 {_ms(m['step_s'])}, exposed "
            f"communication {_ms(now['exposed_comm_s'])} \u2192 {_ms(m['exposed_comm_s'])}"
        )
    tip["source"] = m["basis"]
    return tip


def compiled_points(
    meshes: Sequence[dict[str, Any]],
    current_compiler: CompilerVerdictView | None,
    proposals: Sequence[ProposalView],
) -> list[dict[str, Any]]:
    """A point for each mesh whose compiled program's step was simulated (its verdict's `schedule`): the same
    operational intensity as the mesh's estimate point, at the same FLOPs per device over the simulated step instead
    of the modelled one, so the two points differ only in the step time (`of` names the mesh's point)."""
    verdicts = {"now": current_compiler} | {f"P{p.rank}": p.compiler for p in proposals if not p.keep_current}
    out: list[dict[str, Any]] = []
    for m in meshes:
        v = verdicts.get(m["name"])
        sched = v.schedule if v is not None else None
        if v is None or sched is None or sched.step_s <= 0:
            continue
        step = float(sched.step_s)
        per_step = m["flops"] * m["step_s"]  # the estimate's FLOPs per device a step (the estimate point's)
        c: dict[str, Any] = {
            "name": f"{m['name']} (compiled)",
            "of": m["name"],
            "intensity": m["intensity"],
            "flops": per_step / step,
            "source": COMPILED_SOURCE,
            "mesh": m["mesh"],
            "step_s": step,
            "estimate_step_s": m["step_s"],
            "flops_per_step": per_step,
            "program": v.program,
        }
        if "rank" in m:
            c["rank"] = m["rank"]
        if sched.mfu is not None:
            c["mfu"] = float(sched.mfu)
        out.append(c)
    return out


def _compiled_tip(c: dict[str, Any], peak: float) -> dict[str, str]:
    sim, est = c["step_s"], c["estimate_step_s"]
    whose = "the current mesh's" if c["of"] == "now" else f"proposal {c.get('rank', '?')}'s"
    program = _PROGRAMS.get(c["program"], c["program"])
    return {
        "point": f"{c['name']}: {whose} compiled program, its step simulated",
        "mesh": c["mesh"],
        "operational intensity": _oi(c["intensity"]),
        "attained": f"{_si(c['flops'], 'FLOP/s')} per device ({c['flops'] / peak:.0%} of peak)",
        "step time": f"{_ms(sim)} simulated" + (f" (MFU {c['mfu']:.1%})" if "mfu" in c else ""),
        "against the estimate": f"step {_ms(est)} estimated \u2192 {_ms(sim)} simulated ({sim / est - 1:+.0%})",
        "source": f"{SCHEDULE_SOURCE} ({program}), at ASAP's estimate of {c['flops_per_step']:.3g} FLOP per device "
        "a step",
    }


def _op_points(est: EstimateView, profile: ProfileView | None, peak: float, now_mesh: str) -> list[dict[str, Any]]:
    """The estimate's components of the current mesh's step, then the profile's top ops (measured)."""
    out: list[dict[str, Any]] = []
    for p in est.roofline.points:
        if p.seconds > 0 and p.flops > 0 and p.operational_intensity:
            rate = p.flops / p.seconds
            out.append(
                {
                    "name": p.name,
                    "intensity": p.operational_intensity,
                    "flops": rate,
                    "source": "estimate (current mesh)",
                    "group": COMPONENT_GROUP,
                    "tip": {
                        "point": f"{p.name} (a component of the step, ASAP's estimate)",
                        "mesh": f"now: {now_mesh}",
                        "operational intensity": _oi(p.operational_intensity),
                        "attained": f"{_si(rate, 'FLOP/s')} per device ({rate / peak:.0%} of peak)",
                        "time": f"{_ms(p.seconds)} a step, {p.bound}-bound",
                        "source": f"ASAP's roofline estimate: {p.flops:.3g} FLOP, {p.hbm_bytes:.3g} B of HBM traffic",
                    },
                }
            )
    if profile is not None:
        # the profile's ops at their measured FLOP rate (utilization of the declared chip's peak, per device)
        for o in profile.top_ops:
            if o.operational_intensity and o.flop_utilization:
                rate = o.flop_utilization * peak
                out.append(
                    {
                        "name": o.name[:40],
                        "intensity": o.operational_intensity,
                        "flops": rate,
                        "source": "profile (top ops)",
                        "group": PROFILE_GROUP,
                        "tip": {
                            "point": f"{o.name[:60]} (XProf op, {o.category})",
                            "mesh": "the profiled run's",
                            "operational intensity": _oi(o.operational_intensity),
                            "attained": f"{_si(rate, 'FLOP/s')} per device ({o.flop_utilization:.0%} of peak)",
                            "time": f"{o.self_time_fraction:.1%} of the profiled time ({o.occurrences:,} runs)",
                            "source": f"XProf op profile ({Path(profile.source).name})",
                        },
                    }
                )
    return out


def _nice(v: float, up: bool) -> float:
    """The next round number (1, 1.5, 2, 3, 5, 7 times a power of ten) at or above (`up`) or below `v`."""
    e = math.floor(math.log10(v))
    steps = [1, 1.5, 2, 3, 5, 7, 10]
    if up:
        return next(s * 10**e for s in steps if s * 10**e >= v * (1 - 1e-9))
    return next(s * 10**e for s in reversed(steps[:-1]) if s * 10**e <= v * (1 + 1e-9))


class _Scale:
    """The chart's log-log mapping between data and plot pixels (y down)."""

    def __init__(self, x: tuple[float, float], y: tuple[float, float]) -> None:
        self.x, self.y = x, y
        self._lx = (math.log10(x[0]), math.log10(x[1]))
        self._ly = (math.log10(y[0]), math.log10(y[1]))

    def px(self, x: float, y: float) -> tuple[float, float]:
        (a, b), (c, d) = self._lx, self._ly
        return (PLOT_W * (math.log10(x) - a) / (b - a), PLOT_H * (1 - (math.log10(y) - c) / (d - c)))

    def data(self, px: float, py: float) -> tuple[float, float]:
        (a, b), (c, d) = self._lx, self._ly
        return (10 ** (a + px / PLOT_W * (b - a)), 10 ** (c + (1 - py / PLOT_H) * (d - c)))


def spec(result: AnalysisReport, an: Analysis | None = None, theme: str = "light") -> dict[str, Any]:
    """Vega-Lite for an `asap analyze --json` document (needs its estimate). With the config's analysis `an`,
    the proposals are plotted too, and a compiled point for each mesh whose compiled program ASAP: Verify
    simulated. `theme`: "light" or "dark"."""
    return chart(
        result.estimate,
        an,
        theme,
        slice_name=result.slice.name if result.slice else None,
        profile=result.profile,
        proposals=result.proposals,
        current_compiler=result.current_compiler,
    )


def chart(
    est: EstimateView | None,
    an: Analysis | None = None,
    theme: str = "light",
    *,
    slice_name: str | None = None,
    profile: ProfileView | None = None,
    proposals: Sequence[ProposalView] = (),
    current_compiler: CompilerVerdictView | None = None,
) -> dict[str, Any]:
    """Vega-Lite for an estimate, the linked profile's top ops and the proposals (the editor's chart for the
    text as it is now, with the agents' proposals only when they are of this version); `current_compiler` and each
    proposal's `compiler` add the compiled points of the meshes whose schedule was simulated."""
    if theme not in _PALETTE:
        raise ValueError(f"theme must be one of {', '.join(THEMES)}, got {theme!r}")
    if est is None:
        raise ValueError("no estimate: the config must declare a slice and have a valid mesh")
    pal = _PALETTE[theme]
    roof = est.roofline
    peak = max(p.peak_flops_per_s for p in roof.points)
    ridges = roof.ridge_points
    ridge = float(ridges.hbm)
    bw = peak / ridge
    now_mesh = current_mesh_label(est)
    ops = _op_points(est, profile, peak, now_mesh)
    meshes = mesh_points(est, proposals, an)
    now = next((m for m in meshes if m["name"] == "now"), None)
    colours = iter(list(pal["range"]) * 4)
    for m in meshes:
        m["colour"] = pal["now"] if m["name"] == "now" else next(colours)
        m["legend"] = "now" if m["name"] == "now" else f"{m['name']} x{m.get('speedup', 0):.2f}"
        m["tip"] = _mesh_tip(m, now, peak)
    compiled = compiled_points(meshes, current_compiler, proposals)
    by_name = {m["name"]: m for m in meshes}
    for c in compiled:
        c["colour"] = by_name[c["of"]]["colour"]
        c["shape"] = "circle" if c["of"] == "now" else "diamond"  # its mesh's shape, hollow
        c["legend"] = f"{c['of']} {_ms(c['step_s'])}"
        c["tip"] = _compiled_tip(c, peak)
    for m in [*ops, *meshes, *compiled]:
        m["aria"] = "; ".join(f"{k}: {v}" for k, v in m["tip"].items())

    # Explicit domains on decade-ish steps: the pixel mapping below is the one Vega draws.
    rule_xs = [ridge, *([float(ridges.ici_axis)] if ridges.ici_axis else [])]
    xs = [m["intensity"] for m in [*ops, *meshes]]
    ys = [m["flops"] for m in [*ops, *meshes, *compiled]]
    xdom = (
        _nice(min([ridge / 10, *(x / 3 for x in xs)]), False),
        _nice(max([*(r * 4 for r in rule_xs), *(x * 3 for x in xs)]), True),
    )
    # a simulated step shorter than the estimate's FLOPs at peak would put its point above the roof: keep it inside
    top = max([peak * 1.3, *(c["flops"] * 1.3 for c in compiled)])
    ydom = (_nice(min(y / 2.5 for y in ys) if ys else peak / 100, False), _nice(top, True))
    sc = _Scale(xdom, ydom)
    layout = Layout(PLOT_W, PLOT_H)

    def pos(p: dict[str, Any]) -> tuple[float, float]:
        return sc.px(p["intensity"], p["flops"])

    start = max(xdom[0], ydom[0] / bw)
    line = [{"intensity": x, "flops": min(peak, x * bw)} for x in _logspace(start, xdom[1], 80)]
    layout.add_line([sc.px(p["intensity"], p["flops"]) for p in line])
    for x in rule_xs:
        layout.add_line(
            [(sc.px(x, ydom[0])[0], 0.0), (sc.px(x, ydom[0])[0], float(PLOT_H))], step=6, half=1, weight=0.25
        )
    for m in ops:
        layout.add_marker(*sc.px(m["intensity"], m["flops"]), _OP_R)
    for m in meshes:
        layout.add_marker(*sc.px(m["intensity"], m["flops"]), _MESH_R)
    for c in compiled:
        layout.add_marker(*pos(c), _MESH_R)
    # a thin line from each estimate point to its compiled point (none when the two touch: the tooltip says it)
    links = []
    for c in compiled:
        (ex, ey), (cx, cy) = pos(by_name[c["of"]]), pos(c)
        d = math.hypot(cx - ex, cy - ey)
        if d < _MESH_R * 2 + 4:
            continue
        ux, uy = (cx - ex) / d, (cy - ey) / d
        p0, p1 = (ex + ux * (_MESH_R + 1), ey + uy * (_MESH_R + 1)), (cx - ux * (_MESH_R + 1), cy - uy * (_MESH_R + 1))
        layout.add_line([p0, p1], half=1)
        (x0, y0), (x1, y1) = sc.data(*p0), sc.data(*p1)
        what = f"{c['of']} \u2192 {c['name']}: {c['tip']['against the estimate']}"
        links.append({"x": x0, "y": y0, "x2": x1, "y2": y1, "colour": c["colour"], "tip": what})

    # Meshes drawn on one another (the same step time from the same FLOPs and bytes) share one label and one
    # arrow: "P1, P2".
    groups: list[list[dict[str, Any]]] = []
    for m in meshes:
        mx, my = sc.px(m["intensity"], m["flops"])
        for g in groups:
            gx, gy = sc.px(g[0]["intensity"], g[0]["flops"])
            if math.hypot(mx - gx, my - gy) < _MESH_R:
                g.append(m)
                break
        else:
            groups.append([m])
    for g in groups:
        for m in g[1:]:
            m["legend"] += f" (at {g[0]['name']})"
    arrows, heads = [], []
    if now is not None:
        nx, ny = sc.px(now["intensity"], now["flops"])
        for m in (g[0] for g in groups):
            if m is now:
                continue
            tx, ty = sc.px(m["intensity"], m["flops"])
            d = math.hypot(tx - nx, ty - ny)
            if d < _MESH_R * 2 + 8:
                continue  # the proposal sits on now: no room for an arrow (its tooltip says why it is faster)
            ux, uy = (tx - nx) / d, (ty - ny) / d
            x0, y0 = nx + ux * (_MESH_R + 2), ny + uy * (_MESH_R + 2)
            hx, hy = tx - ux * (_MESH_R + 6), ty - uy * (_MESH_R + 6)  # the head's centre; its tip near the point
            layout.add_line([(x0, y0), (hx, hy)], half=1)
            layout.add_marker(hx, hy, _HEAD_R, anchor=False)
            a0, a1 = sc.data(x0, y0), sc.data(hx, hy)
            what = f"now \u2192 {m['name']}: " + m["tip"].get("against now", m["mesh"])
            arrows.append({"x": a0[0], "y": a0[1], "x2": a1[0], "y2": a1[1], "colour": m["colour"], "tip": what})
            heads.append(
                {
                    "x": a1[0],
                    "y": a1[1],
                    "colour": m["colour"],
                    "angle": math.degrees(math.atan2(ux, -uy)) % 360,
                    "tip": what,
                }
            )

    labels: dict[str, list[dict[str, Any]]] = {"mesh": [], "ridge": [], "op": [], "compiled": []}
    leaders: list[dict[str, Any]] = []

    def put(kind: str, text: str, pl: Placement | None) -> None:
        if pl is None:
            return
        lx, ly = sc.data(pl.cx, pl.cy)
        b = pl.box
        labels[kind].append({"text": text, "lx": lx, "ly": ly, "box": [b.x0, b.y0, b.x1, b.y1], "angle": pl.angle})
        if pl.leader:
            (ax, ay), (bx, by) = sc.data(*pl.leader[:2]), sc.data(*pl.leader[2:])
            leaders.append({"x": ax, "y": ay, "x2": bx, "y2": by})

    # A proposal's label goes ahead of its arrow, now's behind the arrows: neither reads as another's.
    aim: dict[str, tuple[float, float]] = {}
    if now is not None:
        nx, ny = sc.px(now["intensity"], now["flops"])
        for g in groups:
            tx, ty = sc.px(g[0]["intensity"], g[0]["flops"])
            aim[g[0]["name"]] = (tx - nx, ty - ny)
        aim["now"] = (-sum(v[0] for v in aim.values()), -sum(v[1] for v in aim.values()))
    for group in groups:
        text = ", ".join(m["name"] for m in group)
        at = sc.px(group[0]["intensity"], group[0]["flops"])
        put("mesh", text, layout.near_point(text, *at, _MESH_R, _MESH_FONT, True, 5, prefer=aim.get(group[0]["name"])))
    # compiled points drawn on one another share a label ("P1, P2 (compiled)"), placed beyond the point as seen from
    # its estimate point, after the meshes' labels
    cgroups: list[list[dict[str, Any]]] = []
    for c in compiled:
        for g in cgroups:
            if math.dist(pos(c), pos(g[0])) < _MESH_R:
                g.append(c)
                c["legend"] += f" (at {g[0]['of']})"
                break
        else:
            cgroups.append([c])
    for g in cgroups:
        text = ", ".join(c["of"] for c in g) + " (compiled)"
        (ex, ey), (cx, cy) = pos(by_name[g[0]["of"]]), pos(g[0])
        put("compiled", text, layout.near_point(text, cx, cy, _MESH_R, _LABEL_FONT, True, 5, prefer=(cx - ex, cy - ey)))
    ridge_rules: list[dict[str, Any]] = [
        {
            "intensity": ridge,
            "label": f"HBM ridge {ridge:,.0f}",
            "tip": {
                "ridge": f"HBM: {ridge:,.0f} FLOP per HBM byte",
                "meaning": f"peak {_si(peak, 'FLOP/s')} \u00f7 HBM {_si(bw, 'B/s')}; to its left a kernel waits on HBM",
            },
        }
    ]
    if ridges.ici_axis:
        # the same kind of ratio against the bytes one mesh axis sends over ICI (DOMAIN.md §4)
        ici = float(ridges.ici_axis)
        ridge_rules.append(
            {
                "intensity": ici,
                "label": f"ICI ridge {ici:,.0f}",
                "tip": {
                    "ridge": f"ICI: {ici:,.0f} FLOP per byte one mesh axis sends over ICI",
                    "meaning": "to its left a sharded matmul waits on its collective",
                },
            }
        )
    for m in ops:
        put(
            "op",
            m["name"],
            layout.near_point(
                m["name"], *sc.px(m["intensity"], m["flops"]), _OP_R, _LABEL_FONT, rings=1, diagonal=False
            ),
        )
    # ridge labels last: they slide along their rule to wherever the points and their labels leave room
    for r in ridge_rules:
        put("ridge", r["label"], layout.along_vertical(r["label"], sc.px(r["intensity"], ydom[0])[0], _LABEL_FONT))

    title: dict[str, Any] = {"text": f"Roofline of {slice_name} per device" if slice_name else "Roofline"}
    subtitle = []
    for m in meshes:
        tail = f"MFU {m['mfu']:.1%}" if m is now else f"x{m.get('speedup', 0):.2f} tokens/s"
        subtitle.append(f"{m['name']}: {m['mesh']} \u00b7 step {_ms(m['step_s'])} \u00b7 {tail}")
    if subtitle:
        title["subtitle"] = subtitle  # one line per mesh
    op_groups = [g for g in (COMPONENT_GROUP, PROFILE_GROUP) if any(m["group"] == g for m in ops)]
    x_enc = {
        "field": "intensity",
        "type": "quantitative",
        "scale": {"type": "log", "domain": list(xdom), "nice": False},
    }
    y_enc = {"field": "flops", "type": "quantitative", "scale": {"type": "log", "domain": list(ydom), "nice": False}}

    def xy(xf: str, yf: str) -> dict[str, Any]:
        return {"x": {**x_enc, "field": xf}, "y": {**y_enc, "field": yf}}

    raw = {"scale": None}
    tip = {"tooltip": {"field": "tip", "type": "nominal"}}
    layers: list[dict[str, Any]] = [
        {
            "data": {"values": line},
            "mark": {"type": "line", "color": pal["roof"], "strokeWidth": 2},
            "encoding": {
                "x": {
                    **x_enc,
                    "title": "operational intensity (FLOP per HBM byte)",
                    "axis": {"values": _ticks(xdom), "format": ",~r"},
                },
                "y": {
                    **y_enc,
                    "title": "attained FLOP/s per device",
                    "axis": {"values": _ticks(ydom), "format": "~s"},
                },
            },
        },
        {
            "name": "ridges",
            "data": {"values": ridge_rules},
            "mark": {"type": "rule", "strokeDash": [4, 4], "color": pal["rule"]},
            "encoding": {"x": x_enc, "description": {"field": "label"}, **tip},
        },
        {
            "name": "leaders",
            "data": {"values": leaders},
            "mark": {"type": "rule", "color": pal["rule"], "strokeWidth": 0.8},
            "encoding": {**xy("x", "y"), "x2": {"field": "x2"}, "y2": {"field": "y2"}},
        },
        {
            "name": "arrows",
            "data": {"values": arrows},
            "mark": {"type": "rule", "strokeWidth": 1.8},
            "encoding": {
                **xy("x", "y"),
                "x2": {"field": "x2"},
                "y2": {"field": "y2"},
                "color": {"field": "colour", "type": "nominal", **raw},
                **tip,
            },
        },
        {
            "name": "arrowheads",
            "data": {"values": heads},
            "mark": {"type": "point", "shape": "triangle-up", "filled": True, "size": 70, "opacity": 1},
            "encoding": {
                **xy("x", "y"),
                "color": {"field": "colour", "type": "nominal", **raw},
                "angle": {"field": "angle", "type": "quantitative", **raw},
                **tip,
            },
        },
        {
            "name": "ops",
            "data": {"values": ops},
            "mark": {"type": "point", "filled": True, "size": _OP_SIZE, "opacity": 0.8},
            "encoding": {
                **xy("intensity", "flops"),
                "color": {
                    "field": "group",
                    "type": "nominal",
                    "title": "Per-op points",
                    "scale": {
                        "domain": op_groups,
                        "range": [pal["component"] if g == COMPONENT_GROUP else pal["profile"] for g in op_groups],
                    },
                },
                "shape": {
                    "field": "group",
                    "type": "nominal",
                    "title": "Per-op points",
                    "scale": {
                        "domain": op_groups,
                        "range": ["circle" if g == COMPONENT_GROUP else "triangle-up" for g in op_groups],
                    },
                },
                "description": {"field": "aria"},
                **tip,
            },
        },
        {
            "name": "meshes",
            "data": {"values": [m for m in meshes if m is now] + [m for m in reversed(meshes) if m is not now]},
            "mark": {
                "type": "point",
                "filled": True,
                "size": _MESH_SIZE,
                "opacity": 1,
                "stroke": pal["background"],
                "strokeWidth": 1.5,
            },
            "encoding": {
                **xy("intensity", "flops"),
                "color": {
                    "field": "legend",
                    "type": "nominal",
                    "title": "Meshes (whole step, ASAP estimate)",
                    "legend": {"orient": "top"},
                    "sort": None,
                    "scale": {"domain": [m["legend"] for m in meshes], "range": [m["colour"] for m in meshes]},
                },
                "shape": {
                    "field": "legend",
                    "type": "nominal",
                    "title": "Meshes (whole step, ASAP estimate)",
                    "legend": {"orient": "top"},
                    "sort": None,
                    "scale": {
                        "domain": [m["legend"] for m in meshes],
                        "range": ["circle" if m is now else "diamond" for m in meshes],
                    },
                },
                "description": {"field": "aria"},
                **tip,
            },
        },
        {
            "name": "ridge_labels",
            "data": {"values": labels["ridge"]},
            "mark": {"type": "text", "angle": 270, "align": "center", "baseline": "middle", "fontSize": _LABEL_FONT},
            "encoding": {**xy("lx", "ly"), "text": {"field": "text"}, "description": {"field": "text"}},
        },
        {
            "name": "op_labels",
            "data": {"values": labels["op"]},
            "mark": {"type": "text", "align": "center", "baseline": "middle", "fontSize": _LABEL_FONT},
            "encoding": {**xy("lx", "ly"), "text": {"field": "text"}, "description": {"field": "text"}},
        },
        {
            "name": "mesh_labels",
            "data": {"values": labels["mesh"]},
            "mark": {
                "type": "text",
                "align": "center",
                "baseline": "middle",
                "fontSize": _MESH_FONT,
                "fontWeight": "bold",
            },
            "encoding": {**xy("lx", "ly"), "text": {"field": "text"}, "description": {"field": "text"}},
        },
    ]
    if compiled:
        layers[_index(layers, "meshes") : _index(layers, "meshes") + 1] = [
            {
                "name": "compiled_links",
                "data": {"values": links},
                "mark": {"type": "rule", "strokeWidth": 1, "strokeDash": [3, 2]},
                "encoding": {
                    **xy("x", "y"),
                    "x2": {"field": "x2"},
                    "y2": {"field": "y2"},
                    "color": {"field": "colour", "type": "nominal", **raw},
                    **tip,
                },
            },
            layers[_index(layers, "meshes")],
            {
                "name": "compiled",
                "data": {"values": compiled},
                "mark": {"type": "point", "filled": False, "size": _MESH_SIZE, "opacity": 1, "strokeWidth": 2},
                "encoding": {
                    **xy("intensity", "flops"),
                    **{
                        channel: {
                            "field": "legend",
                            "type": "nominal",
                            "title": COMPILED_TITLE,
                            "legend": {"orient": "top"},
                            "sort": None,
                            "scale": {"domain": [c["legend"] for c in compiled], "range": [c[key] for c in compiled]},
                        }
                        for channel, key in (("color", "colour"), ("shape", "shape"))
                    },
                    "description": {"field": "aria"},
                    **tip,
                },
            },
        ]
        layers.append(
            {
                "name": "compiled_labels",
                "data": {"values": labels["compiled"]},
                "mark": {
                    "type": "text",
                    "align": "center",
                    "baseline": "middle",
                    "fontSize": _LABEL_FONT,
                    "fontWeight": "bold",
                },
                "encoding": {**xy("lx", "ly"), "text": {"field": "text"}, "description": {"field": "text"}},
            }
        )
    out: dict[str, Any] = {
        "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
        "title": title,
        "width": PLOT_W,
        "height": PLOT_H,
        "layer": layers,
        "resolve": {"scale": {"color": "independent", "shape": "independent"}},
        "config": {
            "background": pal["background"],
            "title": {"color": pal["text"], "subtitleColor": pal["text"], "fontSize": 15, "subtitleFontSize": 11},
            "text": {"color": pal["text"]},
            "axis": {
                "labelColor": pal["text"],
                "titleColor": pal["text"],
                "gridColor": pal["grid"],
                "domainColor": pal["rule"],
                "tickColor": pal["rule"],
                "labelFontSize": 11,
                "titleFontSize": 12,
            },
            "legend": {
                "labelColor": pal["text"],
                "titleColor": pal["text"],
                "orient": "bottom",
                "direction": "horizontal",
                "labelLimit": 320,
                "labelFontSize": 11,
                "titleFontSize": 12,
                "titleLimit": 400,
            },
        },
        "usermeta": {
            "peak_flops_per_s": peak,
            "hbm_bytes_per_s": bw,
            "hbm_ridge": ridge,
            "theme": theme,
            "plot": [PLOT_W, PLOT_H],
            "unlabelled": [m["name"] for m in ops if m["name"] not in {lb["text"] for lb in labels["op"]}],
        },
    }
    if compiled:
        # the compiled legend goes under the meshes' (side by side, the two outgrow the plot's width)
        out["config"]["legend"]["layout"] = {"top": {"direction": "vertical", "anchor": "start"}}
    return out


def _index(layers: list[dict[str, Any]], name: str) -> int:
    return next(i for i, lay in enumerate(layers) if lay.get("name") == name)


def _ticks(dom: tuple[float, float]) -> list[float]:
    """Axis values on a log scale: 1, 2 and 5 times powers of ten within `dom` (powers of ten alone when the
    domain spans more than about two decades), so that labels never crowd."""
    steps = (1,) if dom[1] / dom[0] > 150 else (1, 2, 5)
    out = []
    for e in range(math.floor(math.log10(dom[0])), math.ceil(math.log10(dom[1])) + 1):
        out += [float(f"{s}e{e}") for s in steps if dom[0] <= s * 10**e <= dom[1] * (1 + 1e-9)]
    return out


def _logspace(lo: float, hi: float, n: int) -> list[float]:
    a, b = math.log10(lo), math.log10(hi)
    return [10 ** (a + (b - a) * i / (n - 1)) for i in range(n)]


def write(result: AnalysisReport, path: Path, an: Analysis | None = None, theme: str = "light") -> Path:
    """Render to `path` (.svg or .png) with vl-convert."""
    import vl_convert as vlc

    if path.suffix.lower() not in (".svg", ".png"):
        raise ValueError(f"{path}: --plot writes .svg or .png")
    s = spec(result, an, theme)
    if path.suffix.lower() == ".svg":
        path.write_text(vlc.vegalite_to_svg(s))
    else:
        path.write_bytes(vlc.vegalite_to_png(s, scale=2))
    return path
