"""The synthetic profiles read back through XProf's own conversion as their ground truth says."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from .synth import GROUND_TRUTH, SCENARIOS, ground_truth, write_profile

r2t = pytest.importorskip("xprof.convert.raw_to_tool_data")


def _tool(paths: list[Path], tool: str) -> Any:
    data, _ = r2t.xspace_to_tool_data([str(p) for p in paths], tool, {"use_saved_result": False})
    return json.loads(data)


def _first_table(data: Any) -> dict[str, Any]:
    """hlo_stats returns one DataTable, roofline_model a list of them."""
    return data[0] if isinstance(data, list) else data


def _rows(table: dict[str, Any]) -> list[dict[str, Any]]:
    cols = [c["id"] for c in table["cols"]]
    return [dict(zip(cols, [c.get("v") if c else None for c in r["c"]], strict=True)) for r in table["rows"]]


def _roofline(paths: list[Path]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(Program row, per-op rows) of the step="Total" rows that include infeed/outfeed."""
    table = _first_table(_tool(paths, "roofline_model"))
    total = [r for r in _rows(table) if r["step"] == "Total" and r["include_infeed_outfeed"]]
    return next(r for r in total if r["category"] == "Program"), [r for r in total if r["category"] != "Program"]


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_synth_overview_matches_ground_truth(tmp_path: Path, scenario: str) -> None:
    paths = write_profile(tmp_path, scenario)
    truth = GROUND_TRUTH[scenario]
    overview = _tool(paths, "overview_page")
    assert len(_rows(overview[1])) == truth.steps
    assert float(overview[1]["p"]["steptime_ms_average"]) == pytest.approx(truth.step_time_ms_mean, abs=0.005)
    assert overview[0]["p"]["device_idle_time_percent"] == f"{truth.idle_fraction * 100:.1f}%"
    assert overview[0]["p"]["device_duty_cycle_percent"] == f"{truth.duty_cycle * 100:.1f}%"


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_synth_roofline_matches_ground_truth(tmp_path: Path, scenario: str) -> None:
    paths = write_profile(tmp_path, scenario)
    truth = GROUND_TRUTH[scenario]
    program, ops = _roofline(paths)
    assert program["bound_by"] == truth.program_bound_by
    assert program["roofline_efficiency"] == pytest.approx(truth.program_roofline_efficiency, rel=1e-6)
    assert program["measured_flop_rate"] == pytest.approx(truth.program_flop_rate_gflops, rel=1e-6)
    assert {r["operation"]: r["bound_by"] for r in ops} == {n: t.bound_by for n, t in truth.ops.items()}
    for r in ops:
        assert r["roofline_efficiency"] == pytest.approx(truth.ops[r["operation"]].roofline_efficiency, rel=1e-6)


def test_synth_program_verdicts() -> None:
    assert GROUND_TRUTH["compute"].program_bound_by == "Compute"
    assert GROUND_TRUTH["hbm"].program_bound_by == "HBM"
    assert GROUND_TRUTH["comm"].collective_fraction_of_device_time >= 0.40
    assert GROUND_TRUTH["idle"].idle_fraction == pytest.approx(0.40)
    assert set(GROUND_TRUTH["implausible"].implausible_ops) == {"splash_mha_fwd_residuals", "splash_mha_dkv_segmented"}
    assert GROUND_TRUTH["no_steps"].steps == 0


@pytest.mark.parametrize("scenario", ["comm", "comm_mesh"])
def test_synth_hlo_stats_carry_expressions_and_fractions(tmp_path: Path, scenario: str) -> None:
    kwargs: dict[str, Any] = {"hosts": 2, "step_jitter": 0.1, "seed": 7}
    paths = write_profile(tmp_path, scenario, **kwargs)
    truth = ground_truth(scenario, **kwargs)
    rows = _rows(_first_table(_tool(paths, "hlo_stats")))
    devices = truth.hosts * truth.devices_per_host
    assert {r["hlo_op_name"] for r in rows} == set(truth.ops)
    total = sum(r["total_self_time"] for r in rows)
    assert total == pytest.approx(truth.op_time_us_per_device * devices, rel=1e-6)
    for r in rows:
        op = truth.ops[r["hlo_op_name"]]
        assert r["hlo_op_expression"] == op.expression
        assert r["tf_op_name"] == op.tf_op
        assert r["category"] == op.category
        assert r["occurrences"] == op.occurrences_per_device * devices
        assert r["total_self_time"] / total == pytest.approx(op.self_time_fraction_of_op_time, abs=1e-9)
        # hlo_stats percentages are of device time including idle
        assert r["total_self_time_percent"] / 100 == pytest.approx(
            op.self_time_fraction_of_op_time * (1 - truth.idle_fraction), abs=1e-9
        )


def test_synth_fractions_do_not_depend_on_scale_or_jitter() -> None:
    base = ground_truth("comm")
    other = ground_truth("comm", scale=3, step_jitter=0.2, seed=1)
    for cat, frac in base.op_time_fraction_by_category.items():
        assert math.isclose(other.op_time_fraction_by_category[cat], frac, rel_tol=1e-9)
    assert other.step_time_ms_mean != pytest.approx(3 * base.step_time_ms_mean, abs=1e-9)
    assert ground_truth("comm", scale=3).step_time_ms_mean == pytest.approx(3 * base.step_time_ms_mean)


def test_synth_is_deterministic(tmp_path: Path) -> None:
    a = write_profile(tmp_path / "a", "comm", hosts=2, step_jitter=0.1)
    b = write_profile(tmp_path / "b", "comm", hosts=2, step_jitter=0.1)
    assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b]
    assert [p.name for p in a] == ["host0.xplane.pb", "host1.xplane.pb"]
