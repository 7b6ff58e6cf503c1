"""The closed loop end to end on the tiny model (bench/closed_loop.py runs the real one): measure the CPU
devices, run and profile a data-parallel step, analyse the profile, apply proposal 1 to the YAML, run and
profile the new YAML. Timings are the bench's business; this asserts what must hold whatever they are."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from server.common.findings import Severity
from server.config.slices import Slice, unregister_cpu_slice
from server.lab.closed_loop import POOR_MESH, TINY_MODEL, Repetition, apply_first, measure_slice, repetition
from server.services.analysis import analyze


@pytest.fixture(scope="module")
def cpu_slice() -> Iterator[Slice]:
    _, sl = measure_slice(8, by="tests/test_closed_loop.py")
    yield sl
    unregister_cpu_slice()


@pytest.fixture(scope="module")
def turn(cpu_slice: Slice, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Repetition]:
    work = tmp_path_factory.mktemp("loop")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ASAP_CACHE_DIR", str(work / "cache"))
        yield repetition(work, cpu_slice, TINY_MODEL, steps=3, warmup=1, use_kb=False)


def test_the_profile_of_the_poor_mesh_is_read_and_compared(turn: Repetition) -> None:
    before = turn.before
    assert before.spec.mesh["data"] == 8 and before.spec.devices == 8
    prof = before.result["profile"]
    assert prof["kpis"]["steps"]["count"] >= 1 and before.measured_step_s > 0
    assert any("CPU only" in w for w in prof["warnings"])
    assert set(prof["collectives"]["by_axis"]) == {"data"}  # the gradient all-reduce, on the data axis
    # the profile is of this config's slice and mesh: it is compared with the estimate and calibrates it
    assert before.diagnosis["source"] == "profile" and before.diagnosis["gap"]["host_only"] is True
    assert "calibrated on the profile" in before.result["calibration"]


def test_asap_proposes_a_different_mesh(turn: Repetition) -> None:
    p = turn.proposal
    assert p["rank"] == 1 and not p["keep_current"]
    assert p["ici"] != {"data": 8}
    assert p["ici"].get("data", 1) < 8  # sharding the weights is the point (POOR_MESH's comment)
    assert p["expected"]["step_s"] > 0 and p["expected"]["speedup"] > 1


def test_applying_it_yields_a_valid_config_whose_mesh_is_run(turn: Repetition) -> None:
    after = turn.after
    text = after.config.read_text()
    assert text == after.text and after.config.name == "config.proposed.yml"
    an = analyze(after.config, text)
    assert not [f for f in an.diagnostics if f.severity == Severity.ERROR]
    assert an.check.consistent and an.estimate is not None
    want = {a: turn.proposal["ici"].get(a, 1) for a in after.spec.mesh}
    assert after.spec.mesh == want  # the second run's JAX mesh is the new YAML's
    for k, v in (turn.proposal.get("other_changes") or {}).items():
        assert an.config.get(k) == v
    # a minimal edit: the comment and every non-mesh key of the original survive, the old degrees do not
    before_lines = turn.before.text.splitlines()
    kept = [ln for ln in before_lines if not ln.startswith(("ici_", "per_device_batch_size"))]
    assert all(ln in text.splitlines() for ln in kept)
    assert f"ici_data_parallelism: {POOR_MESH['ici_data_parallelism']}" not in text


def test_the_new_run_is_profiled_and_analysed(turn: Repetition) -> None:
    after = turn.after
    prof = after.result["profile"]
    assert prof["kpis"]["steps"]["count"] >= 1 and after.measured_step_s > 0
    used = {a for a, d in after.spec.mesh.items() if d > 1}
    labels = prof["collectives"]["by_axis"]  # e.g. "fsdp", "fsdp+tensor": the new mesh's axes
    assert labels and all(set(label.split("+")) <= used for label in labels)
    assert after.diagnosis["source"] == "profile" and after.diagnosis["gap"] is not None
    assert all(x > 0 for x in (turn.measured_speedup, turn.predicted_speedup, turn.model_speedup))


def test_mesh_only_leaves_the_batch_as_it_was(turn: Repetition, tmp_path_factory: pytest.TempPathFactory) -> None:
    p, text, _ = apply_first(turn.before, mesh_only=True)
    path = tmp_path_factory.mktemp("mesh-only") / "c.yml"
    path.write_text(text)
    an = analyze(path, text)
    assert an.check.consistent
    assert {d.axis.name: d.degree for d in an.check.ici if d.degree != 1} == p["ici"]
    assert an.config.get("per_device_batch_size") == TINY_MODEL.pdbs
