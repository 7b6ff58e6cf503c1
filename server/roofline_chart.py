"""The roofline chart of an analysis, as one Vega-Lite spec: the declared chip's HBM roofline and ridge point,
the estimate's components for the current mesh (achieved FLOP/s: FLOPs over their modelled time), and the
profile's measured program and top ops when one is linked. The same spec renders in the editor's webview
(vega-embed) and to SVG/PNG for `asap analyze --plot` (vl-convert, no browser).

Axes are log-log: operational intensity (FLOP per HBM byte) against FLOP/s per chip.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any


def spec(result: dict[str, Any]) -> dict[str, Any]:
    """Vega-Lite for an `asap analyze --json` document (needs its estimate)."""
    est = result.get("estimate")
    if not est:
        raise ValueError("no estimate: the config must declare a slice and have a valid mesh")
    roof = est["roofline"]
    points = roof["points"]
    peak = max(p["peak_flops_per_s"] for p in points)
    ridge = float(roof["ridge_points"]["hbm"])
    bw = peak / ridge
    lo, hi = 1.0, max(1e5, 10 * max((p["operational_intensity"] or 0) for p in points))
    line = [{"intensity": x, "flops": min(peak, x * bw), "series": "HBM roofline"} for x in _logspace(lo, hi, 60)]
    marks: list[dict[str, Any]] = []
    for p in points:
        if p["seconds"] > 0 and p["flops"] > 0 and p["operational_intensity"]:
            marks.append(
                {
                    "name": p["name"],
                    "intensity": p["operational_intensity"],
                    "flops": p["flops"] / p["seconds"],
                    "source": "estimate (current mesh)",
                }
            )
    prof = result.get("profile")
    if prof:
        # the profile's ops at their measured FLOP rate (utilization of the declared chip's peak, per chip)
        for o in prof["top_ops"]:
            if o.get("operational_intensity") and o.get("flop_utilization"):
                marks.append(
                    {
                        "name": o["name"][:40],
                        "intensity": o["operational_intensity"],
                        "flops": o["flop_utilization"] * peak,
                        "source": "profile (top ops)",
                    }
                )
    title = f"Roofline of {result['slice']['name']} per chip" if result.get("slice") else "Roofline"
    return {
        "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
        "title": title,
        "width": 560,
        "height": 360,
        "layer": [
            {
                "data": {"values": line},
                "mark": {"type": "line", "color": "#888"},
                "encoding": {
                    "x": {
                        "field": "intensity",
                        "type": "quantitative",
                        "scale": {"type": "log"},
                        "title": "operational intensity (FLOP per HBM byte)",
                    },
                    "y": {
                        "field": "flops",
                        "type": "quantitative",
                        "scale": {"type": "log"},
                        "title": "FLOP/s per chip",
                        "axis": {"format": "~s"},
                    },
                },
            },
            {
                "data": {"values": [{"intensity": ridge, "label": f"HBM ridge {ridge:,.0f} FLOP/B"}]},
                "mark": {"type": "rule", "strokeDash": [4, 4], "color": "#aaa"},
                "encoding": {"x": {"field": "intensity", "type": "quantitative"}},
            },
            {
                "data": {"values": marks},
                "mark": {"type": "point", "filled": True, "size": 80},
                "encoding": {
                    "x": {"field": "intensity", "type": "quantitative"},
                    "y": {"field": "flops", "type": "quantitative"},
                    "color": {"field": "source", "type": "nominal", "title": None},
                    "shape": {"field": "source", "type": "nominal"},
                    "tooltip": [
                        {"field": "name"},
                        {"field": "intensity", "format": ",.0f"},
                        {"field": "flops", "format": ".3s"},
                    ],
                },
            },
            {
                "data": {"values": marks},
                "mark": {"type": "text", "align": "left", "dx": 6, "dy": -6, "fontSize": 10},
                "encoding": {
                    "x": {"field": "intensity", "type": "quantitative"},
                    "y": {"field": "flops", "type": "quantitative"},
                    "text": {"field": "name"},
                },
            },
        ],
        "config": {"background": "white"},
        "usermeta": {"peak_flops_per_s": peak, "hbm_bytes_per_s": bw, "hbm_ridge": ridge},
    }


def _logspace(lo: float, hi: float, n: int) -> list[float]:
    a, b = math.log10(lo), math.log10(hi)
    return [10 ** (a + (b - a) * i / (n - 1)) for i in range(n)]


def write(result: dict[str, Any], path: Path) -> Path:
    """Render to `path` (.svg or .png) with vl-convert."""
    import vl_convert as vlc

    s = spec(result)
    if path.suffix.lower() == ".svg":
        path.write_text(vlc.vegalite_to_svg(s))
    elif path.suffix.lower() == ".png":
        path.write_bytes(vlc.vegalite_to_png(s, scale=2))
    else:
        raise ValueError(f"{path}: --plot writes .svg or .png")
    return path
