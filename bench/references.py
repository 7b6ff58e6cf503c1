"""Published MaxText training results used to calibrate ASAP's performance model.

These are the DOMAIN.md §4 development references plus further published MaxText results that come with a full config.
REFERENCES are dense models (scored on MFU); MOE_REFERENCES (end of file, issue 14) are mixture-of-experts runs scored
on step time, each marked development (may be tuned on) or held out (never tuned on).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Reference:
    name: str  # e.g. "llama2-70b v6e-256 seq4096"
    slice: str  # compile_topology name, e.g. "v6e-256"
    num_slices: int
    config: dict[str, object]  # MaxText keys exactly as the tuned config sets them (model_name or explicit base_*)
    published_mfu: float  # fraction, e.g. 0.438
    published_tflops_per_chip: float | None = None
    source: str = ""  # repo path@commit (and line) or doc URL where the config and the result are written
    notes: str = ""  # anything needed to interpret it (MFU definition, step time, tokens/s, doubts)
    published_step_s: float | None = None  # seconds per step where published (IRONWOOD_DENSE_REFERENCES)
    # True: the published TFLOP/s / MFU counts causal attention halved (MaxText after PR #1988, Jul 2025);
    # False: full attention, as every REFERENCES row (bench/mfu_references.py converts the prediction to match).
    causal_halved: bool = False


@dataclass(frozen=True)
class TunedConfig:
    """A real tuned MaxText config from DOMAIN.md §4 for which no published speed figure was found."""

    name: str
    slice: str
    num_slices: int
    config: dict[str, object]
    source: str
    notes: str = ""


# bf16 peak TFLOP/s per chip used to turn published TFLOP/s/chip into MFU where only TFLOP/s is published.
PEAK_BF16_TFLOPS = {"v4": 275.0, "v5e": 197.0, "v5p": 459.0, "v6e": 918.0, "tpu7x": 2307.0}

# ---------------------------------------------------------------------------------------------------------------
# Sources (all read through the public-code index; commit = the stored version that was read).
# ---------------------------------------------------------------------------------------------------------------
_TIERING = "AI-Hypercomputer/maxtext docs/reference/models/tiering.md@20a91e12a17cbaa7b786ac388b192b63392cd855"
_TRILLIUM = (
    "AI-Hypercomputer/maxtext benchmarks/maxtext_trillium_model_configs.py@bfd388fd4eb0e8ee3f07955dc3b3edb14e9fb163"
)
_TR = "AI-Hypercomputer/tpu-recipes"
_V4_README = "AI-Hypercomputer/maxtext MaxText/configs/v4/README.md@30cd40a5c8ed02519ddb77682e3ca72b8724f927"
_V5P_README = "AI-Hypercomputer/maxtext MaxText/configs/v5p/README.md@0ed7bd529b9d690570473c3525d1efeda6b6c944"
_V5E_README = "AI-Hypercomputer/maxtext MaxText/configs/v5e/README.md@0ed7bd529b9d690570473c3525d1efeda6b6c944"

_MAXTEXT_FLOPS_NOTE = (
    "MFU/TFLOP/s are MaxText's own per-device TFLOP/s (calculate_tflops_training_per_device: 6*params-style matmul "
    "FLOPs incl. embedding/logits, plus attention FLOPs); results published before PR #1988 (Jul 2025) count causal "
    "attention at full (non-halved) cost."
)

# ---------------------------------------------------------------------------------------------------------------
# Synthetic models defined by global_parameter_scale (MaxText base.yml defaults scaled by get_individual_scales).
# base.yml (AI-Hypercomputer/maxtext MaxText/configs/base.yml@000e93554a028c208eeacc75b7c1813a79ae6219):
#   base_emb_dim 2048, base_num_query_heads 16, base_num_kv_heads 16, base_mlp_dim 7168,
#   base_num_decoder_layers 16, head_dim 128, mlp_activations [silu, linear], vocab_size 32000,
#   max_target_length 2048, dtype bfloat16, weight_dtype float32, decoder_block llama2.
# Rule (pyconfig / configs/types.py get_individual_scales): base, rem = divmod(log2(scale), 3);
#   heads_scale = mlp_scale = base + (rem > 0); emb_scale = base + (rem > 1); layer_scale = base;
#   dim = 2**scale_i * base_dim (head_dim is not scaled).
# ---------------------------------------------------------------------------------------------------------------
_BASE_YML_DIMS = {
    "base_emb_dim": 2048,
    "base_num_query_heads": 16,
    "base_num_kv_heads": 16,
    "base_mlp_dim": 7168,
    "base_num_decoder_layers": 16,
}


def _scaled_dims(scale: int) -> dict[str, object]:
    """Explicit base_* dims MaxText derives from global_parameter_scale=scale and base.yml defaults."""
    log2 = int(math.log2(scale))
    if 2**log2 != scale:
        raise ValueError("global_parameter_scale must be a power of 2")
    base, rem = divmod(log2, 3)
    heads = base + int(rem > 0)
    emb = base + int(rem > 1)
    return {
        "base_emb_dim": 2**emb * _BASE_YML_DIMS["base_emb_dim"],
        "base_num_query_heads": 2**heads * _BASE_YML_DIMS["base_num_query_heads"],
        "base_num_kv_heads": 2**heads * _BASE_YML_DIMS["base_num_kv_heads"],
        "base_mlp_dim": 2**heads * _BASE_YML_DIMS["base_mlp_dim"],
        "base_num_decoder_layers": 2**base * _BASE_YML_DIMS["base_num_decoder_layers"],
        "head_dim": 128,
        "vocab_size": 32000,
        "mlp_activations": ["silu", "linear"],
    }


_SCALE_NOTE = (
    "Synthetic model: the script sets global_parameter_scale={scale}; the base_* dims here are what MaxText derives "
    "from base.yml defaults via get_individual_scales (head_dim/vocab_size/mlp_activations are base.yml defaults). "
)

# ---------------------------------------------------------------------------------------------------------------
# v6e (Trillium) tuned configs, v6e-256.
# ---------------------------------------------------------------------------------------------------------------
_SA_1024_2048 = {"sa_block_q": 1024, "sa_block_q_dkv": 2048, "sa_block_q_dq": 2048}
_SA_ALL_2048_FUSED = {
    "sa_block_q": 2048,
    "sa_block_kv": 2048,
    "sa_block_kv_compute": 2048,
    "sa_block_q_dkv": 2048,
    "sa_block_kv_dkv": 2048,
    "sa_block_kv_dkv_compute": 2048,
    "sa_block_q_dq": 2048,
    "sa_block_kv_dq": 2048,
    "sa_use_fused_bwd_kernel": True,
}
_SA_MOE = {"sa_block_q": 2048, "sa_block_q_dkv": 2048, "sa_block_q_dq": 2048}

_V6E: tuple[Reference, ...] = (
    Reference(
        name="llama2-70b v6e-256 seq4096 (llama2_70b_4096: fsdp_transpose, pdbs 4, remat full)",
        slice="v6e-256",
        num_slices=1,
        config={
            "model_name": "llama2-70b",
            "per_device_batch_size": 4,
            "ici_fsdp_parallelism": 1,
            "ici_fsdp_transpose_parallelism": -1,
            "ici_tensor_parallelism": 1,
            "remat_policy": "full",
            "max_target_length": 4096,
            "attention": "flash",
            "use_iota_embed": True,
            "dataset_type": "synthetic",
            **_SA_1024_2048,
        },
        published_mfu=419.193 / 918.0,
        published_tflops_per_chip=419.193,
        source=(
            f"config: {_TRILLIUM} (llama2_70b_4096); result: mahdi-shafiei/tpu-recipes (fork of {_TR}) "
            "training/trillium/Llama2-70B-MaxText/README.md@0838d5ea6a31e5378354559452563f4c7403dae8"
        ),
        notes=(
            "Recipe log line (maxtext@e7292a3a, libtpu 20241028): 'seconds: 17.373, TFLOP/s/device: 419.193, "
            "Tokens/s/device: 943.086, total_weights: 4194304' (=256*4096*4, consistent with pdbs 4). "
            "published_mfu = 419.193/918 computed here (not published as MFU). "
            "xla_flags: DENSE_VMEM_LIMIT_FLAG + CF_FOR_ALL_GATHER. " + _MAXTEXT_FLOPS_NOTE
        ),
    ),
    Reference(
        name="llama2-70b v6e-256 seq4096 (llama2_70b_4096_sc: fsdp_transpose, pdbs 2, qkv_proj_offloaded) [tiering]",
        slice="v6e-256",
        num_slices=1,
        config={
            "model_name": "llama2-70b",
            "per_device_batch_size": 2,
            "ici_fsdp_parallelism": 1,
            "ici_fsdp_transpose_parallelism": -1,
            "ici_tensor_parallelism": 1,
            "remat_policy": "qkv_proj_offloaded",
            "max_target_length": 4096,
            "attention": "flash",
            "use_iota_embed": True,
            "dataset_type": "synthetic",
            **_SA_1024_2048,
        },
        published_mfu=0.438,
        published_tflops_per_chip=402.274,
        source=(
            f"MFU: {_TIERING} (Trillium Gold, 'Llama 2 70B | 256, BF16, SL=4096 | 43.8% | 900'); "
            f"log+config: {_TR} training/trillium/Llama2-70B-MaxText/README.md@9e458c71883a862cb3ba0cd466a223b8a9cba426"
        ),
        notes=(
            "Recipe log (MaxText tag tpu-recipes-v0.1.2): 'seconds: 9.052, TFLOP/s/device: 402.274, Tokens/s/device: "
            "905.021, total_weights: 2097152'. total_weights = 256*4096*2 => the logged run used pdbs 2 (as in the "
            "older trillium file maxtext@02df1543 llama2_70b_4096_sc); the README's printed config says pdbs 3 "
            "(current bfd388fd file also 3). 402.274/918 = 43.8% matches tiering. xla_flags: DENSE_VMEM_LIMIT_FLAG + "
            "CF_FOR_ALL_GATHER + ENABLE_SPARSECORE_OFFLOADING_FOR_ALL_REDUCE. " + _MAXTEXT_FLOPS_NOTE
        ),
    ),
    Reference(
        name="llama3.1-8b v6e-256 seq8192 (llama3_1_8b_8192) [tiering]",
        slice="v6e-256",
        num_slices=1,
        config={
            "model_name": "llama3.1-8b",
            "per_device_batch_size": 4,
            "ici_fsdp_parallelism": -1,
            "remat_policy": "custom",
            "decoder_layer_input": "offload",
            "out_proj": "offload",
            "query_proj": "offload",
            "key_proj": "offload",
            "value_proj": "offload",
            "max_target_length": 8192,
            "attention": "flash",
            "use_iota_embed": True,
            "dataset_type": "synthetic",
            **_SA_ALL_2048_FUSED,
        },
        published_mfu=0.4546,
        published_tflops_per_chip=417.397,
        source=(
            f"MFU: {_TIERING} (Gold, 45.46%, 7,207 tok/s/device); log+config: {_TR} "
            "training/trillium/Llama3.1-8B-MaxText/v6e-256/README.md@a9e09290174425595a0ef6ec5f765d5f04360423"
        ),
        notes=(
            "Recipe (MaxText tag tpu-recipes-v0.1.4, JAX 0.6.1): 'seconds: 4.546, TFLOP/s/device: 417.397, "
            "Tokens/s/device: 7207.336, total_weights: 8388608' (=256*8192*4). xla_flags: DENSE_VMEM_LIMIT_FLAG + "
            "LAYOUT_FOR_ALL_REDUCE_SCATTER + DATA_PARALLEL_OVERLAP + CF_FOR_ALL_GATHER + "
            "ENABLE_SPARSECORE_OFFLOADING_FOR_ALL_REDUCE + HOST_OFFLOAD_FLAGS. " + _MAXTEXT_FLOPS_NOTE
        ),
    ),
    Reference(
        name="llama3.1-70b v6e-256 seq8192 (llama3_1_70b_8192) [tiering]",
        slice="v6e-256",
        num_slices=1,
        config={
            "model_name": "llama3.1-70b",
            "per_device_batch_size": 5,
            "ici_fsdp_parallelism": -1,
            "remat_policy": "custom",
            "decoder_layer_input": "offload",
            "query_proj": "offload",
            "key_proj": "offload",
            "value_proj": "offload",
            "max_target_length": 8192,
            "attention": "flash",
            "use_iota_embed": True,
            "dataset_type": "synthetic",
            **_SA_ALL_2048_FUSED,
        },
        published_mfu=0.5033,
        published_tflops_per_chip=462.297,
        source=(
            f"MFU: {_TIERING} (Gold, 50.33%, 960 tok/s/device; links maxtext@92e59fdf "
            "benchmarks/maxtext_trillium_model_configs.py#L959); log+config: "
            f"{_TR} training/trillium/Llama3.1-70B-MaxText/v6e-256/README.md@3596002ad03c04ae20d5f04c711e8a1d2557b7f8"
        ),
        notes=(
            "Recipe (tpu-recipes-v0.1.4): 'seconds: 42.656, TFLOP/s/device: 462.297, Tokens/s/device: 960.248, "
            "total_weights: 10485760' (=256*8192*5). out_proj is NOT offloaded here (unlike 8B). xla_flags: "
            "DENSE_VMEM_LIMIT_FLAG + LAYOUT_FOR_ALL_REDUCE_SCATTER + DATA_PARALLEL_OVERLAP + CF_FOR_ALL_GATHER + "
            "HOST_OFFLOAD_FLAGS. " + _MAXTEXT_FLOPS_NOTE
        ),
    ),
    Reference(
        name="llama3.1-405b 2x v6e-256 seq8192 (llama3_1_405b_8192_fsdp_dcn: fsdp 64 x tensor 4, dcn_fsdp 2) [tiering]",
        slice="v6e-256",
        num_slices=2,
        config={
            "model_name": "llama3.1-405b",
            "per_device_batch_size": 1,
            "ici_fsdp_parallelism": 64,
            "ici_tensor_parallelism": 4,
            "dcn_fsdp_parallelism": 2,
            "allow_split_physical_axes": True,
            "custom_mesh": "hybrid_ring_64x4",
            "remat_policy": "custom",
            "decoder_layer_input": "offload",
            "query_proj": "offload",
            "key_proj": "offload",
            "value_proj": "offload",
            "out_proj": "offload",
            "max_target_length": 8192,
            "attention": "flash",
            "use_iota_embed": True,
            "dataset_type": "synthetic",
            **_SA_1024_2048,
        },
        published_mfu=0.3855,
        published_tflops_per_chip=None,
        source=(
            f"MFU: {_TIERING} (Silver, 'Llama 3.1 405B | 256 Chips, BF16, SL=8192 | 38.55% | 123', links maxtext@"
            f"5e6a7caf benchmarks/maxtext_trillium_model_configs.py#L723, not readable here); config: {_TRILLIUM}; "
            f"log: {_TR} training/trillium/Llama3-405B-MaxText/README.md@b28e5994616de5d03b21a749d5f3772dfb5e45f7"
        ),
        notes=(
            "DOUBT: which config L723@5e6a7caf is could not be read; DOMAIN.md pairs the tiering figure with this "
            "fsdp 64 x tensor 4 x dcn_fsdp 2 config. Tiering says '256 Chips' but dcn_fsdp=2 needs 2 slices; the "
            "recipe runs it with --num_slices=2 (512 chips). Tiering's 38.55% and 123 tok/s are mutually "
            "inconsistent with MaxText's ~2.63 TFLOP/token for this model. Recipe log (maxtext@5c45ca38, libtpu "
            "20241106): 'seconds: 58.805, TFLOP/s/device: 365.740, Tokens/s/device: 139.307, total_weights: "
            "4194304' (=512*8192*1) => 365.740/918 = 39.8%. xla_flags: DENSE_VMEM_LIMIT_FLAG + CF_FOR_ALL_GATHER + "
            "HOST_OFFLOAD_FLAGS. " + _MAXTEXT_FLOPS_NOTE
        ),
    ),
    Reference(
        name="llama3.1-405b 2x v6e-256 seq8192 (llama3_1_405b_8192_pure_fsdp_ici: fsdp 256, dcn_fsdp 2)",
        slice="v6e-256",
        num_slices=2,
        config={
            "model_name": "llama3.1-405b",
            "per_device_batch_size": 1,
            "ici_fsdp_parallelism": 256,
            "dcn_fsdp_parallelism": 2,
            "remat_policy": "custom",
            "decoder_layer_input": "offload",
            "max_target_length": 8192,
            "attention": "flash",
            "use_iota_embed": True,
            "dataset_type": "synthetic",
            **_SA_1024_2048,
        },
        published_mfu=392.454 / 918.0,
        published_tflops_per_chip=392.454,
        source=(
            f"{_TR} training/trillium/Llama3.1-405B-MaxText/README.md@21efcc212df0744372b3bbba53d016b2cc01bf2a "
            f"(config printed there, MaxText tag tpu-recipes-v0.1.2; same in {_TRILLIUM})"
        ),
        notes=(
            "Recipe log: 'seconds: 54.803, TFLOP/s/device: 392.454, Tokens/s/device: 149.482, total_weights: "
            "4194304' (=512*8192*1). published_mfu = 392.454/918 computed here. xla_flags: DENSE_VMEM_LIMIT_FLAG + "
            "CF_FOR_ALL_GATHER + HOST_OFFLOAD_FLAGS. " + _MAXTEXT_FLOPS_NOTE
        ),
    ),
)

# ---------------------------------------------------------------------------------------------------------------
# v5p tiering result (named model).
# ---------------------------------------------------------------------------------------------------------------
_V5P_NAMED: tuple[Reference, ...] = (
    Reference(
        name="llama2-70b v5p 512 chips seq4096 (pdbs 4, save_dot_except_mlpwi) [tiering]",
        slice="v5p-1024",
        num_slices=1,
        config={
            "model_name": "llama2-70b",
            "per_device_batch_size": 4,
            "ici_fsdp_parallelism": -1,
            "remat_policy": "save_dot_except_mlpwi",
            "max_target_length": 4096,
            "use_iota_embed": True,
            "dataset_type": "synthetic",
        },
        published_mfu=0.654,
        published_tflops_per_chip=None,
        source=(
            f"MFU: {_TIERING} (v5p Gold, '512 Chips, BF16, SL=4096 | 65.4% | 692', links maxtext@92e59fdf "
            "benchmarks/maxtext_v5p_model_configs.py#L156, not readable here); config: AI-Hypercomputer/maxtext "
            "benchmarks/maxtext_v5p_model_configs.py@8270e05004e602d2b80e40e8c6d0c76389372c5d (llama2_70b_v5p_128) "
            "and MaxText/configs/v5p/llama2_70b.sh@ad10ed0fa3ced5585efdfc8802021838648c7b5e (same keys)"
        ),
        notes=(
            "DOUBT: slice size. Tiering says 512 chips (=v5p-1024); llama2_70b.sh says pdbs 4 targets a 4M-token "
            "batch on 1 x v5p-512 (256 chips) and the benchmark entry is named llama2_70b_v5p_128. With pure FSDP "
            "and fixed pdbs the per-chip MFU depends little on chip count. attention not set (autoselected). "
            "xla_flags: DATA_PARALLEL_OVERLAP + CF_FOR_ALL_GATHER. " + _MAXTEXT_FLOPS_NOTE
        ),
    ),
)

# ---------------------------------------------------------------------------------------------------------------
# v4 synthetic models (MaxText/configs/v4/*.sh + v4 README table).
# ---------------------------------------------------------------------------------------------------------------
_V4_NOTE = (
    "published_mfu is the README's MFU (= TFLOP/s / 275). The README numbers date from 2023 scripts that used the "
    "old `scale=` knob (e.g. MaxText/configs/1xv4-384.sh: 'achieves 162 TFLOP/s, 52B'); the explicit dims here are "
    "the later translation in the .sh file. DOUBT: the nominal sizes (22B, 52B) fit head_dim 256 with a single-matrix "
    "MLP (2023 defaults, not re-read here); with today's base.yml defaults (head_dim 128, silu+linear) these dims "
    "give ~25.8B and ~64B params, so head_dim/mlp_activations are left unset. max_target_length 2048 and "
    "vocab_size 32000 are base.yml defaults; attention not set (autoselected). Multislice rows use base.yml "
    "dcn_data_parallelism=-1 (data parallel over DCN). LIBTPU_INIT_ARGS: --xla_enable_async_all_gather=true "
    "TPU_MEGACORE=MEGACORE_DENSE. " + _MAXTEXT_FLOPS_NOTE
)
_V4_22B = {
    "base_emb_dim": 6144,
    "base_num_query_heads": 24,
    "base_num_kv_heads": 24,
    "base_mlp_dim": 24576,
    "base_num_decoder_layers": 48,
    "vocab_size": 32000,
    "per_device_batch_size": 13,
    "ici_fsdp_parallelism": 64,
    "remat_policy": "full",
    "max_target_length": 2048,
}
_V4_52B = {
    "base_emb_dim": 12288,
    "base_num_query_heads": 32,
    "base_num_kv_heads": 32,
    "base_mlp_dim": 49152,
    "base_num_decoder_layers": 32,
    "vocab_size": 32000,
    "per_device_batch_size": 7,
    "ici_fsdp_parallelism": 192,
    "ici_tensor_parallelism": 1,
    "remat_policy": "full",
    "max_target_length": 2048,
}
_V4_22B_SRC = "AI-Hypercomputer/maxtext MaxText/configs/v4/22b.sh@232369cca88adecc924856ea95d0b12a2622d616"
_V4_52B_SRC = "AI-Hypercomputer/maxtext MaxText/configs/v4/52b.sh@0a18c20fe4a40ead174e29ed1241ce946ac53fd4"

_V4: tuple[Reference, ...] = tuple(
    Reference(
        name=f"synthetic-22b {n}x v4-128",
        slice="v4-128",
        num_slices=n,
        config=dict(_V4_22B),
        published_mfu=mfu,
        published_tflops_per_chip=tf,
        source=f"config: {_V4_22B_SRC}; result: {_V4_README} (22B table, {n}x v4-128)",
        notes=_V4_NOTE,
    )
    for n, tf, mfu in ((1, 156.0, 0.567), (2, 152.0, 0.552), (4, 149.0, 0.543), (8, 146.0, 0.532))
) + tuple(
    Reference(
        name=f"synthetic-52b {n}x v4-384",
        slice="v4-384",
        num_slices=n,
        config=dict(_V4_52B),
        published_mfu=mfu,
        published_tflops_per_chip=tf,
        source=f"config: {_V4_52B_SRC}; result: {_V4_README} (52B table, {n}x v4-384)",
        notes=_V4_NOTE
        + (
            " README: 2x is 'quirkily higher than single slice because of choices made by the compiler'."
            if n == 2
            else ""
        ),
    )
    for n, tf, mfu in ((1, 154.0, 0.560), (2, 162.0, 0.589))
)

# ---------------------------------------------------------------------------------------------------------------
# v5p synthetic models (MaxText/configs/v5p/*.sh + v5p README tables).
# ---------------------------------------------------------------------------------------------------------------
_V5P_COMMON = {
    "max_target_length": 2048,
    "attention": "flash",
    "use_iota_embed": True,
    "dataset_type": "synthetic",
    "quantization": "",
}
_V5P_NOTE = (
    "published_mfu is the README's MFU (= TFLOP/s / 459). The .sh read is one stored version; the README does not "
    "say which script version produced each row. Multislice rows use base.yml dcn_data_parallelism=-1. "
    "LIBTPU_INIT_ARGS enable async collective fusion (fuse all-gather, multiple steps), overlap_compute_collective_tc, "
    "data-parallel all-reduce opt, ag backward pipelining, megacore_fusion_allow_ags=false. " + _MAXTEXT_FLOPS_NOTE
)
_V5P_SCRIPTS: dict[int, tuple[str, dict[str, object]]] = {
    32: (
        "MaxText/configs/v5p/32b.sh@0d9779a57e8407f5d4fbb64ffc2074797d714838",
        {
            "per_device_batch_size": 7,
            "remat_policy": "minimal",
            "ici_fsdp_parallelism": -1,
            "ici_tensor_parallelism": 4,
        },
    ),
    64: (
        "MaxText/configs/v5p/64b.sh@3d048f7b461ec9806a03e8bb89bb7129d2c1c327",
        {
            "per_device_batch_size": 3,
            "remat_policy": "minimal",
            "ici_fsdp_parallelism": -1,
            "ici_tensor_parallelism": 4,
        },
    ),
    128: (
        "MaxText/configs/v5p/128b.sh@07775101f8aa8329d71765c5633d980bf6b3afac",
        {
            "per_device_batch_size": 1,
            "remat_policy": "minimal",
            "ici_fsdp_parallelism": -1,
            "ici_tensor_parallelism": 8,
        },
    ),
    256: (
        "MaxText/configs/v5p/256b.sh@07775101f8aa8329d71765c5633d980bf6b3afac",
        {
            "per_device_batch_size": 1,
            "remat_policy": "minimal",
            "ici_fsdp_parallelism": -1,
            "ici_tensor_parallelism": 8,
        },
    ),
    512: (
        "MaxText/configs/v5p/512b.sh@07775101f8aa8329d71765c5633d980bf6b3afac",
        {"per_device_batch_size": 2, "remat_policy": "full", "ici_fsdp_parallelism": -1, "ici_tensor_parallelism": 8},
    ),
}
# (scale, slice, num_slices, TFLOP/s/chip, MFU) rows of MaxText/configs/v5p/README.md (1024B rows omitted: the
# stored 1024b.sh has a broken line continuation before ici_data_parallelism=16, so its mesh is not pinned down).
_V5P_ROWS = (
    (32, "v5p-128", 1, 328.0, 0.7147),
    (32, "v5p-128", 2, 319.0, 0.6943),
    (64, "v5p-128", 1, 323.0, 0.7031),
    (64, "v5p-128", 2, 309.0, 0.6726),
    (128, "v5p-256", 1, 315.0, 0.6868),
    (128, "v5p-256", 2, 305.0, 0.6634),
    (128, "v5p-512", 1, 316.0, 0.6883),
    (128, "v5p-512", 2, 274.0, 0.5966),
    (256, "v5p-1024", 1, 308.0, 0.6709),
    (256, "v5p-1024", 2, 289.0, 0.6299),
    (512, "v5p-1024", 1, 294.0, 0.6399),
    (512, "v5p-1024", 2, 282.0, 0.6145),
)
_V5P: tuple[Reference, ...] = tuple(
    Reference(
        name=f"synthetic-{scale}b {n}x {sl}",
        slice=sl,
        num_slices=n,
        config={**_scaled_dims(scale), **_V5P_SCRIPTS[scale][1], **_V5P_COMMON},
        published_mfu=mfu,
        published_tflops_per_chip=tf,
        source=f"config: AI-Hypercomputer/maxtext {_V5P_SCRIPTS[scale][0]}; result: {_V5P_README} ({scale}B table)",
        notes=_SCALE_NOTE.format(scale=scale) + _V5P_NOTE,
    )
    for scale, sl, n, tf, mfu in _V5P_ROWS
)

# ---------------------------------------------------------------------------------------------------------------
# v5e synthetic models (MaxText/configs/v5e/*.sh + v5e README table).
# ---------------------------------------------------------------------------------------------------------------
_V5E_COMMON = {"max_target_length": 2048, "attention": "flash", "use_iota_embed": True, "dataset_type": "synthetic"}
_V5E_NOTE = (
    "published_mfu is the README's MFU (TFLOP/s/197 up to rounding of the TFLOP/s column). The .sh read is one "
    "stored version; the README does not say which version produced the table. Multislice rows use base.yml "
    "dcn_data_parallelism=-1. LIBTPU_INIT_ARGS enable data-parallel all-reduce opt, async collective fusion (fuse "
    "all-gather, multiple steps), overlap_compute_collective_tc, async all-gather. " + _MAXTEXT_FLOPS_NOTE
)
_V5E_SCRIPTS: dict[int, tuple[str, dict[str, object]]] = {
    16: (
        "MaxText/configs/v5e/16b.sh@07775101f8aa8329d71765c5633d980bf6b3afac",
        {"per_device_batch_size": 6, "remat_policy": "full"},
    ),
    32: (
        "MaxText/configs/v5e/32b.sh@07775101f8aa8329d71765c5633d980bf6b3afac",
        {"per_device_batch_size": 4, "remat_policy": "full"},
    ),
    64: (
        "MaxText/configs/v5e/64b.sh@43fce2e7e9c7e65747d60c2fce084d2a5d19d6e3",
        {"per_device_batch_size": 2, "remat_policy": "full"},
    ),
    128: (
        "MaxText/configs/v5e/128b.sh@3d048f7b461ec9806a03e8bb89bb7129d2c1c327",
        {
            "per_device_batch_size": 1,
            "remat_policy": "minimal_offloaded",
            "ici_fsdp_parallelism": 16,
            "ici_tensor_parallelism": 16,
            "fused_qkv": True,
            "fused_mlp": True,
        },
    ),
}
# TFLOP/s/chip and MFU per (scale) for 1, 2, 4, 8, 16, 32 x v5e-256, from MaxText/configs/v5e/README.md.
_V5E_TABLE: dict[int, tuple[tuple[float, float], ...]] = {
    16: ((120.0, 0.6110), (117.0, 0.5937), (117.0, 0.5914), (115.0, 0.5827), (111.0, 0.5656), (108.0, 0.5465)),
    32: ((132.0, 0.6686), (128.0, 0.6481), (126.0, 0.6410), (125.0, 0.6367), (123.0, 0.6226), (119.0, 0.6040)),
    64: ((118.0, 0.5990), (112.0, 0.5666), (110.0, 0.5585), (108.0, 0.5496), (105.0, 0.5329), (99.0, 0.5018)),
    128: ((110.0, 0.5606), (110.0, 0.5582), (108.0, 0.5493), (104.0, 0.5293), (100.0, 0.5086), (91.0, 0.4625)),
}
_V5E_SLICE_COUNTS = (1, 2, 4, 8, 16, 32)
_V5E: tuple[Reference, ...] = tuple(
    Reference(
        name=f"synthetic-{scale}b {n}x v5e-256",
        slice="v5e-256",
        num_slices=n,
        config={**_scaled_dims(scale), **_V5E_SCRIPTS[scale][1], **_V5E_COMMON},
        published_mfu=mfu,
        published_tflops_per_chip=tf,
        source=f"config: AI-Hypercomputer/maxtext {_V5E_SCRIPTS[scale][0]}; result: {_V5E_README} ({scale}B columns)",
        notes=_SCALE_NOTE.format(scale=scale)
        + _V5E_NOTE
        + (
            " 128b.sh: the stored later version (0ea0637a) drops the line continuation before fused_qkv/fused_mlp, "
            "so those two keys may not have applied in every run."
            if scale == 128
            else ""
        ),
    )
    for scale, rows in _V5E_TABLE.items()
    for n, (tf, mfu) in zip(_V5E_SLICE_COUNTS, rows, strict=True)
)

REFERENCES: tuple[Reference, ...] = _V6E + _V5P_NAMED + _V4 + _V5P + _V5E

# ---------------------------------------------------------------------------------------------------------------
# DOMAIN.md §4 tuned v6e-256 configs with no published speed figure found (kept for mesh/memory checks only).
# All from AI-Hypercomputer/maxtext benchmarks/maxtext_trillium_model_configs.py
# @bfd388fd4eb0e8ee3f07955dc3b3edb14e9fb163.
# ---------------------------------------------------------------------------------------------------------------
TUNED_CONFIGS_WITHOUT_RESULT: tuple[TunedConfig, ...] = (
    TunedConfig(
        name="llama2-7b v6e-256 seq4096 (llama2_7b_4096)",
        slice="v6e-256",
        num_slices=1,
        config={
            "model_name": "llama2-7b",
            "per_device_batch_size": 12,
            "ici_fsdp_parallelism": -1,
            "remat_policy": "full",
            "max_target_length": 4096,
            "attention": "flash",
            "use_iota_embed": True,
            "dataset_type": "synthetic",
            **_SA_1024_2048,
        },
        source=_TRILLIUM,
        notes="xla_flags: DENSE_VMEM_LIMIT_FLAG + CF_FOR_ALL_GATHER.",
    ),
    TunedConfig(
        name="llama3-8b v6e-256 seq8192 (llama3_8b_8192)",
        slice="v6e-256",
        num_slices=1,
        config={
            "model_name": "llama3-8b",
            "per_device_batch_size": 8,
            "ici_fsdp_parallelism": -1,
            "remat_policy": "full",
            "max_target_length": 8192,
            "attention": "flash",
            "use_iota_embed": True,
            "dataset_type": "synthetic",
            **_SA_1024_2048,
        },
        source=_TRILLIUM,
        notes="xla_flags: DENSE_VMEM_LIMIT_FLAG + CF_FOR_ALL_GATHER.",
    ),
    TunedConfig(
        name="deepseek3-671b 2x v6e-256 seq8192 (deepseek_v3_ep16: fsdp 16 x expert 16, dcn_fsdp 2)",
        slice="v6e-256",
        num_slices=2,
        config={
            "model_name": "deepseek3-671b",
            "per_device_batch_size": 1,
            "max_target_length": 8192,
            "ici_fsdp_parallelism": 16,
            "ici_expert_parallelism": 16,
            "dcn_fsdp_parallelism": 2,
            "remat_policy": "custom",
            "decoder_layer_input": "offload",
            "use_iota_embed": True,
            "dataset_type": "synthetic",
            **_SA_MOE,
            "megablox": False,
            "sparse_matmul": False,
            "capacity_factor": 1.0,
            "dtype": "bfloat16",
            "opt_type": "sgd",
            "weight_dtype": "bfloat16",
            "attention": "flash",
        },
        source=_TRILLIUM,
        notes=(
            "File comment says 'Config only runs on v6e-256'; dcn_fsdp 2 implies 2 slices. opt_type sgd (no Adam "
            "moments). xla_flags: MOE_VMEM_LIMIT_FLAG + CF_FOR_ALL_GATHER + DATA_PARALLEL_OVERLAP."
        ),
    ),
    TunedConfig(
        name="gemma2-9b v6e-256 seq8192 (gemma2_9b_8192: fsdp_transpose 256, pdbs 3)",
        slice="v6e-256",
        num_slices=1,
        config={
            "model_name": "gemma2-9b",
            "per_device_batch_size": 3,
            "ici_fsdp_transpose_parallelism": 256,
            "remat_policy": "full",
            "max_target_length": 8192,
            "attention": "flash",
            "use_iota_embed": True,
            "dataset_type": "synthetic",
            **_SA_MOE,
        },
        source=_TRILLIUM,
        notes=(
            "xla_flags: CUSTOM_VMEM_LIMIT_FLAG(vmem_limit=114688) + REDUCE_SCATTER_FUSION + CF_FOR_ALL_GATHER + "
            "LAYOUT_FOR_ALL_REDUCE_SCATTER."
        ),
    ),
)

# ===============================================================================================================
# MoE: published MaxText mixture-of-experts training results (issue 14).
#
# Scored on STEP TIME (bench/mfu_references.py, MoE section), which does not depend on how the FLOPs are counted.
# Development rows (development=True) are the three MoE rows of MaxText's tiering page named in issue 14: Mixtral
# 8x7B and 8x22B on v6e-256 and Mixtral 8x7B on v5p. Everything else is HELD OUT: it is printed separately and is
# not to be used to tune the performance model.
# ===============================================================================================================

FULL_ATTENTION = "full attention (MaxText before PR #1988, merged 2025-07-18 as a4c01726)"
CAUSAL_HALVED = "causal attention halved (MaxText after PR #1988)"

# How published_step_s was obtained.
STEP_LOG = "log"  # a MaxText 'completed step: N, seconds: S, ...' line printed in the recipe
STEP_TABLE = "table"  # a results table's 'Step time (seconds)' column
STEP_TOKENS = "tokens/s"  # pdbs x seq / published tokens/s/device (both exact MaxText quantities)
STEP_FROM_MFU = "MFU"  # only MFU is published: step implied with MaxText's own FLOP count (maxtext_tflops_per_device)


@dataclass(frozen=True)
class MoEReference:
    name: str
    slice: str  # compile_topology name (tpu7x and v5p names count TensorCores/devices: tpu7x-256 = 128 chips)
    num_slices: int
    config: dict[str, object]  # MaxText keys exactly as the recipe sets them (run/IO-only keys dropped, see below)
    development: bool  # True: an issue 14 development row (may be tuned on); False: held out
    published_step_s: float | None  # seconds per optimizer step; None where only MFU is published
    step_basis: str  # STEP_LOG / STEP_TABLE / STEP_TOKENS / STEP_FROM_MFU
    flop_count: str  # FULL_ATTENTION or CAUSAL_HALVED: the count behind the published TFLOP/s or MFU
    active_params: float  # published active parameters per token (for the trivial 6*N*D baseline only)
    active_source: str
    published_tflops_per_device: float | None = None  # MaxText's logged TFLOP/s/device (per JAX device)
    published_mfu: float | None = None
    maxtext_dims: dict[str, int] | None = None  # dims for maxtext_tflops_per_device (GQA decoders only)
    source: str = ""
    notes: str = ""

    @property
    def pdbs(self) -> float:
        return float(self.config["per_device_batch_size"])  # type: ignore[arg-type]

    @property
    def seq(self) -> int:
        return int(self.config["max_target_length"])  # type: ignore[call-overload]


def maxtext_tflops_per_device(dims: dict[str, int], pdbs: float, seq: int, *, causal: bool) -> float:
    """MaxText's training TFLOPs per device per step (calculate_tflops_training_per_device) for a GQA decoder in
    which every layer has the same MLP: dense (experts=1) or a routed MoE counted at top-k experts plus the router
    (the Mixtral/Mistral branch; AI-Hypercomputer/maxtext MaxText/maxtext_utils.py
    @3662540ee852d0d8f8333a36c04ddc0f1316ebfb, calculate_tflops_training_per_device; same terms at e7292a3a5727):
      ffn = 2*B*T*F*D*n_in + 2*B*T*F*D, and for MoE: 2*B*T*D*E (gate) + k*ffn
      qkv = 2*B*T*D*(H+2K)*hd; proj = 2*B*T*D*H*hd; logits = 2*B*T*D*V
      attention = 4*B*T^2*H*hd (halved for causal masks after PR #1988)
      total = 3*((ffn+qkv+proj)*L + logits) + 3*attention*L.
    Not valid for MLA (DeepSeek), Llama 4 (interleaved MoE / NoPE) or Gemma decoders, which MaxText counts otherwise."""
    b, t = pdbs, seq
    d, f, h, k, hd, v, n_layers = (dims[x] for x in ("emb", "mlp", "heads", "kv_heads", "head_dim", "vocab", "layers"))
    experts, top_k, n_in = dims.get("experts", 1), dims.get("experts_per_tok", 1), dims.get("mlp_in", 2)
    ffn = 2 * b * t * f * d * n_in + 2 * b * t * f * d
    if experts > 1:
        ffn = 2 * b * t * d * experts + top_k * ffn
    qkv = 2 * b * t * d * (h + 2 * k) * hd
    proj = 2 * b * t * d * h * hd
    logits = 2 * b * t * d * v
    attention = 4 * b * t * t * h * hd * (0.5 if causal else 1.0)
    return (3 * ((ffn + qkv + proj) * n_layers + logits) + 3 * attention * n_layers) / 1e12


# Keys of the recipes that only name files, runs, logging or checkpointing; dropped from `config`.
_RUN_ONLY_KEYS = frozenset(
    {
        "tokenizer_path",
        "tokenizer_type",
        "dataset_path",
        "base_output_directory",
        "output_dir",
        "run_name",
        "steps",
        "profiler",
        "skip_first_n_steps_for_profiler",
        "profiler_steps",
        "profile_periodically_period",
        "gcs_metrics",
        "enable_checkpointing",
        "async_checkpointing",
        "skip_jax_distributed_system",
        "reuse_example_batch",
    }
)


def _value(text: str) -> object:
    if text in ("True", "true"):
        return True
    if text in ("False", "false"):
        return False
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text.strip("'\"")


def _recipe_args(text: str) -> dict[str, object]:
    """The `key=value` MAXTEXT_ARGS of a tpu-recipes run_recipe.sh, pasted verbatim, as a config dict (values
    typed as MaxText's pyconfig reads them; run/IO-only keys dropped)."""
    out: dict[str, object] = {}
    for tok in text.split():
        key, _, val = tok.partition("=")
        if key and key not in _RUN_ONLY_KEYS:
            out[key] = _value(val)
    return out


# --- sources -----------------------------------------------------------------------------------------------------
_TR_MIXTRAL_7B = f"{_TR} training/trillium/Mixtral-8x7B-MaxText/README.md"
_TR_IRONWOOD = f"{_TR} training/ironwood/README.md"
_MT = "AI-Hypercomputer/maxtext"
_MOE_NOTE = (
    "Step time is the score; a MaxText TFLOP/s or MFU figure, where given, counts routed experts at top-k (no "
    "capacity padding) plus the router, "
)

# Published active parameters per token (trivial baseline only; issue 14 lists the same figures).
_ACTIVE: dict[str, tuple[float, str]] = {
    "mixtral-8x7b": (12.9e9, "Mistral AI, mistral.ai/news/mixtral-of-experts: 46.7B total, 12.9B per token"),
    "mixtral-8x22b": (39.1e9, "Mistral AI, mistral.ai/news/mixtral-8x22b: 141B total, 39B active (issue 14: 39.1B)"),
    "llama4-17b-16e": (17e9, "Meta, Llama 4 Scout model card: 17B active, 109B total"),
    "llama4-17b-128e": (17e9, "Meta, Llama 4 Maverick model card: 17B active, 400B total"),
    "deepseek3-671b": (37e9, "DeepSeek-V3 technical report (arXiv 2412.19437): 671B total, 37B activated"),
    "gpt-oss-120b": (5.1e9, "OpenAI gpt-oss model card: 116.8B total, 5.1B active"),
    "qwen3-235b-a22b": (22e9, "Qwen3 technical report: 235B total, 22B activated"),
    "gemma4-26b": (3.8e9, "google/gemma-4-26B-A4B model details (as quoted on Hugging Face): 25.2B total, 3.8B active"),
}

# MaxText model files (dims for maxtext_tflops_per_device).
_MIXTRAL_8X7B_DIMS = {
    "emb": 4096,
    "mlp": 14336,
    "heads": 32,
    "kv_heads": 8,
    "head_dim": 128,
    "vocab": 32000,
    "layers": 32,
    "experts": 8,
    "experts_per_tok": 2,
}  # src/maxtext/configs/models/mixtral-8x7b.yml@e591f30cb (same at 5172e9e2, Oct 2024)
_MIXTRAL_8X22B_DIMS = {
    "emb": 6144,
    "mlp": 16384,
    "heads": 48,
    "kv_heads": 8,
    "head_dim": 128,
    "vocab": 32768,
    "layers": 56,
    "experts": 8,
    "experts_per_tok": 2,
}  # src/maxtext/configs/models/mixtral-8x22b.yml@e591f30cb

_V6E_MOE_COMMON = {
    "attention": "flash",
    "dataset_type": "synthetic",
    "sa_block_q": 2048,
    "sa_block_q_dkv": 2048,
    "sa_block_q_dq": 2048,
}
_CUSTOM_OFFLOAD = {
    "remat_policy": "custom",
    "decoder_layer_input": "offload",
    "out_proj": "offload",
    "query_proj": "offload",
    "key_proj": "offload",
    "value_proj": "offload",
}
_SA_ALL_2048 = {
    "sa_block_q": 2048,
    "sa_block_kv": 2048,
    "sa_block_kv_compute": 2048,
    "sa_block_q_dkv": 2048,
    "sa_block_kv_dkv": 2048,
    "sa_block_kv_dkv_compute": 2048,
    "sa_block_q_dq": 2048,
    "sa_block_kv_dq": 2048,
}
_DENSE_PATH_NOTE = (
    "sparse_matmul=False is today's spelling of what this config selected: at e7292a3a/261a8be0 the key did not "
    "exist and megablox=False alone chose MaxText's dense (capacity-padded, token-dropping) MoE path. "
)

# ---------------------------------------------------------------------------------------------------------------
# Development rows: MaxText tiering page (docs/reference/models/tiering.md), MoE entries.
# ---------------------------------------------------------------------------------------------------------------
_MOE_DEV: tuple[MoEReference, ...] = (
    MoEReference(
        name="mixtral-8x7b v6e-256 seq4096 (mixtral_8x7b_dropped @e7292a3a: pdbs 8, remat full, cf 1.25) [tiering]",
        slice="v6e-256",
        num_slices=1,
        config={
            "model_name": "mixtral-8x7b",
            "per_device_batch_size": 8,
            "ici_fsdp_parallelism": -1,
            "max_target_length": 4096,
            "remat_policy": "full",
            "use_iota_embed": True,
            **_V6E_MOE_COMMON,
            "megablox": False,
            "sparse_matmul": False,
            "capacity_factor": 1.25,
        },
        development=True,
        published_step_s=8.409,
        step_basis=STEP_LOG,
        flop_count=FULL_ATTENTION,
        active_params=_ACTIVE["mixtral-8x7b"][0],
        active_source=_ACTIVE["mixtral-8x7b"][1],
        published_tflops_per_device=323.173,
        published_mfu=0.3523,
        maxtext_dims=_MIXTRAL_8X7B_DIMS,
        source=(
            f"MFU: {_TIERING} (Trillium Silver 'Mixtral 8X7B | 256 Chips, BF16, SL=4096 | 35.23% | 3,899'); log: "
            f"{_TR_MIXTRAL_7B}@372537f26ecdb56c06992e5bcc3937860b9e0115 (first set in a50d68ea90b7); config: {_MT} "
            "benchmarks/maxtext_trillium_model_configs.py@e7292a3a572792a0d797fc8977b21d0f255729f1 L439-467 "
            "(mixtral_8x7b_dropped; the recipe pins maxtext@e7292a3a, libtpu-nightly 20241028, jaxlib 0.4.35)"
        ),
        notes=(
            "Log: 'completed step: 19, seconds: 8.409, TFLOP/s/device: 323.173, Tokens/s/device: 3896.752, "
            "total_weights: 8388608' (=256*4096*8). Tiering's 35.23% / 3,899 tok/s is this run (323.173/918 = 35.2%); "
            "maxtext_tflops_per_device(full attention) x 8.409 s reproduces 323.17 TFLOP/s. The recipe README later "
            "moved to a pdbs-12 config (held-out row below) but the tiering page kept this figure. "
            + _DENSE_PATH_NOTE
            + "xla_flags: MOE_VMEM_LIMIT_FLAG + CF_FOR_ALL_GATHER + DATA_PARALLEL_OVERLAP. "
            + _MOE_NOTE
            + "and this figure predates PR #1988."
        ),
    ),
    MoEReference(
        name="mixtral-8x22b v6e-256 seq4096 (mixtral_8x22b_dropped: fsdp 64 x expert 4, pdbs 8, cf 1.25) [tiering]",
        slice="v6e-256",
        num_slices=1,
        config={
            "model_name": "mixtral-8x22b",
            "per_device_batch_size": 8,
            "max_target_length": 4096,
            "ici_fsdp_parallelism": 64,
            "ici_expert_parallelism": 4,
            **_CUSTOM_OFFLOAD,
            "use_iota_embed": True,
            **_V6E_MOE_COMMON,
            "megablox": False,
            "sparse_matmul": False,
            "capacity_factor": 1.25,
            "dtype": "bfloat16",
            "weight_dtype": "bfloat16",
            "allow_split_physical_axes": True,
            "custom_mesh": "hybrid_ring_64x4",
        },
        development=True,
        published_step_s=24.706,
        step_basis=STEP_LOG,
        flop_count=FULL_ATTENTION,
        active_params=_ACTIVE["mixtral-8x22b"][0],
        active_source=_ACTIVE["mixtral-8x22b"][1],
        published_tflops_per_device=332.463,
        published_mfu=0.362,
        maxtext_dims=_MIXTRAL_8X22B_DIMS,
        source=(
            f"MFU: {_TIERING} (Trillium Silver 'Mixtral 8X22B | 256 Chips, BF16, SL=4096 | 36.2% | 1,326'); log: "
            f"{_TR} training/trillium/Mixtral-8x22B-MaxText/README.md@c78c38e16b0e1eae214a873a3b5fba953ad80a7a "
            "(maxtext@261a8be0, libtpu-nightly 20241119); config: "
            f"{_MT} benchmarks/maxtext_trillium_model_configs.py@449b4fe52a781e8f9adfa43550bed36d2e9dbd99 L1074 "
            "(mixtral_8x22b_dropped, the commit that added it, Feb 2025; unchanged at bfd388fd)"
        ),
        notes=(
            "Log: 'completed step: 9, seconds: 24.706, TFLOP/s/device: 332.463, Tokens/s/device: 1326.307, "
            "total_weights: 8388608' (=256*4096*8). DOUBT: the run (maxtext@261a8be0, Nov 2024) predates the config "
            "entry (449b4fe5, Feb 2025); maxtext_tflops_per_device(full attention) x 24.706 s reproduces 332.47 "
            "TFLOP/s, so pdbs/seq/model agree; the mesh is the file's. "
            + _DENSE_PATH_NOTE
            + "xla_flags: MOE_VMEM_LIMIT_FLAG + CF_FOR_ALL_GATHER + DATA_PARALLEL_OVERLAP. "
            + _MOE_NOTE
            + "and this figure predates PR #1988."
        ),
    ),
    MoEReference(
        name="mixtral-8x7b v5p-256 (8x4x4) seq4096 (run_mixtral-8x7b.sh: pdbs 36, dropless megablox) [tiering]",
        slice="v5p-256",
        num_slices=1,
        config={
            "model_name": "mixtral-8x7b",
            "per_device_batch_size": 36,
            "max_target_length": 4096,
            "dtype": "bfloat16",
            "weight_dtype": "bfloat16",
            "dataset_type": "synthetic",
            "attention": "flash",
            "remat_policy": "full",
            "ici_fsdp_parallelism": -1,
            "megablox": True,
            "sparse_matmul": True,
            "capacity_factor": -1.0,
        },
        development=True,
        published_step_s=36 * 4096 / 2909,
        step_basis=STEP_TOKENS,
        flop_count=FULL_ATTENTION,
        active_params=_ACTIVE["mixtral-8x7b"][0],
        active_source=_ACTIVE["mixtral-8x7b"][1],
        published_mfu=0.5256,
        maxtext_dims=_MIXTRAL_8X7B_DIMS,
        source=(
            f"MFU and tokens/s: {_TIERING} (v5p Silver 'Mixtral 8X7B | 256 Chips(8x4x4), bf16, SL=4096 | 52.56% | "
            f"2,909'); config: {_TR} training/v5p/Mixtral-8X7B-Maxtext/scripts/run_mixtral-8x7b.sh"
            "@0dfb6a6e8467315d306babaac4cf6aef52d448a1 (unchanged to c8cfe2f6)"
        ),
        notes=(
            "published_step_s = pdbs*seq/tokens-per-s-per-device = 36*4096/2909 = 50.69 s. The MFU agrees only with "
            "the full-attention count: maxtext_tflops_per_device(full) / (0.5256*459) = 50.69 s (the halved count "
            "would give 48.7 s), so the run predates PR #1988. The script sets only model_name, pdbs 36, seq 4096, "
            "dtype/weight_dtype bf16, attention flash, synthetic data; remat_policy full, ici_fsdp -1, megablox True "
            "and capacity_factor -1 (dropless) are base.yml defaults of the time (maxtext@5172e9e2, Oct 2024; "
            "sparse_matmul True is today's spelling of that default path). No MaxText commit is pinned (recipe clones "
            "main). DOUBT: slice size. Tiering says '256 Chips(8x4x4)' but 8x4x4 is 128 chips (v5p-256, the "
            "name counting TensorCores); the recipe's example TPU_TYPE is v5p-128. v5p-256 is used here. "
            "LIBTPU_INIT_ARGS: async collective fusion (fuse all-gather, multiple steps), megacore_fusion_allow_ags "
            "false, async collective permute, ag backward pipelining, data-parallel all-reduce opt, "
            "overlap_compute_collective_tc, async all-gather, scoped_vmem_limit_kib 81920. "
            + _MOE_NOTE
            + "and this figure predates PR #1988. The same MaxText team published 'Mixtral 8X7B | v5p-128 | 251.94 "
            "TFLOP/chip/s | 54.89%' (end_to_end/tpu/mixtral/Run_Mixtral.md@7534e5e2, Jul 2024) without a config; "
            "not used."
        ),
    ),
)

# --- tpu-recipes Ironwood (tpu7x) MAXTEXT_ARGS, pasted verbatim from the run_recipe.sh of the commit that set each
# published figure (run/IO-only keys omitted).
# training/ironwood/deepseek3-671b/4k-bf16-tpu7x-4x4x8/xpk/run_recipe.sh@216f3e1be262
_ARGS_DS_BF16_128 = (
    "model_name=deepseek3-671b per_device_batch_size=8.0 max_target_length=4096 dcn_pipeline_parallelism=1 "
    "dcn_data_parallelism=-1 ici_pipeline_parallelism=1 ici_fsdp_transpose_parallelism=1 ici_fsdp_parallelism=-1 "
    "allow_split_physical_axes=True use_iota_embed=True remat_policy=custom decoder_layer_input=offload "
    "opt_type=adamw mu_dtype=bfloat16 grad_dtype=bfloat16 use_random_routing=True megablox=True "
    "sparse_matmul=True use_custom_sort_vjp=True fsdp_shard_on_exp=True sa_use_fused_bwd_kernel=True "
    "sa_block_q=2048 sa_block_kv=2048 sa_block_q_dkv=2048 sa_block_kv_dkv=2048 sa_block_kv_dkv_compute=2048 "
    "sa_block_kv_dq=2048 sa_block_q_dq=2048 attention=flash use_tokamax_splash=True use_max_logit_estimate=-1 "
    "cost_estimate_flops_fwd=5000000000000 cost_estimate_flops_bwd=5000000000000 float32_weight_sum=False "
    "use_tokamax_gmm=True dataset_type=synthetic "
)
# training/ironwood/deepseek3-671b/4k-bf16-tpu7x-4x8x8/run_recipe.sh@216f3e1be262
_ARGS_DS_BF16_256 = (
    "model_name=deepseek3-671b per_device_batch_size=8.0 max_target_length=4096 dcn_pipeline_parallelism=1 "
    "dcn_data_parallelism=-1 ici_pipeline_parallelism=1 ici_fsdp_transpose_parallelism=2 ici_fsdp_parallelism=-1 "
    "allow_split_physical_axes=True use_iota_embed=True remat_policy=custom decoder_layer_input=offload "
    "opt_type=adamw mu_dtype=bfloat16 grad_dtype=bfloat16 use_random_routing=True megablox=True "
    "sparse_matmul=True use_custom_sort_vjp=True fsdp_shard_on_exp=False use_2d_fsdp_sharding=True "
    "sa_use_fused_bwd_kernel=True sa_block_q=2048 sa_block_kv=2048 sa_block_q_dkv=2048 sa_block_kv_dkv=2048 "
    "sa_block_kv_dkv_compute=2048 sa_block_kv_dq=2048 sa_block_q_dq=2048 attention=flash use_tokamax_splash=True "
    "use_max_logit_estimate=-1 cost_estimate_flops_fwd=5000000000000 cost_estimate_flops_bwd=5000000000000 "
    "float32_weight_sum=False use_tokamax_gmm=True dataset_type=synthetic "
)
# training/ironwood/deepseek3-671b/4k-fp8-tpu7x-4x4x8/xpk/run_recipe.sh@52ab24d915d4
_ARGS_DS_FP8_128 = (
    "model_name=deepseek3-671b per_device_batch_size=8.0 max_target_length=4096 dcn_pipeline_parallelism=1 "
    "dcn_data_parallelism=-1 ici_pipeline_parallelism=1 ici_fsdp_transpose_parallelism=1 ici_fsdp_parallelism=-1 "
    "allow_split_physical_axes=True use_iota_embed=True remat_policy=custom decoder_layer_input=offload "
    "opt_type=adamw mu_dtype=bfloat16 grad_dtype=bfloat16 megablox=True sparse_matmul=True "
    "use_custom_sort_vjp=True fsdp_shard_on_exp=True sa_use_fused_bwd_kernel=True sa_block_q=2048 "
    "sa_block_kv=2048 sa_block_q_dkv=2048 sa_block_kv_dkv=2048 sa_block_kv_dkv_compute=2048 sa_block_kv_dq=2048 "
    "sa_block_q_dq=2048 attention=flash use_tokamax_splash=True use_max_logit_estimate=-1 "
    "cost_estimate_flops_fwd=5000000000000 cost_estimate_flops_bwd=5000000000000 float32_weight_sum=False "
    "use_tokamax_gmm=True dataset_type=synthetic use_qwix_quantization=True quantization=fp8_full "
    "wi_tile_fwd_batch_seq=128 wi_tile_fwd_embed_dim=7168 wi_tile_fwd_mlp_dim=2048 wi_tile_dlhs_batch_seq=256 "
    "wi_tile_dlhs_embed_dim=2048 wi_tile_dlhs_mlp_dim=3584 wi_tile_drhs_batch_seq=256 wi_tile_drhs_embed_dim=1792 "
    "wi_tile_drhs_mlp_dim=2048 wo_tile_fwd_batch_seq=256 wo_tile_fwd_embed_dim=2048 wo_tile_fwd_mlp_dim=3584 "
    "wo_tile_dlhs_batch_seq=256 wo_tile_dlhs_embed_dim=7168 wo_tile_dlhs_mlp_dim=1024 wo_tile_drhs_batch_seq=256 "
    "wo_tile_drhs_embed_dim=2048 wo_tile_drhs_mlp_dim=1792 weight_quantization_calibration_method=fixed,-224,224 "
    "act_quantization_calibration_method=fixed,-224,224 "
)
# training/ironwood/deepseek3-671b/4k-fp8-tpu7x-4x8x8/run_recipe.sh@216f3e1be262
_ARGS_DS_FP8_256 = (
    "model_name=deepseek3-671b per_device_batch_size=8.0 max_target_length=4096 dcn_pipeline_parallelism=1 "
    "dcn_data_parallelism=-1 ici_pipeline_parallelism=1 ici_fsdp_transpose_parallelism=2 ici_fsdp_parallelism=-1 "
    "allow_split_physical_axes=True use_iota_embed=True remat_policy=custom decoder_layer_input=offload "
    "opt_type=adamw megablox=True sparse_matmul=True use_custom_sort_vjp=True fsdp_shard_on_exp=True "
    "moe_fsdp_use_two_stage_all_gather=True sa_use_fused_bwd_kernel=True sa_block_q=2048 sa_block_kv=2048 "
    "sa_block_q_dkv=2048 sa_block_kv_dkv=2048 sa_block_kv_dkv_compute=2048 sa_block_kv_dq=2048 sa_block_q_dq=2048 "
    "attention=flash use_tokamax_splash=True use_max_logit_estimate=22 attn_logits_soft_cap=15 "
    "cost_estimate_flops_fwd=5000000000000 cost_estimate_flops_bwd=5000000000000 float32_weight_sum=False "
    "use_tokamax_gmm=True dataset_type=synthetic use_qwix_quantization=True quantization=fp8_full "
    "wi_tile_fwd_batch_seq=128 wi_tile_fwd_embed_dim=7168 wi_tile_fwd_mlp_dim=2048 wi_tile_dlhs_batch_seq=256 "
    "wi_tile_dlhs_embed_dim=2048 wi_tile_dlhs_mlp_dim=3584 wi_tile_drhs_batch_seq=256 wi_tile_drhs_embed_dim=1792 "
    "wi_tile_drhs_mlp_dim=2048 wo_tile_fwd_batch_seq=256 wo_tile_fwd_embed_dim=2048 wo_tile_fwd_mlp_dim=3584 "
    "wo_tile_dlhs_batch_seq=256 wo_tile_dlhs_embed_dim=7168 wo_tile_dlhs_mlp_dim=1024 wo_tile_drhs_batch_seq=256 "
    "wo_tile_drhs_embed_dim=2048 wo_tile_drhs_mlp_dim=1792 weight_quantization_calibration_method=fixed,-224,224 "
    "act_quantization_calibration_method=fixed,-224,224 "
)
# training/ironwood/gpt-oss-120b/8k-bf16-tpu7x-4x4x4/xpk/run_recipe.sh@adaaeb466ae7
_ARGS_GPTOSS_64 = (
    "model_name=gpt-oss-120b per_device_batch_size=10.0 max_target_length=8192 dtype=bfloat16 "
    "weight_dtype=float32 use_custom_sort_vjp=True fsdp_shard_on_exp=True use_tokamax_gmm=True "
    "use_random_routing=True remat_policy=custom decoder_layer_input=offload mlpwo=offload opt_type=adamw "
    "megablox=True sparse_matmul=True use_tokamax_splash=True sa_block_q=1024 sa_block_kv=1024 "
    "sa_block_kv_compute=1024 sa_block_q_dkv=2048 sa_block_kv_dkv=2048 sa_block_kv_dkv_compute=2048 "
    "sa_block_q_dq=2048 sa_block_kv_dq=2048 sa_use_fused_bwd_kernel=True sa_q_layout=SEQ_MINOR "
    "sa_k_layout=SEQ_MINOR sa_v_layout=SEQ_MINOR attention=flash dcn_pipeline_parallelism=1 "
    "dcn_data_parallelism=-1 ici_pipeline_parallelism=1 ici_fsdp_transpose_parallelism=1 ici_fsdp_parallelism=64 "
    "ici_data_parallelism=2 dataset_type=synthetic "
)
# training/ironwood/gpt-oss-120b/8k-bf16-tpu7x-4x8x8/run_recipe.sh@adaaeb466ae7
_ARGS_GPTOSS_256 = (
    "model_name=gpt-oss-120b per_device_batch_size=10.0 max_target_length=8192 dtype=bfloat16 "
    "weight_dtype=float32 use_custom_sort_vjp=True fsdp_shard_on_exp=True use_tokamax_gmm=True "
    "use_random_routing=True remat_policy=custom decoder_layer_input=offload mlpwo=offload opt_type=adamw "
    "megablox=True sparse_matmul=True use_tokamax_splash=True sa_block_q=1024 sa_block_kv=1024 "
    "sa_block_kv_compute=1024 sa_block_q_dkv=2048 sa_block_kv_dkv=2048 sa_block_kv_dkv_compute=2048 "
    "sa_block_q_dq=2048 sa_block_kv_dq=2048 sa_use_fused_bwd_kernel=True sa_q_layout=SEQ_MINOR "
    "sa_k_layout=SEQ_MINOR sa_v_layout=SEQ_MINOR attention=flash dcn_pipeline_parallelism=1 "
    "dcn_data_parallelism=-1 ici_pipeline_parallelism=1 ici_fsdp_transpose_parallelism=1 ici_fsdp_parallelism=64 "
    "ici_data_parallelism=8 dataset_type=synthetic "
)
# training/ironwood/qwen3-235b-a22b/4k-bf16-tpu7x-4x8x8/xpk/run_recipe.sh@1302a862efdc
_ARGS_QWEN3_BF16_256 = (
    "model_name=qwen3-235b-a22b per_device_batch_size=16.0 max_target_length=4096 dtype=bfloat16 "
    "weight_dtype=float32 opt_type=adamw remat_policy=custom decoder_layer_input=offload use_custom_sort_vjp=True "
    "use_random_routing=True shard_exp_on_fsdp=False megablox=False sparse_matmul=True use_tokamax_gmm=True "
    "use_tokamax_splash=True sa_use_fused_bwd_kernel=True attention=flash sa_block_q=1024 sa_block_kv=1024 "
    "sa_block_kv_compute=512 sa_block_q_dkv=2048 sa_block_kv_dkv=2048 sa_block_kv_dkv_compute=1024 "
    "sa_block_q_dq=1024 sa_block_kv_dq=1024 sa_q_layout=HEAD_DIM_MINOR sa_k_layout=SEQ_MINOR "
    "sa_v_layout=HEAD_DIM_MINOR dcn_pipeline_parallelism=1 dcn_data_parallelism=-1 ici_pipeline_parallelism=1 "
    "ici_fsdp_transpose_parallelism=1 ici_fsdp_parallelism=-1 dataset_type=synthetic "
)
# training/ironwood/qwen3-235b-a22b/4k-fp8-tpu7x-4x8x8/run_recipe.sh@5ccfce2bab55
_ARGS_QWEN3_FP8_256 = (
    "model_name=qwen3-235b-a22b per_device_batch_size=16.0 max_target_length=4096 dtype=bfloat16 "
    "weight_dtype=float32 opt_type=adamw remat_policy=custom decoder_layer_input=offload use_custom_sort_vjp=True "
    "use_random_routing=True fsdp_shard_on_exp=False megablox=False sparse_matmul=True use_tokamax_gmm=True "
    "use_tokamax_splash=True sa_use_fused_bwd_kernel=True attention=flash sa_block_q=1024 sa_block_kv=1024 "
    "sa_block_kv_compute=512 sa_block_q_dkv=2048 sa_block_kv_dkv=2048 sa_block_kv_dkv_compute=1024 "
    "sa_block_q_dq=1024 sa_block_kv_dq=1024 sa_q_layout=HEAD_DIM_MINOR sa_k_layout=SEQ_MINOR "
    "sa_v_layout=HEAD_DIM_MINOR dcn_pipeline_parallelism=1 dcn_data_parallelism=-1 ici_pipeline_parallelism=1 "
    "ici_fsdp_transpose_parallelism=1 ici_fsdp_parallelism=-1 use_qwix_quantization=True quantization=fp8_full "
    "weight_quantization_calibration_method=fixed,-224,224 act_quantization_calibration_method=fixed,-224,224 "
    "wi_tile_fwd_batch_seq=512 wi_tile_fwd_embed_dim=4096 wi_tile_fwd_mlp_dim=1536 wi_tile_dlhs_batch_seq=512 "
    "wi_tile_dlhs_embed_dim=1536 wi_tile_dlhs_mlp_dim=4096 wi_tile_drhs_batch_seq=1024 "
    "wi_tile_drhs_embed_dim=1024 wi_tile_drhs_mlp_dim=1536 wo_tile_fwd_batch_seq=512 wo_tile_fwd_embed_dim=1536 "
    "wo_tile_fwd_mlp_dim=4096 wo_tile_dlhs_batch_seq=512 wo_tile_dlhs_embed_dim=4096 wo_tile_dlhs_mlp_dim=1536 "
    "wo_tile_drhs_batch_seq=512 wo_tile_drhs_embed_dim=768 wo_tile_drhs_mlp_dim=4096 dataset_type=synthetic "
)
# training/ironwood/gemma4-26b/4k-bf16-tpu7x-4x4x4/xpk/run_recipe.sh@aa23ecdf61fc
_ARGS_GEMMA4_26B_64 = (
    "model_name=gemma4-26b dtype=bfloat16 per_device_batch_size=16 max_target_length=4096 use_iota_embed=True "
    "num_vocab_tiling=1 remat_policy=full decoder_layer_input=offload allow_split_physical_axes=True "
    "ici_fsdp_transpose_parallelism=1 ici_fsdp_parallelism=-1 wi_tile_fwd_embed_dim=2816 "
    "wi_tile_dlhs_embed_dim=2816 wi_tile_drhs_embed_dim=2816 wo_tile_fwd_embed_dim=2816 "
    "wo_tile_dlhs_embed_dim=2816 wo_tile_drhs_embed_dim=2816 wi_tile_fwd_mlp_dim=704 wi_tile_dlhs_mlp_dim=704 "
    "wi_tile_drhs_mlp_dim=704 wo_tile_fwd_mlp_dim=704 wo_tile_dlhs_mlp_dim=704 wo_tile_drhs_mlp_dim=704 "
    "megablox=True sparse_matmul=True use_custom_sort_vjp=True attention=flash use_tokamax_splash=True "
    "sa_use_fused_bwd_kernel=True sa_block_q=1024 sa_block_kv=1024 sa_block_kv_compute=512 sa_block_q_dkv=1024 "
    "sa_block_kv_dkv=1024 sa_block_kv_dkv_compute=256 dataset_type=synthetic opt_type=adamw "
)
# training/ironwood/gemma4-26b/4k-bf16-tpu7x-4x8x8/xpk/run_recipe.sh@aa23ecdf61fc
_ARGS_GEMMA4_26B_256 = (
    "model_name=gemma4-26b dtype=bfloat16 per_device_batch_size=16 max_target_length=4096 use_iota_embed=True "
    "num_vocab_tiling=1 remat_policy=custom allow_split_physical_axes=True ici_fsdp_transpose_parallelism=1 "
    "ici_fsdp_parallelism=256 ici_data_parallelism=2 wi_tile_fwd_embed_dim=2816 wi_tile_dlhs_embed_dim=2816 "
    "wi_tile_drhs_embed_dim=2816 wo_tile_fwd_embed_dim=2816 wo_tile_dlhs_embed_dim=2816 "
    "wo_tile_drhs_embed_dim=2816 wi_tile_fwd_mlp_dim=704 wi_tile_dlhs_mlp_dim=704 wi_tile_drhs_mlp_dim=704 "
    "wo_tile_fwd_mlp_dim=704 wo_tile_dlhs_mlp_dim=704 wo_tile_drhs_mlp_dim=704 megablox=True sparse_matmul=True "
    "use_custom_sort_vjp=True attention=flash use_tokamax_splash=True sa_use_fused_bwd_kernel=True "
    "sa_block_q=1024 sa_block_kv=1024 sa_block_kv_compute=512 sa_block_q_dkv=1024 sa_block_kv_dkv=1024 "
    "sa_block_kv_dkv_compute=256 dataset_type=synthetic opt_type=adamw "
)

_CUSTOM_700B_DIMS = {
    "emb": 8192,
    "mlp": 32768,
    "heads": 128,
    "kv_heads": 8,
    "head_dim": 256,
    "vocab": 32000,
    "layers": 56,
    "experts": 16,
    "experts_per_tok": 2,
}
_CUSTOM_700B = {
    "model_name": "default",
    "per_device_batch_size": 1,
    "max_target_length": 8192,
    "decoder_block": "mixtral",
    "base_emb_dim": 8192,
    "base_mlp_dim": 32768,
    # At 3662540e the mixtral block sized its experts by mlp_dim (MaxText/layers/mixtral.py:141@3662540ee852);
    # today's MaxText reads base_moe_mlp_dim for them (types.py:3400@e591f30cb) and refuses a MoE model without it.
    "base_moe_mlp_dim": 32768,
    "base_num_decoder_layers": 56,
    "head_dim": 256,
    "base_num_kv_heads": 8,
    "base_num_query_heads": 128,
    "vocab_size": 32000,
    "enable_dropout": False,
    "logits_via_embedding": False,
    "normalization_layer_epsilon": 1.0e-5,
    "rope_max_timescale": 1_000_000,
    "num_experts": 16,
    "num_experts_per_tok": 2,
    "ici_fsdp_parallelism": 16,
    "ici_expert_parallelism": 16,
    **_CUSTOM_OFFLOAD,
    "dataset_type": "synthetic",
    **_SA_ALL_2048,
    "sa_use_fused_bwd_kernel": True,
    "sparse_matmul": False,
    "capacity_factor": 1.5,
    "dtype": "bfloat16",
    "weight_dtype": "bfloat16",
    "opt_type": "sgd",
    "attention": "flash",
}
_CUSTOM_700B_SRC = (
    f"MFU: {_MT} docs/guides/optimization/custom_model.md@e591f30cbbf217ed67ef71263ec0538239f9c3b8 ('700B "
    "Mixtral-like MoE on Trillium', Final Configs column; first published as getting_started/Custom_Model.md@"
    f"7b2f9476a20b, 2025-06-20); config: {_MT} benchmarks/maxtext_trillium_model_configs.py"
    "@3662540ee852d0d8f8333a36c04ddc0f1316ebfb L1743 (custom_moe_700b, the doc's link)"
)
_CUSTOM_700B_NOTE = (
    "Only MFU is published: published_step_s is None and the bench implies the step from MaxText's full-attention "
    "count (maxtext_tflops_per_device; the guide predates PR #1988) at 918 TFLOP/s/chip. The doc's table gives "
    "1.23e11 active params (matches the dims). opt_type sgd (no Adam moments). The file says 'config only runs on "
    "v6e-256'. xla_flags: MOE_VMEM_LIMIT_FLAG + CF_FOR_ALL_GATHER + DATA_PARALLEL_OVERLAP + "
    "LAYOUT_FOR_ALL_REDUCE_SCATTER + HOST_OFFLOAD_FLAGS. "
)
_V5P_LLAMA4_NOTE = (
    "Dropless (sparse_matmul + megablox), weight_dtype float32. xla_flags: MOE_VMEM_LIMIT_FLAG + CF_FOR_ALL_GATHER + "
    "DATA_PARALLEL_OVERLAP + LAYOUT_FOR_ALL_REDUCE_SCATTER + HOST_OFFLOAD_FLAGS. "
)
_SCOUT = {
    "model_name": "llama4-17b-16e",
    "per_device_batch_size": 8,
    "max_target_length": 8192,
    "ici_fsdp_parallelism": -1,
    "dtype": "bfloat16",
    "weight_dtype": "float32",
    "megablox": True,
    "sparse_matmul": True,
    "dataset_type": "synthetic",
    "opt_type": "adamw",
    "remat_policy": "custom",
    "decoder_layer_input": "offload",
    **_SA_ALL_2048,
}
_IRONWOOD_NOTE = (
    "Ironwood: the slice name counts devices (2 TensorCores per chip), so pdbs is per TensorCore and "
    "GBS = pdbs x 2 x chips. published_step_s is the table's 'Step time (seconds)'; its TFLOPs/sec/chip column is "
    "not used (per chip, i.e. about twice MaxText's per-device log). Post PR #1988 (causal halved). XLA_FLAGS as in "
    "run_recipe.sh (not transcribed). "
)
_RANDOM_ROUTING = "use_random_routing=True: tokens are routed at random, so experts are balanced (no load imbalance). "


def _ironwood(
    name: str, sl: str, args: str, step: float, model: str, table_commit: str, recipe: str, notes: str
) -> MoEReference:
    return MoEReference(
        name=name,
        slice=sl,
        num_slices=1,
        config=_recipe_args(args),
        development=False,
        published_step_s=step,
        step_basis=STEP_TABLE,
        flop_count=CAUSAL_HALVED,
        active_params=_ACTIVE[model][0],
        active_source=_ACTIVE[model][1],
        source=f"step: {_TR_IRONWOOD}@{table_commit}; config: {_TR} {recipe}",
        notes=_IRONWOOD_NOTE + notes,
    )


# ---------------------------------------------------------------------------------------------------------------
# Held-out rows: other configs, models and generations. NOT for tuning.
# ---------------------------------------------------------------------------------------------------------------
_MOE_HELD_OUT: tuple[MoEReference, ...] = (
    MoEReference(
        name="mixtral-8x7b v6e-256 seq4096 (mixtral_8x7b_dropped @tpu-recipes-v0.1.0: pdbs 12, offload, cf 1.25)",
        slice="v6e-256",
        num_slices=1,
        config={
            "model_name": "mixtral-8x7b",
            "per_device_batch_size": 12,
            "ici_fsdp_parallelism": -1,
            "max_target_length": 4096,
            **_CUSTOM_OFFLOAD,
            "use_iota_embed": True,
            **_V6E_MOE_COMMON,
            "megablox": False,
            "sparse_matmul": False,
            "capacity_factor": 1.25,
        },
        development=False,
        published_step_s=13.484,
        step_basis=STEP_LOG,
        flop_count=FULL_ATTENTION,
        active_params=_ACTIVE["mixtral-8x7b"][0],
        active_source=_ACTIVE["mixtral-8x7b"][1],
        published_tflops_per_device=302.311,
        maxtext_dims=_MIXTRAL_8X7B_DIMS,
        source=(
            f"log: {_TR_MIXTRAL_7B}@44189f96a3731e62fdca51c9355e811fc853c0a2 (MaxText tag tpu-recipes-v0.1.0, JAX "
            f"0.5.2; kept verbatim at c8cfe2f6 under tag v0.1.2); config: {_MT} benchmarks/"
            "maxtext_trillium_model_configs.py@0b1fde4513d9b57c25dc3651b2f3c66497d800bb (tag tpu-recipes-v0.1.0) "
            "L1298 (mixtral_8x7b_dropped), printed in the README"
        ),
        notes=(
            "Log: 'completed step: 11, seconds: 13.484, TFLOP/s/device: 302.311, Tokens/s/device: 3645.203, "
            "total_weights: 12582912' (=256*4096*12); maxtext_tflops_per_device(full) x 13.484 s reproduces 302.31. "
            "An earlier log of the same config (f190d41e, JAX 0.4.37): 13.360 s. Same model and generation as a "
            "development row (a weaker held-out test). xla_flags: MOE_VMEM_LIMIT_FLAG + CF_FOR_ALL_GATHER + "
            "DATA_PARALLEL_OVERLAP. Predates PR #1988."
        ),
    ),
    MoEReference(
        name="mixtral-8x7b v6e-256 seq4096 int8 (mixtral_8x7b_dropped_int8 @e7292a3a: pdbs 8, remat full, cf 1.25)",
        slice="v6e-256",
        num_slices=1,
        config={
            "model_name": "mixtral-8x7b",
            "per_device_batch_size": 8,
            "ici_fsdp_parallelism": -1,
            "max_target_length": 4096,
            "remat_policy": "full",
            **_V6E_MOE_COMMON,
            "megablox": False,
            "sparse_matmul": False,
            "capacity_factor": 1.25,
            "quantization": "int8",
        },
        development=False,
        published_step_s=8.218,
        step_basis=STEP_LOG,
        flop_count=FULL_ATTENTION,
        active_params=_ACTIVE["mixtral-8x7b"][0],
        active_source=_ACTIVE["mixtral-8x7b"][1],
        published_tflops_per_device=330.683,
        maxtext_dims=_MIXTRAL_8X7B_DIMS,
        source=(
            f"log: {_TR_MIXTRAL_7B}@372537f26ecdb56c06992e5bcc3937860b9e0115 ('Int8 run', first in f81bfc90e779); "
            f"config: {_MT} benchmarks/maxtext_trillium_model_configs.py@e7292a3a572792a0d797fc8977b21d0f255729f1 "
            "L469-497 (mixtral_8x7b_dropped_int8)"
        ),
        notes=(
            "Log: 'completed step: 18, seconds: 8.218, TFLOP/s/device: 330.683, Tokens/s/device: 3987.307, "
            "total_weights: 8388608'. MaxText's TFLOP/s counts the int8 matmuls as bf16 work. No use_iota_embed "
            "(unlike the bf16 entry). " + _DENSE_PATH_NOTE + "Predates PR #1988."
        ),
    ),
    MoEReference(
        name="custom-moe-700b v6e-256 seq8192 (custom_moe_700b: fsdp 16 x expert 16, pdbs 1, cf 1.5)",
        slice="v6e-256",
        num_slices=1,
        config=dict(_CUSTOM_700B),
        development=False,
        published_step_s=None,
        step_basis=STEP_FROM_MFU,
        flop_count=FULL_ATTENTION,
        active_params=1.23e11,
        active_source="the custom_model.md table: Active Params 1.23E+11",
        published_mfu=0.381,
        maxtext_dims=_CUSTOM_700B_DIMS,
        source=_CUSTOM_700B_SRC + " ('MFU (1 pod Trillium) 38.1%')",
        notes=_CUSTOM_700B_NOTE,
    ),
    MoEReference(
        name="custom-moe-700b 4x v6e-256 seq8192 (custom_moe_700b, 4 pods: dcn data parallel)",
        slice="v6e-256",
        num_slices=4,
        config=dict(_CUSTOM_700B),
        development=False,
        published_step_s=None,
        step_basis=STEP_FROM_MFU,
        flop_count=FULL_ATTENTION,
        active_params=1.23e11,
        active_source="the custom_model.md table: Active Params 1.23E+11",
        published_mfu=0.353,
        maxtext_dims=_CUSTOM_700B_DIMS,
        source=_CUSTOM_700B_SRC + " ('MFU (4 pod Trillium) 35.3%')",
        notes=_CUSTOM_700B_NOTE + "DOUBT: the 4-pod DCN mesh is not written; base.yml dcn_data_parallelism=-1 assumed.",
    ),
    MoEReference(
        name="llama4-17b-128e v5p-256 seq8192 (llama4_maverick_dropless_v5p_256: fsdp 32 x tensor 4, pdbs 4)",
        slice="v5p-256",
        num_slices=1,
        config={
            "model_name": "llama4-17b-128e",
            "per_device_batch_size": 4,
            "max_target_length": 8192,
            "ici_fsdp_parallelism": 32,
            "ici_tensor_parallelism": 4,
            "dtype": "bfloat16",
            "weight_dtype": "float32",
            "megablox": True,
            "sparse_matmul": True,
            "dataset_type": "synthetic",
            "opt_type": "adamw",
            **_CUSTOM_OFFLOAD,
            **_SA_ALL_2048,
        },
        development=False,
        published_step_s=24.792,
        step_basis=STEP_LOG,
        flop_count=FULL_ATTENTION,
        active_params=_ACTIVE["llama4-17b-128e"][0],
        active_source=_ACTIVE["llama4-17b-128e"][1],
        published_tflops_per_device=160.005,
        source=(
            f"log+config: {_TR} training/v5p/Llama4-Maverick-17B-128E-Maxtext/README.md"
            f"@c51f658196068d5bb03f1201ca00b92c03aec73e (MaxText tag tpu-recipes-v0.1.3, JAX 0.5.2); config also "
            f"{_MT} benchmarks/maxtext_v5p_model_configs.py@9ca35d7e60b71303b9f6fa885447d32e8a612c47 L151-196"
        ),
        notes=(
            "Log: 'completed step: 12, seconds: 24.792, TFLOP/s/device: 160.005, Tokens/s/device: 1321.725, "
            "total_weights: 4194304' (=128 chips*8192*4). " + _V5P_LLAMA4_NOTE + "June 2025: predates PR #1988."
        ),
    ),
    MoEReference(
        name="llama4-17b-16e v5p-256 seq8192 (llama4_scout_dropless_v5p_256 @tpu-recipes-v0.1.3: pdbs 8)",
        slice="v5p-256",
        num_slices=1,
        config=dict(_SCOUT),
        development=False,
        published_step_s=31.494,
        step_basis=STEP_LOG,
        flop_count=FULL_ATTENTION,
        active_params=_ACTIVE["llama4-17b-16e"][0],
        active_source=_ACTIVE["llama4-17b-16e"][1],
        published_tflops_per_device=251.760,
        source=(
            f"log+config: {_TR} training/v5p/Llama4-Scout-17B-16E-Maxtext/README.md"
            f"@c51f658196068d5bb03f1201ca00b92c03aec73e (tag tpu-recipes-v0.1.3); config also {_MT} "
            "benchmarks/maxtext_v5p_model_configs.py@f4db8e4cc9463151bbfbc04baa5adfde64d6f5ec L109"
        ),
        notes=(
            "Log: 'completed step: 12, seconds: 31.494, TFLOP/s/device: 251.760, Tokens/s/device: 2080.892, "
            "total_weights: 8388608' (=128 chips*8192*8). " + _V5P_LLAMA4_NOTE + "June 2025: predates PR #1988."
        ),
    ),
    MoEReference(
        name="llama4-17b-16e v5p-1024 seq8192 (llama4_scout_dropless_v5p_256 @3eb77db3: pdbs 8, 512 chips)",
        slice="v5p-1024",
        num_slices=1,
        config=dict(_SCOUT),
        development=False,
        published_step_s=31.652,
        step_basis=STEP_LOG,
        flop_count=CAUSAL_HALVED,
        active_params=_ACTIVE["llama4-17b-16e"][0],
        active_source=_ACTIVE["llama4-17b-16e"][1],
        published_tflops_per_device=225.491,
        source=(
            f"log: {_TR} training/v5p/Llama4-Scout-17B-16E-Maxtext/README.md@7e88b6d146a00901446f8a11244d49a471d8242b "
            f"(maxtext@3eb77db3, JAX 0.7.0); config: {_MT} benchmarks/maxtext_v5p_model_configs.py"
            "@3eb77db3c94580f56f1b738f8d254b03bd205e35 L109 (the README: the v5p_1024 run uses the v5p_256 config)"
        ),
        notes=(
            "Log: 'completed step: 11, seconds: 31.652, TFLOP/s/device: 225.491, Tokens/s/device: 2070.487, "
            "total_weights: 33554432' (=512 chips*8192*8, so the logged run is v5p-1024). Same per-chip step as the "
            "v5p-256 June run (31.49 s) while TFLOP/s fell 251.8 -> 225.5: the causal halving of PR #1988. "
            + _V5P_LLAMA4_NOTE
        ),
    ),
    MoEReference(
        name="deepseek3-671b v5p-1024 seq8192 (deepseek3_671b_v5p_1024: fsdp 512, pdbs 6, dropless megablox)",
        slice="v5p-1024",
        num_slices=1,
        config={
            "model_name": "deepseek3-671b",
            "ici_fsdp_parallelism": -1,
            "ici_tensor_parallelism": 1,
            "per_device_batch_size": 6,
            "max_target_length": 8192,
            "dtype": "bfloat16",
            "weight_dtype": "float32",
            "megablox": True,
            "sparse_matmul": True,
            "scan_layers": True,
            "use_custom_sort_vjp": True,
            **_SA_ALL_2048,
            "remat_policy": "custom",
            "decoder_layer_input": "offload",
            "out_proj": "offload",
            "tile_batch_seq": 512,
            "tile_embed_dim": 1024,
            "tile_mlp_dim": 1024,
            "sa_use_fused_bwd_kernel": False,
            "dataset_type": "synthetic",
        },
        development=False,
        published_step_s=90.668,
        step_basis=STEP_LOG,
        flop_count=CAUSAL_HALVED,
        active_params=_ACTIVE["deepseek3-671b"][0],
        active_source=_ACTIVE["deepseek3-671b"][1],
        published_tflops_per_device=152.415,
        source=(
            f"log: {_TR} training/v5p/DeepSeek3-671B-MaxText/README.md@7e88b6d146a00901446f8a11244d49a471d8242b "
            f"(maxtext@3eb77db3, JAX 0.7.0); config: {_MT} benchmarks/maxtext_v5p_model_configs.py"
            "@3eb77db3c94580f56f1b738f8d254b03bd205e35 L287 (deepseek3_671b_v5p_1024)"
        ),
        notes=(
            "Log: 'completed step: 11, seconds: 90.668, TFLOP/s/device: 152.415, Tokens/s/device: 542.108, "
            "total_weights: 25165824' (=512 chips*8192*6). opt_type adamw (default). xla_flags: "
            "ENABLE_SPARSECORE_OFFLOADING_FOR_RS_AG_AR + HOST_OFFLOAD_FLAGS + LAYOUT_FOR_ALL_REDUCE_SCATTER + "
            "DATA_PARALLEL_OVERLAP + MOE_VMEM_LIMIT_FLAG + DISABLE_MEGACORE_FUSION_ALLOW_AGS + "
            "ENABLE_ASYNC_COLLECTIVE_PERMUTE. Oct 2025: after PR #1988."
        ),
    ),
    _ironwood(
        "deepseek3-671b tpu7x-256 (128 chips) seq4096 bf16 (fsdp 256, pdbs 8)",
        "tpu7x-256",
        _ARGS_DS_BF16_128,
        27.02,
        "deepseek3-671b",
        "216f3e1be26275e754ed140f20330b9edfbfd17d",
        "training/ironwood/deepseek3-671b/4k-bf16-tpu7x-4x4x8/xpk/run_recipe.sh@216f3e1be262 (tpu7x-4x4x8; "
        "MaxText maxtext-tutorial-v1.4.0 = 79eecc9f2)",
        "Table: '128 | GBS 2048 | 4096 | bf16 | 27.02 | 607.53 | 2,425.75'. "
        + _RANDOM_ROUTING
        + "fsdp_shard_on_exp is the v1.4.0 name of today's shard_exp_on_fsdp.",
    ),
    _ironwood(
        "deepseek3-671b tpu7x-512 (256 chips) seq4096 bf16 (fsdp x fsdp_transpose 2, 2D FSDP, pdbs 8)",
        "tpu7x-512",
        _ARGS_DS_BF16_256,
        26.79,
        "deepseek3-671b",
        "216f3e1be26275e754ed140f20330b9edfbfd17d",
        "training/ironwood/deepseek3-671b/4k-bf16-tpu7x-4x8x8/run_recipe.sh@216f3e1be262 (tpu7x-4x8x8; "
        "maxtext-tutorial-v1.4.0)",
        "Table: '256 | GBS 4096 | 4096 | bf16 | 26.79 | 612.66 | 2,446.25'. "
        + _RANDOM_ROUTING
        + "The recipe was rewritten later (43ecfd65, Apr 2026: model deepseek3-671b-2dfsdp) without a new figure; "
        "the table's figure is paired with the recipe of its own commit.",
    ),
    _ironwood(
        "deepseek3-671b tpu7x-256 (128 chips) seq4096 fp8_full (fsdp 256, pdbs 8)",
        "tpu7x-256",
        _ARGS_DS_FP8_128,
        22.47,
        "deepseek3-671b",
        "52ab24d915d44168e48634ac610e79abe68a1185",
        "training/ironwood/deepseek3-671b/4k-fp8-tpu7x-4x4x8/xpk/run_recipe.sh@52ab24d915d4 (tpu7x-4x4x8; MaxText "
        "98a3d4cdd9c7)",
        "Table: '128 | GBS 2048 | 4096 | fp8_full | 22.47 | 730.60 | 2,917.15'. Routing is learned here (no "
        "use_random_routing). Quantized (qwix fp8_full).",
    ),
    _ironwood(
        "deepseek3-671b tpu7x-512 (256 chips) seq4096 fp8_full (fsdp x fsdp_transpose 2, pdbs 8)",
        "tpu7x-512",
        _ARGS_DS_FP8_256,
        22.08,
        "deepseek3-671b",
        "216f3e1be26275e754ed140f20330b9edfbfd17d",
        "training/ironwood/deepseek3-671b/4k-fp8-tpu7x-4x8x8/run_recipe.sh@216f3e1be262 (tpu7x-4x8x8; "
        "maxtext-tutorial-v1.4.0)",
        "Table: '256 | GBS 4096 | 4096 | fp8_full | 22.08 | 743.46 | 2,968.49'. Routing is learned (no "
        "use_random_routing); attn_logits_soft_cap 15. Quantized (qwix fp8_full).",
    ),
    _ironwood(
        "gpt-oss-120b tpu7x-128 (64 chips) seq8192 bf16 (fsdp 64 x data 2, pdbs 10)",
        "tpu7x-128",
        _ARGS_GPTOSS_64,
        17.10,
        "gpt-oss-120b",
        "adaaeb466ae7594c6bd47064306fb466fa16e813",
        "training/ironwood/gpt-oss-120b/8k-bf16-tpu7x-4x4x4/xpk/run_recipe.sh@adaaeb466ae7 (tpu7x-4x4x4; "
        "maxtext-tutorial-v1.4.0)",
        "Table: '64 | GBS 1280 | 8192 | bf16 | 17.10 | 330.25 | 9,581.66'. " + _RANDOM_ROUTING,
    ),
    _ironwood(
        "gpt-oss-120b tpu7x-512 (256 chips) seq8192 bf16 (fsdp 64 x data 8, pdbs 10)",
        "tpu7x-512",
        _ARGS_GPTOSS_256,
        17.12,
        "gpt-oss-120b",
        "adaaeb466ae7594c6bd47064306fb466fa16e813",
        "training/ironwood/gpt-oss-120b/8k-bf16-tpu7x-4x8x8/run_recipe.sh@adaaeb466ae7 (tpu7x-4x8x8; "
        "maxtext-tutorial-v1.4.0)",
        "Table: '256 | GBS 5120 | 8192 | bf16 | 17.12 | 329.90 | 9,571.36'. " + _RANDOM_ROUTING,
    ),
    _ironwood(
        "qwen3-235b-a22b tpu7x-512 (256 chips) seq4096 bf16 (fsdp 512, pdbs 16)",
        "tpu7x-512",
        _ARGS_QWEN3_BF16_256,
        30.87,
        "qwen3-235b-a22b",
        "1302a862efdc0a77095a8d7b9e32a34452751a36",
        "training/ironwood/qwen3-235b-a22b/4k-bf16-tpu7x-4x8x8/xpk/run_recipe.sh@1302a862efdc (tpu7x-4x8x8; "
        "MaxText a0fceb5bd2cd)",
        "Table: '256 | GBS 8192 | 4096 | bf16 | 30.87 | 629.79 | 4,245.89' (was 31.58 s with the 5ccfce2b recipe). "
        + _RANDOM_ROUTING
        + "JAX ragged dot via tokamax (megablox False, use_tokamax_gmm True).",
    ),
    _ironwood(
        "qwen3-235b-a22b tpu7x-512 (256 chips) seq4096 fp8_full (fsdp 512, pdbs 16)",
        "tpu7x-512",
        _ARGS_QWEN3_FP8_256,
        27.67,
        "qwen3-235b-a22b",
        "5ccfce2bab55f55e2394257b77902a5a212b469a",
        "training/ironwood/qwen3-235b-a22b/4k-fp8-tpu7x-4x8x8/run_recipe.sh@5ccfce2bab55 (tpu7x-4x8x8; "
        "maxtext-tutorial-v1.4.0; dea86fa1 later changed only the run keys)",
        "Table: '256 | GBS 8192 | 4096 | fp8_full | 27.67 | 702.60 | 4,736.72'. "
        + _RANDOM_ROUTING
        + "Quantized (qwix fp8_full).",
    ),
    _ironwood(
        "gemma4-26b tpu7x-128 (64 chips) seq4096 bf16 (fsdp 128, pdbs 16, remat full)",
        "tpu7x-128",
        _ARGS_GEMMA4_26B_64,
        5.54,
        "gemma4-26b",
        "aa23ecdf61fc7eadff7fbe3cf798041dd8039161",
        "training/ironwood/gemma4-26b/4k-bf16-tpu7x-4x4x4/xpk/run_recipe.sh@aa23ecdf61fc (tpu7x-4x4x4; MaxText "
        "df1b3598070)",
        "Table: '64 | GBS 2048 | 4096 | bf16 | 5.54 | 592.31 | 23,655.73' (was 6.04 s at dad1193). Gemma 4 26B-A4B "
        "text decoder (128 experts top-8 + 1 shared, sliding/global attention); learned routing.",
    ),
    _ironwood(
        "gemma4-26b tpu7x-512 (256 chips) seq4096 bf16 (fsdp 256 x data 2, pdbs 16, remat custom)",
        "tpu7x-512",
        _ARGS_GEMMA4_26B_256,
        5.54,
        "gemma4-26b",
        "aa23ecdf61fc7eadff7fbe3cf798041dd8039161",
        "training/ironwood/gemma4-26b/4k-bf16-tpu7x-4x8x8/xpk/run_recipe.sh@aa23ecdf61fc (tpu7x-4x8x8; MaxText "
        "df1b3598070)",
        "Table: '256 | GBS 8192 | 4096 | bf16 | 5.54 | 592.41 | 23,660.00'. remat_policy custom with no offload "
        "key set. Learned routing.",
    ),
)

MOE_REFERENCES: tuple[MoEReference, ...] = _MOE_DEV + _MOE_HELD_OUT

# ===============================================================================================================
# Dense TPU7x (Ironwood): published MaxText results with their recipes, AI-Hypercomputer/tpu-recipes
# training/ironwood (README table + each recipe's run_recipe.sh at the commit that set the figure). Kept apart from
# REFERENCES (whose rows and median the other sections print) to calibrate TPU7x's mxu_efficiency on dense runs.
# ===============================================================================================================
_IRONWOOD_DENSE_NOTE = (
    "Ironwood: the slice name counts devices (2 TensorCores per chip, tpu7x-128 = 64 chips), so pdbs is per "
    "TensorCore and GBS = pdbs x 2 x chips. The table's TFLOPs/sec/chip is per chip: 2 x MaxText's per-device "
    "count / the step (checked: maxtext_flops.training_tflops_per_device for this config x 2 / the table's step "
    "reproduces it within 0.1%, 0.7% where the step is rounded to 0.01 s). published_mfu = TFLOPs/sec/chip / 2307 "
    "(MaxText's MFU: against the bf16 peak, whatever the matmul dtype). After PR #1988: causal attention halved. "
    "Single slice. XLA_FLAGS (SparseCore collective offload, scoped VMEM limit) as in run_recipe.sh, not "
    "transcribed. "
)
_FP8_NOTE = (
    "Quantized: qwix fp8_full (e4m3 weights and activations, e5m2 gradients); its MFU is still against the bf16 "
    "peak, so it can pass what bf16 allows. "
)

# training/ironwood/llama3.1-70b/8k-bf16-tpu7x-4x4x4/xpk/run_recipe.sh@edf6fa7d098c
_ARGS_L70_BF16_64 = (
    "model_name=llama3.1-70b dtype=bfloat16 per_device_batch_size=2 use_iota_embed=True remat_policy=custom "
    "decoder_layer_input=device context=device query_proj=device key_proj=device value_proj=device "
    "qkv_proj=device ici_fsdp_parallelism=-1 dataset_type=synthetic opt_type=adamw mu_dtype=bfloat16 "
    "sa_block_q=2048 sa_block_kv=2048 sa_block_kv_compute=2048 sa_block_q_dkv=2048 sa_block_kv_dkv=2048 "
    "sa_block_kv_dkv_compute=2048 sa_q_layout=SEQ_MINOR sa_k_layout=SEQ_MINOR sa_v_layout=HEAD_DIM_MINOR "
    "sa_use_fused_bwd_kernel=True use_tokamax_splash=True max_target_length=8192 attention=flash "
)
# training/ironwood/llama3.1-70b/8k-bf16-tpu7x-4x8x8/run_recipe.sh@a29f0e447f7d
_ARGS_L70_BF16_256 = (
    "model_name=llama3.1-70b dtype=bfloat16 per_device_batch_size=2 use_iota_embed=True remat_policy=custom "
    "decoder_layer_input=device context=device query_proj=device key_proj=device value_proj=device "
    "qkv_proj=device ici_fsdp_parallelism=-1 dataset_type=synthetic opt_type=adamw mu_dtype=bfloat16 "
    "sa_block_q=2048 sa_block_kv=2048 sa_block_kv_compute=2048 sa_block_q_dkv=2048 sa_block_kv_dkv=2048 "
    "sa_block_kv_dkv_compute=2048 sa_q_layout=SEQ_MINOR sa_k_layout=SEQ_MINOR sa_v_layout=HEAD_DIM_MINOR "
    "sa_use_fused_bwd_kernel=True use_tokamax_splash=True max_target_length=8192 attention=flash "
)
# training/ironwood/llama3.1-70b/128k-bf16-tpu7x-4x8x8/xpk/run_recipe.sh@82a737a18775
_ARGS_L70_128K_BF16_256 = (
    "model_name=llama3.1-70b dtype=bfloat16 per_device_batch_size=0.125 use_iota_embed=True remat_policy=custom "
    "decoder_layer_input=device context=device query_proj=device key_proj=device value_proj=device mlpwo=device "
    "num_vocab_tiling=4 ici_fsdp_parallelism=-1 ici_context_parallelism=8 dataset_type=synthetic "
    "opt_type=adam_pax sa_block_q=2048 sa_block_kv=2048 sa_block_kv_compute=512 sa_block_q_dkv=1024 "
    "sa_block_kv_dkv=4096 sa_block_kv_dkv_compute=256 sa_q_layout=SEQ_MINOR sa_k_layout=HEAD_DIM_MINOR "
    "sa_v_layout=SEQ_MINOR sa_use_fused_bwd_kernel=True dq_reduction_steps=3 use_tokamax_splash=True "
    "use_max_logit_estimate=30 max_target_length=131072 attention=flash "
)
# training/ironwood/llama3.1-405b/8k-bf16-tpu7x-4x8x8/run_recipe.sh@36812de3f946
_ARGS_L405_BF16_256 = (
    "model_name=llama3.1-405b dtype=bfloat16 per_device_batch_size=3 use_iota_embed=True ici_fsdp_parallelism=-1 "
    "remat_policy=custom decoder_layer_input=offload mlpwo=offload key_proj=device value_proj=device "
    "attention=flash sa_block_q=2048 sa_block_kv=2048 sa_block_kv_compute=1024 sa_block_q_dkv=2048 "
    "sa_block_kv_dkv=2048 sa_block_kv_dkv_compute=512 sa_use_fused_bwd_kernel=True sa_q_layout=SEQ_MINOR "
    "sa_k_layout=SEQ_MINOR sa_v_layout=HEAD_DIM_MINOR use_splash_scheduler=True use_tokamax_splash=True "
    "dataset_type=synthetic opt_type=adamw mu_dtype=bfloat16 num_vocab_tiling=4 max_target_length=8192 "
)
# training/ironwood/gemma4-2b/8k-bf16-tpu7x-4x4x4/xpk/run_recipe.sh@aa23ecdf61fc
_ARGS_G4_E2B_64 = (
    "model_name=gemma4-e2b scan_layers=False dtype=bfloat16 per_device_batch_size=2 max_target_length=8192 "
    "use_iota_embed=True num_vocab_tiling=8 remat_policy=full allow_split_physical_axes=True "
    "ici_data_parallelism=4 ici_fsdp_parallelism=-1 attention=flash use_tokamax_splash=True "
    "sa_use_fused_bwd_kernel=True sa_block_q=1024 sa_block_kv=1024 sa_block_kv_compute=512 sa_block_q_dkv=1024 "
    "sa_block_kv_dkv=1024 sa_block_kv_dkv_compute=256 dataset_type=synthetic opt_type=adamw "
)
# training/ironwood/gemma4-4b/8k-bf16-tpu7x-4x4x4/xpk/run_recipe.sh@aa23ecdf61fc
_ARGS_G4_E4B_64 = (
    "model_name=gemma4-e4b scan_layers=False dtype=bfloat16 per_device_batch_size=2 max_target_length=8192 "
    "use_iota_embed=True num_vocab_tiling=8 remat_policy=full allow_split_physical_axes=True "
    "ici_data_parallelism=4 ici_fsdp_parallelism=-1 attention=flash use_tokamax_splash=True "
    "sa_use_fused_bwd_kernel=True sa_block_q=1024 sa_block_kv=1024 sa_block_kv_compute=512 sa_block_q_dkv=1024 "
    "sa_block_kv_dkv=1024 sa_block_kv_dkv_compute=256 dataset_type=synthetic opt_type=adamw "
)
# training/ironwood/gemma4-31b/8k-bf16-tpu7x-4x4x4/xpk/run_recipe.sh@d25b533d0448
_ARGS_G4_31B_64 = (
    "model_name=gemma4-31b per_device_batch_size=4 max_target_length=8192 use_iota_embed=True attention=flash "
    "use_tokamax_splash=True sa_use_fused_bwd_kernel=True sa_block_q=2048 sa_block_kv=2048 "
    "sa_block_kv_compute=512 sa_block_q_dkv=1024 sa_block_kv_dkv=2048 sa_block_kv_dkv_compute=1024 "
    "sa_block_q_dq=1024 sa_block_kv_dq=1024 sa_q_layout=SEQ_MINOR sa_k_layout=SEQ_MINOR "
    "sa_v_layout=HEAD_DIM_MINOR use_splash_scheduler=True local_sa_block_q=1024 local_sa_block_kv=1024 "
    "local_sa_block_kv_compute=512 local_sa_block_q_dkv=1024 local_sa_block_kv_dkv=2048 "
    "local_sa_block_kv_dkv_compute=1024 local_use_splash_scheduler=False ici_fsdp_parallelism=16 "
    "ici_fsdp_transpose_parallelism=8 dense_fsdp_use_two_stage_all_gather=True num_vocab_tiling=8 "
    "remat_policy=custom out_proj=device mlpwo=device dataset_type=synthetic "
)
# training/ironwood/gemma4-31b/8k-bf16-tpu7x-4x4x4/xpk/run_recipe.sh@aa23ecdf61fc
_ARGS_G4_31B_64_PDBS8 = (
    "model_name=gemma4-31b per_device_batch_size=8 max_target_length=8192 use_iota_embed=True attention=flash "
    "use_tokamax_splash=True sa_use_fused_bwd_kernel=True sa_block_q=1024 sa_block_kv=1024 "
    "sa_block_kv_compute=1024 sa_block_q_dkv=512 sa_block_kv_dkv=2048 sa_block_kv_dkv_compute=512 "
    "sa_block_q_dq=1024 sa_block_kv_dq=1024 sa_q_layout=SEQ_MINOR sa_k_layout=SEQ_MINOR "
    "sa_v_layout=HEAD_DIM_MINOR ici_fsdp_parallelism=16 ici_fsdp_transpose_parallelism=8 dataset_type=synthetic "
)
# training/ironwood/llama3.1-405b/8k-fp8-tpu7x-4x8x8/run_recipe.sh@24b35b27be74
_ARGS_L405_FP8_256 = (
    "model_name=llama3.1-405b dtype=bfloat16 per_device_batch_size=3 use_iota_embed=True remat_policy=custom "
    "decoder_layer_input=offload ici_fsdp_parallelism=-1 dataset_type=synthetic opt_type=adamw "
    "quantization=fp8_full use_qwix_quantization=True mu_dtype=bfloat16 use_tokamax_splash=True "
    "use_max_logit_estimate=-1 sa_block_kv=2048 sa_block_kv_compute=256 sa_block_q=1024 sa_block_kv_dkv=2048 "
    "sa_block_kv_dkv_compute=1024 sa_block_q_dkv=2048 sa_k_layout=SEQ_MINOR sa_q_layout=HEAD_DIM_MINOR "
    "sa_v_layout=SEQ_MINOR attention=flash sa_use_fused_bwd_kernel=True max_target_length=8192 "
    "weight_quantization_calibration_method='fixed,-224,224' "
    "act_quantization_calibration_method='fixed,-224,224' "
)
# training/ironwood/llama3.1-70b/8k-fp8-tpu7x-4x4x4/xpk/run_recipe.sh@bdc182844827
_ARGS_L70_FP8_64 = (
    "model_name=llama3.1-70b dtype=bfloat16 per_device_batch_size=2 use_iota_embed=True remat_policy=custom "
    "decoder_layer_input=device context=device query_proj=device key_proj=device value_proj=device "
    "qkv_proj=device ici_fsdp_parallelism=-1 dataset_type=synthetic opt_type=adamw mu_dtype=bfloat16 "
    "sa_block_q=1024 sa_block_kv=1024 sa_block_kv_compute=512 sa_block_q_dkv=2048 sa_block_kv_dkv=2048 "
    "sa_block_kv_dkv_compute=256 sa_q_layout=SEQ_MINOR sa_k_layout=HEAD_DIM_MINOR sa_v_layout=HEAD_DIM_MINOR "
    "sa_use_fused_bwd_kernel=True use_tokamax_splash=True max_target_length=8192 attention=flash "
    "quantization=fp8_full use_qwix_quantization=True weight_quantization_calibration_method='fixed,-224,224' "
    "act_quantization_calibration_method='fixed,-224,224' "
)
# training/ironwood/llama3.1-70b/8k-fp8-tpu7x-4x8x8/run_recipe.sh@ec09a47e103b
_ARGS_L70_FP8_256 = (
    "model_name=llama3.1-70b dtype=bfloat16 per_device_batch_size=2 use_iota_embed=True remat_policy=custom "
    "decoder_layer_input=device context=device query_proj=device key_proj=device value_proj=device "
    "qkv_proj=device ici_fsdp_parallelism=-1 dataset_type=synthetic opt_type=adamw mu_dtype=bfloat16 "
    "sa_block_q=1024 sa_block_kv=1024 sa_block_kv_compute=512 sa_block_q_dkv=2048 sa_block_kv_dkv=2048 "
    "sa_block_kv_dkv_compute=256 sa_q_layout=SEQ_MINOR sa_k_layout=HEAD_DIM_MINOR sa_v_layout=HEAD_DIM_MINOR "
    "sa_use_fused_bwd_kernel=True use_tokamax_splash=True max_target_length=8192 attention=flash "
    "quantization=fp8_full use_qwix_quantization=True weight_quantization_calibration_method='fixed,-224,224' "
    "act_quantization_calibration_method='fixed,-224,224' "
)
# training/ironwood/llama3.1-70b/128k-fp8-tpu7x-4x8x8/run_recipe.sh@ad4736a598bc
_ARGS_L70_128K_FP8_256 = (
    "model_name=llama3.1-70b dtype=bfloat16 per_device_batch_size=0.125 use_iota_embed=True remat_policy=custom "
    "decoder_layer_input=device context=device query_proj=device key_proj=device value_proj=device mlpwo=device "
    "num_vocab_tiling=4 ici_fsdp_parallelism=-1 ici_context_parallelism=8 dataset_type=synthetic "
    "opt_type=adam_pax sa_block_q=2048 sa_block_kv=2048 sa_block_kv_compute=512 sa_block_q_dkv=1024 "
    "sa_block_kv_dkv=4096 sa_block_kv_dkv_compute=256 sa_q_layout=SEQ_MINOR sa_k_layout=HEAD_DIM_MINOR "
    "sa_v_layout=SEQ_MINOR sa_use_fused_bwd_kernel=True dq_reduction_steps=3 use_tokamax_splash=True "
    "use_max_logit_estimate=30 max_target_length=131072 attention=flash quantization=fp8_full "
    "use_qwix_quantization=True "
)


def _ironwood_dense(
    name: str,
    sl: str,
    args: str,
    step: float,
    tflops_per_chip: float,
    table: str,
    recipe: str,
    notes: str,
) -> Reference:
    return Reference(
        name=name,
        slice=sl,
        num_slices=1,
        config=_recipe_args(args),
        published_mfu=tflops_per_chip / PEAK_BF16_TFLOPS["tpu7x"],
        published_tflops_per_chip=tflops_per_chip,
        source=f"step and TFLOP/s: {_TR_IRONWOOD}@{table}; config: {_TR} {recipe}",
        notes=_IRONWOOD_DENSE_NOTE + notes,
        published_step_s=step,
        causal_halved=True,
    )


IRONWOOD_DENSE_REFERENCES: tuple[Reference, ...] = (
    _ironwood_dense(
        "llama3.1-70b tpu7x-128 (64 chips) seq8192 bf16 (pdbs 2, fsdp 128, remat custom)",
        "tpu7x-128",
        _ARGS_L70_BF16_64,
        12.20,
        1207.05,
        "edf6fa7d098cef0bddb433f14a3dbb5ccc6edd58 L15",
        "training/ironwood/llama3.1-70b/8k-bf16-tpu7x-4x4x4/xpk/run_recipe.sh@edf6fa7d098c (tpu7x-4x4x4; MaxText "
        "maxtext-tutorial-v1.4.0, JAX 0.8.2.dev20251215, libtpu 0.0.32.dev20251215)",
        "Table: '64 | GBS 256 | 8192 | bf16 | 12.20 | 1,207.05 | 2,686.98' (was 12.51 s at 8aa6a5c with MaxText "
        "v1.3.0, same keys). remat_policy custom keeping decoder_layer_input, context and the q/k/v projections on "
        "device (nothing offloaded).",
    ),
    _ironwood_dense(
        "llama3.1-70b tpu7x-512 (256 chips) seq8192 bf16 (pdbs 2, fsdp 512, remat custom)",
        "tpu7x-512",
        _ARGS_L70_BF16_256,
        12.27,
        1199.67,
        "a29f0e447f7db099a8f6ca7cd29eadbfc46eaaca L17",
        "training/ironwood/llama3.1-70b/8k-bf16-tpu7x-4x8x8/run_recipe.sh@a29f0e447f7d (tpu7x-4x8x8; "
        "maxtext-tutorial-v1.4.0)",
        "Table: '256 | GBS 1024 | 8192 | bf16 | 12.27 | 1,199.67 | 2,670.55' (was 12.78 s with the earlier recipe: "
        "sa_block_kv 1024, more XLA flags). Same keys as the 64-chip row.",
    ),
    _ironwood_dense(
        "llama3.1-70b tpu7x-512 (256 chips) seq131072 bf16 (pdbs 0.125, fsdp 64 x context 8)",
        "tpu7x-512",
        _ARGS_L70_128K_BF16_256,
        34.02,
        897.94,
        "82a737a1877540877fa7f7f7f2dadff8f870fa58 L19",
        "training/ironwood/llama3.1-70b/128k-bf16-tpu7x-4x8x8/xpk/run_recipe.sh@82a737a18775 (tpu7x-4x8x8; "
        "MaxText a0fceb5, JAX 0.9.2.dev20260306, libtpu 0.0.37)",
        "Table: '256 | GBS 64 | 131072 | bf16 | 34.02 | 897.94 | 963.03'. Long context: one 128k sequence per 8 "
        "devices (context parallelism 8), opt_type adam_pax, use_max_logit_estimate 30, dq_reduction_steps 3.",
    ),
    _ironwood_dense(
        "llama3.1-405b tpu7x-512 (256 chips) seq8192 bf16 (pdbs 3, fsdp 512, offload)",
        "tpu7x-512",
        _ARGS_L405_BF16_256,
        98.34,
        1261.40,
        "ddfa8bc3b7362a8adcc2c840094f349e20a6f320 L13",
        "training/ironwood/llama3.1-405b/8k-bf16-tpu7x-4x8x8/run_recipe.sh@36812de3f946 (tpu7x-4x8x8; MaxText "
        "bf174d6, JAX 0.9.1.dev20260225, libtpu 0.0.37.dev20260224; the keys are unchanged to ddfa8bc and HEAD)",
        "Table: '256 | GBS 1536 | 8192 | bf16 | 98.34 | 1,261.40 | 499.77' (ddfa8bc corrected 36812de's 98.35 / "
        "1,261.34). remat_policy custom: decoder_layer_input and mlpwo offloaded to host, key/value projections "
        "kept on device; num_vocab_tiling 4; use_splash_scheduler.",
    ),
    _ironwood_dense(
        "gemma4-e2b tpu7x-128 (64 chips) seq8192 bf16 (pdbs 2, data 4 x fsdp 32, remat full)",
        "tpu7x-128",
        _ARGS_G4_E2B_64,
        0.57,
        892.84,
        "aa23ecdf61fc7eadff7fbe3cf798041dd8039161 L11",
        "training/ironwood/gemma4-2b/8k-bf16-tpu7x-4x4x4/xpk/run_recipe.sh@aa23ecdf61fc (tpu7x-4x4x4; MaxText "
        "df1b359, JAX 0.10.2.dev20260603, libtpu 0.0.42.dev20260603)",
        "Table: 'gemma4-2b | 64 | GBS 256 | 8192 | bf16 | 0.57 | 892.84 | 57,873.71'; the recipe's model_name is "
        "gemma4-e2b (Gemma 4 E2B, per-layer embeddings, sliding/global attention 4:1). The step is rounded: "
        "pdbs x seq x 2 / tokens/s/chip = 0.5662 s. scan_layers False, num_vocab_tiling 8.",
    ),
    _ironwood_dense(
        "gemma4-e4b tpu7x-128 (64 chips) seq8192 bf16 (pdbs 2, data 4 x fsdp 32, remat full)",
        "tpu7x-128",
        _ARGS_G4_E4B_64,
        0.97,
        1002.50,
        "aa23ecdf61fc7eadff7fbe3cf798041dd8039161 L12",
        "training/ironwood/gemma4-4b/8k-bf16-tpu7x-4x4x4/xpk/run_recipe.sh@aa23ecdf61fc (tpu7x-4x4x4; MaxText df1b359)",
        "Table: 'gemma4-4b | 64 | GBS 256 | 8192 | bf16 | 0.97 | 1,002.50 | 33,755.24'; model_name gemma4-e4b. "
        "The step is rounded: pdbs x seq x 2 / tokens/s/chip = 0.9708 s. scan_layers False, num_vocab_tiling 8.",
    ),
    _ironwood_dense(
        "gemma4-31b tpu7x-128 (64 chips) seq8192 bf16 (pdbs 4, fsdp 16 x fsdp_transpose 8)",
        "tpu7x-128",
        _ARGS_G4_31B_64,
        12.20,
        1057.76,
        "d25b533d0448daa5b76ec77b628a020eaf87f618 L15",
        "training/ironwood/gemma4-31b/8k-bf16-tpu7x-4x4x4/xpk/run_recipe.sh@d25b533d0448 (tpu7x-4x4x4; MaxText "
        "df1b359 per the README)",
        "Table: '64 | GBS 512 | 8192 | bf16 | 12.20 | 1,057.76 | 5,370.74'. remat_policy custom keeping out_proj "
        "and mlpwo on device; dense_fsdp_use_two_stage_all_gather; local_sa_block_* for the sliding-window layers.",
    ),
    _ironwood_dense(
        "gemma4-31b tpu7x-128 (64 chips) seq8192 bf16 (pdbs 8, fsdp 16 x fsdp_tr 8) [superseded]",
        "tpu7x-128",
        _ARGS_G4_31B_64_PDBS8,
        27.72,
        931.30,
        "aa23ecdf61fc7eadff7fbe3cf798041dd8039161 L15",
        "training/ironwood/gemma4-31b/8k-bf16-tpu7x-4x4x4/xpk/run_recipe.sh@aa23ecdf61fc (tpu7x-4x4x4; MaxText "
        "df1b359)",
        "Table: '64 | GBS 1024 | 8192 | bf16 | 27.72 | 931.30 | 4,728.65' (27.89 s at dad1193), replaced at "
        "d25b533 by the pdbs-4 row above: a different config (pdbs 8, base.yml remat, other splash blocks), kept "
        "as its own published point. No remat_policy set (base.yml default).",
    ),
    _ironwood_dense(
        "llama3.1-405b tpu7x-512 (256 chips) seq8192 fp8_full (pdbs 3, fsdp 512, offload)",
        "tpu7x-512",
        _ARGS_L405_FP8_256,
        64.37,
        1927.15,
        "24b35b27be746a29ee5118c119efbda095aee355 L14",
        "training/ironwood/llama3.1-405b/8k-fp8-tpu7x-4x8x8/run_recipe.sh@24b35b27be74 (tpu7x-4x8x8; MaxText "
        "a0fceb5, JAX 0.9.2.dev20260306, libtpu 0.0.37)",
        "Table: '256 | GBS 1536 | 8192 | fp8_full | 64.37 | 1,927.15 | 763.54'. " + _FP8_NOTE,
    ),
    _ironwood_dense(
        "llama3.1-70b tpu7x-128 (64 chips) seq8192 fp8_full (pdbs 2, fsdp 128, remat custom)",
        "tpu7x-128",
        _ARGS_L70_FP8_64,
        7.93,
        1854.19,
        "bdc1828448278ac31dcc9dd9be6f393f9d53b9ec L16",
        "training/ironwood/llama3.1-70b/8k-fp8-tpu7x-4x4x4/xpk/run_recipe.sh@bdc182844827 (tpu7x-4x4x4; MaxText "
        "a0fceb5)",
        "Table: '64 | GBS 256 | 8192 | fp8_full | 7.93 | 1,854.19 | 4127.56'. " + _FP8_NOTE,
    ),
    _ironwood_dense(
        "llama3.1-70b tpu7x-512 (256 chips) seq8192 fp8_full (pdbs 2, fsdp 512, remat custom)",
        "tpu7x-512",
        _ARGS_L70_FP8_256,
        7.95,
        1851.25,
        "ec09a47e103bc24c9ad712518e7606f11b0794d4 L18",
        "training/ironwood/llama3.1-70b/8k-fp8-tpu7x-4x8x8/run_recipe.sh@ec09a47e103b (tpu7x-4x8x8; MaxText "
        "a0fceb5; keys last changed at 7a0ae05, Apr 2026)",
        "Table: '256 | GBS 1024 | 8192 | fp8_full | 7.95 | 1,851.25 | 4,121.02' (8.39 s at 53f09e6, a day earlier). "
        + _FP8_NOTE,
    ),
    _ironwood_dense(
        "llama3.1-70b tpu7x-512 (256 chips) seq131072 fp8_full (pdbs 0.125, fsdp 64 x context 8)",
        "tpu7x-512",
        _ARGS_L70_128K_FP8_256,
        30.11,
        1014.45,
        "ad4736a598bc07cddbfc1386f2975a2374dcaea9 L20",
        "training/ironwood/llama3.1-70b/128k-fp8-tpu7x-4x8x8/run_recipe.sh@ad4736a598bc (tpu7x-4x8x8; MaxText a0fceb5)",
        "Table: '256 | GBS 64 | 131072 | fp8_full | 30.11 | 1,014.45 | 1,087.99'. Long context as the bf16 row. "
        + _FP8_NOTE,
    ),
)
