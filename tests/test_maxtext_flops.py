"""MaxText's training TFLOPs per device (server/perf/maxtext_flops.py) on one tiny model per family.

Each expected value is written out by hand from MaxText's formula (maxtext_utils.py:1149@e591f30cb):
products of the tiny dims, never a call into the module's helpers. Conventions in the comments:
BT = per_device_batch_size * max_target_length tokens; "x3" is forward + backward.
"""

from __future__ import annotations

from typing import Any

import pytest

from server.perf.arith import ArithError, Shape, step_flops
from server.perf.maxtext_flops import MAXTEXT_COMMIT, training_tflops_per_device
from server.perf.remat import resolve

# base.yml@e591f30cb defaults of the keys the formula reads (the ones a tiny config leaves alone).
BASE: dict[str, Any] = {
    "model_name": "default",
    "decoder_block": "llama2",
    "global_parameter_scale": 1,
    "head_dim": 128,
    "attention_output_dim": -1,
    "global_head_dim": 0,
    "global_num_kv_heads": 0,
    "mlp_activations": ["silu", "linear"],
    "mtp_num_layers": 0,
    "num_experts": 1,
    "num_experts_per_tok": 1,
    "moe_expert_input_dim": -1,
    "base_moe_mlp_dim": -1,
    "first_num_dense_layers": 0,
    "shared_experts": 0,
    "inhomogeneous_layer_cycle_interval": 1,
    "attention_type": "global",
    "share_kv_projections": False,
    "sliding_window_size": 0,
    "chunk_attn_window_size": 0,
    "hidden_size_per_layer_input": 0,
    "num_kv_shared_layers": 0,
    "use_double_wide_mlp": False,
    "use_indexer": False,
    "indexer_head_dim": 128,
    "indexer_n_heads": 64,
    "indexer_topk": 2048,
    "q_lora_rank": 0,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "o_lora_rank": 0,
    "o_groups": 0,
    "compress_ratios": [],
    "use_dpo": False,
    "gradient_accumulation_steps": 1,
    "nope_layer_interval": -1,
    "interleave_moe_layer_step": 1,
    "use_multimodal": False,
    "freeze_vision_encoder_params": True,
    "image_size_for_vit": 896,
    "num_channels_for_vit": 3,
    "mhc_expansion_rate": 1,
    "engram_layers": [],
    "engram_max_ngram_size": 3,
    "engram_num_heads": 8,
    "engram_head_dim": 1280,
    "engram_kernel_size": 4,
}

# The tiny dense decoder most families start from: emb 16, 4 query heads, 2 KV heads, head_dim 4,
# MLP 32, vocab 64.
TINY: dict[str, Any] = {
    "base_emb_dim": 16,
    "base_num_query_heads": 4,
    "base_num_kv_heads": 2,
    "head_dim": 4,
    "base_mlp_dim": 32,
    "vocab_size": 64,
}


def flops(**keys: Any):
    cfg = {**BASE, **TINY, **keys}
    return training_tflops_per_device(lambda k, d=None: cfg.get(k, d))


def check(r, learnable: float, attention: float, reference: float = 0.0) -> None:
    """learnable / attention / reference in FLOPs (not TFLOPs), as written out in the test."""
    assert r.learnable_weight == pytest.approx(learnable / 1e12, rel=1e-9)
    assert r.attention == pytest.approx(attention / 1e12, rel=1e-9)
    assert r.reference_model == pytest.approx(reference / 1e12, rel=1e-9)
    assert r.total == pytest.approx((learnable + attention + reference) / 1e12, rel=1e-9)
    assert sum(r.parts.values()) == pytest.approx(r.total, rel=1e-9)
    assert all(s.endswith("@" + MAXTEXT_COMMIT[:9]) for s in r.sources)


LLAMA2 = {"base_num_decoder_layers": 2, "per_device_batch_size": 2, "max_target_length": 8}
# BT = 16. Per layer: ffn 2*16*32*16*2 + 2*16*32*16 = 49152; qkv 2*16*16*(4+2*2)*4 = 16384;
# out 2*16*16*4*4 = 8192; causal attention 4*2*8^2*4*4 / 2 = 4096. Logits 2*16*16*64 = 32768.
LLAMA2_LEARNABLE = (49152 * 2 + (16384 + 8192) * 2 + 32768) * 3  # 540672
LLAMA2_ATTENTION = 4096 * 2 * 3  # 24576


def test_maxtext_flops_llama2_dense():
    r = flops(**LLAMA2)
    check(r, LLAMA2_LEARNABLE, LLAMA2_ATTENTION)
    assert r.branch == "llama2: uniform layers"
    assert r.tokens == 16


def test_maxtext_flops_gradient_accumulation_multiplies_everything():
    r = flops(**LLAMA2, gradient_accumulation_steps=4)
    check(r, 4 * LLAMA2_LEARNABLE, 4 * LLAMA2_ATTENTION)
    assert r.tokens == 64


def test_maxtext_flops_dpo_adds_a_reference_forward():
    r = flops(**LLAMA2, use_dpo=True)
    # the reference model's forward: a third of the weights' and of the attention's training FLOPs
    check(r, LLAMA2_LEARNABLE, LLAMA2_ATTENTION + 8192, reference=180224)


def test_maxtext_flops_global_parameter_scale():
    # scale 8 = 2^3: emb x2, heads x2, mlp x2, layers x2 (types.py:2857)
    r = flops(**LLAMA2, global_parameter_scale=8)
    # emb 32, 8 q / 4 kv heads, mlp 64, 4 layers. ffn 2*16*64*32*3 = 196608; qkv 2*16*32*16*4 = 65536;
    # out 2*16*32*8*4 = 32768; attention 2*2*64*8*4 = 8192; logits 2*16*32*64 = 65536.
    check(r, (196608 * 4 + (65536 + 32768) * 4 + 65536) * 3, 8192 * 4 * 3)


def test_maxtext_flops_mixtral_gate_plus_top_k():
    r = flops(**LLAMA2, decoder_block="mixtral", num_experts=4, num_experts_per_tok=2, base_moe_mlp_dim=32)
    # per layer: gate 2*16*16*4 = 2048 + 2 experts x 49152
    check(r, ((2048 + 2 * 49152) * 2 + (16384 + 8192) * 2 + 32768) * 3, LLAMA2_ATTENTION)
    assert "top-2 of 4" in r.details[0]


DEEPSEEK = {
    "decoder_block": "deepseek",
    "attention_type": "mla",
    "base_num_decoder_layers": 3,
    "first_num_dense_layers": 1,
    "base_moe_mlp_dim": 8,
    "num_experts": 4,
    "num_experts_per_tok": 2,
    "shared_experts": 1,
    "q_lora_rank": 8,
    "kv_lora_rank": 8,
    "qk_nope_head_dim": 4,
    "qk_rope_head_dim": 2,
    "v_head_dim": 4,
    "per_device_batch_size": 1,
    "max_target_length": 8,
}
# BT = 8. Dense layer ffn 2*8*32*16*2 + 2*8*32*16 = 24576. MoE layer: gate 2*8*16*4 = 1024, one
# 8-wide expert 2*8*8*16*2 + 2*8*8*16 = 6144 (1 shared + 2 routed): 1024 + 6144 + 12288 = 19456.
DEEPSEEK_FFN = 24576 * 1 + 19456 * 2  # 63488
# MLA: q 2*8*(16*8 + 8*4*6) = 5120; kv 2*8*(16*(8+2) + 8*4*(4+4)) = 6656; out 2*8*16*4*4 = 4096;
# causal attention 2*8*8*4*(6+4) / 2 = 2560. Logits 2*8*16*64 = 16384.
DEEPSEEK_LEARNABLE = (DEEPSEEK_FFN + (5120 + 6656 + 4096) * 3 + 16384) * 3  # 382464
DEEPSEEK_ATTENTION = 2560 * 3 * 3  # 23040


def test_maxtext_flops_deepseek_mla_dense_first_shared_experts():
    r = flops(**DEEPSEEK)
    check(r, DEEPSEEK_LEARNABLE, DEEPSEEK_ATTENTION)
    assert r.branch == "deepseek: mla"
    assert "(1 dense + 2 moe layers)" in r.details[0]


def test_maxtext_flops_deepseek32_indexer():
    r = flops(**DEEPSEEK, use_indexer=True, indexer_n_heads=2, indexer_head_dim=4, indexer_topk=2)
    # indexer projections: q 2*8*8*2*4 = 1024, k 2*8*16*4 = 1024, head weights 2*8*16*2 = 512 -> 2560
    # scoring: (2*8*8*2*4 + 2*8*8*2) / 2 = 640; mask ratio K/T - (K/T)^2/2 = 0.25 - 0.03125 = 0.21875
    attention = 2 * 8 * 8 * 4 * (6 + 4) * 0.21875 + 640  # 1760
    check(r, (DEEPSEEK_FFN + (5120 + 6656 + 2560 + 4096) * 3 + 16384) * 3, attention * 3 * 3)
    assert r.branch == "deepseek: mla + indexer"


def test_maxtext_flops_indexer_bypassed_when_top_k_covers_the_sequence():
    r = flops(**DEEPSEEK, use_indexer=True, indexer_topk=8)
    check(r, DEEPSEEK_LEARNABLE, DEEPSEEK_ATTENTION)


def test_maxtext_flops_mtp_copies_the_last_moe_layer():
    r = flops(**DEEPSEEK, mtp_num_layers=1)
    # one module: last layer's ffn (19456) + MLA qkv and out (5120 + 6656 + 4096), its attention 2560
    check(r, DEEPSEEK_LEARNABLE + (19456 + 11776 + 4096) * 3, DEEPSEEK_ATTENTION + 2560 * 3)


GEMMA = {"mlp_activations": ["gelu", "linear"], "sliding_window_size": 4, "per_device_batch_size": 1}
# BT = 8 at T = 8: ffn 2*8*32*16*2 + 2*8*32*16 = 24576; qkv 2*8*16*8*4 = 8192; out 2*8*16*4*4 = 4096;
# global causal 2*1*8^2*4*4 = 2048; window 4: 4*1*(8*4 - 0.5*4^2)*4*4 = 1536; logits 16384.


def test_maxtext_flops_gemma2_merged_local_global_layers():
    r = flops(**GEMMA, decoder_block="gemma2", base_num_decoder_layers=2, max_target_length=8)
    # each of the 2 decoder layers is a local + a global layer: weights twice, both attentions
    check(r, ((24576 + 8192 + 4096) * 2 * 2 + 16384) * 3, (2048 + 1536) * 2 * 3)


def test_maxtext_flops_gemma3_one_global_in_six():
    r = flops(**GEMMA, decoder_block="gemma3", base_num_decoder_layers=7, max_target_length=8)
    # 7 layers: 7 // 6 = 1 global, 6 sliding
    check(r, (24576 * 7 + (8192 + 4096) * 7 + 16384) * 3, (1 * 2048 + 6 * 1536) * 3)
    assert r.branch == "gemma3: mixed attention, pattern 6"


def test_maxtext_flops_gemma3_vision_tower_frozen():
    r = flops(
        **GEMMA,
        decoder_block="gemma3",
        model_name="gemma3-tiny",
        base_num_decoder_layers=7,
        max_target_length=8,
        use_multimodal=True,
        image_size_for_vit=56,
    )
    # SigLIP (MaxText's fixed dims): 56/14 = 4x4 = 16 patches, width 1152, MLP 4304, 27 layers
    patch_embed = 2 * 1 * 16 * (3 * 14 * 14) * 1152
    encoder = (3 * (2 * 16 * 1152 * 1152) + 2 * 16 * 1152 * 1152 + 2 * (2 * 16 * 1152 * 4304)) * 27
    embedder = 2 * 1 * 1 * 1152 * 16  # (4 // 4)^2 = 1 pooled token to emb 16
    # frozen: the tower's forward plus the projector's two backward matmuls; attention forward only
    vision_learnable = patch_embed + encoder + embedder + 2 * embedder
    vision_attention = 4 * 16 * 16 * 1152 * 27
    learnable = (24576 * 7 + (8192 + 4096) * 7 + 16384) * 3 + vision_learnable
    check(r, learnable, (1 * 2048 + 6 * 1536) * 3 + vision_attention)


def test_maxtext_flops_vision_not_counted_outside_gemma3_and_llama4():
    r = flops(**LLAMA2, model_name="qwen3-vl-tiny", use_multimodal=True)
    check(r, LLAMA2_LEARNABLE, LLAMA2_ATTENTION)
    assert any("vision tower not counted" in n for n in r.notes)


def test_maxtext_flops_gemma4_moe_own_global_heads_shared_kv():
    r = flops(
        **GEMMA,
        decoder_block="gemma4",
        base_num_decoder_layers=6,
        max_target_length=8,
        global_head_dim=8,
        global_num_kv_heads=1,
        share_kv_projections=True,
        num_experts=4,
        num_experts_per_tok=2,
        shared_experts=1,
        base_moe_mlp_dim=8,
    )
    # every layer MoE: gate 1024 + shared expert at mlp_dim 32 (24576) + 2 routed 8-wide (2*6144)
    ffn = (1024 + 24576 + 12288) * 6
    # 1 global layer: qkv 2*8*16*(4 + 1*1)*8 = 10240 (K = V), out 2*8*16*4*8 = 8192,
    #   attention 2*1*8^2*4*8 = 4096; 5 sliding layers: qkv 8192, out 4096, attention 1536
    learnable = (ffn + (8192 + 4096) * 5 + (10240 + 8192) * 1 + 16384) * 3
    check(r, learnable, (4096 + 5 * 1536) * 3)


def test_maxtext_flops_gemma4_small_kv_shared_double_wide_ple():
    r = flops(
        **GEMMA,
        decoder_block="gemma4_small",
        model_name="gemma4-e2b",
        base_num_decoder_layers=6,
        base_num_kv_heads=1,
        max_target_length=8,
        global_head_dim=8,
        num_kv_shared_layers=2,
        use_double_wide_mlp=True,
        hidden_size_per_layer_input=2,
    )
    # E2B pattern: layer 4 global, layers 0-3 and 5 sliding; layers 4 and 5 share K/V, 2x MLP.
    attention = 5 * 1536 + 2 * 1 * 8 * 8 * 4 * 8
    q_and_o = 5 * 2 * (2 * 8 * 16 * 4 * 4) + 1 * 2 * (2 * 8 * 16 * 4 * 8)
    kv = 4 * (2 * 8 * 16 * (2 * 1) * 4)  # layers 0-3 (all sliding) own K and V
    ffn = 4 * 24576 + 2 * (2 * 24576)
    ple = 2 * 8 * 16 * (6 * 2) + 6 * (2 * 8 * 16 * 2 + 2 * 8 * 2 * 16)
    check(r, (q_and_o + kv + ffn + ple + 16384) * 3, attention * 3)


def test_maxtext_flops_gpt_oss_alternating_windows():
    r = flops(
        **GEMMA,
        decoder_block="gpt_oss",
        base_num_decoder_layers=4,
        max_target_length=8,
        num_experts=4,
        num_experts_per_tok=2,
        base_moe_mlp_dim=32,
    )
    # 2 global + 2 sliding; ffn per layer gate 1024 + 2 x 24576
    check(r, ((1024 + 2 * 24576) * 4 + (8192 + 4096) * 4 + 16384) * 3, (2 * 2048 + 2 * 1536) * 3)
    assert r.branch == "gpt_oss: mixed attention, pattern 2"


def test_maxtext_flops_llama4_interleaved_moe_chunked_attention():
    r = flops(
        decoder_block="llama4",
        base_num_decoder_layers=4,
        per_device_batch_size=1,
        max_target_length=10,
        num_experts=4,
        num_experts_per_tok=1,
        shared_experts=1,
        base_moe_mlp_dim=8,
        interleave_moe_layer_step=2,
        nope_layer_interval=2,
        chunk_attn_window_size=4,
    )
    # BT = 10. 2 dense layers: 2*10*32*16*2 + 2*10*32*16 = 30720; 2 MoE layers: gate 2*10*16*4 = 1280,
    # shared + 1 routed 8-wide: 2 x (2*10*8*16*2 + 2*10*8*16) = 2 x 7680
    ffn = 2 * 30720 + 2 * (1280 + 7680 + 7680)
    # qkv 2*10*16*8*4 = 10240, out 2*10*16*4*4 = 5120, logits 2*10*16*64 = 20480
    learnable = (ffn + (10240 + 5120) * 4 + 20480) * 3
    # 2 global layers 4*1*10^2*4*4 = 6400; 2 chunked (chunks 4, 4, 2: 16 + 16 + 4 = 36) 4*36*16 = 2304;
    # all halved for causality
    attention = (2 * 6400 + 2 * 2304) / 2 * 3
    check(r, learnable, attention)


QWEN_NEXT = {
    "decoder_block": "qwen3_next",
    "base_num_decoder_layers": 4,
    "inhomogeneous_layer_cycle_interval": 4,
    "base_mlp_dim": 8,
    "base_moe_mlp_dim": 8,
    "num_experts": 4,
    "num_experts_per_tok": 2,
    "shared_experts": 1,
    "gdn_num_key_heads": 2,
    "gdn_num_value_heads": 4,
    "gdn_key_head_dim": 4,
    "gdn_value_head_dim": 4,
    "gdn_conv_kernel_dim": 4,
    "per_device_batch_size": 1,
    "max_target_length": 8,
}
# ffn, all 4 layers MoE: gate 1024 + shared 6144 + 2 routed 12288 = 19456.
# Gated delta net (K = 2*4 = 8, V = 4*4 = 16): in 2*8*16*(2*8 + 2*16 + 2*4) = 14336, out 2*8*16*16 = 4096,
# conv 2*8*4*(2*8 + 16) = 2048 -> 20480 weights; core 8*(4*4*4*8) = 4096.
QWEN_NEXT_LEARNABLE = (19456 * 4 + 16384 + (8192 + 4096) * 1 + 20480 * 3) * 3  # 1 full, 3 linear
QWEN_NEXT_ATTENTION = (2048 * 1 + 4096 * 3) * 3


def test_maxtext_flops_qwen3_next_gated_delta_net():
    r = flops(**QWEN_NEXT)
    check(r, QWEN_NEXT_LEARNABLE, QWEN_NEXT_ATTENTION)
    assert r.branch == "qwen3_next: gated delta net, every 4th layer full attention (1 full, 3 linear)"


def test_maxtext_flops_qwen35_mtp_leaves_shared_experts_out():
    r = flops(**{**QWEN_NEXT, "decoder_block": "qwen3_5"}, mtp_num_layers=1)
    # MaxText's MTP list has qwen3_next but not qwen3_5: gate 1024 + routed 12288 only
    check(r, QWEN_NEXT_LEARNABLE + (1024 + 12288 + 8192 + 4096) * 3, QWEN_NEXT_ATTENTION + 2048 * 3)
    assert any("shared experts" in n for n in r.notes)


def test_maxtext_flops_qwen3_custom_moe_latent():
    r = flops(
        decoder_block="qwen3_custom_moe",
        base_num_decoder_layers=2,
        base_mlp_dim=8,
        base_moe_mlp_dim=8,
        num_experts=4,
        num_experts_per_tok=2,
        attention_output_dim=8,
        moe_expert_input_dim=8,
        per_device_batch_size=1,
        max_target_length=8,
    )
    # experts see the 8-wide latent: gate 2*8*8*4 = 512, one expert 2*8*8*8*2 + 2*8*8*8 = 3072
    ffn = (512 + 2 * 3072) * 2
    # attention out 2*8*8*4*4 = 2048 to the latent, then up 2*8*8*16 = 2048 to emb
    check(r, (ffn + (8192 + 2048 + 2048) * 2 + 16384) * 3, 2048 * 2 * 3)


def test_maxtext_flops_deepseek4_tracks_and_mhc():
    r = flops(
        decoder_block="deepseek4",
        attention_type="compressed",
        base_num_decoder_layers=3,
        base_num_kv_heads=1,
        compress_ratios=[0, 128, 4],
        q_lora_rank=8,
        o_groups=2,
        o_lora_rank=4,
        sliding_window_size=2,
        base_mlp_dim=8,
        base_moe_mlp_dim=8,
        num_experts=4,
        num_experts_per_tok=2,
        shared_experts=1,
        indexer_n_heads=2,
        indexer_head_dim=4,
        indexer_topk=1,
        mhc_expansion_rate=2,
        per_device_batch_size=1,
        max_target_length=8,
    )
    # per layer: q 2*8*(16*8 + 8*4*4) = 4096, kv 2*8*16*(1*4) = 1024,
    #   grouped out 2*8*2*8*4 + 2*8*(2*4)*16 = 3072 -> 8192
    # mHC (k = 2): 2*8*32*2 + 2*8*2*16 + 2*8*32*2 + 8*2*16 + 2*8*32*4 + 2*8*4*16 = 5888, twice per layer
    # window 2: 4*1*(8*2 - 0.5*2^2)*4*4 = 896
    # HCA: pooler 4*8*16*4 = 2048, attention 896 + 2*8*(8/128)*4*4 = 912
    # CSA: indexer 2*8*(8*2*4 + 16*2) + 8*2*2*4 + 8*2*2 + 4*8*16*8 = 5792, pooler 4*8*16*8 = 4096,
    #   sparse top-1 of 2 blocks (ratio 0.5 - 0.125 = 0.375): 4*(8*2)*4*4*0.375 = 384 -> 896 + 384 + 5792
    attention = 896 + 912 + (896 + 384 + 5792)
    learnable = 3 * 8192 + 2 * 3 * 5888 + 2048 + 4096 + 19456 * 3 + 16384
    check(r, learnable * 3, attention * 3)


def test_maxtext_flops_engram():
    r = flops(**LLAMA2, engram_layers=[0], engram_num_heads=2, engram_head_dim=2, engram_kernel_size=2)
    # engram dim 2*2*(3-1) = 8; key 2*16*8*16 = 4096, value 2*16*8*16 = 4096, conv 2*16*2*16 = 1024,
    # gating dot 2*16*1*16 = 512
    check(r, LLAMA2_LEARNABLE + (4096 + 4096 + 1024) * 3, LLAMA2_ATTENTION + 512 * 3)


def test_maxtext_flops_agrees_with_arith_on_dense_llama():
    """MaxText counts per device, arith.step_flops over all devices: on a plain llama2-7b they agree."""
    devices, pdbs, seq = 256, 4, 4096
    r = training_tflops_per_device(
        lambda k, d=None: {
            **BASE,
            "base_emb_dim": 4096,
            "base_num_query_heads": 32,
            "base_num_kv_heads": 32,
            "head_dim": 128,
            "base_mlp_dim": 11008,
            "base_num_decoder_layers": 32,
            "vocab_size": 32000,
            "per_device_batch_size": pdbs,
            "max_target_length": seq,
        }.get(k, d)
    )
    shape = Shape(name="llama2-7b", emb=4096, q_heads=32, kv_heads=32, head_dim=128, mlp=11008, layers=32, vocab=32000)
    policy = resolve("full", {})
    assert policy is not None
    whole = step_flops(shape, tokens=pdbs * seq * devices, seq=seq, remat=policy).model
    assert r.total == pytest.approx(whole / devices / 1e12, rel=1e-12)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("per_device_batch_size", "four"),
        ("base_emb_dim", 16.5),
        ("num_experts", 0),
        ("global_parameter_scale", 3),
        ("decoder_block", "transformer"),
        ("use_dpo", "maybe"),
        ("mlp_activations", "silu"),
    ],
)
def test_maxtext_flops_bad_value_names_its_key(key: str, value: Any):
    with pytest.raises(ArithError) as e:
        flops(**{**LLAMA2, key: value})
    assert e.value.key == key


def test_maxtext_flops_divisions_by_zero_name_their_key():
    with pytest.raises(ArithError) as e:
        flops(**LLAMA2, decoder_block="llama4", nope_layer_interval=0, chunk_attn_window_size=4)
    assert e.value.key == "nope_layer_interval"
    with pytest.raises(ArithError) as e:
        flops(**LLAMA2, num_experts=4)  # base_moe_mlp_dim stays -1: MaxText refuses the config
    assert e.value.key == "base_moe_mlp_dim"


def test_maxtext_flops_missing_keys_take_base_yml_defaults():
    # an empty config is MaxText's default model: 16 layers, emb 2048, 16 heads of 128, MLP 7168,
    # vocab 32000, pdbs 12, seq 2048 (base.yml)
    r = training_tflops_per_device(lambda k, d=None: d)
    bt = 12 * 2048
    ffn = 2 * bt * 7168 * 2048 * 2 + 2 * bt * 7168 * 2048
    qkv = 2 * bt * 2048 * (16 + 2 * 16) * 128
    out = 2 * bt * 2048 * 16 * 128
    attention = 4 * 12 * 2048**2 * 16 * 128 / 2
    check(r, (ffn * 16 + (qkv + out) * 16 + 2 * bt * 2048 * 32000) * 3, attention * 16 * 3)
