"""The roofline chart's layout (server/presentation/roofline_chart.py, label_layout.py): labels that never overlap
one another or cover a point, now and each proposal as distinct marks with an arrow from now to each, legends
that keep per-op points apart from meshes, and tooltips that name the mesh with numbers in units."""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import pytest

from server.agents.coordinator import run_report
from server.agents.report import AnalysisReport, ProfileOp, ProfileView
from server.agents.types import Experiment
from server.presentation.label_layout import Box, Layout, text_width
from server.presentation.roofline_chart import COMPONENT_GROUP, MESH_SOURCE, PLOT_H, PLOT_W, chart, spec
from server.services.analysis import Analysis, analyze

ROOT = Path(__file__).resolve().parents[1]
LABEL_LAYERS = ("mesh_labels", "op_labels", "ridge_labels")


@pytest.fixture(scope="module")
def v6e() -> tuple[AnalysisReport, Analysis]:
    """The demo config: its proposals 1 and 2 price almost the same (the crowded case for mesh labels)."""
    cfg = ROOT / "examples" / "llama3-8b-v6e-16.yml"
    doc, _ = run_report(Experiment(cfg))
    return doc, analyze(cfg)


def layer(s: dict[str, Any], name: str) -> dict[str, Any]:
    return next(lay for lay in s["layer"] if lay.get("name") == name)


def values(s: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return list(layer(s, name)["data"]["values"])


def to_px(s: dict[str, Any], x: float, y: float) -> tuple[float, float]:
    """Data to plot pixels through the spec's own (explicit, log) scale domains."""
    enc = s["layer"][0]["encoding"]
    (x0, x1), (y0, y1) = enc["x"]["scale"]["domain"], enc["y"]["scale"]["domain"]
    fx = (math.log10(x) - math.log10(x0)) / (math.log10(x1) - math.log10(x0))
    fy = (math.log10(y) - math.log10(y0)) / (math.log10(y1) - math.log10(y0))
    return fx * PLOT_W, (1 - fy) * PLOT_H


def label_boxes(s: dict[str, Any]) -> list[tuple[str, Box]]:
    return [(lb["text"], Box(*lb["box"])) for name in LABEL_LAYERS for lb in values(s, name)]


def marker_boxes(s: dict[str, Any]) -> list[tuple[str, Box]]:
    out = []
    for name, r in (("ops", 4.0), ("meshes", 6.5)):  # the drawn markers' radii (size 50 and 170)
        for m in values(s, name):
            x, y = to_px(s, m["intensity"], m["flops"])
            out.append((m["name"], Box(x - r, y - r, x + r, y + r)))
    return out


def assert_clear(s: dict[str, Any]) -> None:
    """No two label boxes overlap, no label covers a point, every label inside the plot, and every label sits
    where the spec draws it (its box centred on its data position)."""
    boxes = label_boxes(s)
    for i, (a, ba) in enumerate(boxes):
        assert ba.inside(Box(0, 0, PLOT_W, PLOT_H)), a
        for b, bb in boxes[i + 1 :]:
            assert not ba.overlaps(bb), f"labels {a!r} and {b!r} overlap"
        for p, bp in marker_boxes(s):
            assert not ba.overlaps(bp), f"label {a!r} covers the point {p!r}"
    for name in LABEL_LAYERS:
        for lb in values(s, name):
            cx, cy = to_px(s, lb["lx"], lb["ly"])
            b = lb["box"]
            assert cx == pytest.approx((b[0] + b[2]) / 2, abs=0.01) and cy == pytest.approx((b[1] + b[3]) / 2, abs=0.01)


def test_label_layout_crowded_cluster_never_overlaps() -> None:
    rng = random.Random(7)
    layout = Layout(PLOT_W, PLOT_H)
    points = [(300 + rng.uniform(-25, 25), 120 + rng.uniform(-15, 15)) for _ in range(40)]
    for x, y in points:
        layout.add_marker(x, y, 5)
    layout.add_line([(0, 100), (560, 100)])
    placed = [layout.near_point(f"fusion.{i}", x, y, 5, 10, rings=2) for i, (x, y) in enumerate(points)]
    boxes = [p.box for p in placed if p is not None]
    assert 5 <= len(boxes) < len(points)  # some labelled, the rest left to their tooltips
    for i, a in enumerate(boxes):
        assert a.inside(layout.area)
        assert not any(a.overlaps(b) for b in boxes[i + 1 :])
        assert not any(a.overlaps(m) for m in layout.hard)
    # a label next to a free point goes right beside it, with no leader line
    free = Layout(PLOT_W, PLOT_H)
    free.add_marker(100, 100, 5)
    p = free.near_point("now", 100, 100, 5, 12, bold=True)
    assert p is not None and p.leader is None and p.box.x0 > 105 and p.box.y0 < 100 < p.box.y1
    # in a row of points, a label without diagonal spots goes above or below its own point, not at a corner
    row = Layout(PLOT_W, PLOT_H)
    for x in (100, 112, 124):
        row.add_marker(x, 100, 5)
    q = row.near_point("qkv", 112, 100, 5, 11, diagonal=False)
    assert q is not None and q.box.x0 < 112 < q.box.x1 and (q.box.y1 <= 95 or q.box.y0 >= 105)
    # a vertical label beside a rule avoids the points on the rule's side and stays clear of them
    rule = Layout(PLOT_W, PLOT_H)
    for y in range(0, 200, 10):
        rule.add_marker(195, y, 5)
    v = rule.along_vertical("HBM ridge 241 FLOP/B", 200, 10)
    assert v is not None and v.angle == 270 and not any(v.box.overlaps(m) for m in rule.hard)
    assert v.box.y1 - v.box.y0 >= text_width("HBM ridge 241 FLOP/B", 10)


def test_roofline_labels_clear_with_crowded_profile(v6e: tuple[AnalysisReport, Analysis]) -> None:
    doc, an = v6e
    rng = random.Random(3)
    ops = [
        ProfileOp(
            name=f"%fusion.{i}",
            category="convolution fusion",
            occurrences=32,
            self_time_us=1000.0,
            self_time_fraction=0.02,
            flop_utilization=rng.uniform(0.55, 0.7),
            hbm_bw_utilization=0.3,
            operational_intensity=rng.uniform(2500, 6000),
            bound_by="compute",
            framework_op=None,
            layer=None,
            implausible_flops=False,
        )
        for i in range(30)
    ]
    profile = ProfileView.model_construct(source="/runs/r1/plugins/profile/x", top_ops=ops)
    s = chart(doc.estimate, an, slice_name="v6e-16", profile=profile, proposals=doc.proposals)
    assert_clear(s)
    unlabelled = s["usermeta"]["unlabelled"]
    assert unlabelled and len(unlabelled) < 36  # the cluster is too tight for every name; some still get one
    # an op without a label is still named by its tooltip, with its mesh and numbers in units
    tips = {m["name"]: m["tip"] for m in values(s, "ops")}
    for name in unlabelled:
        assert tips[name]["point"].startswith(name)
    prof = next(m for m in values(s, "ops") if m["group"].startswith("XProf"))
    assert prof["tip"]["mesh"] == "the profiled run's" and prof["tip"]["source"] == "XProf op profile (x)"
    # the legend of per-op points lists both kinds
    assert len(layer(s, "ops")["encoding"]["color"]["scale"]["domain"]) == 2


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_roofline_now_and_proposals_distinct_with_arrows(v6e: tuple[AnalysisReport, Analysis], theme: str) -> None:
    doc, an = v6e
    s = spec(doc, an, theme)
    assert_clear(s)
    meshes = {m["name"]: m for m in values(s, "meshes")}
    ranks = [f"P{p.rank}" for p in doc.proposals if not p.keep_current]
    assert set(meshes) == {"now", *ranks} and len(ranks) >= 2
    colours = {m["colour"] for m in meshes.values()}
    assert len(colours) == len(meshes)  # every mesh its own colour
    shape = layer(s, "meshes")["encoding"]["shape"]["scale"]
    assert dict(zip(shape["domain"], shape["range"], strict=True))["now"] == "circle"
    assert {r for d, r in zip(shape["domain"], shape["range"], strict=True) if d != "now"} == {"diamond"}
    # one label per group of meshes drawn on one another; every mesh named exactly once
    texts = [lb["text"] for lb in values(s, "mesh_labels")]
    assert sorted(n for t in texts for n in t.split(", ")) == sorted(meshes)
    assert "now" in texts  # now never shares its label: the proposals here are faster, so elsewhere
    assert "P1, P2" in texts  # proposals 1 and 2 price within a few pixels of each other here
    # the legend names a mesh drawn on another with its speedup and where to find it
    assert f"P2 x{meshes['P2']['speedup']:.2f} (at P1)" in layer(s, "meshes")["encoding"]["color"]["scale"]["domain"]
    # an arrow from now towards each labelled proposal group, its head pointing at the proposal
    nx, ny = to_px(s, meshes["now"]["intensity"], meshes["now"]["flops"])
    heads = values(s, "arrowheads")
    leads = [t.split(", ")[0] for t in texts if t != "now"]
    assert len(heads) == len(values(s, "arrows")) == len(leads)
    for lead, head in zip(leads, heads, strict=True):
        tx, ty = to_px(s, meshes[lead]["intensity"], meshes[lead]["flops"])
        hx, hy = to_px(s, head["x"], head["y"])
        assert math.hypot(tx - hx, ty - hy) < math.hypot(tx - nx, ty - ny)  # on the way to the proposal
        want = math.degrees(math.atan2(tx - nx, -(ty - ny))) % 360  # triangle-up turned clockwise
        assert head["angle"] == pytest.approx(want, abs=0.5)
        assert head["colour"] == meshes[lead]["colour"]
        assert head["tip"].startswith(f"now \u2192 {lead}: x")
    # the faster proposals sit higher than now (more FLOP/s attained per device)
    for r in ranks:
        assert meshes[r]["speedup"] > 1 and meshes[r]["flops"] > meshes["now"]["flops"]


def test_roofline_tooltips_name_the_mesh_with_units(v6e: tuple[AnalysisReport, Analysis]) -> None:
    doc, an = v6e
    s = spec(doc, an)
    now_mesh = "fsdp=4 x tensor=4"
    for name in ("ops", "meshes"):
        for m in values(s, name):
            tip = m["tip"]
            assert all(isinstance(v, str) and v and "undefined" not in v and "None" not in v for v in tip.values())
            assert tip["mesh"] and tip["operational intensity"].endswith(" FLOP/B")
            assert "FLOP/s per device" in tip["attained"] and "% of peak" in tip["attained"]
            assert m["aria"].startswith("point: ")  # the accessible description says the same
    meshes = {m["name"]: m for m in values(s, "meshes")}
    assert meshes["now"]["tip"]["mesh"] == now_mesh and meshes["now"]["tip"]["point"] == "now (the current mesh)"
    assert meshes["P1"]["tip"]["mesh"] == "fsdp=16"
    assert meshes["P1"]["tip"]["against now"].startswith("x1.") and "ms \u2192" in meshes["P1"]["tip"]["against now"]
    assert all(m["tip"]["mesh"] == f"now: {now_mesh}" for m in values(s, "ops"))
    # the tooltip channel carries the whole tip object, so no field shows as "undefined" for a point without it
    for name in ("ops", "meshes", "arrows", "arrowheads", "ridges"):
        assert layer(s, name)["encoding"]["tooltip"] == {"field": "tip", "type": "nominal"}
    assert all(r["tip"]["ridge"] for r in values(s, "ridges"))


def test_roofline_legends_separate_per_op_points_from_meshes(v6e: tuple[AnalysisReport, Analysis]) -> None:
    doc, an = v6e
    s = spec(doc, an)
    ops, meshes = layer(s, "ops")["encoding"], layer(s, "meshes")["encoding"]
    assert ops["color"]["title"] == "Per-op points" and meshes["color"]["title"].startswith("Meshes")
    assert ops["color"]["scale"]["domain"] == [COMPONENT_GROUP]  # no profile here
    assert meshes["color"]["scale"]["domain"][0] == "now"
    assert all(d.startswith("P") and " x" in d for d in meshes["color"]["scale"]["domain"][1:])
    assert s["resolve"]["scale"] == {"color": "independent", "shape": "independent"}
    assert {m["source"] for m in values(s, "meshes")} == {MESH_SOURCE}
    # both ridges labelled beside their rules, after the points' labels have taken their places
    assert [lb["text"] for lb in values(s, "ridge_labels")] == ["HBM ridge 560", "ICI ridge 4,590"]
    assert all(lb["angle"] == 270 for lb in values(s, "ridge_labels"))
    # the themes change colours, never the layout
    dark = spec(doc, an, "dark")
    assert dark["config"]["background"] != s["config"]["background"]
    assert label_boxes(dark) == label_boxes(s)


def test_roofline_renders_with_vl_convert(v6e: tuple[AnalysisReport, Analysis]) -> None:
    import vl_convert as vlc

    doc, an = v6e
    svg = vlc.vegalite_to_svg(spec(doc, an))
    assert "Per-op points" in svg and "Meshes (whole step, ASAP estimate)" in svg and ">now<" in svg
    assert "undefined" not in svg and "NaN" not in svg
