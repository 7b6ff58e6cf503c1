"""The offline engine (Analyzer + Proposal behind the Coordinator) on scenarios whose right direction is
known from DOMAIN.md, on the synthetic compute/HBM/communication profiles, and the CLI contract."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from profiles.synth import write_profile

from server.agents.coordinator import run, run_report
from server.agents.types import Experiment, Result
from server.cli.main import main
from server.config.axes import AXES
from server.perf.memory import TIGHT_BAND
from server.services.analysis import analyze

ROOT = Path(__file__).resolve().parents[1]


def analyze_text(tmp_path: Path, text: str, name: str = "c.yml", **kw: object) -> Result:
    p = tmp_path / name
    p.write_text(text)
    return run(Experiment(p, text, workspace=tmp_path, **kw), use_kb=False)  # type: ignore[arg-type]


def degree(p: dict, axis: str) -> int:
    return int(p["ici"].get(axis, 1)) * int(p["dcn"].get(axis, 1))


def test_tensor_parallelism_above_the_mlp_ceiling_is_cut(tmp_path: Path) -> None:
    # Llama 2 7B (MLP 11008) with 16-way TP on v5e-256: far above the ceiling Y < M_Y F / alpha (DOMAIN.md §4)
    r = analyze_text(
        tmp_path,
        "compile_topology: v5e-256\nmodel_name: llama2-7b\nper_device_batch_size: 4\n"
        "ici_fsdp_parallelism: 16\nici_tensor_parallelism: 16\n",
    )
    assert r.diagnosis is not None and r.diagnosis.bottleneck == "communication"
    assert "ici_tensor_parallelism" in r.diagnosis.keys
    assert any("tensor collectives" in e.text for e in r.diagnosis.evidence)
    best = r.proposals[0].to_json()
    assert degree(best, "tensor") < 16 and best["expected"]["speedup"] > 1.2
    assert "tensor" in r.proposals[0].rationale
    assert len({json.dumps([p.ici, p.dcn, p.other_changes], sort_keys=True) for p in r.proposals}) == len(r.proposals)


def test_hbm_bound_data_parallel_job_is_sharded(tmp_path: Path) -> None:
    # A 1.1B model with pure data parallelism on v6e-16: every chip updates the whole replicated optimizer
    # state each step (memory-bound); sharding the weights divides that traffic (DOMAIN.md §4, memory per chip).
    r = analyze_text(
        tmp_path,
        "compile_topology: v6e-16\nper_device_batch_size: 2\nmax_target_length: 1024\n"
        "ici_data_parallelism: 16\nici_fsdp_parallelism: 1\n",
    )
    assert r.diagnosis is not None and r.diagnosis.bottleneck == "hbm"
    assert {"per_device_batch_size", "remat_policy"} <= set(r.diagnosis.keys)
    best = r.proposals[0].to_json()
    assert degree(best, "fsdp") * degree(best, "fsdp_transpose") > 1
    assert best["expected"]["speedup"] > 1.03


def test_model_that_does_not_fit_with_pure_data_parallelism(tmp_path: Path) -> None:
    r = analyze_text(
        tmp_path,
        "compile_topology: v5e-256\nmodel_name: llama2-70b\nper_device_batch_size: 1\n"
        "ici_data_parallelism: 256\nici_fsdp_parallelism: 1\n",
    )
    assert r.diagnosis is not None and r.diagnosis.bottleneck == "memory"
    # the first fits; none is beyond the memory model's error band ('tight' is within it: the compiler decides)
    assert r.proposals and r.proposals[0].hbm_bytes <= r.proposals[0].hbm_usable_bytes
    assert all(p.hbm_bytes <= p.hbm_usable_bytes * TIGHT_BAND[1] for p in r.proposals)
    shards_weights = [a.name for a in AXES if a.shards_weights]
    for p in r.proposals:
        assert math.prod(degree(p.to_json(), a) for a in shards_weights) > 1
    assert r.proposals[0].ici == {"fsdp": 256}


def test_current_mesh_is_kept_when_it_is_already_best(tmp_path: Path) -> None:
    text = (ROOT / "examples" / "llama2-7b-v5e-256.yml").read_text()
    r = analyze_text(tmp_path, text.replace("base_config: common.yml\n", ""))
    first = r.proposals[0]
    assert first.keep_current and first.speedup == 1.0 and first.ici == {"fsdp": 256}
    assert "Keep the current mesh" in first.rationale
    assert all(p.speedup >= 1.0 for p in r.proposals[1:])


def test_invalid_mesh_gets_valid_alternatives_and_keeps_the_users_axis(tmp_path: Path) -> None:
    r = analyze_text(
        tmp_path,
        "compile_topology: v5e-256\nmodel_name: llama2-7b\nper_device_batch_size: 4\n"
        "ici_fsdp_parallelism: 32\nici_tensor_parallelism: 16\n",
    )
    assert r.diagnosis is not None and r.diagnosis.bottleneck == "invalid"
    assert r.proposals[0].ici == {"fsdp": 256}  # not the equally priced fsdp_transpose spelling
    assert all(math.isnan(p.speedup) for p in r.proposals)
    assert r.to_json()["proposals"][0]["expected"]["speedup"] is None  # valid JSON, no NaN


@pytest.mark.parametrize(
    ("scenario", "bottleneck"), [("compute", "compute"), ("hbm", "hbm"), ("comm", "communication")]
)
def test_profiles_drive_the_diagnosis_and_calibrate_the_pricing(tmp_path: Path, scenario: str, bottleneck: str) -> None:
    write_profile(tmp_path / "run", scenario)
    text = (
        "# asap: profile=run\ncompile_topology: v5e-4\nmodel_name: llama2-7b\nper_device_batch_size: 1\n"
        "ici_fsdp_parallelism: 4\n"
    )
    r = analyze_text(tmp_path, text)
    assert r.diagnosis is not None
    assert (r.diagnosis.source, r.diagnosis.bottleneck) == ("profile", bottleneck)
    assert r.diagnosis.gap is not None and r.calibration is not None and "calibrated on the profile" in r.calibration
    assert any(e.source.startswith("XProf op profile of ") for e in r.diagnosis.evidence)
    assert all("server/" not in e.source and ".py" not in e.source for e in r.diagnosis.evidence)  # named, not paths
    if bottleneck == "communication":
        assert "ici_fsdp_parallelism" in r.diagnosis.keys
        cur = r.estimate
        assert cur is not None
        for p in r.proposals:
            if not p.keep_current:
                assert p.speedup >= 1.0


def test_cli_json_contract_and_cache(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "c.yml"
    p.write_text(
        "compile_topology: v5e-256\nmodel_name: llama2-7b\nper_device_batch_size: 4\n"
        "ici_fsdp_parallelism: 16\nici_tensor_parallelism: 16\n"
    )
    assert main(["analyze", str(p), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) >= {"config", "slice", "mesh", "findings", "estimate", "diagnosis", "proposals", "backend"}
    assert set(doc["slice"]) >= {"name", "chips", "devices", "topology"}
    assert doc["mesh"]["ici"]["fsdp"] == 16 and doc["mesh"]["ici"]["tensor"] == 16
    assert set(doc["diagnosis"]) >= {"bottleneck", "confidence", "evidence", "source"}
    prop = doc["proposals"][0]
    assert set(prop) >= {"rank", "ici", "dcn", "other_changes", "expected", "confidence", "rationale", "references"}
    assert set(prop["expected"]) == {"step_s", "mfu", "speedup"}
    assert doc["backend"] == {"name": "offline", "fallback_reason": None, "model": None}
    exp = Experiment(p, p.read_text(), workspace=Path.cwd())  # as the CLI runs it
    assert run_report(exp)[1]  # the same inputs: from the store
    p.write_text(p.read_text().replace("per_device_batch_size: 4", "per_device_batch_size: 2"))
    assert not run_report(Experiment(p, p.read_text(), workspace=Path.cwd()))[1]


def test_a_stored_analysis_is_not_read_by_another_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An edit to ASAP's code without a version bump (a checkout, an editable install) analyses again."""
    from server.agents import coordinator
    from server.common import build

    pkg = tmp_path / "pkg"
    (pkg / "perf").mkdir(parents=True)
    (pkg / "perf" / "estimate.py").write_text("X = 1\n")
    monkeypatch.setattr(build, "_PACKAGE", pkg)
    build.build_key.cache_clear()
    before = build.build_key()
    (pkg / "perf" / "estimate.py").write_text("X = 2\n")
    build.build_key.cache_clear()
    assert build.build_key() != before and build.build_key().startswith(build.__version__ + "+")
    build.build_key.cache_clear()
    monkeypatch.undo()

    p = tmp_path / "c.yml"
    p.write_text("compile_topology: v5e-16\nmodel_name: llama2-7b\nici_fsdp_parallelism: -1\n")
    run_report(Experiment(p, p.read_text(), workspace=tmp_path))
    assert run_report(Experiment(p, p.read_text(), workspace=tmp_path))[1]
    monkeypatch.setattr(coordinator, "build_key", lambda: "0.1.0+another-build")
    assert not run_report(Experiment(p, p.read_text(), workspace=tmp_path))[1]


def test_cli_human_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(ROOT / "examples" / "llama3-8b-v6e-16.yml")]) == 0
    out = capsys.readouterr().out
    assert "Diagnosis" in out and "Proposals" in out and "backend: offline" in out


def test_cli_plot_writes_the_roofline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from server.presentation.roofline_chart import spec

    svg = tmp_path / "roof.svg"
    assert main(["analyze", str(ROOT / "examples" / "llama3-8b-v6e-16.yml"), "--plot", str(svg)]) == 0
    text = svg.read_text()
    assert text.startswith("<svg") and "Roofline of v6e-16 per device" in text and "mlpwi" in text
    assert "operational intensity" in text and "P1: " in text and "ICI ridge" in text
    doc, _ = run_report(Experiment(ROOT / "examples" / "llama3-8b-v6e-16.yml"))
    an = analyze(ROOT / "examples" / "llama3-8b-v6e-16.yml")
    s = spec(doc, an)
    est = doc.estimate
    assert est is not None
    assert s["usermeta"]["hbm_ridge"] == pytest.approx(est.roofline.ridge_points.hbm)
    # one point per mesh: the current one at the estimate's FLOP rate (FLOPs / modelled step time)
    points = {
        m["name"]: m for layer in s["layer"] for m in layer["data"]["values"] if m.get("source") == "meshes (estimate)"
    }
    flops = sum(p.flops for p in est.roofline.points)
    assert points["now"]["flops"] == pytest.approx(flops / est.time.step_s)
    assert points["now"]["flops"] == pytest.approx(est.mfu * s["usermeta"]["peak_flops_per_s"], rel=0.35)
    ranks = [f"P{p.rank}" for p in doc.proposals if not p.keep_current]
    assert ranks and set(ranks) <= set(points)
    # a proposal expected faster than the current mesh sits higher on the chart
    p1 = next(p for p in doc.proposals if p.rank == 1)
    assert p1.expected.speedup is not None
    assert (points["P1"]["flops"] > points["now"]["flops"]) == (p1.expected.speedup > 1)
    with pytest.raises(ValueError, match="theme"):
        spec(doc, an, theme="sepia")
    dark = tmp_path / "dark.svg"
    assert (
        main(["analyze", str(ROOT / "examples" / "llama3-8b-v6e-16.yml"), "--plot", str(dark), "--plot-theme", "dark"])
        == 0
    )
    assert "#1e1e1e" in dark.read_text() and "#1e1e1e" not in text
    assert main(["analyze", str(ROOT / "examples" / "llama3-8b-v6e-16.yml"), "--plot", str(tmp_path / "x.gif")]) == 2


def test_cli_profile_search_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mirror = tmp_path / "mirror"
    write_profile(mirror / "r9" / "tensorboard" / "plugins" / "profile" / "2026_03_01_00_00_00", "comm")
    cfg = tmp_path / "c.yml"
    cfg.write_text(
        "base_output_directory: gs://bucket/runs\nrun_name: r9\ncompile_topology: v5e-4\nmodel_name: llama2-7b\n"
        "per_device_batch_size: 1\nici_fsdp_parallelism: 4\n"
    )
    main(["analyze", str(cfg), "--json"])
    assert json.loads(capsys.readouterr().out)["diagnosis"]["source"] == "estimate"  # gs:// alone: no profile
    main(["analyze", str(cfg), "--json", "--profile-search-path", str(mirror)])
    doc = json.loads(capsys.readouterr().out)
    assert doc["diagnosis"]["source"] == "profile" and doc["diagnosis"]["bottleneck"] == "communication"


@pytest.mark.parametrize("host_only", [False, True])
def test_calibration_splits_on_collectives_except_for_a_cpu_only_profile(tmp_path: Path, host_only: bool) -> None:
    # A CPU-only profile's collective time is mostly threads waiting for each other: it scales the step by one
    # factor; a device profile's collective share scales the exposed communication on its own.
    from server.agents.proposal import calibration

    text = "compile_topology: v5e-256\nmodel_name: llama2-7b\nper_device_batch_size: 4\nici_tensor_parallelism: 16\n"
    p = tmp_path / "c.yml"
    p.write_text(text)
    est = analyze(p, text).estimate
    assert est is not None and est.time.exposed_comm_s > 0.1 * est.time.step_s
    gap = {"measured_step_s": 2 * est.time.step_s, "measured_comm_share": 0.8, "host_only": host_only}
    cal = calibration(est, gap)
    assert cal.step(est) == pytest.approx(2 * est.time.step_s)
    if host_only:
        assert cal.kc == cal.kx == pytest.approx(2.0) and "CPU-only" in (cal.note or "")
    else:
        assert cal.kx > cal.kc


# Over the usable HBM but inside the band where the estimate cannot decide (TIGHT_BAND): 15.98 of 15.75 GiB.
TIGHT = """\
model_name: llama2-7b
compile_topology: v5e-16
per_device_batch_size: 5
max_target_length: 4096
ici_fsdp_parallelism: -1
remat_policy: full
"""


def test_a_tight_mesh_is_a_warning_everywhere_and_no_proposal_needs_more_hbm(tmp_path: Path, capsys):
    """One memory rule (issue 16): 'tight' is a warning in check, estimate and analyze alike, never "does not
    launch"; and while the current mesh is tight, no proposal needs more HBM than it does."""
    an = analyze(tmp_path / "c.yml", TIGHT)
    mem = an.estimate.memory
    assert mem.verdict == "tight" and mem.total > mem.usable and mem.launches  # over usable, inside the band
    codes = {f.code for f in an.diagnostics}
    assert "ASAP122" in codes and "ASAP121" not in codes  # a warning, not the error
    cfg = tmp_path / "c.yml"
    cfg.write_text(TIGHT)
    assert main(["check", str(cfg)]) == 0
    assert main(["estimate", str(cfg)]) == 0  # tight: exit 0 as in check (1 is for "does not fit")
    capsys.readouterr()
    res = analyze_text(tmp_path, TIGHT)
    assert res.proposals, "a tight mesh still gets proposals"
    for p in res.proposals:
        assert p.speedup == p.speedup, f"proposal {p.rank} priced against a current mesh that 'does not launch'"
        assert p.hbm_bytes <= mem.total, (p.rank, p.hbm_bytes, mem.total)
    assert "does not launch" not in (res.diagnosis.summary if res.diagnosis else "")
