"""Hovers people read in a 250 px box (issue 18): at most about 15 lines, sources as readable names (never a
module path), knowledge-base references as links that open the note at its heading, one usable-HBM figure with
what it is."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from server.agents.coordinator import Experiment, run_report
from server.config.slices import parse_slice
from server.perf.memory import usable_hbm
from server.presentation import explain
from server.services.analysis import analyze

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "llama3-8b-v6e-16.yml"


def lines(md: str) -> list[str]:
    return [ln for ln in md.splitlines() if ln.strip() and ln.strip() != "---"]


def no_internal_paths(md: str) -> bool:
    return "server/" not in md and not re.search(r"\w\.py\b", md)


@pytest.mark.parametrize(
    ("source", "name"),
    [
        ("estimate: server/perf/steptime.py (overlap model in its docstring)", "ASAP's step-time model"),
        (
            "estimate: server/perf/collectives.py (ring cost per physical axis) + steptime.py overlap",
            "ASAP's collective-cost model + ASAP's step-time model",
        ),
        (
            "spec: v6e peak_bf16_flops (gcp-v6e); estimate: server/perf/arith.py executed FLOPs",
            "TPU v6e spec (Google Cloud TPU docs) + ASAP's FLOP count",
        ),
        ("profile: runs/r1 (XProf hlo_stats/overview, collectives >= 30%)", "XProf op profile"),
        (
            "profile: overview step table (median of the steps kept) vs estimate: server/perf/steptime.py",
            "XProf step table + ASAP's step-time model",
        ),
        ("estimate: server/perf/memory.py; spec: v5e hbm_bytes (gib-hbm)", "ASAP's memory model + TPU v5e spec"),
    ],
)
def test_evidence_sources_are_named_not_paths(source: str, name: str):
    got = explain.readable_source(source)
    assert got.startswith(name) and no_internal_paths(got), got


def test_agents_hover_is_short_with_the_table_first_and_links():
    report, _ = run_report(Experiment(EXAMPLE))
    md = explain.agent_md(report, stale=False)
    assert len(lines(md)) <= 15, md
    assert no_internal_paths(md), md
    assert md.startswith(f"**{report.diagnosis.bottleneck}-bound** (confidence ")  # type: ignore[union-attr]
    assert md.index("| 1 |") < md.index("**Why:**") < md.index("More: ")
    # every knowledge reference a proposal cites is a link that opens the file (at its heading when it has one)
    for m in re.finditer(r"\]\((file://[^)]+)\)", md):
        target = m.group(1)
        path = Path(target.removeprefix("file://").split("#")[0].replace("%20", " "))
        assert path.is_file(), target
        if "/kb/docs/" in target and "#L" in target:
            line = int(target.rsplit("#L", 1)[1])
            assert path.read_text().splitlines()[line - 1].startswith("#")
    assert "ahead of the next" not in md


def test_one_usable_hbm_figure_with_its_definition():
    an = analyze(EXAMPLE)
    assert an.estimate is not None
    chip = parse_slice("v6e-16").chip
    usable = usable_hbm(chip.hbm_bytes, chip.compiler_hbm_bytes)
    assert usable == an.estimate.memory.usable  # the same figure the memory verdicts use
    figure = f"{usable / 2**30:.2f} GiB usable"
    text = EXAMPLE.read_text().splitlines()
    for key in ("compile_topology", "per_device_batch_size"):
        line = next(i for i, ln in enumerate(text) if ln.startswith(f"{key}:"))
        found = explain.hover(an, line, 2, an.diagnostics)
        assert found is not None and figure in found[0], (key, found)
        assert "TPU compiler" in found[0] and "libtpu" in found[0]  # what the figure is
        assert len(lines(found[0])) <= 15 and no_internal_paths(found[0]), found[0]


def test_every_key_hover_of_the_examples_is_short_and_readable():
    for path in sorted((ROOT / "examples").glob("*.yml")):
        an = analyze(path)
        for i in range(len(path.read_text().splitlines())):
            found = explain.hover(an, i, 2, an.diagnostics)
            if found is not None:
                assert len(lines(found[0])) <= 16, (path.name, i, found[0])
                assert no_internal_paths(found[0]), (path.name, i, found[0])
