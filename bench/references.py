"""Published MaxText training results used to calibrate ASAP's performance model.

These are the DOMAIN.md §4 development references plus further published MaxText results that come with a full config.
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
PEAK_BF16_TFLOPS = {"v4": 275.0, "v5e": 197.0, "v5p": 459.0, "v6e": 918.0}

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
    Reference(
        name="mixtral-8x7b v6e-256 seq4096 (mixtral_8x7b_dropped, pdbs 12) [tiering]",
        slice="v6e-256",
        num_slices=1,
        config={
            "model_name": "mixtral-8x7b",
            "per_device_batch_size": 12,
            "ici_fsdp_parallelism": -1,
            "max_target_length": 4096,
            "remat_policy": "custom",
            "decoder_layer_input": "offload",
            "out_proj": "offload",
            "query_proj": "offload",
            "key_proj": "offload",
            "value_proj": "offload",
            "attention": "flash",
            "use_iota_embed": True,
            "dataset_type": "synthetic",
            **_SA_MOE,
            "megablox": False,
            "sparse_matmul": False,
            "capacity_factor": 1.25,
        },
        published_mfu=0.3523,
        published_tflops_per_chip=None,
        source=(
            f"MFU: {_TIERING} (Silver, 35.23%, 3,899 tok/s/device); config+log: {_TR} "
            "training/trillium/Mixtral-8x7B-MaxText/README.md@e008533bc4a73f8f4246148a55f67c3bd3b9623c"
        ),
        notes=(
            "Recipe (tpu-recipes-v0.1.2) log: 'seconds: 13.484, TFLOP/s/device: 302.311, Tokens/s/device: "
            "3645.203, total_weights: 12582912' (=256*4096*12) => 302.311/918 = 32.9%, lower than tiering's 35.23%; "
            "an older recipe (fork mahdi-shafiei/tpu-recipes@0aae82e1, maxtext@2e1ebad7) logged 302.566 TFLOP/s at "
            "total_weights 8388608 (pdbs 8). Dropping (capacity_factor 1.25) MoE, no EP. xla_flags: "
            "MOE_VMEM_LIMIT_FLAG + CF_FOR_ALL_GATHER + DATA_PARALLEL_OVERLAP. " + _MAXTEXT_FLOPS_NOTE
        ),
    ),
    Reference(
        name="mixtral-8x22b v6e-256 seq4096 (mixtral_8x22b_dropped: fsdp 64 x expert 4, pdbs 8) [tiering]",
        slice="v6e-256",
        num_slices=1,
        config={
            "model_name": "mixtral-8x22b",
            "per_device_batch_size": 8,
            "max_target_length": 4096,
            "ici_fsdp_parallelism": 64,
            "ici_expert_parallelism": 4,
            "remat_policy": "custom",
            "decoder_layer_input": "offload",
            "out_proj": "offload",
            "query_proj": "offload",
            "key_proj": "offload",
            "value_proj": "offload",
            "attention": "flash",
            "use_iota_embed": True,
            "dataset_type": "synthetic",
            **_SA_MOE,
            "megablox": False,
            "sparse_matmul": False,
            "capacity_factor": 1.25,
            "dtype": "bfloat16",
            "weight_dtype": "bfloat16",
            "allow_split_physical_axes": True,
            "custom_mesh": "hybrid_ring_64x4",
        },
        published_mfu=0.362,
        published_tflops_per_chip=332.463,
        source=(
            f"MFU: {_TIERING} (Silver, 36.2%, 1,326 tok/s/device); config: {_TRILLIUM} (mixtral_8x22b_dropped); "
            f"log: {_TR} training/trillium/Mixtral-8x22B-MaxText/README.md@03fb496c2da2bc3183be6484f3d54845a66ac002"
        ),
        notes=(
            "Recipe log (maxtext@261a8be0, libtpu 20241119): 'seconds: 24.706, TFLOP/s/device: 332.463, "
            "Tokens/s/device: 1326.307, total_weights: 8388608' (=256*4096*8). The recipe README does not print the "
            "config; it is taken from the later bfd388fd file (may differ from 261a8be0). weight_dtype bf16. "
            "xla_flags: MOE_VMEM_LIMIT_FLAG + CF_FOR_ALL_GATHER + DATA_PARALLEL_OVERLAP. " + _MAXTEXT_FLOPS_NOTE
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
