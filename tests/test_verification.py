"""server/presentation/verification.py without compiling: which meshes are compiled, how verdicts become diagnostics and
hover rows, and that compiles wait for each other across processes."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import fake_maxtext
from support.verdicts import OOM

from server.agents import alternatives
from server.agents.coordinator import run_report
from server.agents.report import AnalysisReport, CompilerVerdictView
from server.agents.types import Experiment
from server.common import store
from server.common.findings import Severity
from server.compile.verify import Compiled, VerifyResult, VerifyStatus
from server.presentation import agent_findings, explain, verification
from server.services import experiments
from server.services.analysis import analyze

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "llama3-8b-v6e-16.yml"
GiB = 2**30


def compiled(mem_gib: float, limit_gib: float = 31.25) -> Compiled:
    return Compiled(
        mem_gib * GiB,
        {"argument": mem_gib * GiB, "output": 0.0, "alias": 0.0, "temp": 0.0, "generated_code": 0.0},
        limit_gib * GiB,
        mem_gib <= limit_gib,
        [],
        12.0,
        [2, 4],
        32,
        True,
    )


def entry(res: VerifyResult, rank: int | None = None) -> verification.VerifiedTarget:
    return verification.VerifiedTarget("current mesh" if rank is None else f"proposal {rank}", rank, {}, res)


def test_targets_are_the_current_mesh_then_each_proposal_in_full() -> None:
    doc, _ = run_report(Experiment(EXAMPLE))
    todo = verification.targets(doc)
    assert todo[0].label == "current mesh" and todo[0].overrides == {} and todo[0].rank is None
    props = [p for p in doc.proposals if not p.keep_current]
    assert [t.rank for t in todo[1:]] == [p.rank for p in props]
    first = todo[1].overrides
    # every ici_/dcn_ key is set, so the compiled mesh is exactly the proposal whatever the file says
    assert all(first[f"ici_{a}_parallelism"] == d for a, d in props[0].ici.items())
    assert sum(1 for k in first if k.startswith(("ici_", "dcn_"))) >= 20
    assert verification.targets(doc, include_current=False) == todo[1:]
    assert verification.targets(None) == todo[:1]


def test_findings_of_each_verdict_on_the_mesh_block() -> None:
    an = analyze(EXAMPLE)
    mesh_line = min(e.key_span.line for k, e in an.config.document.entries.items() if k.endswith("_parallelism"))

    ok = VerifyResult(
        VerifyStatus.OK,
        "verified by the TPU compiler: 14.10 GiB of 31.25 GiB per chip, fits",
        "v6e-16",
        compiled=compiled(14.1),
    )
    ok.disagreements = [
        {"what": "memory_per_chip_bytes", "message": "per-chip memory: estimate 10 GiB, compiler 14 GiB"}
    ]
    fs = verification.findings([entry(ok)], an, stale=False)
    assert [(f.code, f.severity) for f in fs] == [("ASAP400", Severity.INFORMATION), ("ASAP402", Severity.WARNING)]
    assert fs[0].message.startswith("Verified by the TPU compiler: 14.10 GiB") and fs[0].span.line == mesh_line
    assert fs[1].message == "Estimate vs TPU compiler: per-chip memory: estimate 10 GiB, compiler 14 GiB"
    assert all(f.message.startswith("[stale") for f in verification.findings([entry(ok)], an, stale=True))

    oom = VerifyResult(
        VerifyStatus.DOES_NOT_FIT, "does not fit: needs 40.00 GiB of 31.25 GiB per chip on v6e-16", "v6e-16"
    )
    (f,) = verification.findings([entry(oom)], an, stale=False)
    assert (f.code, f.severity) == ("ASAP401", Severity.ERROR) and f.message.startswith("TPU compiler: does not fit")

    missing = VerifyResult(
        VerifyStatus.UNAVAILABLE, "compiling for a TPU slice needs libtpu next to jax: pip install ..."
    )
    assert [f.code for f in verification.findings([entry(missing)], an, stale=False)] == ["ASAP403"]
    # an unplaceable mesh already has ASAP106; proposals' verdicts are not diagnostics
    assert verification.findings([entry(VerifyResult(VerifyStatus.UNPLACEABLE, "x"))], an, stale=False) == []
    assert verification.findings([entry(ok, rank=1)], an, stale=False) == []


def test_proposals_hover_gains_a_compiler_column() -> None:
    doc, _ = run_report(Experiment(EXAMPLE))
    plain = explain.agent_md(doc, stale=False)
    assert "TPU compiler" not in plain
    p1 = next(p for p in doc.proposals if not p.keep_current)
    oom = VerifyResult(VerifyStatus.DOES_NOT_FIT, "does not fit", needs_bytes=40 * GiB, available_bytes=31.25 * GiB)
    md = explain.agent_md(
        doc,
        stale=False,
        verified=[entry(VerifyResult(VerifyStatus.OK, "ok", compiled=compiled(14.1))), entry(oom, p1.rank)],
    )
    assert "| TPU compiler |" in md
    row = next(line for line in md.splitlines() if line.startswith(f"| {p1.rank} |"))
    assert row.endswith("| does not fit, needs 40.0 of 31.25 GiB |")
    others = [line for line in md.splitlines() if line.startswith("| ") and "not compiled" in line]
    assert len(others) == len([p for p in doc.proposals if p.rank != p1.rank])
    assert verification.summary(VerifyResult(VerifyStatus.OK, "", compiled=compiled(14.1))) == "fits, 14.1 of 31.25 GiB"


def test_compiles_wait_for_another_process_holding_the_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASAP_CACHE_DIR", str(tmp_path))
    lock = store.cache_dir() / "verify.lock"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, sys\nf = open(sys.argv[1], 'a+')\nfcntl.flock(f, fcntl.LOCK_EX)\n"
            "print('locked', flush=True)\nsys.stdin.readline()\n",
            str(lock),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        waited = threading.Event()
        entered = threading.Event()

        def compile_() -> None:
            with verification.one_at_a_time(lambda message, _f: waited.set()):
                entered.set()

        t = threading.Thread(target=compile_)
        t.start()
        assert waited.wait(10)  # told that another compile holds the machine
        assert not entered.is_set()
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.flush()  # the other process finishes: this one proceeds
        assert entered.wait(10)
        t.join(10)
    finally:
        holder.kill()
        holder.wait()


@contextlib.contextmanager
def compile_lock_held_elsewhere() -> Iterator[subprocess.Popen[str]]:
    """Another ASAP process holding the machine-wide compile lock (verification.one_at_a_time) for the block, until
    a line on its stdin lets it go ("released" on its stdout then); killed at the end."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys\nfrom server.presentation.verification import one_at_a_time\n"
            "with one_at_a_time():\n    print('locked', flush=True)\n    sys.stdin.readline()\n"
            "print('released', flush=True)\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        yield holder
    finally:
        holder.kill()
        holder.wait()


def test_compiles_wait_for_another_asap_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both sides are ASAP's own lock (filelock): the second process is told, waits, and proceeds once the
    first one is done."""
    monkeypatch.setenv("ASAP_CACHE_DIR", str(tmp_path))
    with compile_lock_held_elsewhere() as holder:
        assert holder.stdout is not None
        told: list[str] = []
        waited, entered = threading.Event(), threading.Event()

        def compile_() -> None:
            with verification.one_at_a_time(lambda message, _f: (told.append(message), waited.set())):
                entered.set()

        t = threading.Thread(target=compile_)
        t.start()
        assert waited.wait(30)
        assert told == ["waiting for another ASAP compile to finish"] and not entered.is_set()
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "released"
        assert entered.wait(10)
        t.join(10)
        with verification.one_at_a_time(lambda message, _f: told.append(message)):
            pass  # nobody holds it now: no waiting, nothing said
        assert len(told) == 1


def test_result_json_carries_the_status_as_its_plain_value() -> None:
    doc = VerifyResult(VerifyStatus.DOES_NOT_FIT, "does not fit").to_json()
    assert type(doc["status"]) is str and doc["status"] == "does-not-fit"
    assert json.dumps(doc["status"]) == '"does-not-fit"'


# -- compiler verdicts feed the advice (issue 18) ----------------------------------------------------------------
def verdict_of(res: VerifyResult) -> CompilerVerdictView:
    return verification.verdict(res)


def test_a_rejected_proposal_is_marked_in_the_lens_the_quick_fix_and_the_diagnosis() -> None:
    doc, _ = run_report(Experiment(EXAMPLE))
    an = analyze(EXAMPLE)
    p1 = doc.proposals[0]
    assert agent_findings.proposal_title(p1).startswith(
        f"Apply proposal 1: {agent_findings.mesh_label(p1)} (expected ×"
    )
    marked = verification._marked(doc, {1: verdict_of(OOM)})
    assert doc.proposals[0].compiler is None  # the report shown meanwhile is never written into
    assert (
        agent_findings.proposal_title(marked.proposals[0]) == "Apply proposal 1: fsdp=16: does not fit (TPU compiler)"
    )
    line = agent_findings.lens_title(marked, 0.25)
    assert re.fullmatch(
        r"ASAP: compute-bound · MFU 25% · 2 proposals \(best ×[\d.]+, confidence \d+%\)"
        r" · 1 withdrawn",
        line,
    ), line
    (f, *_) = agent_findings.diagnosis_findings(marked, an, stale=False)
    assert "Withdrawn by the TPU compiler: [fsdp=16] does not fit" in f.message and "proposal 2: " in f.message
    assert "of the step ahead of the next" not in f.message  # in plain words
    assert re.match(r"compute-bound \(estimate, confidence \d+%\): compute \d+% of the step, ", f.message), f.message
    assert "bound by the estimate" not in f.message  # the verdict is said once


def test_the_revised_report_ranks_the_accepted_and_explains_the_disagreement_once() -> None:
    doc, _ = run_report(Experiment(EXAMPLE))
    p1, p2, p3 = (p.model_copy(deep=True) for p in doc.proposals)
    ok = VerifyResult(VerifyStatus.OK, "fits", compiled=compiled(15.0), program="maxtext")
    for p in (p2, p3):
        p.compiler = verdict_of(ok)
    p1.compiler = verdict_of(OOM)
    rejected = verification.VerifiedTarget("proposal 1", 1, verification.target_of(p1).overrides, OOM)
    entries = [(p, verification.VerifiedTarget(f"proposal {p.rank}", p.rank, {}, ok)) for p in (p2, p3)]
    revised = verification._revised(doc, entries, [p1], [rejected])
    assert [(p.rank, p.ici) for p in revised.proposals] == [(1, p2.ici), (2, p3.ici)]
    assert revised.withdrawn is not None and revised.withdrawn[0].ici == {"fsdp": 16}
    assert revised.compiler_note == (
        "Withdrawn proposal 1 (fsdp=16): estimate 19.6 GiB per chip (ASAP's memory model), TPU compiler 39.8 GiB of "
        "31.25 GiB (libtpu's out-of-memory report on MaxText's train_compile); the compiler decides"
    )
    line = agent_findings.lens_title(revised, 0.25)
    assert line.endswith("· 1 withdrawn")
    assert "2 proposals (best ×" in line
    assert AnalysisReport.from_json(revised.to_json()) == revised  # the JSON carries all of it
    assert revised.to_json()["proposals"][0]["compiler"]["fits"] is True
    assert "withdrawn" not in doc.to_json() and "compiler" not in doc.to_json()["proposals"][0]  # absent before


def test_next_candidates_leave_out_the_rejected_and_the_meshes_priced_the_same() -> None:
    doc, _ = run_report(Experiment(EXAMPLE))
    an = analyze(EXAMPLE)
    again = alternatives.next_proposals(an, doc, [])
    assert [alternatives.key_of(p) for p in again] == [alternatives.key_of(p) for p in doc.proposals]
    p1 = doc.proposals[0]
    nxt = alternatives.next_proposals(an, doc, [alternatives.RuledOut.of(p1)])
    keys = [alternatives.key_of(p) for p in nxt]
    assert alternatives.key_of(p1) not in keys and nxt
    # fsdp=4 x fsdp_transpose=4 prices exactly as fsdp=16: the same candidate, ruled out with it
    same = [p for p in nxt if p.memory.hbm_bytes == p1.memory.hbm_bytes and p.expected.step_s == p1.expected.step_s]
    assert same == []
    assert [p.rank for p in nxt] == list(range(1, len(nxt) + 1))


def test_verify_advice_tells_the_current_verdict_first_and_logs_the_revised_advice(tmp_path: Path) -> None:
    """Through the MaxText path's real child process (tests/support/fake_maxtext.py, a script answering as
    train_compile does, as in tests/test_verify.py): the current mesh's verdict is told alone before any proposal
    compiles; the revised advice is a new experiment, so applying its proposal 1 records that mesh (not the withdrawn
    one)."""
    exe = fake_maxtext.write(tmp_path / "maxtext-env")
    (exe.parent / "release").touch()  # the proposals compile at once
    cfg = tmp_path / "llama.yml"
    cfg.write_text(EXAMPLE.read_text())
    doc, _ = run_report(Experiment(cfg))
    assert doc.experiment
    an = analyze(cfg)
    heard: list[tuple[list[str], list[object]]] = []

    def told(entries: list[verification.VerifiedTarget], report: AnalysisReport | None) -> None:
        assert report is not None
        heard.append(([e.label for e in entries], [p.compiler for p in report.proposals]))

    out = verification.verify_advice(an, doc, maxtext_python=str(exe), on_verdict=told, text=cfg.read_text())
    assert heard[0] == (["current mesh"], [None, None, None])  # before any proposal's compile
    assert heard[1][0] == ["current mesh", "proposal 1"] and heard[1][1][0].fits is False  # marked, not yet withdrawn
    assert out.report is not None and not out.cancelled
    assert all(p.ici.get("fsdp") != 16 for p in out.report.proposals) and len(out.report.proposals) == 3
    assert [e.rank for e in out.entries] == [None, 1, 2, 3]
    assert out.report.experiment and out.report.experiment != doc.experiment
    row = experiments.record_applied(out.report.experiment, 1, cfg)
    assert json.loads(row["ici"]) == out.report.proposals[0].ici


def test_parallel_depths_merge_as_one_child_would() -> None:
    from server.compile.verify import _merge, _Run

    ran = {"event": "compiled", "layers": 2}
    deeper = {"event": "compiled", "layers": 4}
    merged = _merge([_Run(runs=[ran], versions={"jax": "x"}), _Run(runs=[deeper])])
    assert merged.runs == [ran, deeper] and merged.error is None and merged.versions == {"jax": "x"}
    crashed = _merge([_Run(runs=[ran]), _Run(returncode=-9, stderr="killed")])
    assert crashed.runs == [] and crashed.returncode == -9  # a child without a result: no extrapolation from one
    oom = {"kind": "oom", "layers": 2}
    failed = _merge([_Run(error=oom, returncode=3), _Run(returncode=-9)])  # the other killed once the first failed
    assert failed.error == oom and failed.returncode == 3


def test_reading_verdicts_from_the_cache_does_not_wait_for_a_compile_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """verify_advice(cached_only=True) compiles nothing (the editor's look at cached verdicts, and the Ray sweep's
    verdicts so far): while another ASAP process holds the machine-wide compile lock it answers at once, the current
    mesh's verdict that the cache holds included."""
    monkeypatch.setenv("ASAP_CACHE_DIR", str(tmp_path / "cache"))
    exe = fake_maxtext.write(tmp_path / "maxtext-env")
    cfg = tmp_path / "llama.yml"
    cfg.write_text(EXAMPLE.read_text())
    an = analyze(cfg)
    first = verification.verify_advice(an, None, maxtext_python=str(exe), text=cfg.read_text())  # fills the cache
    assert [e.label for e in first.entries] == ["current mesh"] and first.entries[0].result.status == VerifyStatus.OK
    with compile_lock_held_elsewhere():
        told: list[str] = []
        got: list[verification.Advice] = []
        t = threading.Thread(
            target=lambda: got.append(
                verification.verify_advice(
                    an,
                    None,
                    maxtext_python=str(exe),
                    text=cfg.read_text(),
                    cached_only=True,
                    progress=lambda message, _f: told.append(message),
                )
            )
        )
        t.start()
        t.join(60)  # a deadline, not a measure: with the lock taken it would wait until the holder is told to go
        assert not t.is_alive() and got, told
        assert got[0].entries[0].result.status == VerifyStatus.OK and got[0].entries[0].result.cached
        assert "waiting for another ASAP compile to finish" not in told


def test_revisions_logged_once_are_remembered_for_the_latest_few(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A revision of the advice by the cached verdicts is logged once per analysis (the same revision applied again
    reuses its id); what remembers that was kept for every analysis as long as the server ran (issue 25)."""
    monkeypatch.setenv("ASAP_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(verification, "_LOGGED_MAX", 3)
    monkeypatch.setattr(verification, "_LOGGED", {})
    report, _ = run_report(Experiment(EXAMPLE, workspace=tmp_path))
    an = analyze(EXAMPLE, EXAMPLE.read_text())
    props = [p for p in report.proposals if not p.keep_current]
    assert report.experiment and len(props) > 1
    ids = []
    for i in range(5):  # five analyses, each revised (its first proposal withdrawn)
        original = report.model_copy(update={"experiment": f"{report.experiment}-{i}"})
        revised = original.model_copy(update={"proposals": props[1:]})
        verification._log(revised, original, an, EXAMPLE.read_text())
        ids.append(revised.experiment)
    assert len(set(ids)) == 5 and None not in ids
    assert [k[0] for k in verification._LOGGED] == [f"{report.experiment}-{i}" for i in (2, 3, 4)]
    last = report.model_copy(update={"experiment": f"{report.experiment}-4"})
    again = last.model_copy(update={"proposals": props[1:]})
    verification._log(again, last, an, "")
    assert again.experiment == ids[-1]  # the latest one is still logged once


def test_a_verdict_carries_the_compiled_step_simulated_and_omits_it_without_one() -> None:
    """Issue 27: the compiler's verdict on a mesh carries the compiled program's simulated step (schedule_sim), its
    busy seconds per op category and each group's exposed seconds, through the report's JSON; a compile without a
    simulation (cached before it, MaxText's without its HLO) has no `schedule` key, not a null."""
    c = compiled(15.0)
    c.schedule = {
        "step_s": 2.5,
        "busy_s": {"matmul": 1.5, "memory-bound": 0.5},
        "groups": {"fsdp": {"seconds": 0.8, "exposed_s": 0.3, "count": 64}, "host": {"seconds": 0.2, "exposed_s": 0.2}},
        "flops": 1e15,
    }
    v = verification.verdict(VerifyResult(VerifyStatus.OK, "fits", compiled=c))
    assert v.schedule is not None and v.schedule.step_s == 2.5
    assert v.schedule.exposed_s == {"fsdp": 0.3, "host": 0.2} and v.schedule.busy_s["matmul"] == 1.5
    assert CompilerVerdictView.from_json(v.to_json()) == v
    bare = verification.verdict(VerifyResult(VerifyStatus.OK, "fits", compiled=compiled(15.0))).to_json()
    assert "schedule" not in bare and bare["fits"] is True


def scheduled(step_s: float, mem_gib: float = 15.0) -> VerifyResult:
    """A fitting compile whose program was simulated at `step_s` (MFU: the estimate's FLOPs over it)."""
    c = compiled(mem_gib)
    c.schedule = {"step_s": step_s, "busy_s": {"matmul": step_s * 0.8}, "groups": {}, "mfu": 0.3 * 3.0 / step_s}
    return VerifyResult(VerifyStatus.OK, "fits", compiled=c, program="maxtext")


def test_proposals_are_reranked_by_their_simulated_steps_when_every_one_has_one() -> None:
    """Issue 27: once every accepted proposal's compiled program has a simulated step, the fastest is ranked first;
    a moved proposal says why, one no faster than the current mesh's simulated step says so among its tradeoffs,
    and the report carries the current mesh's verdict. With one proposal lacking a simulation, the engine's order
    stays."""
    doc, _ = run_report(Experiment(EXAMPLE))
    p1, p2, p3 = (p.model_copy(deep=True) for p in doc.proposals)
    steps = {1: 3.2, 2: 2.9, 3: 3.9}  # the engine's second is the compiled program's fastest
    for p in (p1, p2, p3):
        p.compiler = verdict_of(scheduled(steps[p.rank]))
    now = verdict_of(scheduled(3.5))
    entries = [(p, entry(scheduled(steps[p.rank]), p.rank)) for p in (p1, p2, p3)]
    revised = verification._revised(doc, entries, [], [], now)
    assert [(p.rank, p.ici) for p in revised.proposals] == [(1, p2.ici), (2, p1.ici), (3, p3.ici)]
    first, second, third = revised.proposals
    assert first.rationale.startswith(
        "Ranked 1 by the TPU compiler's schedule (simulated step 2.90 s); the estimate ranked it 2. "
    )
    assert second.rationale.startswith(
        "Ranked 2 by the TPU compiler's schedule (simulated step 3.20 s); the estimate ranked it 1. "
    )
    assert third.rationale == p3.rationale  # not moved
    assert third.tradeoffs[-1] == (
        "The TPU compiler's schedule simulates it no faster than the current mesh: step 3.90 s against 3.50 s."
    )
    assert all("no faster" not in t for t in [*first.tradeoffs, *second.tradeoffs])
    assert revised.current_compiler is not None and revised.current_compiler.schedule is not None
    assert revised.current_compiler.schedule.step_s == 3.5 and revised.current_compiler.schedule.mfu == 0.3 * 3.0 / 3.5
    assert AnalysisReport.from_json(revised.to_json()) == revised  # the JSON carries all of it
    # one proposal without a simulated step (cached before issue 27): the engine's order, no reason given
    p3.compiler = verdict_of(VerifyResult(VerifyStatus.OK, "fits", compiled=compiled(15.0), program="maxtext"))
    again = verification._revised(doc, [(p, entry(scheduled(1.0), p.rank)) for p in (p1, p2, p3)], [], [], now)
    assert [p.ici for p in again.proposals] == [p1.ici, p2.ici, p3.ici]
    assert not any(p.rationale.startswith("Ranked") for p in again.proposals)


def test_a_fitting_verdict_says_the_simulated_step_in_the_lens_and_the_hover() -> None:
    """The code lens' and the proposals table's few words carry the compiled program's simulated step and MFU."""
    assert verification.summary(scheduled(2.5)) == "fits, 15.0 of 31.25 GiB; schedule 2.50 s, MFU 36.0%"
    assert verification.summary(scheduled(2.5), figures=False) == "fits"
    assert verification.summary(VerifyResult(VerifyStatus.OK, "fits", compiled=compiled(15.0))) == (
        "fits, 15.0 of 31.25 GiB"
    )
