"""Memory per chip (server/perf/memory.py): the loss' buffers at large vocabularies (logits, the gathered output
head and its gradient, vocabulary tiling, the iota embedding's one-hot), context parallelism's gathered keys and
values, which remat-named tensors the backward keeps, Gemma 2's pairs (one scan carry a pair, both layers' working sets
in the backward), a tied table's head-gradient accumulators, all-reduce threshold and row-major update copies, and the
two phases of the peak; hand-computed bytes for a small shape and properties."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from server.config import resolve as config_mod
from server.config.mesh import check
from server.config.slices import parse_slice
from server.perf import memory
from server.perf import remat as remat_mod
from server.perf.arith import BytesPerParam, Shape, params
from server.perf.estimate import estimate
from server.perf.layout import Layout
from server.perf.remat import POLICIES

D, H, KV, HD, F, L, V = 256, 4, 2, 128, 1024, 2, 1024  # widths in whole 128-lane tile rows (memory.lanes)
SMALL = Shape(name="small", emb=D, q_heads=H, kv_heads=KV, head_dim=HD, mlp=F, layers=L, vocab=V)
BPP = BytesPerParam(4, 4, 8)  # MaxText's defaults: fp32 weights, fp32 gradients, two fp32 Adam moments


def lay(sl: str = "v5e-16", **ici: int) -> Layout:
    return Layout(parse_slice(sl), dict(ici), {}, None)


def mem(
    layout: Layout,
    pdbs: float = 2,
    seq: int = 128,
    remat: str = "full",
    tiles: int = 1,
    iota: bool = False,
    s: Shape = SMALL,
) -> memory.Memory:
    return memory.memory(s, params(s), BPP, layout, pdbs, seq, POLICIES[remat], tiles, iota_embed=iota)


TOKENS = 2 * 128
LOGIT_BUF = TOKENS * V * 2  # one bf16 [tokens, vocab]
HEAD = D * V * 2  # the output head gathered in bf16
HIDDEN = TOKENS * D * (4 + 2)  # the final hidden state in float32 and bf16


def test_loss_on_the_reduce_scatter_path_by_hand() -> None:
    # fsdp 4: 64 rows of the head's embed dimension a device, so its gradient is reduce-scattered
    m = mem(lay("v5e-4", fsdp=4))
    c = m.components
    assert c["logits"] == 2 * LOGIT_BUF + HIDDEN == 1_441_792  # the logits and one more of their shape
    assert c["output_head"] == HEAD == 524_288
    assert c["embedding_one_hot"] == 0
    # the second logits-sized buffer is still live in the backward pass
    per_layer = params(SMALL).per_layer()
    working = TOKENS * memory.all_dims(SMALL) * 2 + per_layer * 2
    assert c["temporaries"] == pytest.approx(working + LOGIT_BUF)
    assert c["activations"] == L * TOKENS * D * 2  # full remat: each layer's bf16 input
    # with data parallelism the head's gradient is reduced right after the loss: nothing carried
    assert mem(lay(fsdp=4, data=4)).components["temporaries"] == pytest.approx(working)


def test_loss_on_the_all_reduce_path_by_hand() -> None:
    # fsdp 16: 16 rows a device (< HEAD_ALLREDUCE_ROWS): one logits buffer, the head and its whole bf16 gradient
    m = mem(lay(fsdp=16))
    c = m.components
    assert D / 16 < memory.HEAD_ALLREDUCE_ROWS
    assert c["logits"] == LOGIT_BUF + HIDDEN
    assert c["output_head"] == c["output_head_gradient"] == HEAD
    per_layer = params(SMALL).per_layer()
    working = TOKENS * memory.all_dims(SMALL) * 2 + per_layer * 2
    assert c["temporaries"] == pytest.approx(working)
    # with host offload the forward logits stay live through the backward (the head's gradient dot, which recomputes
    # their gradient, scheduled after the layers' backward)
    assert OFFLOAD_IO is not None
    offloaded = memory.memory(SMALL, params(SMALL), BPP, lay(fsdp=16), 2, 128, OFFLOAD_IO).components
    assert offloaded["temporaries"] == pytest.approx(working + LOGIT_BUF)
    # ... unless data parallelism reduces the head's gradient right after the loss
    with_data = memory.memory(SMALL, params(SMALL), BPP, lay(fsdp=4, data=4), 2, 128, OFFLOAD_IO).components
    assert with_data["temporaries"] == pytest.approx(working)


def test_iota_embedding_keeps_its_one_hot_on_the_all_reduce_path_only() -> None:
    assert mem(lay(fsdp=16), iota=True).components["embedding_one_hot"] == TOKENS * V  # pred, one byte
    assert mem(lay(fsdp=4, data=4), iota=True).components["embedding_one_hot"] == 0


def test_tensor_parallelism_splits_the_head_not_the_logits() -> None:
    c = mem(lay(fsdp=4, tensor=4)).components
    assert c["output_head"] == HEAD / 4
    assert c["logits"] == 2 * LOGIT_BUF + HIDDEN  # pdbs x tp sequences over vocab / tp columns


def test_context_parallelism_gathers_keys_and_values_of_the_whole_sequence() -> None:
    without = mem(lay(fsdp=16)).components["temporaries"]
    with_cp = mem(lay(fsdp=4, context=4)).components["temporaries"]  # the embed dimension split 16 ways alike
    kv = 2 * KV * HD
    assert with_cp == pytest.approx(without + TOKENS * 4 * kv * (2 + 4))


def test_vocab_tiling_by_hand() -> None:
    c = mem(lay("v5e-4", fsdp=4), tiles=4).components
    assert c["logits"] == 2 * LOGIT_BUF / 4 + HIDDEN
    # the tiled loss' custom VJP finishes the head's gradient before the layers' backward
    per_layer = params(SMALL).per_layer()
    assert c["temporaries"] == pytest.approx(TOKENS * memory.all_dims(SMALL) * 2 + per_layer * 2)


def test_peak_is_the_larger_phase() -> None:
    for layout in (lay("v5e-4", fsdp=4), lay(fsdp=4, data=4), lay(fsdp=16)):
        for pdbs in (1, 64):
            m = mem(layout, pdbs=pdbs)
            c = m.components
            loss = sum(c[k] for k in memory.LOSS_PHASE)
            backward = sum(c[k] for k in memory.BACKWARD_PHASE)
            phases = memory.LOSS_PHASE + memory.OFFLOAD_PHASE + memory.BACKWARD_PHASE
            always = sum(v for k, v in c.items() if k not in phases)
            assert c["offload_relayout"] == 0
            assert m.total == pytest.approx(always + max(loss, backward))
    # the gradients are not live at the loss: a config whose loss is the peak does not pay for them
    big_vocab = dataclasses.replace(SMALL, vocab=64_000)
    m = mem(lay(fsdp=4, data=4), s=big_vocab)
    c = m.components
    assert sum(c[k] for k in memory.LOSS_PHASE) > sum(c[k] for k in memory.BACKWARD_PHASE)
    state = c["weights"] + c["weight_casts"] + c["optimizer"] + c["activations"]
    assert m.total == pytest.approx(state + c["logits"] + c["output_head"])


def test_more_vocab_tiles_never_raise_logits_memory() -> None:
    for layout in (lay("v5e-4", fsdp=4), lay(fsdp=4, data=4), lay(fsdp=16), lay(fsdp=4, tensor=4)):
        for pdbs in (1, 8):
            runs = [mem(layout, pdbs=pdbs, tiles=t) for t in (1, 2, 4, 8, 16)]
            logits = [r.components["logits"] for r in runs]
            totals = [r.total for r in runs]
            assert logits == sorted(logits, reverse=True)
            assert totals == sorted(totals, reverse=True)


@pytest.mark.parametrize("layout", [lay("v5e-4", fsdp=4), lay(fsdp=16), lay(fsdp=4, context=4)])
def test_token_terms_scale_with_pdbs_times_seq(layout: Layout) -> None:
    base = mem(layout, pdbs=2, seq=128, iota=True).components
    double = mem(layout, pdbs=4, seq=128, iota=True).components
    same_tokens = mem(layout, pdbs=1, seq=256, iota=True).components
    for k in ("logits", "embedding_one_hot", "activations"):
        assert double[k] == pytest.approx(2 * base[k])
        assert same_tokens[k] == pytest.approx(base[k])
    assert double["output_head"] == base["output_head"]  # weights, not tokens


def test_mlp_output_is_kept_only_where_the_backward_needs_it() -> None:
    # `minimal` names mlpwo; a dense block's MLP output only feeds the residual sum, so it is never kept
    dense = memory.kept_dims(SMALL, POLICIES["minimal"])
    assert dense == D + H * HD + 2 * KV * HD + D + 2 * F  # input, q, k, v, out_proj, mlpwi
    moe = dataclasses.replace(SMALL, experts=4, experts_per_tok=2, moe_mlp=F)
    assert memory.mlpwo_is_residual(moe)
    # MoE keeps every routed copy's expert output, [tokens x top_k, emb] (moe.py names the grouped matmul's output)
    assert memory.kept_dims(moe, POLICIES["minimal"]) == D + H * HD + 2 * KV * HD + D + 2 * 2 * F + 2 * D
    assert not memory.mlpwo_is_residual(SMALL)


MOE = dataclasses.replace(SMALL, experts=8, experts_per_tok=2, moe_mlp=512, moe_tile=512)


def test_moe_expert_parallel_dispatch_by_hand() -> None:
    # expert 4 of 8 experts, top 2: the receive buffer holds min(4, 8 / 2) = 4 times the balanced rows
    tokens = TOKENS
    rows = tokens * 2 * 4
    mlp = 3 * 512  # wi_0, wi_1 and their product, per row
    expect = (rows * (memory.DISPATCH_BUFFERS * D + mlp) - tokens * 2 * mlp) * 2
    assert memory.moe_dispatch(MOE, lay(fsdp=4, expert=4), tokens) == expect
    # a top-k larger than the local experts caps it: 8 experts top 4 on expert 8 -> min(8, 2) = 2
    top4 = dataclasses.replace(MOE, experts_per_tok=4)
    rows4 = tokens * 4 * 2
    assert (
        memory.moe_dispatch(top4, lay(fsdp=2, expert=8), tokens)
        == (rows4 * (memory.DISPATCH_BUFFERS * D + mlp) - tokens * 4 * mlp) * 2
    )
    # no expert parallelism: the tokens only sorted, three emb-wide copies at the routed rows (tokens x top_k)
    assert memory.SORTED_BUFFERS == 3
    assert memory.moe_dispatch(MOE, lay(fsdp=16), tokens) == tokens * 2 * 3 * D * 2 == 786_432
    # the dense (capacity) path: no ragged buffers
    assert memory.moe_dispatch(dataclasses.replace(MOE, moe_tile=0), lay(fsdp=4, expert=4), tokens) == 0


def test_moe_dense_path_gathers_every_expert() -> None:
    dropless = mem(lay(fsdp=4, expert=4), s=MOE).components["temporaries"]
    dense = mem(lay(fsdp=4, expert=4), s=dataclasses.replace(MOE, moe_tile=0)).components["temporaries"]
    routed = params(MOE).routed  # expert parallelism splits the routed experts only
    assert 0 < routed < params(MOE).per_layer()
    dispatch = memory.moe_dispatch(MOE, lay(fsdp=4, expert=4), TOKENS)
    combine = TOKENS * 2 * D * 4  # the dropless combine's f32 [tokens, top_k, emb]
    assert dense - (dropless - dispatch - combine) == pytest.approx(routed * 2 - routed * 2 / 4)
    # unless the dispatch stays expert-parallel (moe_dispatch_no_expert_sharding)
    kept_split = memory.memory(
        dataclasses.replace(MOE, moe_tile=0),
        params(MOE),
        BPP,
        lay(fsdp=4, expert=4),
        2,
        128,
        POLICIES["full"],
        moe_dispatch_expert_parallel=True,
    )
    assert kept_split.components["temporaries"] == pytest.approx(dropless - dispatch - combine)


def test_moe_combine_in_float32_by_hand() -> None:
    """The dropless combine weighs each token's top_k expert outputs in float32 unless float32_weight_sum is off."""
    base = mem(lay(fsdp=16), s=MOE).components["temporaries"]
    bf16 = mem(lay(fsdp=16), s=dataclasses.replace(MOE, moe_combine_bytes=2)).components["temporaries"]
    assert base - bf16 == TOKENS * 2 * D * (4 - 2) == 262_144


def gpt_oss_blocks_of_two() -> Any:
    """A 4-layer gpt-oss-style MoE that MaxText scans two layers a step (inhomogeneous_layer_cycle_interval 2)."""
    from server.perf.architecture import build
    from server.perf.arith import shape_of

    keys: dict[str, Any] = {
        "decoder_block": "gpt_oss",
        "base_emb_dim": D,
        "base_num_query_heads": H,
        "base_num_kv_heads": KV,
        "head_dim": HD,
        "base_mlp_dim": F,
        "base_moe_mlp_dim": 512,
        "base_num_decoder_layers": 4,
        "vocab_size": V,
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "inhomogeneous_layer_cycle_interval": 2,
        "mlp_activations": ["sigmoid", "linear"],
        "sliding_window_size": 64,
    }
    return dataclasses.replace(shape_of(build(keys.get)), moe_tile=512)


def test_scanned_blocks_hold_every_layers_working_set_by_hand() -> None:
    """MaxText scans gpt-oss two layers a step (inhomogeneous_layer_cycle_interval): the backward's body holds both
    layers' tensors, routed rows and gathered experts, and the scan keeps one input a block."""
    s = gpt_oss_blocks_of_two()
    assert s.arch is not None and s.arch.scan_block == 2
    assert (s.layers, memory.scan_iterations(s)) == (4, 2)
    c = mem(lay(fsdp=16), s=s).components
    assert c["activations"] == 2 * TOKENS * D * 2  # full remat: one input a block
    p = params(s)
    gathered = (p.per_layer() - p.routed + p.routed * s.layers / s.routed_layers) * 2
    per_layer = TOKENS * memory.all_dims(s) * 2 + memory.moe_dispatch(s, lay(fsdp=16), TOKENS)
    combine = TOKENS * 2 * D * 4
    assert c["temporaries"] == pytest.approx(2 * (per_layer + gathered) + combine)


def test_block_recomputed_a_layer_at_a_time_where_every_layer_input_is_saved_by_hand() -> None:
    """Offloading each layer's input (custom `decoder_layer_input: offload`) saves it inside a scanned block too, so
    the backward recomputes each layer from its own input: every layer's emb-wide and attention tensors and gathered
    weights, one layer's MLP intermediates and routed rows (Llama 4 Scout's blocks of four)."""
    s = gpt_oss_blocks_of_two()
    offload = remat_mod.resolve("custom", {"decoder_layer_input": "offload"})
    assert offload is not None and memory.scan_iterations(s) == 2
    c = memory.memory(s, params(s), BPP, lay(fsdp=16), 2, 128, offload).components
    p = params(s)
    gathered = 2 * (p.per_layer() - p.routed + p.routed * s.layers / s.routed_layers) * 2  # both layers'
    attention = 2 * (3 * D + 2 * H * HD + 2 * KV * HD)  # both layers': emb-wide, q, k, v and their gradients
    mlp = 2 * 3 * 2 * s.moe_mlp  # one layer's: wi_0, wi_1, their product and their gradients, top 2
    assert memory.attention_dims(s) + memory.mlp_dims(s) == memory.all_dims(s)
    assert memory.attention_dims(s) * 2 == attention and memory.mlp_dims(s) == mlp
    dispatch = memory.moe_dispatch(s, lay(fsdp=16), TOKENS)  # one layer's routed rows
    combine = TOKENS * 2 * D * 4
    assert c["activations"] == 0
    carried = TOKENS * V * 2  # 16 rows of the head a device, offloading: the forward logits live through the backward
    assert c["temporaries"] == pytest.approx(TOKENS * (attention + mlp) * 2 + gathered + dispatch + combine + carried)
    # only the block's input saved (remat full): the chain is recomputed first, every layer's working set at once
    full = mem(lay(fsdp=16), s=s).components["temporaries"]
    assert full - (c["temporaries"] - carried) == pytest.approx(TOKENS * mlp * 2 + dispatch)


def test_a_vocabulary_laid_out_sequence_minor_carries_the_head_gradient_not_the_logits() -> None:
    """A vocabulary that is not a multiple of 128 lanes (Llama 4's 202048) is laid out sequence-minor and the logits'
    gradient consumed at the loss: the reduced head gradient lives through the backward, not a logits-sized buffer."""
    assert OFFLOAD_IO is not None
    aligned = memory.memory(SMALL, params(SMALL), BPP, lay(fsdp=16), 2, 128, OFFLOAD_IO).components
    odd = dataclasses.replace(SMALL, vocab=1000)
    c = memory.memory(odd, params(odd), BPP, lay(fsdp=16), 2, 128, OFFLOAD_IO).components
    assert aligned["output_head_carried"] == 0
    assert aligned["temporaries"] - c["temporaries"] == pytest.approx(TOKENS * V * 2)  # its logits, carried
    assert c["output_head_carried"] == D * 1000 * 2  # the head's gradient, bf16 [emb, vocab]
    assert c["logits"] == TOKENS * 1000 * 2 + HIDDEN  # the loss itself as before (the all-reduce path: one buffer)


def test_tile_lanes_pad_activations_and_state_by_hand() -> None:
    """The TPU stores an array in (8, 128) tiles: an activation's minor (hidden) width takes whole 128-lane rows; a
    weight is laid out minor in its least padded dimension (gpt-oss-20b: emb 2880 in 2944 lanes, head_dim 64 in 128)."""
    assert (memory.lanes(2880), memory.lanes(64), memory.lanes(4096), memory.lanes(1)) == (2944, 128, 4096, 128)
    assert memory.least_padded(180, 2880) == 2944 / 2880  # the experts: minor in their width, not emb / fsdp
    assert memory.least_padded(180, 64, 64) == 256 / 180  # attention: minor in emb / fsdp, not head_dim 64
    assert memory.least_padded(16, 32, 128) == 1.0  # llama3.1-8b at fsdp 256: head_dim minor, nothing padded
    odd = dataclasses.replace(SMALL, emb=192, head_dim=64, mlp=320)  # 256, 128 and 384 lanes
    assert memory.tensor_dims(odd, frozenset({"decoder_layer_input", "query_proj", "mlpwi"})) == (
        256 + H * 128 + 2 * 384
    )
    assert memory.all_dims(odd) == 3 * 256 + 2 * H * 128 + 2 * KV * 128 + 2 * 3 * 384
    # the state: fsdp 4 leaves 48 of emb a device; attention stays minor in head_dim 64 (2x) or its heads (4: 32x)
    # unless emb / fsdp pads less (48 in 128: 2.67x), so 2x; the MLP in its 320 (384 lanes); the tables in their
    # vocabulary of 1024, unpadded
    p = params(odd)
    stored = L * (p.attention * 2 + p.mlp * 384 / 320 + p.norms) + (p.embedding + p.logits)
    assert memory.padded_params(odd, p, 4, 1) == pytest.approx(stored)
    c = mem(lay("v5e-4", fsdp=4), s=odd).components
    assert c["weights"] == pytest.approx(stored * 4 / 4)
    assert c["optimizer"] == pytest.approx(stored * 8 / 4)
    assert c["gradients"] == pytest.approx(p.total(L) * 4 / 4)  # the backward's layouts: not padded so
    # nothing padded where a dimension of each weight is a multiple of 128 (the table minor in emb / fsdp, 128)
    assert memory.padded_params(SMALL, params(SMALL), 2, 1) == params(SMALL).total(L)


def test_logits_not_carried_through_the_backward_where_they_would_not_fit() -> None:
    """A logits-sized buffer carried through the layers' backward is dropped where the step would not fit with it
    and fits clear of the undecided band without it (the compiler recomputes the logits or reduces the head's
    gradient right after the loss, carrying one head-sized buffer); nearer the limit it is kept, erring high."""
    big = dataclasses.replace(SMALL, vocab=16_384, emb=1024, mlp=8192)
    chip = lay("v5e-4", fsdp=4).slice.chip

    def on(hbm: float) -> memory.Memory:
        spec = dataclasses.replace(chip, hbm_bytes=int(hbm), compiler_hbm_bytes=None)
        degrees = (4, 1, 1, 1, 4, 1)
        return memory.memory_on(big, params(big), BPP, spec, degrees, 16, 512, POLICIES["full"])

    roomy = on(1e15)
    c = roomy.components
    logit_buf = 16 * 512 * 16_384 * 2
    head = 1024 * 16_384 * 2
    assert c["output_head_carried"] == 0 and not roomy.uncertain  # carried where it fits
    backward = c["gradients"] + c["temporaries"]
    loss = c["logits"] + c["output_head"]
    assert backward > loss  # the carried logits make the backward the peak
    rest = roomy.total - backward
    without = rest + max(loss, backward - logit_buf + head)
    usable = 1 - memory.RUNTIME_RESERVE
    assert without <= memory.TIGHT_BAND[0] * (roomy.total - 1)  # the premise of the next
    tight = on((roomy.total - 1) / usable)  # just over the HBM with them
    t = tight.components
    assert t["temporaries"] == pytest.approx(c["temporaries"] - logit_buf)
    assert t["output_head_carried"] == head
    assert tight.total == pytest.approx(without) and tight.fits
    assert [k for k, _ in tight.uncertain] == ["output_head_carried"]
    # without them the step would be within the band: kept (the estimate errs high)
    near = on(without / memory.TIGHT_BAND[0] / usable * 0.99)
    assert near.components["output_head_carried"] == 0 and near.total == pytest.approx(roomy.total)
    assert not near.fits


def test_expert_parallelism_never_raises_expert_weight_memory() -> None:
    for ep in (1, 2, 4, 8):
        fsdp = 16 // ep
        c = mem(lay(fsdp=fsdp, expert=ep), s=MOE).components
        assert c["weights"] == mem(lay(fsdp=16), s=MOE).components["weights"]  # the same 16-way sharding
    weights = [mem(lay(fsdp=2, expert=e, data=8 // e), s=MOE).components["weights"] for e in (1, 2, 4, 8)]
    assert weights == sorted(weights, reverse=True)


GOLDEN = Path(__file__).parent / "data" / "verify" / "memory_compiled.json"


def _golden_cases() -> list[dict[str, Any]]:
    return list(json.loads(GOLDEN.read_text())["cases"]) if GOLDEN.exists() else []


# Cases the estimate misses, each with what the compiler showed (bench/memory_vs_compiler.py --details): strict, so a
# fix that brings one within the targets fails here until it is taken off the list.
KNOWN_MISSES = {
    "llama4-17b-16e v5p-256 fsdp128 pdbs8 seq8192 offload input dropless (llama4_scout_dropless_v5p_256)": (
        "-15.8%, the verdict right: the estimate counts what the compiler holds at once at its peak, the loss (two "
        "bf16[8,8192,202048] and the gathered head, 54.7 GiB of temp), and the compiler's heap is 66.4 GiB: it lays "
        "the two logits buffers out above 17 GiB of the layers' working region. Where it must fit (pdbs 12, 93.3 of "
        "95.7 GiB) it leaves less room (7.2 GiB) and the estimate is -3.9%"
    ),
}


def _golden_params() -> list[Any]:
    return [
        pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=KNOWN_MISSES[c["name"]]))
        if c["name"] in KNOWN_MISSES
        else c
        for c in _golden_cases()
    ]


@pytest.mark.parametrize("case", _golden_params(), ids=lambda c: str(c["name"]))
def test_estimate_against_the_tpu_compiler(case: dict[str, Any], tmp_path: Path) -> None:
    """The TPU compiler's per-chip memory of MaxText's own train step for bench/memory_vs_compiler.py's cases
    (tests/data/verify/memory_compiled.json, written by the bench's --write-golden with maxtext 0.2.5, jax 0.12.0.1,
    libtpu 0.0.52; `cli`: MaxText's command-line keys of what was compiled, e.g. a reduced depth): the same verdict
    everywhere; where it fits, never more than 5% under the compiler and at most 10% over it."""
    path = tmp_path / "case.yml"
    path.write_text(case["yaml"])
    cfg = config_mod.with_overrides(config_mod.load(path), case.get("cli", {}))
    m = estimate(cfg, check(cfg)).memory
    compiled = float(case["memory_per_chip_bytes"])
    assert m.fits == case["fits"], (m.total, compiled)
    if case["fits"]:
        assert 0.95 * compiled <= m.total <= 1.10 * compiled, (m.total / compiled, m.components)


MAXTEXT_PYTHON = os.environ.get("ASAP_MAXTEXT_PYTHON")


@pytest.mark.tpu
@pytest.mark.skipif(
    not MAXTEXT_PYTHON, reason="set ASAP_MAXTEXT_PYTHON to a Python 3.12 with maxtext[tpu] (make maxtext-env)"
)
def test_offload_estimate_is_at_least_maxtexts_compile(tmp_path: Path) -> None:
    """Host offload against the TPU compiler, compiled now: MaxText's own train step of a custom remat policy that
    offloads each layer's input and its q/k/v/out projections (bench/memory_vs_compiler.py's OFFLOAD_TEST_CASE,
    llama3.1-8b at 4 layers on v5p-8), cold. ASAP's per-chip memory is never under the compiler's, and at most 10%
    over it."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import memory_vs_compiler as bench

    case = next(c for c in bench.CASES if c.name == bench.OFFLOAD_TEST_CASE)
    assert case.extra["query_proj"] == "offload" and case.remat == "custom"
    bench.CACHE = tmp_path  # its config and HLO here, and no cached compile
    assert MAXTEXT_PYTHON is not None
    out = bench.maxtext_outcome(case, MAXTEXT_PYTHON, None, 1800)
    assert out.status == "ok" and out.compiled is not None and out.estimate is not None, out.message
    assert not out.cached
    compiled, estimated = out.compiled.memory_per_chip_bytes, float(out.estimate["memory_per_chip_bytes"])
    assert compiled <= estimated <= 1.10 * compiled, (estimated / compiled, out.estimate["components"])


# A small Gemma 2 (MaxText's gemma2 decoder block: each MaxText layer a local and a global attention layer, post
# norms, a tied table): 2 pairs, so 4 decoder layers and 2 iterations of the layer scan.
GEMMA2_KEYS: dict[str, Any] = {
    "decoder_block": "gemma2",
    "global_parameter_scale": 1,
    "base_emb_dim": D,
    "base_num_query_heads": H,
    "base_num_kv_heads": KV,
    "head_dim": HD,
    "base_mlp_dim": F,
    "base_num_decoder_layers": 2,
    "vocab_size": 1024,
    "mlp_activations": ["gelu", "linear"],
    "logits_via_embedding": True,
    "sliding_window_size": 64,
    "use_post_attn_norm": True,
    "use_post_ffw_norm": True,
    "num_experts": 1,
    "num_experts_per_tok": 1,
}


def gemma2(**keys: Any) -> Shape:
    from server.perf.architecture import build
    from server.perf.arith import shape_of

    cfg = {**GEMMA2_KEYS, **keys}
    return shape_of(build(cfg.get))


def test_gemma2_pairs_keep_one_input_a_scan_iteration_by_hand() -> None:
    s = gemma2()
    assert (s.layers, memory.scan_iterations(s)) == (4, 2)
    assert memory.scan_iterations(SMALL) == L  # one decoder layer an iteration elsewhere
    # full remat: the scan's carry, one bf16 [tokens, emb] a pair
    assert mem(lay("v5e-4", fsdp=4), s=s).components["activations"] == 2 * TOKENS * D * 2
    # minimal: the carry a pair, the named matmul outputs a layer (mlpwo too: a post-FFN norm reads it)
    named = H * HD + 2 * KV * HD + D + 2 * F + D
    assert mem(lay("v5e-4", fsdp=4), s=s, remat="minimal").components["activations"] == (
        2 * TOKENS * D * 2 + 4 * TOKENS * named * 2
    )


def test_gemma2_backward_holds_a_pair_of_working_sets_by_hand() -> None:
    s = gemma2()
    c = mem(lay("v5e-4", fsdp=4), s=s).components
    per_layer = params(s).per_layer()
    pair = 2 * TOKENS * memory.all_dims(s) * 2  # both layers' tensors at once
    logit_buf = TOKENS * 1024 * 2  # carried into the backward: the head gradient is unrolled over 4 devices
    assert c["temporaries"] == pytest.approx(pair + per_layer * 2 + logit_buf)


def test_tied_head_gradient_in_a_loop_by_hand() -> None:
    # fsdp 8, more than TIED_HEAD_LOOP_DEVICES; emb 1024 over 8 = 128 rows of the table a device (a whole lane row:
    # stored row-major, so no relayout)
    s = gemma2(base_emb_dim=1024)
    c = mem(lay("v5e-8", fsdp=8), s=s).components
    assert c["head_gradient"] == 2 * 1024 * (1024 / 8) * 2 == 524_288  # two bf16 [vocab, emb / fsdp] accumulators
    assert c["embedding_relayout"] == 0
    per_layer = params(s).per_layer()
    pair = 2 * TOKENS * memory.all_dims(s) * 2
    assert c["temporaries"] == pytest.approx(pair + per_layer * 2)  # no logits carried into the backward
    assert "head_gradient" in memory.LOSS_PHASE
    # over 4 devices the compiler unrolls it: no accumulators at the loss, the logits carried
    c4 = mem(lay("v5e-4", fsdp=4), s=s).components
    assert c4["head_gradient"] == 0
    assert c4["temporaries"] == pytest.approx(pair + per_layer * 2 + TOKENS * 1024 * 2)
    # an untied head keeps the logits' gradient through the backward as before
    untied = gemma2(base_emb_dim=1024, logits_via_embedding=False)
    assert mem(lay("v5e-8", fsdp=8), s=untied).components["head_gradient"] == 0


def test_tied_table_relayout_by_hand() -> None:
    # emb 1792 over fsdp 8 = 224 rows: stored vocab-minor (224 is not a multiple of 128), its row-major tiles 7/8
    # full, so the update copies the float32 table and both Adam moments row-major: 12 bytes an element
    s = gemma2(base_emb_dim=1792, base_num_query_heads=8)
    assert memory.row_major_fill(224) == 7 / 8
    c = mem(lay("v5e-8", fsdp=8), s=s).components
    assert c["embedding_relayout"] == 1024 * 224 * (4 + 8) == 2_752_512
    assert c["head_gradient"] == 2 * 1024 * 224 * 2
    # 288 rows fill 3/4 of three lane rows: the bf16 gradient is transposed instead
    assert memory.row_major_fill(288) == 0.75
    assert mem(lay("v5e-8", fsdp=8), s=gemma2(base_emb_dim=2304)).components["embedding_relayout"] == 0
    # a vocabulary that is not a multiple of 128 cannot be stored vocab-minor
    odd = gemma2(base_emb_dim=1792, base_num_query_heads=8, vocab_size=1000)
    assert mem(lay("v5e-8", fsdp=8), s=odd).components["embedding_relayout"] == 0
    # an untied table has no head gradient to add to its update
    untied = gemma2(base_emb_dim=1792, base_num_query_heads=8, logits_via_embedding=False)
    assert mem(lay("v5e-8", fsdp=8), s=untied).components["embedding_relayout"] == 0


def test_tied_table_takes_the_all_reduce_path_below_64_rows() -> None:
    # emb 448 over fsdp 8 = 56 rows: an untied head would reduce-scatter (>= 32 rows), a tied table all-reduces
    s = gemma2(base_emb_dim=448)
    c = mem(lay("v5e-8", fsdp=8), s=s).components
    head = 448 * 1024 * 2
    assert c["output_head"] == c["output_head_gradient"] == head  # the gathered table and its whole bf16 gradient
    # one logits buffer and the final hidden state, its 448 wide rows in 512 lanes
    assert c["logits"] == TOKENS * 1024 * 2 + TOKENS * 512 * 6
    assert c["head_gradient"] == 0 and c["embedding_relayout"] == 0
    untied = gemma2(base_emb_dim=448, logits_via_embedding=False)
    untied_c = mem(lay("v5e-8", fsdp=8), s=untied).components
    assert untied_c["output_head"] == head and untied_c["output_head_gradient"] == 0


def test_usable_hbm_is_what_the_compiler_states_for_each_generation():
    """The slice table's compiler_hbm_bytes is the limit MaxText's compiles reported (the golden file's
    hbm_limit_bytes), and the memory verdicts compare with it."""
    import json
    from pathlib import Path

    from server.config.slices import parse_slice
    from server.services.analysis import analyze

    golden = json.loads((Path(__file__).parent / "data" / "verify" / "memory_compiled.json").read_text())
    seen = set()
    for case in golden["cases"]:
        if case["hbm_limit_bytes"] is None:
            continue
        an = analyze(None, case["yaml"])
        sl = parse_slice(str(an.config.get("compile_topology")))
        assert sl.chip.compiler_hbm_bytes == pytest.approx(case["hbm_limit_bytes"], rel=1e-6), case["name"]
        assert an.estimate is not None and an.estimate.memory.usable == sl.chip.compiler_hbm_bytes
        seen.add(sl.chip.generation)
    assert seen >= {"v5e", "v5p", "v6e", "tpu7x"}


# MaxText's custom remat policy: one key per tensor, 'offload' keeps it in host memory
OFFLOAD_IO = remat_mod.resolve("custom", {"decoder_layer_input": "offload", "out_proj": "offload"})
OFFLOAD_QKV = remat_mod.resolve("custom", {"query_proj": "offload", "key_proj": "offload", "value_proj": "offload"})


def test_offload_relayout_by_hand() -> None:
    """An offloaded emb-wide stack of the dense layers relaid through HBM: the whole stack, twice, live beside the
    loss' forward (the logits, the final hidden state, the gathered head), never with the head's gradient."""
    assert OFFLOAD_IO is not None and OFFLOAD_QKV is not None
    m = memory.memory(SMALL, params(SMALL), BPP, lay("v5e-4", fsdp=4), 2, 128, OFFLOAD_IO)
    c = m.components
    stack = L * TOKENS * D * 2  # [layers, tokens, emb] in bf16: 262,144 bytes
    assert c["offload_relayout"] == 2 * stack == 524_288
    assert c["activations"] == 0  # the layer input is offloaded: nothing kept on the device
    offload = c["logits"] + c["output_head"] + c["offload_relayout"]
    loss = c["logits"] + c["output_head"] + c["output_head_gradient"] + c["head_gradient"]
    backward = c["gradients"] + c["temporaries"]
    always = c["weights"] + c["weight_casts"] + c["optimizer"] + c["activations"] + c["embedding_relayout"]
    assert m.total == pytest.approx(always + max(loss, offload, backward))
    assert [k for k, _ in m.uncertain] == ["offload_relayout"]
    assert m.to_json()["uncertain"][0].startswith("offload_relayout (0.00 GiB): an offloaded layer-input")
    # the head-split q/k/v stacks are not relaid; nor are the stacks of MoE layers
    assert memory.offload_relayout(SMALL, OFFLOAD_QKV, TOKENS) == 0
    assert memory.offload_relayout(MOE, OFFLOAD_IO, TOKENS) == 0
    # DeepSeek's dense-first layers are: one dense layer of two
    dense_first = dataclasses.replace(MOE, moe_layers=1)
    assert memory.offload_relayout(dense_first, OFFLOAD_IO, TOKENS) == 2 * TOKENS * D * 2
    # the layer input alone is written and read in one layout (llama3.1-70b's recipe): nothing relaid
    only_input = remat_mod.resolve("custom", {"decoder_layer_input": "offload", "query_proj": "offload"})
    assert only_input is not None
    assert memory.offload_relayout(SMALL, only_input, TOKENS) == 0
    # a Gemma 2 pair stacks one layer input (two decoder layers, one scan iteration) and two out_proj outputs: the
    # larger stack counts
    assert memory.offload_relayout(gemma2(), OFFLOAD_IO, TOKENS) == 2 * 4 * TOKENS * D * 2
    # a device holds emb / tensor of each token (in whole 128-lane rows: 64 of emb take 128)
    assert memory.offload_relayout(SMALL, OFFLOAD_IO, TOKENS, tp=2) == 2 * stack / 2
    assert memory.offload_relayout(SMALL, OFFLOAD_IO, TOKENS, tp=4) == 2 * stack / 2


def test_hover_and_json_say_what_is_counted_as_an_upper_bound() -> None:
    """A config whose estimate counts components the compiler may not keep says so where the estimate is shown: the
    hover on compile_topology names each with its GiB, the JSON lists why, and being over the HBM only by them is
    'tight' (the estimate cannot decide), never 'does not fit'."""
    from server.presentation.explain import hover
    from server.services.analysis import analyze

    text = (
        "model_name: llama3.1-70b\ncompile_topology: v6e-256\nper_device_batch_size: 5\nmax_target_length: 8192\n"
        "ici_fsdp_parallelism: -1\nremat_policy: custom\ndecoder_layer_input: offload\nout_proj: offload\n"
    )
    an = analyze(None, text)
    assert an.estimate is not None
    m = an.estimate.memory
    relayout = m.components["offload_relayout"]
    # 80 dense layers' inputs, 5 x 8192 tokens of emb 8192 in bf16, twice
    assert relayout == 2 * 80 * 5 * 8192 * 8192 * 2
    assert m.total > m.usable and m.certain_total <= memory.TIGHT_BAND[1] * m.usable
    assert m.verdict == "tight" and not m.fits
    md = hover(an, 1, 3)
    assert md is not None
    line = next(ln for ln in md[0].splitlines() if ln.startswith("- HBM per chip"))
    assert "(tight); an upper bound: counts " in line and f"offload_relayout {relayout / 2**30:.1f} GiB" in line, line
    notes = an.estimate.to_json()["memory"]["uncertain"]
    assert any(n.startswith(f"offload_relayout ({relayout / 2**30:.2f} GiB): ") for n in notes), notes
