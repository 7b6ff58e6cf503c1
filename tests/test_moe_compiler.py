"""ASAP's MoE collectives against MaxText's own compiled train step (issue 14).

The golden facts (tests/data/verify/moe_compiled.json) were read from the optimized HLO of MaxText's train_compile
for reduced-layer MoE configs (bench/moe_vs_compiler.py --write-golden: Mixtral 8x7B, Qwen3-30B-A3B and a
DeepSeek-style MLA + MoE model, 2-3 layers on v5p-16, dropless and capacity paths, with and without expert
parallelism), keyed on the maxtext, jax and libtpu versions that compiled them. The tests check ASAP's CommPlan
(server/perf/steptime.py) against them without compiling: which collectives move the routed experts' weights, their
gradients and the tokens, on which mesh axes, how often and how many bytes. Compiling again is opt-in
(ASAP_MAXTEXT_PYTHON, as in tests/test_verify.py): it checks that the facts still hold for that MaxText.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from server.config import resolve as config_mod
from server.config.mesh import check
from server.perf.estimate import Estimate, estimate

ROOT = Path(__file__).resolve().parents[1]
GOLDEN_PATH = ROOT / "tests" / "data" / "verify" / "moe_compiled.json"
GOLDEN: dict[str, Any] = json.loads(GOLDEN_PATH.read_text())
CASES: list[dict[str, Any]] = GOLDEN["cases"]
IDS = [c["name"] for c in CASES]
MiB = 2**20


def _estimate(case: dict[str, Any], tmp_path: Path) -> Estimate:
    p = tmp_path / "case.yml"
    p.write_text(case["yaml"])
    cfg = config_mod.with_overrides(config_mod.load(p), case["cli"])
    return estimate(cfg, check(cfg))


def _matrix_bytes(est: Estimate) -> tuple[float, float]:
    """One routed-expert matrix of one MoE layer in bf16: every expert's, and one device's experts'."""
    s, p = est.shape, est.params
    tp = est.layout.degree("tensor", "tensor_sequence", "autoregressive")
    ep = est.layout.degree("expert")
    full = p.routed * s.layers / s.routed_layers / tp / (s.n_mlp_in + 1) * 2
    return full, full / ep


def _near(a: float, b: float, tol: float = 0.01) -> bool:
    return abs(a - b) <= tol * max(abs(a), abs(b), 1.0)


def _compiled(case: dict[str, Any], kind: str, group: str, payload: float) -> tuple[float, int]:
    """Bytes per step and count of the compiled collectives of this kind and axis group whose payload is `payload`
    (within the compiler's padding)."""
    hits = [
        c
        for c in case["collectives"]
        if c["kind"] == kind and c["group"] == group and _near(c["payload_bytes"], payload)
    ]
    return sum(c["payload_bytes"] * c["count"] for c in hits), sum(c["count"] for c in hits)


def _asap(est: Estimate, kind: str, axis: str, purpose: str) -> tuple[float, float]:
    hits = [c for c in est.time.comm.collectives if c.kind == kind and c.axis == axis and c.purpose == purpose]
    return sum(c.bytes * c.count for c in hits), sum(c.count for c in hits)


def test_golden_facts_say_what_compiled_them() -> None:
    v = GOLDEN["versions"]
    assert v["libtpu"] and v["maxtext"] and v["jax"]
    assert len(CASES) >= 5
    paths = {("capacity" if "sparse_matmul: false" in c["yaml"] else "dropless") for c in CASES}
    assert paths == {"capacity", "dropless"}


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_token_dispatch_and_combine_are_the_compiled_ragged_all_to_alls(case: dict[str, Any], tmp_path: Path) -> None:
    """Dropless with expert parallelism: 6 ragged all-to-alls a layer under full remat (forward 2, backward 2,
    rematerialised 2), each moving a device's routed rows; none otherwise (the capacity path gathers weights)."""
    est = _estimate(case, tmp_path)
    ragged = [c for c in case["collectives"] if c["kind"] == "ragged-all-to-all"]
    routed_v = sum(
        min(c["send_buffer_bytes"], c["receive_buffer_bytes"]) * c["group_size"] * c["count"] for c in ragged
    )
    a_bytes, a_count = _asap(est, "all-to-all", "expert", "token dispatch and combine")
    assert a_count == sum(c["count"] for c in ragged)
    assert _near(a_bytes, routed_v)
    # no dense all-to-all of tokens in the layers either (the two in the step's entry reshard the embedded batch)
    in_layers = [c for c in case["collectives"] if c["kind"] == "all-to-all" and c["count"] > c["ops"]]
    assert not in_layers


def _windowed(case: dict[str, Any], group: str, shard: float, loop: str) -> int:
    """Permutes of a collective matmul's loop (XLA's windowed einsum: an all-gather `ag` or a reduce-scatter `rs`
    fused into the matmul, one shard a step) that move shards of this size over this axis group."""
    return sum(
        c["count"]
        for c in case["collectives"]
        if c["kind"] == "collective-permute"
        and c["group"] == group
        and f"windowed_dot_general_body_{loop}" in c.get("loop", "")
        and _near(c["payload_bytes"], shard)
    )


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_routed_expert_weights_are_gathered_where_the_compiler_gathers_them(
    case: dict[str, Any], tmp_path: Path
) -> None:
    """A device's experts over fsdp, forward and backward; on the capacity path with expert parallelism every
    expert over the expert axis as well. Where the compiler gathers them inside a collective matmul (the capacity
    path's forward without expert parallelism) the plan has the gather, not the loop's bytes."""
    est = _estimate(case, tmp_path)
    full, local = _matrix_bytes(est)
    f_deg = est.layout.degree("fsdp", "fsdp_transpose")
    for axis, size, deg in (("fsdp", local, f_deg), ("expert", full, est.layout.degree("expert"))):
        c_bytes, c_count = _compiled(case, "all-gather", axis, size)
        a_bytes, _ = _asap(est, "all-gather", axis, "routed expert weights (forward)")
        b_bytes, _ = _asap(est, "all-gather", axis, "routed expert weights (backward)")
        if _windowed(case, axis, size / deg, "ag"):
            assert a_bytes > 0 and _near(b_bytes, c_bytes), (axis, b_bytes, c_bytes)
        else:
            assert _near(a_bytes + b_bytes, c_bytes), (axis, a_bytes + b_bytes, c_bytes, c_count)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_routed_expert_gradients_are_reduced_as_compiled(case: dict[str, Any], tmp_path: Path) -> None:
    """In bf16: all-reduced whole over fsdp on the dropless path without expert parallelism (the shard_map's
    replicated weights), reduce-scattered otherwise (over the expert axis too where every expert was gathered
    there; inside the dW matmul's collective-matmul loop on the capacity path without expert parallelism)."""
    est = _estimate(case, tmp_path)
    full, local = _matrix_bytes(est)
    f_deg = est.layout.degree("fsdp", "fsdp_transpose")
    seen = 0.0
    for kind in ("all-reduce", "reduce-scatter"):
        for axis in ("fsdp", "expert"):
            size = full if (kind == "all-reduce" or axis == "expert") else local
            c_bytes, _ = _compiled(case, kind, axis, size)
            a_bytes, _ = _asap(est, kind, axis, "routed expert gradients")
            if kind == "reduce-scatter" and axis == "fsdp" and _windowed(case, axis, size / f_deg, "rs"):
                assert c_bytes == 0 and _near(a_bytes, size * est.shape.routed_layers * (est.shape.n_mlp_in + 1))
                seen += a_bytes
                continue
            assert _near(a_bytes, c_bytes), (kind, axis, a_bytes, c_bytes)
            seen += c_bytes
    assert seen > 0 or f_deg == 1


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_dense_weights_are_gathered_over_the_axes_the_compiler_uses(case: dict[str, Any], tmp_path: Path) -> None:
    """MaxText's `embed` axes include the expert axis: the attention and the other dense weights are gathered over
    fsdp x expert, or over expert alone when fsdp is 1 (a plan over fsdp alone had none)."""
    est = _estimate(case, tmp_path)
    full, local = _matrix_bytes(est)
    routed = [full, local]
    dense_groups = {
        c["group"]
        for c in case["collectives"]
        if c["kind"] == "all-gather"
        and c["payload_bytes"] >= MiB
        and "shape" in c
        and not any(_near(c["payload_bytes"], r) for r in routed)
        and c["count"] > 1  # inside the layer scan (the embedding's gathers run once)
    }
    asap = {c.axis for c in est.time.comm.collectives if c.purpose == "weights (forward)"}
    assert dense_groups == asap


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_state_memory_is_the_compilers_arguments(case: dict[str, Any], tmp_path: Path) -> None:
    """Weights and optimizer state of every expert under the axes that shard them: the compiler's argument bytes
    (the batch is a few KiB). The rest of the memory (dispatch buffers, gathered experts) is memory.py's."""
    est = _estimate(case, tmp_path)
    c = est.memory.components
    assert _near(c["weights"] + c["optimizer"], case["memory"]["argument"], 0.005)


MAXTEXT_PYTHON = os.environ.get("ASAP_MAXTEXT_PYTHON")


@pytest.mark.tpu
@pytest.mark.skipif(not MAXTEXT_PYTHON, reason="set ASAP_MAXTEXT_PYTHON to a Python 3.12 with maxtext[tpu]")
def test_compiling_again_gives_the_golden_facts(tmp_path: Path) -> None:
    """MaxText's train_compile of the smallest expert-parallel case, read as the bench reads it; with the golden's
    versions the collectives must be the same, with others their structure (kinds, axes, counts)."""
    sys.path.insert(0, str(ROOT / "bench"))
    import moe_vs_compiler as bench

    case = next(c for c in bench.CASES if c.name == "mixtral-8x7b 2L v5p-16 fsdp4 x expert2 dropless")
    golden = next(c for c in CASES if c["name"] == case.name)
    bench.CACHE = tmp_path  # a cold compile, away from the bench's cache
    assert MAXTEXT_PYTHON is not None
    r, dest = bench.compile_case(case, MAXTEXT_PYTHON, None, 1800)
    assert r is not None and r.status == "ok", r and r.message
    hlo, _, _ = bench.load_hlo(dest)
    assert hlo is not None
    colls = bench.read_collectives(hlo, bench.mesh_axes(case))
    got = bench._merged([c.to_json() for c in colls if c.v_bytes * c.count >= MiB])
    vers = bench.verify_maxtext.versions(MAXTEXT_PYTHON)

    def shape_of(cs: list[dict[str, Any]]) -> set[tuple[str, str, int]]:
        return {(c["kind"], c["group"], c["count"]) for c in cs if c["kind"] != "collective-permute"}

    assert shape_of(got) == shape_of(golden["collectives"])
    if all(vers.get(k) == GOLDEN["versions"][k] for k in ("maxtext", "jax", "libtpu")):
        key = ("kind", "group", "payload_bytes", "count", "ops")
        assert sorted(tuple(c[k] for k in key) for c in got) == sorted(
            tuple(c[k] for k in key) for c in golden["collectives"]
        )
