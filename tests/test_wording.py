"""Plain words at the source (issue 18): one usable-HBM figure at one precision on every surface (the estimate's line,
the HBM diagnostics, the fit options, the proposals' trade-offs, the hovers), evidence sources as readable names in the
report itself (so Problems and `asap analyze --json` read as the hovers do), the diagnosis' summary without "ahead of
the next", and the hover listing the proposals the TPU compiler withdrew with its words and the estimate's
disagreement once."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.verdicts import OOM

from server.agents.coordinator import Experiment, run_report
from server.agents.report import AnalysisReport
from server.common.codes import DiagCode
from server.config.slices import parse_slice
from server.perf import wording
from server.perf.memory import usable_hbm
from server.presentation import agent_findings, explain, verification
from server.services.analysis import analyze

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "llama3-8b-v6e-16.yml"
GiB = 2**30
# llama2-13b on v5e-16 at per_device_batch_size 8 (tests/test_nothing_fits.py): no mesh fits in 15.75 GiB per chip
TOO_BIG = (
    "model_name: llama2-13b\ncompile_topology: v5e-16\nper_device_batch_size: 8\nmax_target_length: 2048\n"
    "remat_policy: full\nici_fsdp_parallelism: 16\n"
)


def no_paths(text: str) -> bool:
    return "server/" not in text and not re.search(r"\w\.py\b", text)


@pytest.mark.parametrize(("gib", "text"), [(31.25, "31.25"), (15.75, "15.75"), (16.0, "16"), (94.75, "94.75")])
def test_the_usable_figure_has_two_decimals_unless_whole(gib: float, text: str) -> None:
    assert wording.gib(gib * GiB) == text


def test_every_surface_says_the_same_usable_figure() -> None:
    an = analyze(EXAMPLE)
    assert an.estimate is not None
    chip = parse_slice("v6e-16").chip
    figure = f"{wording.gib(usable_hbm(chip.hbm_bytes, chip.compiler_hbm_bytes))} GiB usable"
    assert figure == "31.25 GiB usable"
    assert figure in an.estimate.summary()  # ASAP120 and the CLI's estimate line
    line = next(i for i, ln in enumerate(EXAMPLE.read_text().splitlines()) if ln.startswith("compile_topology:"))
    found = explain.hover(an, line, 2, an.diagnostics)
    assert found is not None and figure in found[0]  # the hover's, with what it is
    report, _ = run_report(Experiment(EXAMPLE))
    tradeoffs = [t for p in report.proposals for t in p.tradeoffs if t.startswith("HBM ")]
    assert tradeoffs and all(f"of {figure} per chip" in t for t in tradeoffs), tradeoffs


def test_a_config_that_does_not_fit_says_the_figure_everywhere(tmp_path: Path) -> None:
    cfg = tmp_path / "big.yml"
    cfg.write_text(TOO_BIG)
    an = analyze(cfg)
    overflow = [f for f in an.diagnostics if f.code == DiagCode.HBM_OVERFLOW]
    assert overflow and all("GiB per device needed, 15.75 GiB usable" in f.message for f in overflow)
    report, _ = run_report(Experiment(cfg))
    assert report.diagnosis is not None and report.diagnosis.bottleneck == "memory"
    assert report.diagnosis.summary.endswith("of 15.75 GiB usable")
    assert all(no_paths(e.source) for e in report.diagnosis.evidence)
    assert any(e.source.startswith("ASAP's memory model + TPU v5e spec") for e in report.diagnosis.evidence)
    assert report.nothing_fits is not None and report.nothing_fits.options
    text = agent_findings.fit_option_text(report.nothing_fits.options[0])
    assert re.search(r"HBM \d+\.\d of 15\.75 GiB usable", text), text


def test_the_diagnosis_is_in_plain_words_with_named_sources() -> None:
    report, _ = run_report(Experiment(EXAMPLE))
    d = report.diagnosis
    assert d is not None
    assert "ahead of the next" not in d.summary
    assert re.match(r"compute-bound by the estimate \(compute \d+% of the step", d.summary), d.summary
    sources = [e.source for e in d.evidence]
    assert sources[0] == "ASAP's step-time model"
    assert all(no_paths(s) for s in sources), sources
    assert all(explain.readable_source(s) == s for s in sources)  # the hover names them as the report does
    # the same words reach the JSON (`asap analyze --json`) and Problems (ASAP300)
    doc = report.to_json()
    assert no_paths(str(doc["diagnosis"])) and "ahead of the next" not in str(doc["diagnosis"])
    (f, *_) = agent_findings.diagnosis_findings(report, analyze(EXAMPLE), stale=False)
    assert f.message.startswith("compute-bound (estimate, confidence ") and no_paths(f.message)
    assert "ahead of the next" not in f.message and "bound by the estimate" not in f.message


def test_a_report_read_back_from_older_words_is_still_said_plainly() -> None:
    report, _ = run_report(Experiment(EXAMPLE))
    assert report.diagnosis is not None
    old = report.model_copy(deep=True)
    assert old.diagnosis is not None
    old.diagnosis.summary = "compute-bound by the estimate (9% of the step ahead of the next)"
    old.diagnosis.evidence[0].source = "estimate: server/perf/steptime.py (overlap model in its docstring)"
    md = explain.agent_md(old, stale=False)
    assert "ahead of the next" not in md and no_paths(md) and "ASAP's step-time model" in md
    (f, *_) = agent_findings.diagnosis_findings(old, analyze(EXAMPLE), stale=False)
    assert "9% of the step more than the next-largest part" in f.message


def _withdrawn(report: AnalysisReport, n: int) -> AnalysisReport:
    """The report as a verification that rejected its first `n` proposals leaves it (server/presentation/
    verification.py's own revision, with libtpu's words on each)."""
    out = [p.model_copy(deep=True) for p in report.proposals[:n]]
    for p in out:
        p.compiler = verification.verdict(OOM)
    rejected = [verification.VerifiedTarget(f"proposal {p.rank}", p.rank, verification.target_of(p).overrides, OOM)
                for p in out]  # fmt: skip
    kept = [(p, verification.VerifiedTarget(f"proposal {p.rank}", p.rank, {}, OOM)) for p in report.proposals[n:]]
    return verification._revised(report, kept, out, rejected)


@pytest.mark.parametrize("n", [1, 3])
def test_the_hover_lists_the_withdrawn_with_the_compilers_words_and_the_note_once(n: int) -> None:
    report, _ = run_report(Experiment(EXAMPLE))
    revised = _withdrawn(report, n)
    assert revised.withdrawn is not None and len(revised.withdrawn) == n and revised.compiler_note
    md = explain.agent_md(revised, stale=False)
    rows = [ln for ln in md.splitlines() if ln.startswith("- Withdrawn: ")]
    assert len(rows) == n
    for w, row in zip(revised.withdrawn, rows, strict=True):
        assert row.startswith(f"- Withdrawn: {agent_findings.mesh_label(w)} (TPU compiler: does not fit: needs 39.80")
    assert md.count(revised.compiler_note) == 1
    assert len([ln for ln in md.splitlines() if ln.strip()]) <= 15, md
    assert no_paths(md)
