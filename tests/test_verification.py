"""server/presentation/verification.py without compiling: which meshes are compiled, how verdicts become diagnostics and
hover rows, and that compiles wait for each other across processes."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from server.agents.coordinator import run_report
from server.agents.types import Experiment
from server.common import store
from server.common.findings import Severity
from server.compile.verify import Compiled, VerifyResult, VerifyStatus
from server.presentation import explain, verification
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


def test_compiles_wait_for_another_asap_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both sides are ASAP's own lock (filelock): the second process is told, waits, and proceeds once the
    first one is done."""
    monkeypatch.setenv("ASAP_CACHE_DIR", str(tmp_path))
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
    finally:
        holder.kill()
        holder.wait()


def test_result_json_carries_the_status_as_its_plain_value() -> None:
    doc = VerifyResult(VerifyStatus.DOES_NOT_FIT, "does not fit").to_json()
    assert type(doc["status"]) is str and doc["status"] == "does-not-fit"
    assert json.dumps(doc["status"]) == '"does-not-fit"'
