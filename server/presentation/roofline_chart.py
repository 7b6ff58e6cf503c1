"""The roofline chart of an analysis, as one Vega-Lite spec: the declared chip's HBM roofline with its HBM and
ICI ridge points, the estimate's components for the current mesh, one point per mesh (the current one and each
proposal: the whole step's FLOPs over its HBM bytes, at the FLOP rate its modelled step time gives), and the
profile's measured program and top ops when one is linked. The same spec renders in the editor's webview
(vega-embed) and to SVG/PNG for `asap analyze --plot` (vl-convert, no browser).

Axes are log-log: operational intensity (FLOP per HBM byte) against FLOP/s per device. Every point carries its
source in the tooltip: which estimate (spec table, formula) or which profile row.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from server.agents.report import AnalysisReport, EstimateView, ProfileView, ProposalView
from server.services.analysis import Analysis

THEMES = ("light", "dark")
# Colours per theme. Both palettes keep every mark above 4.5:1 contrast against their background.
_PALETTE = {
    "light": {
        "background": "#ffffff",
        "text": "#1f1f1f",
        "grid": "#e4e4e4",
        "roof": "#555555",
        "rule": "#8a8a8a",
        "range": ["#1f6fb4", "#b35806", "#1b7837", "#7b3294", "#c51b7d"],
    },
    "dark": {
        "background": "#1e1e1e",
        "text": "#e0e0e0",
        "grid": "#3a3a3a",
        "roof": "#bdbdbd",
        "rule": "#9e9e9e",
        "range": ["#6cb6ff", "#fdb863", "#7fd88f", "#c2a5cf", "#f1a7d0"],
    },
}


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
        "basis": f"estimate: {flops:.3g} FLOP / {nbytes:.3g} B per device, step {step * 1e3:.1f} ms, "
        f"MFU {est.mfu * 100:.1f}%",
    }


def mesh_points(
    est: EstimateView | None, proposals: Sequence[ProposalView], an: Analysis | None
) -> list[dict[str, Any]]:
    """The current mesh and each proposal (re-priced by the estimate for `an`'s config) as program points."""
    out: list[dict[str, Any]] = []
    if est is not None:
        p = _program_point(est, "now", "meshes (estimate)", "current mesh")
        if p:
            out.append(p)
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
        p = _program_point(priced, f"P{prop.rank}", "meshes (estimate)", mesh_label(prop))
        if p:
            out.append(p)
    return out


def spec(result: AnalysisReport, an: Analysis | None = None, theme: str = "light") -> dict[str, Any]:
    """Vega-Lite for an `asap analyze --json` document (needs its estimate). With the config's analysis `an`,
    the proposals are plotted too. `theme`: "light" or "dark"."""
    return chart(
        result.estimate,
        an,
        theme,
        slice_name=result.slice.name if result.slice else None,
        profile=result.profile,
        proposals=result.proposals,
    )


def chart(
    est: EstimateView | None,
    an: Analysis | None = None,
    theme: str = "light",
    *,
    slice_name: str | None = None,
    profile: ProfileView | None = None,
    proposals: Sequence[ProposalView] = (),
) -> dict[str, Any]:
    """Vega-Lite for an estimate, the linked profile's top ops and the proposals (the editor's chart for the
    text as it is now, with the agents' proposals only when they are of this version)."""
    if theme not in _PALETTE:
        raise ValueError(f"theme must be one of {', '.join(THEMES)}, got {theme!r}")
    if est is None:
        raise ValueError("no estimate: the config must declare a slice and have a valid mesh")
    pal = _PALETTE[theme]
    roof = est.roofline
    points = roof.points
    peak = max(p.peak_flops_per_s for p in points)
    ridges = roof.ridge_points
    ridge = float(ridges.hbm)
    bw = peak / ridge
    marks: list[dict[str, Any]] = []
    for p in points:
        if p.seconds > 0 and p.flops > 0 and p.operational_intensity:
            marks.append(
                {
                    "name": p.name,
                    "intensity": p.operational_intensity,
                    "flops": p.flops / p.seconds,
                    "source": "estimate (current mesh)",
                    "basis": f"estimate: {p.flops:.3g} FLOP, {p.hbm_bytes:.3g} B in {p.seconds * 1e3:.2f} ms "
                    f"({p.bound}-bound)",
                }
            )
    marks.extend(mesh_points(est, proposals, an))
    if profile is not None:
        # the profile's ops at their measured FLOP rate (utilization of the declared chip's peak, per device)
        for o in profile.top_ops:
            if o.operational_intensity and o.flop_utilization:
                marks.append(
                    {
                        "name": o.name[:40],
                        "intensity": o.operational_intensity,
                        "flops": o.flop_utilization * peak,
                        "source": "profile (top ops)",
                        "basis": f"profile: XProf op_profile row {o.name[:60]}, "
                        f"{o.flop_utilization * 100:.1f}% of peak",
                    }
                )
    top = max([4 * ridge, *(4 * m["intensity"] for m in marks)])
    lo = min([ridge / 30, *(m["intensity"] / 2 for m in marks)])
    line = [{"intensity": x, "flops": min(peak, x * bw)} for x in _logspace(lo, top, 80)]
    rules = [{"intensity": ridge, "label": f"HBM ridge {ridge:,.0f} FLOP/B"}]
    if ridges.ici_axis:
        # the same kind of ratio against the bytes one mesh axis sends over ICI (DOMAIN.md §4)
        rules.append({"intensity": float(ridges.ici_axis), "label": f"ICI ridge {ridges.ici_axis:,.0f} FLOP/B"})
    title: dict[str, Any] = {"text": f"Roofline of {slice_name} per device" if slice_name else "Roofline"}
    legend = [f"{m['name']}: {m['mesh']}" for m in marks if m.get("mesh")]
    if legend:
        title["subtitle"] = legend  # one line per mesh
    x_enc = {"field": "intensity", "type": "quantitative"}
    y_enc = {"field": "flops", "type": "quantitative"}
    return {
        "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
        "title": title,
        "width": 560,
        "height": 360,
        "layer": [
            {
                "data": {"values": line},
                "mark": {"type": "line", "color": pal["roof"], "strokeWidth": 2},
                "encoding": {
                    "x": {
                        **x_enc,
                        "scale": {"type": "log"},
                        "title": "operational intensity (FLOP per HBM byte)",
                    },
                    "y": {**y_enc, "scale": {"type": "log"}, "title": "FLOP/s per device", "axis": {"format": "~s"}},
                },
            },
            {
                "data": {"values": rules},
                "mark": {"type": "rule", "strokeDash": [4, 4], "color": pal["rule"]},
                "encoding": {"x": x_enc, "tooltip": [{"field": "label"}]},
            },
            {
                "data": {"values": rules},
                "mark": {"type": "text", "angle": 270, "align": "right", "baseline": "bottom", "dx": -4, "y": 4},
                "encoding": {"x": x_enc, "text": {"field": "label"}},
            },
            {
                "data": {"values": marks},
                "mark": {"type": "point", "filled": True, "size": 80},
                "encoding": {
                    "x": x_enc,
                    "y": y_enc,
                    "color": {"field": "source", "type": "nominal", "title": None, "scale": {"range": pal["range"]}},
                    "shape": {"field": "source", "type": "nominal", "title": None},
                    "tooltip": [
                        {"field": "name"},
                        {"field": "mesh"},
                        {"field": "intensity", "format": ",.0f", "title": "FLOP per HBM byte"},
                        {"field": "flops", "format": ".3s", "title": "FLOP/s"},
                        {"field": "basis"},
                    ],
                },
            },
            {
                "data": {"values": marks},
                "mark": {"type": "text", "align": "left", "dx": 6, "dy": -6, "fontSize": 10},
                "encoding": {"x": x_enc, "y": y_enc, "text": {"field": "name"}},
            },
        ],
        "config": {
            "background": pal["background"],
            "title": {"color": pal["text"], "subtitleColor": pal["text"]},
            "text": {"color": pal["text"]},
            "axis": {
                "labelColor": pal["text"],
                "titleColor": pal["text"],
                "gridColor": pal["grid"],
                "domainColor": pal["rule"],
                "tickColor": pal["rule"],
            },
            "legend": {"labelColor": pal["text"], "titleColor": pal["text"], "orient": "bottom"},
        },
        "usermeta": {"peak_flops_per_s": peak, "hbm_bytes_per_s": bw, "hbm_ridge": ridge, "theme": theme},
    }


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
