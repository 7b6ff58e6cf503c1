"""Closing the loop (server/services/experiments.py): an analysis is logged with its predictions, applying proposal 1
is recorded, a profile of the changed config becomes an outcome (right proposal; wrong run and missing
profile refused with the reason), the outcome is retrievable from the knowledge store, and the calibration
arithmetic of the track record."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import sqlite_utils
from profiles.synth import GROUND_TRUTH, write_profile
from support.configs import LOOP_CONFIG as CONFIG

from server.agents.coordinator import run_report
from server.agents.types import Experiment
from server.cli.main import main
from server.config.apply import apply_text, proposal_edits
from server.kb.store import KnowledgeStore, Situation
from server.profiles.profile import ProfileError
from server.services import experiments
from server.services.analysis import analyze


@pytest.fixture
def loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """A communication-bound run analysed with its profile; proposal 1 applied to the file."""
    monkeypatch.setenv("ASAP_CACHE_DIR", str(tmp_path / "cache"))
    cfg = tmp_path / "c.yml"
    cfg.write_text(CONFIG)
    write_profile(tmp_path / "runs" / "before", "comm")
    doc, _ = run_report(Experiment(cfg, workspace=tmp_path))
    p1 = doc.proposals[0]
    an = analyze(cfg)
    cfg.write_text(apply_text(CONFIG, proposal_edits(an.config, p1.ici, p1.dcn, p1.other_changes)))
    applied = experiments.record_applied(doc.experiment, 1, cfg)
    return cfg, doc, applied


def test_an_analysis_is_logged_with_its_predictions(loop) -> None:  # type: ignore[no-untyped-def]
    cfg, doc, _ = loop
    ex = experiments.experiment(doc.experiment)
    assert ex["config_path"] == str(cfg.resolve()) and ex["slice"] == "v5e-4" and ex["generation"] == "v5e"
    assert ex["mesh"] == {"ici": {"tensor": 4}, "dcn": {}}
    assert ex["measured_step_s"] == pytest.approx(GROUND_TRUTH["comm"].step_time_ms_mean / 1e3)
    assert [p["rank"] for p in ex["proposals"]] == [p.rank for p in doc.proposals]
    assert ex["diagnosis"]["bottleneck"] == "communication"
    # the same inputs again: the cached analysis, the same experiment
    assert run_report(Experiment(cfg.with_name("c.yml"), CONFIG, workspace=cfg.parent))[0].experiment == doc.experiment


def test_outcome_of_the_applied_proposal(loop, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cfg, doc, applied = loop
    write_profile(tmp_path / "runs" / "after", "compute")
    an = analyze(cfg)
    assert an.check.mesh_dict()["ici"]["fsdp"] == 4  # the file now has proposal 1's mesh
    measured = experiments.measure(an, tmp_path / "runs" / "after")
    out = experiments.record_outcome(an, cfg, measured)
    p1 = doc.proposals[0]
    assert out.rank == 1 and out.experiment_id == doc.experiment and out.application_id == applied["id"]
    assert out.predicted_step_s == pytest.approx(p1.expected.step_s)
    assert out.measured_step_s == pytest.approx(GROUND_TRUTH["compute"].step_time_ms_mean / 1e3)
    assert out.step_error == pytest.approx((out.predicted_step_s - out.measured_step_s) / out.measured_step_s)
    base = GROUND_TRUTH["comm"].step_time_ms_mean
    assert out.measured_speedup == pytest.approx(base / GROUND_TRUTH["compute"].step_time_ms_mean)
    assert out.delivered == (out.measured_speedup > 1)
    assert (out.bottleneck_before, out.bottleneck_after, out.bottleneck_moved) == (
        "communication",
        "compute",
        True,
    )
    # the outcome is a knowledge record: retrievable by search and by situation
    record = Path(out.record)
    assert record.parent == experiments.outcomes_dir() and record.stem == f"outcome-{out.id}"
    kb = KnowledgeStore(path=tmp_path / "kb.sqlite").ensure()
    hits = kb.search("ASAP proposal applied measured outcome v5e-4", k=5)
    assert any(h.doc_id == record.stem for h in hits), [h.doc_id for h in hits]
    similar = kb.similar_history(Situation(2.0, "v5e-4", "communication", {"ici_tensor_parallelism": 4}), k=3)
    assert similar[0][0].id == record.stem
    # and it counts in the track record
    rec = experiments.track_record()
    assert rec["outcomes"] == 1 and rec["per_generation"]["v5e"]["step_time_error"]["n"] == 1


def test_outcome_refuses_the_wrong_run(loop, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cfg, _, applied = loop
    an = analyze(cfg)
    old = tmp_path / "runs" / "old"
    write_profile(old, "compute")
    for f in old.glob("*.xplane.pb"):  # captured before proposal 1 was applied
        os.utime(f, (applied["applied_at"] - 3600, applied["applied_at"] - 3600))
    with pytest.raises(experiments.OutcomeError, match="predates applying proposal 1"):
        experiments.record_outcome(an, cfg, experiments.measure(an, old))
    bigger = tmp_path / "runs" / "bigger"  # a run on 8 devices: another slice size
    write_profile(bigger, "comm", hosts=2)
    with pytest.raises(experiments.OutcomeError, match="another run"):
        experiments.record_outcome(an, cfg, experiments.measure(an, bigger))
    edited = (
        cfg.read_text()
        .replace("ici_fsdp_parallelism: 4", "ici_fsdp_parallelism: 2")
        .replace("ici_tensor_parallelism: 1", "ici_tensor_parallelism: 2")
    )
    cfg.write_text(edited)
    an2 = analyze(cfg)
    write_profile(tmp_path / "runs" / "later", "compute")
    with pytest.raises(experiments.OutcomeError, match="none of the applied proposals"):
        experiments.record_outcome(an2, cfg, experiments.measure(an2, tmp_path / "runs" / "later"))
    with pytest.raises(ProfileError):
        experiments.measure(an2, tmp_path / "runs" / "missing")


def test_cli_outcome_and_stats(loop, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    cfg, _, _ = loop
    assert main(["outcome", str(cfg), "--profile", str(tmp_path / "runs" / "missing")]) == 1
    assert "asap outcome:" in capsys.readouterr().err
    write_profile(tmp_path / "runs" / "after", "hbm")
    assert main(["outcome", str(cfg), "--profile", str(tmp_path / "runs" / "after"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["bottleneck_after"] == "hbm" and out["rank"] == 1
    assert main(["stats", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["outcomes"] == 1 and rec["calibration"]["active"] is False
    assert main(["stats"]) == 0
    assert "as stated (calibration starts at 20 measured outcomes; 1 so far)" in capsys.readouterr().out


def _outcomes(db: sqlite_utils.Database, rows: list[tuple[float, bool, float]], start: int = 0) -> None:
    db.table("outcomes").insert_all(
        {
            "id": f"o{i}",
            "created": float(i),
            "generation": "v5p" if i % 2 else "v6e",
            "stated_confidence": conf,
            "delivered": delivered,
            "step_error": err,
            "memory_error": None,
            "bottleneck_moved": False,
        }
        for i, (conf, delivered, err) in enumerate(rows, start)
    )


def test_calibration_arithmetic(tmp_path: Path) -> None:
    db = sqlite_utils.Database(tmp_path / "x.sqlite")
    # 10 at a stated 80%, of which 5 delivered; 10 at 60%, of which 9 delivered
    rows = [(0.8, i < 5, 0.1 * (i - 5)) for i in range(10)] + [(0.6, i < 9, -0.05) for i in range(10)]
    _outcomes(db, rows[:19])
    cal = experiments.calibrator(db)
    assert cal.n == 19 and not cal.active and cal(0.8) == 0.8  # below the minimum: shown as stated
    _outcomes(db, rows[19:], start=19)
    cal = experiments.calibrator(db)
    assert cal.active
    by = {b["stated"]: b for b in cal.table}
    assert (by["80%-90%"]["n"], by["80%-90%"]["delivered"]) == (10, 0.5)
    assert (by["60%-70%"]["n"], by["60%-70%"]["delivered"]) == (10, 0.9)
    w = experiments.PRIOR_WEIGHT
    assert cal(0.8) == pytest.approx((5 + w * 0.8) / (10 + w))  # overconfident bin pulled down
    assert cal(0.65) == pytest.approx((9 + w * 0.65) / (10 + w))  # underconfident bin pulled up
    assert cal(0.95) == 0.95  # an empty bin keeps the stated value
    rec = experiments.track_record(db)
    errs = rec["per_generation"]["v6e"]["step_time_error"]
    v6e = [abs(e) for i, (_, _, e) in enumerate(rows) if i % 2 == 0]
    assert errs["n"] == 10 and errs["median_abs"] == pytest.approx(sorted(v6e)[4] / 2 + sorted(v6e)[5] / 2)
