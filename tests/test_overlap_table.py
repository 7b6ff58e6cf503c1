"""The committed overlap table (server/perf/data/overlap.json, written by bench/overlap_table.py): it loads through
server/perf/overlap.py, every row is well-formed, and the rows measured on one compiled module are what
server/profiles/hlo_schedule.py reads from that module again (tests/data/overlap/, a real MaxText train step
compiled by libtpu; its README names the config, flags and versions)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from server.config.slices import parse_slice
from server.config.xla_flags import GROUP_SPECS
from server.perf import overlap
from server.perf.layout import build
from server.profiles import hlo_schedule

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "overlap"
MODULE = DATA / "v5e-2slices-fsdp16-8l.after_optimizations.txt.gz"
CONFIG = "v5e llama2-7b 8L 2 slices x fsdp16"
AXES = ("fsdp", "tensor", "context", "expert", "data", "pipeline", "fsdp+expert")
KINDS = ("all-gather", "reduce-scatter", "all-reduce", "all-to-all", "collective-permute")
GENERATIONS = ("v4", "v5e", "v5p", "v6e", "tpu7x")
GROUPS = {g.name for g in GROUP_SPECS}


def raw() -> dict[str, Any]:
    return dict(json.loads(overlap.TABLE.read_text(encoding="utf-8")))


def test_overlap_table_loads_with_versions_and_rows() -> None:
    tab = overlap.table(str(overlap.TABLE))
    assert tab.rows, "no rows"
    for key in ("maxtext", "jax", "libtpu"):
        assert tab.versions.get(key), key
    assert "maxtext" in tab.label() and "libtpu" in tab.label()


def test_overlap_table_rows_are_well_formed() -> None:
    data = raw()
    assert data["method"]
    seen: set[tuple[str, str, str, tuple[str, ...], tuple[str, ...]]] = set()
    for r in data["rows"]:
        assert r["generation"] in GENERATIONS, r
        assert r["axis"] in AXES, r
        assert r["kind"] in KINDS, r
        assert r["behind"] in overlap.WINDOWS, r
        assert 0.0 <= r["hidden"] <= 1.0, r
        assert (r["hidden"] == 0.0) == (r["behind"] == "none"), r
        assert set(r["on"]) <= GROUPS and set(r["off"]) <= GROUPS, r
        assert r["collectives"] >= 1 and r["configs"], r
        key = (r["generation"], r["axis"], r["kind"], tuple(r["on"]), tuple(r["off"]))
        assert key not in seen, f"two rows for {key}"
        seen.add(key)
    for e in data["flag_effects"]:
        assert e["generation"] in GENERATIONS and isinstance(e["changes_program"], bool) and e["what"], e


def test_overlap_table_lookup_answers_from_a_measured_row() -> None:
    row = next(r for r in overlap.table(str(overlap.TABLE)).rows if not r.on and not r.off)
    got = overlap.lookup(row.generation, row.axis, row.kind)
    assert got.measured and got.hidden == pytest.approx(row.hidden) and got.behind == row.behind
    assert "overlap.json" in got.source and row.generation in got.source


def test_overlap_table_row_reproduced_from_a_compiled_module() -> None:
    """The rows only the committed module's config measured (its data axis across the two slices) are what the
    schedule reader gives for that module again."""
    data = raw()
    case = next(c for c in data["cases"] if c["config"] == CONFIG and c["flags"] == "defaults")
    lay = build(parse_slice(case["slice"], case["num_slices"]), case["ici"], case["dcn"])
    with gzip.open(MODULE, "rt", encoding="utf-8") as f:
        text = f.read()
    got = {(r.group, r.kind): r for r in hlo_schedule.aggregate(hlo_schedule.schedule(text, lay).collectives)}
    gen = parse_slice(case["slice"]).chip.generation
    own = [r for r in data["rows"] if r["generation"] == gen and r["configs"] == [CONFIG] and not r["on"] + r["off"]]
    assert own, "no row of the table comes from that config alone"
    for r in own:
        mine = got[(r["axis"], r["kind"])]
        assert (round(mine.hidden, 3), mine.behind, mine.collectives) == (r["hidden"], r["behind"], r["collectives"])
