"""The roofline chart's layout (server/presentation/roofline_chart.py, label_layout.py): labels that never overlap
one another or cover a point, now and each proposal as distinct marks with an arrow from now to each, legends
that keep per-op points apart from meshes, tooltips that name the mesh with numbers in units, and the compiled
point of each mesh whose compiled program's step Verify simulated."""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import pytest

from server.agents.coordinator import run_report
from server.agents.report import AnalysisReport, CompilerVerdictView, ProfileOp, ProfileView, ScheduleView
from server.agents.types import Experiment
from server.presentation.label_layout import Box, Layout, text_width
from server.presentation.roofline_chart import (
    COMPILED_SOURCE,
    COMPILED_TITLE,
    COMPONENT_GROUP,
    MESH_SOURCE,
    PLOT_H,
    PLOT_W,
    SCHEDULE_SOURCE,
    chart,
    spec,
)
from server.services.analysis import Analysis, analyze

ROOT = Path(__file__).resolve().parents[1]
LABEL_LAYERS = ("mesh_labels", "compiled_labels", "op_labels", "ridge_labels")


@pytest.fixture(scope="module")
def v6e() -> tuple[AnalysisReport, Analysis]:
    """The demo config: its proposals 1 and 2 price almost the same (the crowded case for mesh labels)."""
    cfg = ROOT / "examples" / "llama3-8b-v6e-16.yml"
    doc, _ = run_report(Experiment(cfg))
    return doc, analyze(cfg)


def layer(s: dict[str, Any], name: str) -> dict[str, Any]:
    return next(lay for lay in s["layer"] if lay.get("name") == name)


def values(s: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """A layer's data; none for a layer the chart leaves out (the compiled points' without a simulated step)."""
    lay = next((lay for lay in s["layer"] if lay.get("name") == name), None)
    return list(lay["data"]["values"]) if lay is not None else []


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
    for name, r in (("ops", 4.0), ("meshes", 6.5), ("compiled", 6.5)):  # the drawn markers' radii (size 50, 170)
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


def verdict(step_s: float | None, mfu: float | None = None) -> CompilerVerdictView:
    """A verdict of a compile that fits, with its simulated step when `step_s` (none: a compile without one)."""
    sched = ScheduleView(step_s=step_s, busy_s={"matmul": step_s * 0.7}, exposed_s={}) if step_s else None
    if sched is not None and mfu is not None:
        sched.mfu = mfu
    return CompilerVerdictView(
        status="ok",
        fits=True,
        memory_per_chip_bytes=20e9,
        hbm_limit_bytes=31.25e9,
        program="maxtext",
        message="fits: 20.0 GB of 31.2 GB per chip",
        schedule=sched,
    )


def with_verdicts(doc: AnalysisReport, now: CompilerVerdictView | None, **ranks: CompilerVerdictView) -> AnalysisReport:
    """The report as Verify leaves it: the current mesh's verdict and the proposals' (by "P<rank>")."""
    out = doc.model_copy(deep=True)
    out.current_compiler = now
    for p in out.proposals:
        if f"P{p.rank}" in ranks:
            p.compiler = ranks[f"P{p.rank}"]
    return out


def test_roofline_compiled_points_at_the_simulated_step(v6e: tuple[AnalysisReport, Analysis]) -> None:
    doc, an = v6e
    est = doc.estimate
    assert est is not None
    s = spec(with_verdicts(doc, verdict(3.0, mfu=0.31), P1=verdict(3.4)), an)
    assert_clear(s)  # the compiled points' labels cover no point, no label covers a compiled point
    meshes = {m["name"]: m for m in values(s, "meshes")}
    compiled = {c["name"]: c for c in values(s, "compiled")}
    assert set(compiled) == {"now (compiled)", "P1 (compiled)"}  # P2 and P3 were not simulated
    # now's: the estimate's FLOPs per device a step over the simulated 3.0 s, at the estimate point's intensity
    flops = sum(p.flops for p in est.roofline.points)
    nbytes = sum(p.hbm_bytes for p in est.roofline.points)
    now = compiled["now (compiled)"]
    assert now["intensity"] == pytest.approx(flops / nbytes) == meshes["now"]["intensity"]
    assert now["flops"] == pytest.approx(flops / 3.0)
    assert now["flops"] == pytest.approx(meshes["now"]["flops"] * est.time.step_s / 3.0)
    # P1's: its estimate point moved along y by its estimated step over its simulated 3.4 s
    p1, p1_est = compiled["P1 (compiled)"], meshes["P1"]
    assert p1["intensity"] == p1_est["intensity"]
    assert p1["flops"] == pytest.approx(p1_est["flops"] * p1_est["step_s"] / 3.4)
    assert {c["source"] for c in compiled.values()} == {COMPILED_SOURCE}
    # drawn hollow in its mesh's colour and shape, with a legend of its own naming the simulated step
    assert (now["colour"], p1["colour"]) == (meshes["now"]["colour"], p1_est["colour"])
    lay = layer(s, "compiled")
    assert lay["mark"]["filled"] is False
    for channel, want in (("color", [now["colour"], p1["colour"]]), ("shape", ["circle", "diamond"])):
        enc = lay["encoding"][channel]
        assert enc["title"] == COMPILED_TITLE and enc["scale"] == {
            "domain": ["now 3,000 ms", "P1 3,400 ms"],
            "range": want,
        }
    assert s["config"]["legend"]["layout"]["top"]["direction"] == "vertical"  # under the meshes' legend
    # the tooltip names the point, its mesh, the simulated step with MFU, the attained rate and its source
    tip = now["tip"]
    assert tip["point"].startswith("now (compiled): the current mesh's compiled program")
    assert tip["mesh"] == meshes["now"]["tip"]["mesh"] and tip["operational intensity"].endswith(" FLOP/B")
    assert tip["step time"] == "3,000 ms simulated (MFU 31.0%)"
    peak = s["usermeta"]["peak_flops_per_s"]
    assert tip["attained"].endswith(f"per device ({flops / 3.0 / peak:.0%} of peak)")
    assert tip["against the estimate"].startswith(f"step {est.time.step_s * 1e3:,.0f} ms estimated \u2192 3,000 ms")
    assert tip["source"].startswith(SCHEDULE_SOURCE + " (MaxText's own train step)")
    assert p1["tip"]["step time"] == "3,400 ms simulated"  # no MFU in its schedule: none claimed
    assert p1["tip"]["point"].startswith("P1 (compiled): proposal 1's")
    assert all(isinstance(v, str) and v and "None" not in v for c in compiled.values() for v in c["tip"].values())
    assert now["aria"].startswith("point: now (compiled)")
    # labelled by the same layout, and each joined to its estimate point by a thin line in its colour
    assert sorted(lb["text"] for lb in values(s, "compiled_labels")) == ["P1 (compiled)", "now (compiled)"]
    links = values(s, "compiled_links")
    assert len(links) == 2
    for c, link in zip((now, p1), links, strict=True):
        m = meshes[c["of"]]
        assert link["x"] == pytest.approx(m["intensity"]) and link["x2"] == pytest.approx(m["intensity"])
        lo, hi = sorted((m["flops"], c["flops"]))
        assert lo < link["y"] < hi and lo < link["y2"] < hi and link["colour"] == c["colour"]
        assert link["tip"].startswith(f"{c['of']} \u2192 {c['name']}: step ")
    # the page hides overlapping labels and keeps them off points by these layers' names
    assert [lay.get("name") for lay in s["layer"]][-1] == "compiled_labels"


def test_roofline_compiled_points_share_a_label_and_stay_on_the_chart(v6e: tuple[AnalysisReport, Analysis]) -> None:
    doc, an = v6e
    est = doc.estimate
    assert est is not None
    peak = max(p.peak_flops_per_s for p in est.roofline.points)
    flops = sum(p.flops for p in est.roofline.points)
    # P1 and P2 price within a pixel of each other; at the same simulated step their compiled points do too.
    # now's simulated step is shorter than its FLOPs at twice the chip's peak (a schedule that skips work the
    # estimate counts): its point still lies inside the plot
    fast = flops / (2 * peak)
    s = spec(with_verdicts(doc, verdict(fast), P1=verdict(3.4), P2=verdict(3.4)), an, "dark")
    assert_clear(s)
    texts = [lb["text"] for lb in values(s, "compiled_labels")]
    assert "P1, P2 (compiled)" in texts and "now (compiled)" in texts
    assert layer(s, "compiled")["encoding"]["color"]["scale"]["domain"][1:] == ["P1 3,400 ms", "P2 3,400 ms (at P1)"]
    now = next(c for c in values(s, "compiled") if c["of"] == "now")
    assert now["flops"] == pytest.approx(2 * peak)
    top = layer(s, "meshes")["encoding"]["y"]["scale"]["domain"][1]
    assert top >= 1.3 * now["flops"]
    _, y = to_px(s, now["intensity"], now["flops"])
    assert 0 < y < PLOT_H


def test_roofline_without_a_simulated_step_is_unchanged(v6e: tuple[AnalysisReport, Analysis]) -> None:
    """Verdicts without a schedule (a compile that did not fit, an older cache) draw the chart as before Verify."""
    doc, an = v6e
    plain = spec(doc, an)
    assert spec(with_verdicts(doc, verdict(None), P1=verdict(None)), an) == plain
    names = [lay.get("name") for lay in plain["layer"]]
    assert not any(n and n.startswith("compiled") for n in names) and "layout" not in plain["config"]["legend"]
    # a simulated step only for a proposal left out of the chart (keep the current mesh) draws nothing either
    kept = doc.model_copy(deep=True)
    for p in kept.proposals:
        p.keep_current, p.compiler = True, verdict(3.0)
    assert not values(spec(kept, an), "compiled")
