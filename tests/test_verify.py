"""Compiler verification (server/compile/verify.py): the HLO walk that counts collectives through loops,
the OOM message parser, the layer extrapolation and the logical-axis rules run everywhere; the
compiles of a small model for v5e-16 need libtpu (marked tpu) and share one child per mesh.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import sqlite_utils
from support.configs import OVERSIZED, SMALL

from server.cli.main import main
from server.common.progress import CancelToken
from server.compile.ref_model import logical_to_mesh
from server.compile.verify import VerifyStatus, combine, layer_plan, libtpu_available, verify
from server.compile.verify_worker import parse_oom
from server.config import resolve as config_mod
from server.config.mesh import check
from server.perf.wording import seconds
from server.profiles.hlo_program import summarize, trip_count, walk

# A two-level loop: the layer scan (trip 3) holding a collective-matmul loop (trip 4, counting with LE
# from 0 to 3) with a collective-permute pair per iteration; an async all-gather start/done pair in the
# scan body; a reduce-scatter fusion whose own text has neither the operand shape nor the groups; one
# all-reduce at the top level.
HLO = (Path(__file__).parent / "data" / "verify" / "two_loops.hlo.txt").read_text()
MESH = [("data", 4), ("fsdp", 4)]


def test_verify_walk_multiplies_loop_trip_counts() -> None:
    w = walk(HLO)
    assert w.unknown_trip_counts == []
    by_kind = {(c.kind, c.count, c.loop_trip_counts) for c in w.collectives}
    assert by_kind == {
        ("collective-permute", 12, (3, 4)),  # 3 layers x 4 steps of the inner loop (LE 3 from 0)
        ("all-gather", 3, (3,)),  # the start counted, the done not
        ("reduce-scatter", 3, (3,)),  # the fusion calling %all-reduce-scatter
        ("all-reduce", 1, ()),
    }
    summary = {s.kind: s for s in summarize(w, MESH)}
    rs = summary["reduce-scatter"]
    # The fusion's text has no operand shape or groups: both come from the all-reduce inside it.
    assert (rs.payload_bytes, rs.group_size, rs.axes) == (256 * 64 * 2, 4, ("fsdp",))
    assert summary["all-gather"].payload_bytes == 64 * 64 * 2 and summary["all-gather"].axes == ("fsdp",)
    assert summary["all-reduce"].axes == ("data",)
    assert summary["collective-permute"].axes == ("fsdp",) and summary["collective-permute"].total_bytes == 12 * 1024


def test_verify_trip_count_from_backend_config_wins() -> None:
    line = '%w = (s32[]) while(%t), condition=%c, body=%b, backend_config={"known_trip_count":{"n":"7"}}'
    assert trip_count(line, {}) == 7


def test_verify_parse_oom_reads_both_numbers() -> None:
    msg = (
        "RESOURCE_EXHAUSTED: Ran out of memory on HBM, the total memory required for HLO temporaries (48.83G) "
        "exceeds available HBM (15.75G)."
    )
    oom = parse_oom(msg)
    assert oom is not None
    assert oom["needed_bytes"] == pytest.approx(48.83 * 2**30)
    assert oom["available_bytes"] == pytest.approx(15.75 * 2**30)
    assert parse_oom("INVALID_ARGUMENT: something else") is None


def test_verify_extrapolates_layers_linearly() -> None:
    def run(layers: int, per_layer: int, base: int, count: int) -> dict[str, object]:
        mem = {k: base + layers * per_layer for k in ("argument", "output", "temp")}
        return {
            "layers": layers,
            "memory": {**mem, "alias": mem["output"], "generated_code": 1000},
            "collectives": [
                {"kind": "all-gather", "axes": ["fsdp"], "payload_bytes": 10, "group_size": 4, "count": count * layers},
                {"kind": "all-reduce", "axes": ["data"], "payload_bytes": 4, "group_size": 4, "count": 1},
            ],
            "compile_s": 1.0,
            "lower_s": 0.5,
        }

    assert layer_plan(32, 4) == [2, 4] and layer_plan(3, 4) == [3]
    c = combine([run(2, 100, 50, 3), run(4, 100, 50, 3)], 32, 1e9)
    assert c.extrapolated and c.layers_compiled == [2, 4]
    assert c.components["argument"] == 50 + 32 * 100
    assert c.memory_per_chip_bytes == 2 * (50 + 32 * 100) + 1000
    counts = {x["kind"]: x["count"] for x in c.collectives}
    assert counts == {"all-gather": 96, "all-reduce": 1}  # in the layer loop: x layers; outside: once


def test_verify_logical_axis_rules_resolve_like_flax() -> None:
    # 'mlp' takes fsdp_transpose first, so 'embed' falls back to its second rule (no fsdp_transpose).
    assert logical_to_mesh(("embed", "mlp")) == (
        ("fsdp", "context", "context_usp_ulysses", "expert"),
        ("fsdp_transpose", "tensor", "tensor_sequence", "autoregressive"),
    )
    assert logical_to_mesh(("embed", "q_heads", "kv"))[1:] == (("tensor", "tensor_sequence", "autoregressive"), None)


needs_libtpu = pytest.mark.skipif(not libtpu_available(), reason="needs libtpu: pip install '.[compile]'")


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("verify") / "small.yml"
    p.write_text(SMALL)
    return p


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> sqlite_utils.Database:
    return sqlite_utils.Database(tmp_path_factory.mktemp("verify-db") / "asap.sqlite")


@pytest.fixture(scope="module")
def fsdp16(small: Path, db: sqlite_utils.Database):  # type: ignore[no-untyped-def]
    return verify(small, db=db)


@pytest.mark.tpu
@needs_libtpu
def test_verify_small_model_fits_and_matches_state_bytes(fsdp16) -> None:  # type: ignore[no-untyped-def]
    r = fsdp16
    assert r.status == VerifyStatus.OK, r.message
    c = r.compiled
    assert c is not None and c.fits and not c.extrapolated
    assert r.versions["libtpu"]
    # Arguments: fp32 weights + two fp32 Adam moments, sharded 16 ways (+ the step counter and the tokens);
    # TPU tiles pad the narrow shards of this tiny model (an embed shard of 16 is laid out as 128) a little.
    params = 1024 * 256 * 2 + 2 * (256 * 4 * 64 * 4 + 3 * 256 * 1024 + 2 * 256) + 256
    assert params * 12 / 16 <= c.components["argument"] <= 1.25 * params * 12 / 16
    assert c.memory_per_chip_bytes == pytest.approx(
        sum(c.components[k] for k in ("argument", "output", "temp", "generated_code")) - c.components["alias"]
    )
    kinds = {x["kind"] for x in c.collectives if x["axes"] == ["fsdp"]}
    # FSDP: weights gathered; gradients reduced (a reduce-scatter, or at this size an all-reduce and a slice)
    assert "all-gather" in kinds and kinds & {"reduce-scatter", "all-reduce"}
    assert all(x["axes"] in (["fsdp"], []) for x in c.collectives)
    assert r.estimate is not None and "fsdp" in r.estimate["collectives_by_axis"]


# The exact compiled bytes of the fsdp16 case per libtpu version: the compiler is deterministic for one version
# and changes between versions (DOMAIN.md §6), so a new version gets its own entry instead of a looser test.
# Regenerate an entry with: verify(<SMALL as a file>).compiled.components (argument, output, alias, temp,
# generated_code), after any change to server/compile/ref_model.py.
FSDP16_GOLDEN: dict[str, dict[str, int]] = {
    "0.0.42.1": {
        "argument": 2376192,
        "output": 2376192,
        "alias": 2375168,
        "temp": 4265984,
        "generated_code": 4834304,
    },
}


@pytest.mark.tpu
@needs_libtpu
def test_verify_small_model_golden_bytes_for_this_libtpu(fsdp16) -> None:  # type: ignore[no-untyped-def]
    version = fsdp16.versions.get("libtpu")
    golden = FSDP16_GOLDEN.get(str(version))
    if golden is None:
        pytest.skip(f"no golden compiled bytes for libtpu {version} (known: {', '.join(FSDP16_GOLDEN)})")
    assert fsdp16.compiled is not None
    got = {k: round(v) for k, v in fsdp16.compiled.components.items() if k in golden}
    assert got == golden


@pytest.mark.tpu
@needs_libtpu
def test_verify_fsdp_divides_argument_bytes_and_tensor_adds_collectives(  # type: ignore[no-untyped-def]
    small: Path, db: sqlite_utils.Database, fsdp16
) -> None:
    tp = verify(small, {"ici_fsdp_parallelism": 4, "ici_tensor_parallelism": 4}, db=db)
    dp = verify(small, {"ici_fsdp_parallelism": 4, "ici_data_parallelism": 4}, db=db)
    assert tp.status == dp.status == VerifyStatus.OK, (tp.message, dp.message)
    assert tp.compiled is not None and dp.compiled is not None and fsdp16.compiled is not None
    # fsdp 4 -> 16 (data 4 -> 1): the state is sharded 4x as many ways.
    ratio = dp.compiled.components["argument"] / fsdp16.compiled.components["argument"]
    assert ratio == pytest.approx(4.0, rel=0.05)
    # tensor parallelism: collectives over the tensor axis, all-reduces among them; none without it.
    on_tensor = [x for x in tp.compiled.collectives if "tensor" in x["axes"]]
    assert {x["kind"] for x in on_tensor} >= {"all-reduce"}
    assert not [x for x in fsdp16.compiled.collectives if "tensor" in x["axes"]]
    assert "tensor" in tp.compiled.collectives_by_axis()
    # a second call with the same job is answered from the cache
    again = verify(small, {"ici_fsdp_parallelism": 4, "ici_tensor_parallelism": 4}, db=db)
    assert again.cached and again.compiled is not None
    assert again.compiled.memory_per_chip_bytes == tp.compiled.memory_per_chip_bytes


@pytest.mark.tpu
@needs_libtpu
def test_verify_oversized_does_not_fit(tmp_path: Path, db: sqlite_utils.Database) -> None:
    p = tmp_path / "oversized.yml"
    p.write_text(OVERSIZED)
    r = verify(p, db=db)
    assert r.status == VerifyStatus.DOES_NOT_FIT, r.message
    assert r.fits is False
    assert r.message.startswith("does not fit: needs ")
    assert r.available_bytes == pytest.approx(15.75 * 2**30)
    assert r.needs_bytes is not None and r.needs_bytes > r.available_bytes
    assert "RESOURCE_EXHAUSTED" in r.detail
    assert r.estimate is not None and r.estimate["fits"] is False  # the estimate agrees it does not fit


@pytest.mark.tpu
@needs_libtpu
def test_verify_unplaceable_mesh_gives_the_static_message(small: Path, db: sqlite_utils.Database) -> None:
    mesh = {"ici_fsdp_parallelism": 8, "ici_data_parallelism": 2}
    r = verify(small, mesh, db=db)
    assert r.status == VerifyStatus.UNPLACEABLE
    static = [f for f in check(config_mod.with_overrides(config_mod.load(small), mesh)).findings if f.code == "ASAP106"]
    assert len(static) == 1 and r.message == static[0].message
    assert "Failed to find assignment" in r.detail  # JAX's own words, from the verifier's mesh build


@pytest.mark.tpu
@needs_libtpu
def test_verify_layer_extrapolation_matches_a_full_compile(tmp_path: Path, db: sqlite_utils.Database) -> None:
    p = tmp_path / "four_layers.yml"
    p.write_text(SMALL.replace("base_num_decoder_layers: 2", "base_num_decoder_layers: 4"))
    full = verify(p, db=db)
    ext = verify(p, db=db, max_layers=3)
    assert full.compiled is not None and ext.compiled is not None
    assert not full.compiled.extrapolated and ext.compiled.extrapolated and ext.compiled.layers_compiled == [2, 3]
    assert "extrapolated from 2 and 3 of 4 layers" in ext.message
    assert ext.compiled.components["argument"] == pytest.approx(full.compiled.components["argument"], rel=0.01)
    assert ext.compiled.memory_per_chip_bytes == pytest.approx(full.compiled.memory_per_chip_bytes, rel=0.05)
    for axis, kinds in full.compiled.collectives_by_axis().items():
        for kind, nbytes in kinds.items():
            assert ext.compiled.collectives_by_axis()[axis][kind] == pytest.approx(nbytes, rel=0.05), (axis, kind)
    # the simulated schedule (server/compile/schedule_sim.py) extrapolates per layer like the memory (issue 27)
    fs, es = full.compiled.schedule, ext.compiled.schedule
    assert fs is not None and es is not None and es["extrapolated_from"] == [2, 3]
    assert es["step_s"] == pytest.approx(fs["step_s"], rel=0.05)
    assert es["flops"] == pytest.approx(fs["flops"], rel=0.05)


@pytest.mark.tpu
@needs_libtpu
def test_verify_depths_side_by_side_give_the_sequential_numbers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The two reduced depths compiled in two children at once (issue 18: the 2-core budget) are the same programs:
    the same bytes, collectives and verdict as one child compiling them in turn."""
    p = tmp_path / "four_layers.yml"
    p.write_text(SMALL.replace("base_num_decoder_layers: 2", "base_num_decoder_layers: 4"))
    got = {}
    for parallel in ("0", "1"):
        monkeypatch.setenv("ASAP_VERIFY_PARALLEL", parallel)
        heard: list[str] = []
        got[parallel] = verify(p, max_layers=3, use_cache=False, progress=lambda m, _f, h=heard: h.append(m))
        if parallel == "1":
            assert any(m == "compiling 2 and 3 layers side by side (0 of 2 done)" for m in heard), heard
    seq, par = got["0"].compiled, got["1"].compiled
    assert seq is not None and par is not None and par.layers_compiled == seq.layers_compiled == [2, 3]
    assert par.components == seq.components and par.memory_per_chip_bytes == seq.memory_per_chip_bytes
    assert par.collectives_by_axis() == seq.collectives_by_axis() and got["1"].message == got["0"].message


@pytest.mark.tpu
@needs_libtpu
def test_verify_cancel_stops_the_compile(small: Path) -> None:
    token = CancelToken()
    seen: list[str] = []

    def progress(message: str, fraction: float | None) -> None:
        seen.append(message)
        token.cancel()  # kills the child at its first progress line

    r = verify(
        small,
        {"ici_fsdp_parallelism": 4, "ici_tensor_parallelism": 4},
        progress=progress,
        cancel=token,
        use_cache=False,
    )
    assert r.status == VerifyStatus.CANCELLED and r.compiled is None
    assert seen and seen[0].startswith("loading libtpu")


@pytest.mark.tpu
@needs_libtpu
def test_verify_cli_current_mesh_and_an_override(
    small: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`asap verify` prints the estimate and the compiler side by side (the first run of a job compiles, the
    same job again is answered from ASAP's store); --json is the verifier's document."""
    monkeypatch.delenv("ASAP_MAXTEXT_PYTHON", raising=False)  # the reference program, whatever the shell says
    assert main(["verify", str(small), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"] == "ok" and doc["fits"] is True and doc["program"] == "reference"
    assert set(doc["compiled"]) >= {"memory_per_chip_bytes", "components", "fits", "collectives", "compile_s"}
    assert set(doc["estimate"]) >= {"memory_per_chip_bytes", "collectives_by_axis", "step_s", "mfu"}
    sch = doc["compiled"]["schedule"]  # the compiled step simulated on the slice (issue 27)
    assert sch["step_s"] > 0 and sch["flops"] > 0 and sum(sch["busy_s"].values()) <= sch["step_s"] * (1 + 1e-9)
    assert set(sch["groups"]) >= {"fsdp"} and not sch["unknown_trip_counts"]
    # its MFU counts the estimate's FLOPs over the simulated step, and the verdict says both
    assert sch["mfu"] == pytest.approx(doc["estimate"]["mfu"] * doc["estimate"]["step_s"] / sch["step_s"])
    assert doc["message"].endswith(f"; TPU compiler's schedule: step {seconds(sch['step_s'])}, MFU {sch['mfu']:.1%}")
    assert set(doc["estimate"]["time"]) == {"compute_s", "memory_bound_s", "bubble_s", "exposed_s"}
    assert isinstance(doc["disagreements"], list)
    assert doc["mesh"]["ici"]["fsdp"] == 16
    # an unplaceable override: exit 1 with the static rule's words
    assert main(["verify", str(small), "--mesh", "ici_fsdp_parallelism=8,ici_data_parallelism=2"]) == 1
    out = capsys.readouterr().out
    assert "mesh (ici_fsdp_parallelism=8, ici_data_parallelism=2) on v5e-16: unplaceable" in out
    # the human table, from the store this time
    assert main(["verify", str(small)]) == 0
    out = capsys.readouterr().out
    assert "== current mesh (as written) on v5e-16: ok" in out and "memory per chip" in out and "(cached)" in out
    assert "step (schedule simulated)" in out and "MFU" in out
    assert "\n     compute " in out  # where the step goes, estimate beside schedule
    assert main(["verify", str(small.parent / "missing.yml")]) == 2


# -- MaxText's own train_compile (server/compile/verify_maxtext.py) ----------------------------------------
def test_verify_maxtext_reads_the_memory_report_and_errors() -> None:
    from server.compile import verify_maxtext

    out = (
        "Starting train_compile.py...\nJitting and compiling train step...\nJitting and compilation complete!\n"
        "Finished train_compile.py successfully!\nCost analysis: {'flops': 1.0}\n"
        "Memory analysis: CompiledMemoryStats(generated_code_size_in_bytes=139776, argument_size_in_bytes=262144, "
        "output_size_in_bytes=512, alias_size_in_bytes=256, temp_size_in_bytes=1024, "
        "host_generated_code_size_in_bytes=0, host_argument_size_in_bytes=0, host_output_size_in_bytes=0, "
        "host_alias_size_in_bytes=0, "
        "host_temp_size_in_bytes=0)\n"
    )
    mem = verify_maxtext.parse_memory(out)
    assert mem is not None
    assert (mem["argument"], mem["output"], mem["alias"], mem["temp"], mem["generated_code"]) == (
        262144,
        512,
        256,
        1024,
        139776,
    )
    assert verify_maxtext.parse_memory("Finished train_compile.py successfully!") is None
    oom = verify_maxtext._error(
        "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Ran out of memory on HBM, the total memory required for HLO "
        "temporaries (48.83G) exceeds available HBM (15.75G).",
        1,
    )
    assert oom["kind"] == "oom" and oom["available_bytes"] == pytest.approx(15.75 * 2**30)
    # a kernel's VMEM running out is a compile failure, not "does not fit" (libtpu 0.0.52's two wordings)
    for vmem in (
        "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: E1001: CompileTimeScopedVmemOom:",
        "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory "
        "space vmem. Used 69.30M of 63.94M vmem. Exceeded vmem capacity by 5.37M.",
    ):
        failed = verify_maxtext._error(vmem, 1)
        assert failed["kind"] == "compile" and "vmem" in failed["message"].lower(), failed
    placement = verify_maxtext._error("Traceback...\nNotImplementedError: Failed to find assignment for mesh", 1)
    assert placement == {"kind": "placement", "message": "NotImplementedError: Failed to find assignment for mesh"}
    assert verify_maxtext._error("ModuleNotFoundError: No module named 'maxtext'", 1)["kind"] == "no-maxtext"


def test_verify_maxtext_needs_a_maxtext_environment(small: Path) -> None:
    """An interpreter without MaxText: the result says how to get it, and nothing is compiled."""
    import sys

    r = verify(small, maxtext_python=sys.executable, use_cache=False)
    assert r.status == VerifyStatus.UNAVAILABLE and r.program == "maxtext"
    assert "pip install 'maxtext[tpu]'" in r.message


MAXTEXT_PYTHON = os.environ.get("ASAP_MAXTEXT_PYTHON")


@pytest.mark.tpu
@pytest.mark.skipif(not MAXTEXT_PYTHON, reason="set ASAP_MAXTEXT_PYTHON to a Python 3.12 with maxtext[tpu]")
def test_verify_maxtext_compiles_the_real_program(tmp_path: Path) -> None:
    """MaxText's own train step (opt-in: MaxText is a 2.8 GB environment of its own, not installed by CI)."""
    p = tmp_path / "tiny.yml"
    p.write_text(MAXTEXT_TINY)
    assert MAXTEXT_PYTHON is not None
    r = verify(p, maxtext_python=MAXTEXT_PYTHON, use_cache=False, timeout_s=1500)
    assert r.status == VerifyStatus.OK, (r.message, r.detail)
    assert r.program == "maxtext" and r.compiled is not None and r.compiled.fits
    assert r.message.endswith("(MaxText's own train step)")
    assert r.compiled.components["argument"] > 0
    assert any(c["axes"] == ["fsdp"] for c in r.compiled.collectives)  # FSDP gathers and reduces over fsdp
    sch = r.compiled.schedule  # MaxText's compiled step, simulated on the slice (issue 27)
    assert sch is not None and sch["step_s"] > 0 and sch["flops"] > 0 and "fsdp" in sch["groups"]


# SMALL as a MaxText config: MaxText reads its own base.yml under it and needs the slice as a key
MAXTEXT_TINY = (
    "base_config: base.yml\n"
    + SMALL.replace("# asap: slice=v5e-16", "compile_topology: v5e-16").replace(
        "ici_fsdp_parallelism: -1", "ici_fsdp_parallelism: 16"
    )
    + "dataset_type: synthetic\n"
)


@pytest.mark.tpu
@needs_libtpu
def test_verify_cached_only_never_compiles(small: Path, db: sqlite_utils.Database, fsdp16) -> None:  # type: ignore[no-untyped-def]
    """What an outcome reads for its memory side: a verification already made, or nothing (no compile)."""
    hit = verify(small, db=db, cached_only=True)
    assert hit.cached and hit.compiled is not None
    assert hit.compiled.memory_per_chip_bytes == fsdp16.compiled.memory_per_chip_bytes
    miss = verify(small, {"ici_fsdp_parallelism": 2, "ici_data_parallelism": 8}, db=db, cached_only=True)
    assert miss.status == VerifyStatus.UNAVAILABLE and miss.compiled is None and "not compiled yet" in miss.message


def test_compiled_collectives_compare_in_the_cost_models_convention():
    """An all-to-all's V is the whole group's array (a device's payload times the group size), as the
    estimate's dispatch is priced; results cached before v_bytes was stored are converted the same way."""
    from server.compile.verify import Compiled

    ragged = {"kind": "ragged-all-to-all", "axes": ["expert"], "payload_bytes": 1000, "group_size": 4, "count": 6}
    gather = {"kind": "all-gather", "axes": ["fsdp"], "payload_bytes": 500, "group_size": 8, "count": 2}
    fresh = [{**ragged, "v_bytes": 4000, "total_bytes": 6000}, {**gather, "v_bytes": 500, "total_bytes": 1000}]
    cached = [{**ragged, "total_bytes": 6000}, {**gather, "total_bytes": 1000}]
    for cs in (fresh, cached):
        c = Compiled(1.0, {}, 2.0, True, cs, 0.0, [2], 2, False)
        assert c.collectives_by_axis() == {"expert": {"ragged-all-to-all": 24000.0}, "fsdp": {"all-gather": 1000.0}}


def _fake_maxtext(tmp_path: Path, body: str) -> str:
    """A stand-in for a MaxText environment's python: a shell script that answers as train_compile does."""
    exe = tmp_path / "python"
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(0o755)
    return str(exe)


def test_maxtext_run_reads_milestones_memory_and_failures(tmp_path: Path) -> None:
    """verify_maxtext.run's child handling without MaxText: its log (stderr) is the progress, the memory line
    the result; a crash, a timeout, a cancel and a missing interpreter each come back as before."""
    from server.compile import verify_maxtext
    from server.config.slices import parse_slice

    cfg = tmp_path / "cfg.yml"
    cfg.write_text("base_config: base.yml\n")
    sl = parse_slice("v5p-8")
    ok = _fake_maxtext(
        tmp_path,
        "echo 'Starting train_compile.py' >&2\necho 'Jitting and compiling train step' >&2\n"
        "echo 'Memory analysis: CompiledMemoryStats(argument_size_in_bytes=10, temp_size_in_bytes=5)'\n"
        "pwd\n",
    )
    seen: list[tuple[str, float | None]] = []
    out = verify_maxtext.run(ok, cfg, sl, {}, [], 60, lambda m, f: seen.append((m, f)))
    assert not out["timed_out"] and not out["cancelled"] and "error" not in out
    assert out["run"]["memory"]["argument"] == 10 and out["run"]["memory"]["temp"] == 5
    assert [f for _, f in seen] == [0.05, 0.2]
    assert out["tail"].rstrip().endswith(str(tmp_path))  # run in the config's directory

    crash = _fake_maxtext(tmp_path, "echo 'ValueError: bad mesh' >&2\nexit 1\n")
    out = verify_maxtext.run(crash, cfg, sl, {}, [], 60)
    assert out["error"] == {"kind": "compile", "message": "ValueError: bad mesh"}

    hang = _fake_maxtext(tmp_path, "echo 'Starting train_compile.py'\nexec sleep 3600\n")
    out = verify_maxtext.run(hang, cfg, sl, {}, [], 1)
    assert out["timed_out"] and "run" not in out and "error" not in out
    token = CancelToken()
    out = verify_maxtext.run(hang, cfg, sl, {}, [], 600, lambda _m, _f: token.cancel(), token)
    assert out["cancelled"] and not out["timed_out"]

    out = verify_maxtext.run(str(tmp_path / "missing"), cfg, sl, {}, [], 60)
    assert out["error"]["kind"] == "no-maxtext" and "cannot run" in out["error"]["message"]


def test_no_collective_read_back_is_not_a_collective_disagreement():
    """A compile whose optimized HLO was not read (no collective at all, as a MaxText run without a dump) says
    nothing about collectives; one that read some and lacks an axis the estimate prices is a disagreement."""
    from server.compile.verify import Compiled, disagreements

    def compiled(collectives: list[dict[str, Any]]) -> Compiled:
        return Compiled(2e9, {}, 16e9, True, collectives, 1.0, [2, 4], 32, True)

    est = {"memory_per_chip_bytes": 2e9, "fits": True, "collectives_by_axis": {"fsdp": {"all-gather": 4e9}}}
    assert disagreements(compiled([]), est) == []
    other = {"kind": "all-reduce", "axes": ["tensor"], "payload_bytes": 1e9, "group_size": 4, "count": 1}
    got = disagreements(compiled([other]), est)
    assert [d["what"] for d in got] == ["collective_bytes[fsdp]", "collective_bytes[tensor]"]


def _kept_run(layers: int) -> dict[str, Any]:
    """A compile's event as the worker writes it: 1 GiB of arguments and 0.5 GiB of temporaries per chip."""
    memory = {"argument": 2**30, "output": 0, "alias": 0, "temp": 2**29, "generated_code": 0}
    return {"layers": layers, "memory": memory, "collectives": [], "compile_s": 1.0, "lower_s": 0.5}


@needs_libtpu
def test_a_verdict_kept_under_compile_key_is_what_verify_reads(small: Path, tmp_path: Path) -> None:
    """The public side of the compile cache (what a Ray sweep uses): a verdict kept under compile_key(config, mesh)
    answers verify for that (config, mesh) without a compile; another mesh has another key; a mesh verify would not
    compile has none."""
    from server.compile import verify as v

    db = sqlite_utils.Database(tmp_path / "asap.sqlite")
    mesh = {"ici_fsdp_parallelism": 4, "ici_tensor_parallelism": 4}
    planned = v.compile_key(small, mesh)
    assert planned is not None and planned.program == "reference" and planned.slice.name == "v5e-16"
    other = v.compile_key(small)
    assert other is not None and other.key != planned.key
    assert v.compile_key(small, {"ici_fsdp_parallelism": 3}) is None  # 3 does not divide 16: invalid
    runs = [_kept_run(n) for n in planned.job["layers"]]
    v.keep_verdict(db, planned.key, v.verdict_value(runs, None, {"jax": "kept"}))
    assert v.read_verdict(db, planned.key) == {"runs": runs, "error": None, "versions": {"jax": "kept"}}
    got = verify(small, mesh, db=db, cached_only=True)
    assert got.cached and got.status == VerifyStatus.OK and got.compiled is not None
    assert got.compiled.memory_per_chip_bytes == 1.5 * 2**30 and got.versions["jax"] == "kept"
    assert verify(small, db=db, cached_only=True).status == VerifyStatus.UNAVAILABLE  # the other key: nothing kept


def test_a_verdict_kept_under_compile_key_answers_a_maxtext_verify(tmp_path: Path) -> None:
    """With a MaxText environment the key is verify_maxtext's (the saved config, the overrides, the versions of that
    environment), through the same compile_key; the verdict kept under it is what verify reads."""
    from support import fake_maxtext

    from server.compile import verify as v

    exe = str(fake_maxtext.write(tmp_path / "env"))
    cfg = tmp_path / "small.yml"
    cfg.write_text(SMALL)
    db = sqlite_utils.Database(tmp_path / "asap.sqlite")
    planned = v.compile_key(cfg, maxtext_python=exe)
    assert planned is not None and planned.program == "maxtext"
    assert dict(planned.mesh_axes)["fsdp"] == 16 and planned.versions["maxtext"]
    assert v.compile_key(cfg, maxtext_python=str(tmp_path / "no-python")) is None  # no MaxText there
    v.keep_verdict(db, planned.key, v.verdict_value([_kept_run(planned.layers)], None, {}))
    got = verify(cfg, db=db, cached_only=True, maxtext_python=exe)
    assert got.cached and got.status == VerifyStatus.OK and got.program == "maxtext"
    assert got.compiled is not None and got.compiled.memory_per_chip_bytes == 1.5 * 2**30


def test_step_disagreement_names_the_category_that_differs_most() -> None:
    """Issue 27: the estimate's step against the compiled program's simulated step, beyond STEP_TOLERANCE, is one
    disagreement naming the category whose seconds differ most (hand figures); within it, none."""
    from server.compile.verify import STEP_TOLERANCE, step_disagreement

    est = {
        "step_s": 3.0,
        "time": {"compute_s": 2.0, "memory_bound_s": 0.3, "bubble_s": 0.0, "exposed_s": {"fsdp": 0.2, "tensor": 0.5}},
    }
    sch = {
        "step_s": 4.0,
        "busy_s": {"matmul": 2.2, "attention": 0.1, "memory-bound": 0.4},
        "groups": {"tensor": {"seconds": 1.5, "exposed_s": 1.2}, "fsdp": {"seconds": 0.6, "exposed_s": 0.1}},
    }
    d = step_disagreement(est, sch)
    assert d is not None and d["what"] == "step_s" and d["relative"] == -0.25 and d["category"] == "exposed:tensor"
    assert d["message"] == (
        "step: estimate 3.00 s, the TPU compiler's schedule simulated 4.00 s (-25%); the largest difference is in "
        "exposed tensor collectives: estimate 500.0 ms, schedule 1.20 s"
    )
    assert step_disagreement({**est, "step_s": 4.0 * (1 - STEP_TOLERANCE) + 1e-6}, sch) is None
    host = {**sch, "groups": {**sch["groups"], "host": {"seconds": 2.0, "exposed_s": 1.4}}, "step_s": 5.0}
    assert step_disagreement(est, host)["category"] == "exposed:host"  # type: ignore[index]
    assert "exposed host-offload copies" in step_disagreement(est, host)["message"]  # type: ignore[index]


def test_estimate_time_splits_the_step_as_the_simulation_does() -> None:
    """The estimate's `time` block (verify.time_json) adds up to its step: compute, memory-bound ops (host offload's
    exposed copies apart), the bubble and each group's exposed seconds."""
    from server.compile.verify import time_json
    from server.perf.estimate import estimate

    for name in ("llama3-8b-v6e-16.yml", "llama2-7b-v5e-256.yml"):
        cfg = config_mod.load(Path(__file__).resolve().parents[1] / "examples" / name)
        est = estimate(cfg, check(cfg))
        t = time_json(est)
        total = t["compute_s"] + t["memory_bound_s"] + t["bubble_s"] + sum(t["exposed_s"].values())
        assert total == pytest.approx(est.time.step_s, rel=1e-9), name
        assert t["compute_s"] == est.time.compute_s
