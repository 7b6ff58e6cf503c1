"""Profile analysis on XProf's real output of a TPU v5 training run (tests/data/profiles), read as exported
tool JSON; the facts asserted are in the fixture's README and were checked against the tables."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from server.cli.main import main
from server.common.findings import Severity
from server.profiles import profile as prof
from server.profiles import profile_convert
from server.services.analysis import analyze
from server.services.profile_analysis import analyze_tools

FIXTURE = Path(__file__).resolve().parent / "data" / "profiles" / "xprof-real-tpu-v5-training"


@pytest.fixture(scope="module")
def tools() -> dict:
    pf = profile_convert.find_profile(FIXTURE)
    assert pf.kind == "json"
    out, cached = profile_convert.load_tools(pf)
    assert not cached
    return out


@pytest.fixture(scope="module")
def report(tools: dict) -> prof.Report:
    return prof.analyze(tools, source="fixture")


def test_finds_exported_tools_from_a_file_or_the_directory() -> None:
    by_dir = profile_convert.find_profile(FIXTURE)
    by_file = profile_convert.find_profile(FIXTURE / "tpu_training.hlo_stats.json.gz")
    assert by_dir.files == by_file.files
    assert {profile_convert.tool_of(f) for f in by_dir.files} >= {"overview_page", "hlo_stats", "roofline_model"}


def test_device_and_peaks_as_xprof_reports_them(report: prof.Report) -> None:
    k = report.kpis
    assert k.device_type == "TPU v5" and k.generation == "v5p"
    assert k.cores == 8 and k.hosts == 1
    assert k.peak_flops == pytest.approx(233.4e12)
    assert k.mxu_utilization == pytest.approx(0.157)


def test_steps_drop_the_degenerate_step(report: prof.Report) -> None:
    st = report.kpis.steps
    assert st is not None and st.n == 5
    assert len(st.outliers) == 1 and st.outliers[0][1] < 10  # the short last step
    assert st.median_ms == pytest.approx(120.1, abs=0.2)
    assert st.cv < 0.01  # the four real steps agree
    assert st.to_json()["raw_stddev_ms"] > 40  # what a naive mean/stddev would report


def test_top_categories_match_the_tables(report: prof.Report) -> None:
    cats = dict(report.top_categories)
    assert next(iter(cats)) == "convolution fusion"
    assert cats["convolution fusion"] == pytest.approx(0.335, abs=0.005)
    assert cats["dynamic-update-slice"] == pytest.approx(0.142, abs=0.005)
    assert cats["custom-call"] == pytest.approx(0.113, abs=0.005)


def test_implausible_custom_calls_are_flagged_not_believed(report: prof.Report, tools: dict) -> None:
    full = prof.analyze(tools)
    flagged = full.implausible_ops
    assert len(flagged) >= 2 and all(o.category == "custom-call" and o.flop_utilization is None for o in flagged)
    assert max(o.claimed_efficiency or 0 for o in flagged) == pytest.approx(4.0, abs=0.3)  # README: 3.3 and 4.0
    # the program's FLOP utilization leaves their FLOPs out: far below XProf's inflated program-level 0.60
    assert full.kpis.program_flop_utilization is not None and full.kpis.program_flop_utilization < 0.40
    assert any("not believed" in e for e in full.verdict.evidence)


def test_top_ops_carry_rates_intensity_and_framework_path(report: prof.Report) -> None:
    assert len(report.top_ops) == 5
    dus = report.top_ops[0]
    assert dus.category == "dynamic-update-slice" and dus.bound_by == "HBM"
    assert dus.self_time_fraction == pytest.approx(0.0512, abs=0.001)
    assert dus.hbm_bw_utilization is not None and 0 < dus.hbm_bw_utilization < 1
    assert "backward" in (dus.layer or "")
    fractions = [o.self_time_fraction for o in report.top_ops]
    assert fractions == sorted(fractions, reverse=True)


def test_collectives_computed_by_asap(report: prof.Report) -> None:
    c = report.collectives
    assert c.share == pytest.approx(0.12, abs=0.01)
    assert c.by_kind["all-reduce-scatter"].fraction == pytest.approx(0.091, abs=0.003)
    assert c.by_kind["all-gather"].fraction == pytest.approx(0.027, abs=0.003)
    assert set(c.by_kind) >= {"all-to-all", "all-reduce"}
    ag = c.by_kind["all-gather"]
    assert ag.group_sizes == {4: ag.occurrences}  # replica_groups=[1,4]<=[4]
    assert ag.achieved_bw is not None and ag.achieved_bw > 0


def test_verdict_is_not_xprofs_inflated_program_verdict(report: prof.Report) -> None:
    v = report.verdict
    # XProf's program-level row says Compute, inflated by the custom calls; by time, HBM-bound ops lead
    # compute-bound ones by a few points, so the verdict is HBM with a low confidence.
    assert v.bottleneck == "hbm"
    assert v.confidence < 0.6
    assert v.shares["hbm"] > v.shares["compute"] > v.shares["communication"]
    assert v.rule == "largest share of the step"


def _config(tmp_path: Path, slice_name: str) -> Path:
    p = tmp_path / "c.yml"
    p.write_text(
        f"# asap: profile={FIXTURE}\ncompile_topology: {slice_name}\nmodel_name: llama2-7b\n"
        "per_device_batch_size: 1\nici_fsdp_parallelism: -1\n"
    )
    return p


def test_other_generation_and_slice_size_are_located_warnings(tmp_path: Path, tools: dict) -> None:
    cfg = _config(tmp_path, "v5e-256")
    an = analyze(cfg, cfg.read_text())
    report, findings = analyze_tools(tools, an, "fixture")
    msgs = [f for f in findings if f.code == "ASAP202"]
    assert len(msgs) == 2 and all(f.severity == Severity.WARNING and f.span.line == 1 for f in msgs)
    assert any("TPU v5 lite" in f.message for f in msgs) and any("4 devices" in f.message for f in msgs)
    assert report.comparison is None


def test_matching_slice_compares_with_the_estimate(tmp_path: Path, tools: dict) -> None:
    cfg = _config(tmp_path, "v5p-8")
    an = analyze(cfg, cfg.read_text())
    assert an.estimate is not None
    report, findings = analyze_tools(tools, an, "fixture")
    assert findings == []
    c = report.comparison
    assert c is not None and c["measured_step_s"] == pytest.approx(0.1201, abs=0.001)
    assert c["measured_mfu"] == pytest.approx(
        an.estimate.model_flops_per_step / (c["measured_step_s"] * 4 * an.estimate.layout.slice.chip.peak_bf16_flops)
    )


def test_cli_json_shape(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", str(FIXTURE), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {"kpis", "top_ops", "collectives", "verdict", "warnings"}
    assert set(out["top_ops"][0]) >= {
        "name",
        "category",
        "self_time_fraction",
        "flop_utilization",
        "hbm_bw_utilization",
        "operational_intensity",
        "bound_by",
        "framework_op",
    }
    assert set(out["collectives"]) >= {"share", "by_kind", "by_axis"}
    assert set(out["verdict"]) >= {"bottleneck", "confidence", "evidence", "rule"}


def test_cli_bad_paths(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["profile", str(tmp_path)]) == 2
    assert "no profiles in" in capsys.readouterr().err
    bad = tmp_path / "x.hlo_stats.json"
    bad.write_text("{not json")
    assert main(["profile", str(bad)]) == 2
    assert "not valid XProf tool JSON" in capsys.readouterr().err


def _table(cols: list[str], rows: list[list[object]], p: dict | None = None) -> dict:
    return {"cols": [{"id": c} for c in cols], "rows": [{"c": [{"v": v} for v in r]} for r in rows], "p": p or {}}


def _steps_tool(compute: float, idle: float, infeed: float, n: int = 4) -> list[dict]:
    cols = ["stepnum", "tcComputeTimeMs", "tcIdleTimeMs", "tcInfeedTimeMs"]
    return [_table(cols, [[str(i), compute, idle, infeed] for i in range(n)])]


def _ops_tool() -> dict:
    cols = ["category", "hlo_op_name", "hlo_op_expression", "tf_op_name", "occurrences", "total_self_time", "bound_by"]
    return _table(
        cols,
        [
            ["convolution fusion", "fusion.1", "", "", 4, 600.0, "Compute"],
            ["loop fusion", "f.2", "", "", 4, 400.0, "HBM"],
        ],
    )


def test_input_bound_rule_takes_precedence() -> None:
    # 30% of every step waiting for input, the rest compute-heavy: input-bound, the rule says why
    r = prof.analyze({"input_pipeline_analyzer": _steps_tool(7.0, 0.0, 3.0), "hlo_stats": _ops_tool()})
    assert r.kpis.input_fraction == pytest.approx(0.3)
    assert (r.verdict.bottleneck, r.verdict.rule) == ("input", "waiting for input >= 20% of the step")
    assert r.verdict.shares["compute"] == pytest.approx(0.42)  # 60% of busy time x 70% busy
    # below the threshold the largest share decides
    r2 = prof.analyze({"input_pipeline_analyzer": _steps_tool(9.0, 0.0, 1.0), "hlo_stats": _ops_tool()})
    assert r2.verdict.bottleneck == "compute" and r2.verdict.shares["input"] == pytest.approx(0.1)


def test_confidence_falls_with_a_close_runner_up_and_noisy_steps() -> None:
    clear = prof.analyze({"input_pipeline_analyzer": _steps_tool(10.0, 0.0, 0.0), "hlo_stats": _ops_tool()})
    ops = _ops_tool()
    ops["rows"][1]["c"][5]["v"] = 560.0  # HBM-bound ops almost as long as compute-bound ones
    close = prof.analyze({"input_pipeline_analyzer": _steps_tool(10.0, 0.0, 0.0), "hlo_stats": ops})
    assert clear.verdict.bottleneck == close.verdict.bottleneck == "compute"
    assert close.verdict.confidence < clear.verdict.confidence
    noisy_steps = [_table(["stepnum", "tcComputeTimeMs"], [["0", 8.0], ["1", 12.0], ["2", 9.0], ["3", 11.0]])]
    noisy = prof.analyze({"input_pipeline_analyzer": noisy_steps, "hlo_stats": _ops_tool()})
    assert noisy.kpis.steps is not None and noisy.kpis.steps.cv > 0.1
    assert noisy.verdict.confidence < clear.verdict.confidence


def test_no_tool_output_at_all_is_an_error() -> None:
    with pytest.raises(prof.ProfileError, match="no XProf tool output"):
        prof.analyze({"memory_profile": {}})


def test_host_step_table_total_is_not_added_to_its_parts() -> None:
    # XProf's step table for host-driven steps (CPU) has the parts and the total ('stepTimeMs'), as in
    # tests/data/profiles/cpu; the step is the total, not the total plus its parts.
    cols = ["stepnum", "hostComputeTimeMs", "infeedTimeMs", "otherTimeMs", "stepTimeMs"]
    rows = [["train 1", 140.0, 0.0, 3.0, 143.0], ["train 2", 8.0, 0.0, 137.0, 145.0], ["train 3", 131, 10, 0, 141]]
    table = {"cols": [{"id": c} for c in cols], "rows": [{"c": [{"v": v} for v in r]} for r in rows], "p": {}}
    r = prof.analyze({"overview_page": [table]}, source="host steps")
    assert r.kpis.steps is not None and r.kpis.steps.median_ms == pytest.approx(143.0)
    assert r.kpis.input_fraction == pytest.approx(10 / (143 + 145 + 141))
