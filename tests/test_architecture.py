"""server/perf/architecture.py: each MaxText decoder block, counted by hand for a tiny model of each family.

Tiny dims used throughout unless a test says otherwise: emb D=8, query heads H=4, kv heads K=2, head_dim 4,
mlp F=16, vocab V=32, so one llama-style attention is q 8*4*4 + k 8*2*4 + v 8*2*4 + o 4*4*8 = 384 and a
gated MLP 3*8*16 = 384; the embedding is 32*8 = 256, an untied logits projection 256 more, the final norm 8.
"""

from __future__ import annotations

from typing import Any

import pytest

from server.perf.architecture import Architecture, build
from server.perf.arith import ArithError

# base.yml defaults (MaxText e591f30cb) of the structural keys these tiny models rely on.
BASE: dict[str, Any] = {
    "decoder_block": "llama2",
    "global_parameter_scale": 1,
    "head_dim": 128,
    "mlp_activations": ["silu", "linear"],
    "logits_via_embedding": False,
    "num_experts": 1,
    "num_experts_per_tok": 1,
    "base_moe_mlp_dim": -1,
    "first_num_dense_layers": 0,
    "shared_experts": 0,
    "routed_bias": False,
    "mlp_bias": False,
    "inhomogeneous_layer_cycle_interval": 1,
    "interleave_moe_layer_step": 1,
    "attention_type": "global",
    "sliding_window_size": 0,
    "use_qk_norm": False,
    "qk_norm_with_scale": True,
    "v_norm_with_scale": True,
    "mhc_expansion_rate": 1,
    "mtp_num_layers": 0,
}

TINY: dict[str, Any] = {
    "base_emb_dim": 8,
    "base_num_query_heads": 4,
    "base_num_kv_heads": 2,
    "head_dim": 4,
    "base_mlp_dim": 16,
    "base_num_decoder_layers": 2,
    "vocab_size": 32,
}

ATTN = 8 * 4 * 4 + 8 * 2 * 4 + 8 * 2 * 4 + 4 * 4 * 8  # 384
MLP = 3 * 8 * 16  # 384
EMB = 32 * 8  # 256
NORM = 8


def arch(**keys: Any) -> Architecture:
    cfg = {**BASE, **TINY, **keys}
    return build(cfg.get)


def test_architecture_llama2_counts():
    a = arch()
    per_layer = ATTN + MLP + 2 * 8  # two RMSNorms
    assert a.layers == 2 and len(a.groups) == 1
    assert a.groups[0].params == per_layer == 784
    assert a.total_params == 2 * per_layer + EMB + EMB + NORM == 2088
    assert a.active_params == a.total_params
    # Forward FLOPs per token: 2 x matmul weights; attention core at T=8: causal keys (8+1)/2 per query,
    # QK^T and PV 2*H*(hd+hd) per key.
    assert a.groups[0].matmul_flops == 2 * (ATTN + MLP)
    assert a.groups[0].attention_flops(8) == 2 * 4 * (4 + 4) * 4.5
    assert a.logits_flops == 2 * 8 * 32
    assert a.forward_flops(8) == 2 * (2 * (ATTN + MLP)) + 2 * 8 * 32 + 2 * 288


def test_architecture_attention_masks_and_blocks():
    a = arch(decoder_block="olmo3", base_num_decoder_layers=4, sliding_window_size=4)
    local = next(g for g in a.groups if g.attention.window)
    # Window 4 over 8 tokens: 1+2+3+4 keys for the first four, 4 each after: (10 + 16) / 8.
    assert local.attention_flops(8) == 2 * 4 * 8 * (10 + 16) / 8
    # Block-granular (block 4): q block 0 computes one 4x4 block, q block 1 two: (16 + 32) / 8 keys.
    glob = next(g for g in a.groups if not g.attention.window)
    assert glob.attention_flops(8, block=4) == 2 * 4 * 8 * (16 + 32) / 8
    l4 = arch(decoder_block="llama4", base_num_decoder_layers=4, nope_layer_interval=4, chunk_attn_window_size=4)
    chunked = next(g for g in l4.groups if g.attention.chunk)
    # Chunks of 4 over 8 tokens: two chunks of 1+2+3+4 keys.
    assert chunked.attention_flops(8) == 2 * 4 * 8 * (2 * 10) / 8


def test_architecture_scale():
    # global_parameter_scale 2: heads and mlp x2, emb and layers x1 (types.py get_individual_scales).
    a = arch(global_parameter_scale=2)
    attn = 8 * 8 * 4 + 8 * 4 * 4 + 8 * 4 * 4 + 8 * 4 * 8
    mlp = 3 * 8 * 32
    assert a.total_params == 2 * (attn + mlp + 16) + EMB + EMB + NORM == 3624
    with pytest.raises(ArithError) as e:
        arch(global_parameter_scale=3)
    assert e.value.key == "global_parameter_scale"


def test_architecture_mixtral_counts():
    a = arch(decoder_block="mixtral", num_experts=4, num_experts_per_tok=2, base_moe_mlp_dim=16)
    expert = 2 * 8 * 16 + 16 * 8  # wi_0, wi_1, wo at mlp_dim
    router = 8 * 4
    assert a.total_params == 2 * (ATTN + 4 * expert + router + 16) + EMB + EMB + NORM == 4456
    assert a.active_params == 2 * (ATTN + 2 * expert + router + 16) + EMB + EMB + NORM == 2920
    assert a.groups[0].matmul_flops == 2 * (ATTN + 2 * expert + router)


def test_architecture_gemma2_pairs():
    a = arch(
        decoder_block="gemma2",
        base_num_decoder_layers=1,
        mlp_activations=["gelu", "linear"],
        sliding_window_size=4,
        use_post_attn_norm=True,
        use_post_ffw_norm=True,
        logits_via_embedding=True,
    )
    assert a.layers == 2 and a.maxtext_layers == 1
    assert {g.attention.window for g in a.groups} == {0, 4}
    per_layer = ATTN + MLP + 4 * 8  # pre/post attention, pre/post FFW norms
    assert a.total_params == 2 * per_layer + EMB + NORM == 1864
    assert a.logits == 0
    assert any("local and a global" in n for n in a.notes)


def test_architecture_gemma3_pattern():
    a = arch(
        decoder_block="gemma3",
        base_num_decoder_layers=7,
        mlp_activations=["gelu", "linear"],
        sliding_window_size=4,
        use_post_attn_norm=True,
        use_post_ffw_norm=True,
        logits_via_embedding=True,
    )
    counts = {g.attention.window: g.count for g in a.groups}
    assert counts == {4: 6, 0: 1}  # layer index 5 is the global one; 6 wraps back to local
    per_layer = ATTN + 2 * 4 + MLP + 4 * 8  # q/k norms per head
    assert a.total_params == 7 * per_layer + EMB + NORM == 5920


def test_architecture_gemma4_moe_counts():
    a = arch(
        decoder_block="gemma4",
        base_num_decoder_layers=6,
        mlp_activations=["gelu", "linear"],
        sliding_window_size=4,
        use_post_attn_norm=True,
        use_post_ffw_norm=True,
        logits_via_embedding=True,
        global_num_kv_heads=1,
        global_head_dim=8,
        share_kv_projections=True,
        v_norm_with_scale=False,
        num_experts=4,
        num_experts_per_tok=2,
        base_moe_mlp_dim=6,
        shared_experts=1,
    )
    local_attn = ATTN + 2 * 4  # q/k norms; the v norm has no scale
    global_attn = 8 * 4 * 8 + 8 * 1 * 8 + 4 * 8 * 8 + 2 * 8  # q, one K=V projection, o, q/k norms
    expert = 2 * 8 * 6 + 6 * 8
    shared = 3 * 8 * 16  # Gemma 4's shared expert is shared_experts x mlp_dim
    ffn = 4 * expert + 8 * 4 + 4 + shared  # router, per-expert scale
    ffn_active = 2 * expert + 8 * 4 + 4 + shared
    norms = 4 * 8 + 4 * 8 + 1  # layer norms, Gemma4MoE's router scale and three norms, layer scalar
    assert a.total_params == 5 * (local_attn + ffn + norms) + (global_attn + ffn + norms) + EMB + NORM == 9182
    assert a.active_params == 5 * (local_attn + ffn_active + norms) + (global_attn + ffn_active + norms) + EMB + NORM
    assert a.active_params == 7454


def test_architecture_gemma4_small_counts():
    a = arch(
        decoder_block="gemma4_small",
        model_name="gemma4-e2b",
        base_num_decoder_layers=5,
        mlp_activations=["gelu", "linear"],
        sliding_window_size=4,
        logits_via_embedding=True,
        global_head_dim=8,
        v_norm_with_scale=False,
        num_kv_shared_layers=2,
        use_double_wide_mlp=True,
        hidden_size_per_layer_input=2,
        vocab_size_per_layer_input=32,
    )
    extra = 1 + 8 * 2 + 2 * 8 + 8  # layer scalar, per-layer gate and projection, their norm
    full = ATTN + 2 * 4 + MLP + 4 * 8 + extra
    shared_local = (8 * 4 * 4 + 4 * 4 * 8 + 4) + 3 * 8 * 32 + 4 * 8 + extra  # no K/V, no k norm; 2x MLP
    shared_global = (8 * 4 * 8 + 4 * 8 * 8 + 8) + 3 * 8 * 32 + 4 * 8 + extra
    ple = 32 * 5 * 2 + 8 * 5 * 2 + 2  # table, projection, norm
    assert a.total_params == 3 * full + shared_local + shared_global + ple + EMB + NORM == 5675
    assert sum(g.count for g in a.groups if g.attention.kv_shared) == 2


def test_architecture_gpt3_counts():
    a = arch(
        decoder_block="gpt3",
        base_num_decoder_layers=1,
        base_num_kv_heads=4,
        mlp_activations=["gelu"],
        logits_via_embedding=True,
        trainable_position_size=16,
    )
    attn = 8 * 3 * 4 * 4 + 3 * 4 * 4 + 4 * 4 * 8 + 8  # fused qkv and out, with biases
    mlp = 8 * 16 + 16 + 16 * 8 + 8
    norms = 2 * 8 + 2 * 8  # LayerNorm (scale, bias) before attention and before the MLP
    assert a.total_params == attn + mlp + norms + EMB + 16 * 8 + 2 * 8 == 1280


def test_architecture_gpt_oss_counts():
    a = arch(
        decoder_block="gpt_oss",
        sliding_window_size=4,
        attention_bias=True,
        attention_sink=True,
        num_experts=4,
        num_experts_per_tok=2,
        base_moe_mlp_dim=16,
        mlp_bias=True,
        routed_bias=True,
        inhomogeneous_layer_cycle_interval=2,
    )
    attn = ATTN + (16 + 8 + 8 + 8) + 4  # q/k/v/o biases, sinks
    expert = (2 * 8 * 16 + 16 * 8) + (2 * 16 + 8)  # weights at mlp_dim, expert biases
    router = 8 * 4 + 4
    assert a.total_params == 2 * (attn + 4 * expert + router + 16) + EMB + EMB + NORM == 4872
    assert a.active_params == 2 * (attn + 2 * expert + router + 16) + EMB + EMB + NORM == 3176
    assert [g.attention.window for g in a.groups] == [4, 0]


def test_architecture_llama4_interleave():
    a = arch(
        decoder_block="llama4",
        base_num_decoder_layers=4,
        nope_layer_interval=4,
        interleave_moe_layer_step=2,
        chunk_attn_window_size=4,
        num_experts=4,
        num_experts_per_tok=1,
        shared_experts=1,
        base_moe_mlp_dim=6,
        use_qk_norm=True,
        inhomogeneous_layer_cycle_interval=4,
    )
    expert, router, shared = 2 * 8 * 6 + 6 * 8, 8 * 4, 3 * 8 * 6
    dense = ATTN + MLP + 16
    moe = ATTN + 4 * expert + router + shared + 16  # the L2 q/k norm has no parameters
    assert a.total_params == 2 * dense + 2 * moe + EMB + EMB + NORM == 4392
    assert a.active_params == 2 * dense + 2 * (ATTN + expert + router + shared + 16) + EMB + EMB + NORM == 3528
    nope = [g for g in a.groups if not g.attention.rope]
    assert len(nope) == 1 and nope[0].count == 1 and nope[0].ffn.kind == "moe" and not nope[0].attention.chunk


MLA_KEYS: dict[str, Any] = {
    "decoder_block": "deepseek",
    "attention_type": "mla",
    "base_num_kv_heads": 4,
    "base_num_decoder_layers": 3,
    "first_num_dense_layers": 1,
    "num_experts": 4,
    "num_experts_per_tok": 2,
    "shared_experts": 1,
    "base_moe_mlp_dim": 6,
    "routed_bias": True,
    "q_lora_rank": 6,
    "kv_lora_rank": 4,
    "qk_nope_head_dim": 2,
    "qk_rope_head_dim": 2,
    "v_head_dim": 3,
}


def test_architecture_deepseek_counts():
    a = arch(**MLA_KEYS)
    # wq_a, q_norm, wq_b (qk head dim 2+2); wkv_a (rank + rope), kv_norm, wkv_b (nope + v); out from v.
    mla = 8 * 6 + 6 + 6 * 4 * 4 + 8 * (4 + 2) + 4 + 4 * 4 * (2 + 3) + 4 * 3 * 8
    assert mla == 378
    expert = 2 * 8 * 6 + 6 * 8
    moe = 4 * expert + 8 * 4 + 4 + 3 * 8 * 6  # routed, router + bias, one shared expert at moe_mlp_dim
    moe_active = 2 * expert + 8 * 4 + 4 + 3 * 8 * 6
    assert a.total_params == (mla + MLP + 16) + 2 * (mla + moe + 16) + EMB + EMB + NORM == 3598
    assert a.active_params == (mla + MLP + 16) + 2 * (mla + moe_active + 16) + EMB + EMB + NORM == 3022
    assert [(g.ffn.kind, g.count) for g in a.groups] == [("dense", 1), ("moe", 2)]
    g = a.groups[0]
    assert g.matmul_flops == 2 * ((mla - 6 - 4) + MLP)  # norms are not matmul weights
    # MLA attention core: 2*H*(qk 4 + v 3) per causal key.
    assert g.attention_flops(8) == 2 * 4 * (4 + 3) * 4.5


def test_architecture_deepseek_indexer_counts():
    a = arch(**MLA_KEYS, use_indexer=True, indexer_n_heads=2, indexer_head_dim=4, indexer_topk=4)
    indexer = 6 * 2 * 4 + 8 * 4 + 2 * 4 + 8 * 2  # wq_b from the q latent, wk, LayerNorm (scale+bias), weights
    assert a.total_params == 3598 + 3 * indexer == 3910
    g = a.groups[0]
    # The indexer scores every causal key (2*n*(d+1)); the top-k mask does not shrink the kernel's blocks.
    assert g.attention_flops(8) == 2 * 4 * 7 * 4.5 + 2 * 2 * (4 + 1) * 4.5


def test_architecture_deepseek4_counts():
    a = arch(
        decoder_block="deepseek4",
        attention_type="compressed",
        base_num_kv_heads=1,
        base_num_decoder_layers=3,
        first_num_hash_layers=1,
        compress_ratios=[0, 4, 128],
        q_lora_rank=6,
        o_groups=2,
        o_lora_rank=3,
        num_experts=4,
        num_experts_per_tok=2,
        shared_experts=1,
        base_moe_mlp_dim=6,
        routed_bias=True,  # a MoEBiasVar in V4: not a trained parameter
        mhc_expansion_rate=2,
        indexer_n_heads=2,
        indexer_head_dim=4,
        indexer_topk=2,
        sliding_window_size=4,
        qk_rope_head_dim=2,
    )
    # wq_a, q_norm, wq_b, wkv (1 kv head), kv_norm, sinks, grouped o_a (H*hd x o_lora), o_b (groups*o_lora x D)
    base = 8 * 6 + 6 + 6 * 4 * 4 + 8 * 1 * 4 + 4 + 4 + 16 * 3 + 2 * 3 * 8
    hca = 8 * 4 + 8 * 4 + 128 * 4 + 4  # kv/gate projections, position bias, norm
    csa = (8 * 8 + 8 * 8 + 4 * 8 + 4) + (6 * 2 * 4 + 8 * 8 + 8 * 8 + 4 * 8 + 4 + 8 * 2)  # compressor, indexer
    expert = 2 * 8 * 6 + 6 * 8
    moe = 4 * expert + 8 * 4 + 3 * 8 * 6
    mhc = 2 * 8 + 3 + 16 * 4 + 16 * 2 + 16 * 2 + 4 + 2 + 2  # norm, scalars, res/pre/post alpha, betas
    layers = 3 * (moe + 16 + 2 * mhc) + 3 * base + hca + csa
    hyper_head = 2 * 8 * 2 + 2 + 1
    assert a.total_params == layers + hyper_head + EMB + EMB + NORM == 5619
    assert a.groups[0].residual == 2 * 8  # the mHC residual stream is expansion_rate x emb wide


def test_architecture_qwen2_bias():
    a = arch(decoder_block="qwen2", base_num_decoder_layers=1, attention_bias=True)
    # q/k/v biases; MaxText drops the output bias for qwen2.
    assert a.total_params == (ATTN + 16 + 8 + 8) + MLP + 16 + EMB + EMB + NORM == 1336


def test_architecture_qwen3_counts():
    a = arch(decoder_block="qwen3", base_num_decoder_layers=1, use_qk_norm=True)
    assert a.total_params == (ATTN + 2 * 4) + MLP + 16 + EMB + EMB + NORM == 1312
    tied = arch(decoder_block="qwen3", base_num_decoder_layers=1, use_qk_norm=True, logits_via_embedding=True)
    assert tied.total_params == 1312 - EMB and tied.logits == 0


def test_architecture_qwen3_moe_counts():
    a = arch(
        decoder_block="qwen3_moe",
        base_num_decoder_layers=1,
        use_qk_norm=True,
        num_experts=4,
        num_experts_per_tok=2,
        base_moe_mlp_dim=6,
    )
    expert = 2 * 8 * 6 + 6 * 8
    assert a.total_params == (ATTN + 8) + 4 * expert + 8 * 4 + 16 + EMB + EMB + NORM == 1536
    assert a.active_params == (ATTN + 8) + 2 * expert + 8 * 4 + 16 + EMB + EMB + NORM == 1248


def test_architecture_qwen3_custom_counts():
    a = arch(
        decoder_block="qwen3_custom_moe",
        base_num_decoder_layers=1,
        use_qk_norm=True,
        attention_output_dim=6,
        moe_expert_input_dim=6,
        num_experts=4,
        num_experts_per_tok=2,
        base_moe_mlp_dim=5,
    )
    attn = 8 * 4 * 4 + 8 * 2 * 4 + 8 * 2 * 4 + 4 * 4 * 6 + 2 * 4  # out to attention_output_dim
    expert = 2 * 6 * 5 + 5 * 6  # experts work in the 6-wide latent
    up = 6 * 8
    norms = 16 + 6  # two layer norms and the latent norm
    assert a.total_params == attn + 4 * expert + 6 * 4 + up + norms + EMB + EMB + NORM == 1334
    assert a.active_params == attn + 2 * expert + 6 * 4 + up + norms + EMB + EMB + NORM == 1154


def test_architecture_qwen3_next_counts():
    a = arch(
        decoder_block="qwen3_next",
        inhomogeneous_layer_cycle_interval=2,
        num_experts=4,
        num_experts_per_tok=2,
        base_moe_mlp_dim=6,
        shared_experts=1,
        gdn_num_key_heads=1,
        gdn_num_value_heads=2,
        gdn_key_head_dim=2,
        gdn_value_head_dim=3,
        gdn_conv_kernel_dim=4,
        gdn_chunk_size=4,
    )
    # in_proj_qkvz (2*2 + 2*6), in_proj_ba (2 per value head), conv over q/k/v (4 taps), A_log, dt_bias,
    # gated norm over the value head dim, out_proj.
    gdn = 8 * (4 + 12) + 8 * 4 + 4 * (4 + 6) + 2 + 2 + 3 + 6 * 8
    full = 8 * 4 * 8 + 8 * 2 * 4 + 8 * 2 * 4 + 4 * 4 * 8 + 2 * 4  # the query projection carries the gate
    expert = 2 * 8 * 6 + 6 * 8
    ffn = 4 * expert + 8 * 4 + 3 * 8 * 6 + 8  # router, shared expert, shared-expert gate
    assert a.total_params == (gdn + ffn + 16) + (full + ffn + 16) + EMB + EMB + NORM == 2847
    linear = next(g for g in a.groups if g.attention.kind == "gated_delta")
    # Chunked delta rule per token: Hv*(6*dk*dv + C*(6*dk + 4*dv) + C^2), whatever the sequence length.
    assert linear.attention_flops(8) == linear.attention_flops(1024) == 2 * (6 * 2 * 3 + 4 * (6 * 2 + 4 * 3) + 16)


def test_architecture_envy_counts():
    a = arch(
        decoder_block="envy",
        interleave_moe_layer_step=2,
        inhomogeneous_layer_cycle_interval=2,
        num_experts=4,
        num_experts_per_tok=1,
        base_moe_mlp_dim=6,
        use_qk_norm=True,
        use_post_ffw_norm=True,
        logits_via_embedding=True,
    )
    attn, norms = ATTN + 8, 3 * 8
    moe = 4 * (2 * 8 * 6 + 6 * 8) + 8 * 4
    assert a.total_params == (attn + MLP + norms) + (attn + moe + norms) + EMB + NORM == 2088
    assert [g.ffn.kind for g in a.groups] == ["dense", "moe"]  # layer index 1 is the MoE one


def test_architecture_olmo3_counts():
    a = arch(decoder_block="olmo3", base_num_decoder_layers=4, sliding_window_size=4, use_qk_norm=True)
    attn = ATTN + 4 * 4 + 2 * 4  # q/k norms over all heads (GlobalRMSNorm)
    assert a.total_params == 4 * (attn + MLP + 16) + EMB + EMB + NORM == 3752
    assert {g.attention.window: g.count for g in a.groups} == {4: 3, 0: 1}


def test_architecture_unknown_block_falls_back():
    a = arch(decoder_block="mystery")
    assert a.total_params == 2088
    assert any("unknown decoder_block" in n for n in a.notes)


def test_architecture_vision_note():
    a = arch(decoder_block="qwen3", vision_encoder_block="qwen3_vl", use_multimodal=True)
    assert any("text decoder only" in n for n in a.notes)


@pytest.mark.parametrize(
    ("keys", "key"),
    [
        ({"base_emb_dim": "wide"}, "base_emb_dim"),
        ({"base_num_decoder_layers": 0}, "base_num_decoder_layers"),
        ({"head_dim": -4}, "head_dim"),
        ({"vocab_size": None, "base_mlp_dim": 2.5}, "base_mlp_dim"),
        ({"num_experts": 4, "num_experts_per_tok": 5, "decoder_block": "mixtral"}, "num_experts_per_tok"),
        ({"decoder_block": "qwen3_moe", "num_experts": 4}, "base_moe_mlp_dim"),
        (
            {"decoder_block": "deepseek", "attention_type": "global", "num_experts": 4, "base_moe_mlp_dim": 4},
            "attention_type",
        ),
        ({"base_num_kv_heads": 3}, "base_num_kv_heads"),
    ],
)
def test_architecture_bad_values_name_the_key(keys: dict[str, Any], key: str):
    with pytest.raises(ArithError) as e:
        arch(**keys)
    assert e.value.key == key


FAMILIES: list[dict[str, Any]] = [
    {},
    {"decoder_block": "mixtral", "num_experts": 4, "num_experts_per_tok": 2, "base_moe_mlp_dim": 16},
    {"decoder_block": "gpt_oss", "num_experts": 4, "num_experts_per_tok": 2, "sliding_window_size": 4},
    {
        "decoder_block": "llama4",
        "num_experts": 4,
        "shared_experts": 1,
        "base_moe_mlp_dim": 6,
        "interleave_moe_layer_step": 2,
        "base_num_decoder_layers": 4,
        "nope_layer_interval": 4,
        "chunk_attn_window_size": 4,
    },
    MLA_KEYS,
    {"decoder_block": "qwen3_moe", "num_experts": 4, "num_experts_per_tok": 2, "base_moe_mlp_dim": 6},
    {
        "decoder_block": "qwen3_next",
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "base_moe_mlp_dim": 6,
        "inhomogeneous_layer_cycle_interval": 2,
    },
    {
        "decoder_block": "gemma4",
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "base_moe_mlp_dim": 6,
        "shared_experts": 1,
        "sliding_window_size": 4,
        "base_num_decoder_layers": 6,
    },
    {
        "decoder_block": "envy",
        "num_experts": 4,
        "base_moe_mlp_dim": 6,
        "interleave_moe_layer_step": 2,
        "inhomogeneous_layer_cycle_interval": 2,
    },
]


@pytest.mark.parametrize("keys", FAMILIES)
def test_architecture_active_at_most_total_and_experts_monotone(keys: dict[str, Any]):
    a = arch(**keys)
    assert 0 < a.active_params <= a.total_params
    assert sum(g.count for g in a.groups) == a.layers
    if keys.get("num_experts", 1) > 1:
        more = arch(**{**keys, "num_experts": 2 * keys["num_experts"]})
        assert more.total_params > a.total_params
        assert more.active_params >= a.active_params  # only the router grows
        assert a.active_params < a.total_params
    for g in a.groups:
        assert g.active_params <= g.params
        assert g.matmul_flops > 0 and g.attention_flops(16) > 0
        acts = g.activations
        assert acts["decoder_layer_input"] >= 8 and acts["out_proj"] == 8


def test_architecture_gemma2_layers_doubled_property():
    for n in (1, 3, 21):
        a = arch(decoder_block="gemma2", base_num_decoder_layers=n, sliding_window_size=4)
        assert a.layers == 2 * n and a.maxtext_layers == n


def test_architecture_mtp_adds_a_layer_copy():
    base = arch(**MLA_KEYS)
    a = arch(**MLA_KEYS, mtp_num_layers=1)
    last = base.groups[-1]
    assert a.total_params - base.total_params == 2 * 8 + 2 * 8 * 8 + last.params


def test_architecture_to_json_round_trips_through_json():
    import json

    a = arch(**MLA_KEYS)
    d = json.loads(json.dumps(a.to_json()))
    assert d["total_params"] == a.total_params and d["layers"] == 3
    assert [g["count"] for g in d["groups"]] == [1, 2]
    assert d["groups"][1]["ffn"]["experts"] == 4 and d["groups"][0]["attention"]["kind"] == "mla"


def test_architecture_numeric_text_is_accepted():
    # A command-line override (key=value) arrives as text; MaxText coerces it.
    assert arch(base_emb_dim="8").total_params == 2088
