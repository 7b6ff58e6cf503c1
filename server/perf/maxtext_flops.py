"""MaxText's own training TFLOPs per device per step: `calculate_tflops_training_per_device`
(src/maxtext/utils/maxtext_utils.py:1149@e591f30cb) and every helper it calls, re-derived here
branch by branch so that ASAP's MFU means what MaxText logs (`perf/per_device_tflops`, divided by
the step time for `perf/per_device_tflops_per_sec`; src/maxtext/common/metric_logger.py:372,470).

Input is a getter over the resolved raw config (model file merged into the user's chain): the
`base_*` keys, `global_parameter_scale` and the rest, as a YAML config sets them. The derived
attributes MaxText's formula reads (`emb_dim`, `num_query_heads`, `mlp_dim`, ...) are computed here
as src/maxtext/configs/types.py does (`Derived`). Arithmetic keeps MaxText's operation order, so
the numbers agree with MaxText's to the last bit, not just to rounding.

Every place is cited `path:line@e591f30cb` (AI-Hypercomputer/maxtext, commit e591f30cbbf2, 2026-08-22).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from server.perf.arith import ArithError, individual_scales

MAXTEXT_COMMIT = "e591f30cbbf217ed67ef71263ec0538239f9c3b8"
_UTILS = "src/maxtext/utils/maxtext_utils.py"
_TYPES = "src/maxtext/configs/types.py"
_BASE = "src/maxtext/configs/base.yml"
_G4S = "src/maxtext/models/gemma4_small.py"

Getter = Callable[..., Any]


def cite(path: str, line: int) -> str:
    return f"{path}:{line}@{MAXTEXT_COMMIT[:9]}"


def _u(line: int) -> str:
    return cite(_UTILS, line)


# Decoder blocks MaxText knows (src/maxtext/common/common_types.py:92-118).
DECODER_BLOCKS = (
    "default",
    "llama2",
    "mistral",
    "mixtral",
    "deepseek",
    "gemma",
    "gemma2",
    "gemma3",
    "gemma4",
    "gemma4_small",
    "qwen2",
    "qwen3",
    "qwen3_moe",
    "qwen3_custom_moe",
    "qwen3_next",
    "qwen3_5",
    "gpt3",
    "gpt_oss",
    "simple",
    "simple_mlp",
    "llama4",
    "olmo3",
    "deepseek4",
    "envy",
)
# types.py:603: the Literal MaxText's config accepts for attention_type.
ATTENTION_TYPES = ("global", "local_sliding", "chunk", "mla", "full", "compressed", "block_diffusion")

# Every raw key the formula depends on: (pydantic type in types.py, base.yml default, base.yml line).
# Kinds: int (any int), nonneg (NonNegativeInt), pos (PositiveInt), num (int | float), float,
# bool, str, list, any (validated where it is used).
_KEYS: dict[str, tuple[str, Any, int]] = {
    "model_name": ("str", "default", 23),
    "decoder_block": ("str", "llama2", 170),
    "global_parameter_scale": ("int", 1, 175),
    "base_emb_dim": ("int", 2048, 176),
    "base_num_query_heads": ("int", 16, 177),
    "base_num_kv_heads": ("int", 16, 178),
    "base_mlp_dim": ("int", 7168, 179),
    "base_num_decoder_layers": ("int", 16, 181),
    "head_dim": ("int", 128, 182),
    "attention_output_dim": ("int", -1, 183),
    "global_head_dim": ("int", 0, 185),
    "global_num_kv_heads": ("int", 0, 186),
    "mlp_activations": ("list", ["silu", "linear"], 187),
    "mtp_num_layers": ("nonneg", 0, 203),
    "num_experts": ("pos", 1, 213),
    "num_experts_per_tok": ("pos", 1, 214),
    "moe_expert_input_dim": ("int", -1, 225),
    "base_moe_mlp_dim": ("int", -1, 226),
    "first_num_dense_layers": ("nonneg", 0, 289),
    "shared_experts": ("nonneg", 0, 290),
    "inhomogeneous_layer_cycle_interval": ("int", 1, 307),
    "attention_type": ("str", "global", 393),
    "share_kv_projections": ("bool", False, 394),
    "sliding_window_size": ("nonneg", 0, 397),
    "chunk_attn_window_size": ("nonneg", 0, 398),
    "hidden_size_per_layer_input": ("nonneg", 0, 414),
    "num_kv_shared_layers": ("nonneg", 0, 419),
    "use_double_wide_mlp": ("bool", False, 422),
    "use_indexer": ("bool", False, 432),
    "indexer_head_dim": ("nonneg", 128, 433),
    "indexer_n_heads": ("nonneg", 64, 434),
    "indexer_topk": ("nonneg", 2048, 435),
    "q_lora_rank": ("nonneg", 0, 448),
    "kv_lora_rank": ("nonneg", 512, 449),
    "qk_nope_head_dim": ("nonneg", 128, 450),
    "qk_rope_head_dim": ("nonneg", 64, 451),
    "v_head_dim": ("nonneg", 128, 452),
    "o_lora_rank": ("nonneg", 0, 456),
    "o_groups": ("nonneg", 0, 457),
    "compress_ratios": ("list", [], 458),
    "vocab_size": ("int", 32_000, 712),
    "per_device_batch_size": ("num", 12.0, 731),
    "use_dpo": ("bool", False, 768),
    "max_target_length": ("int", 2048, 880),
    "gradient_accumulation_steps": ("pos", 1, 968),
    "nope_layer_interval": ("int", -1, 1223),
    "interleave_moe_layer_step": ("int", 1, 1225),
    "use_multimodal": ("bool", False, 1232),
    "freeze_vision_encoder_params": ("bool", True, 1234),
    "image_size_for_vit": ("any", 896, 1238),
    "hidden_size_for_vit": ("int", 1408, 1257),
    "intermediate_size_for_vit": ("int", 5632, 1258),
    "num_channels_for_vit": ("int", 3, 1260),
    "tile_size_for_vit": ("int", 336, 1261),
    "patch_size_for_vit": ("int", 14, 1262),
    "num_hidden_layers_for_vit": ("int", 34, 1264),
    "projector_input_dim_for_vit": ("int", 4096, 1265),
    "projector_output_dim_for_vit": ("int", 4096, 1266),
    "pixel_shuffle_ratio_for_vit": ("float", 0.5, 1269),
    "gdn_conv_kernel_dim": ("int", 4, 1314),
    "gdn_key_head_dim": ("int", 128, 1316),
    "gdn_value_head_dim": ("int", 128, 1318),
    "gdn_num_key_heads": ("int", 16, 1320),
    "gdn_num_value_heads": ("int", 32, 1322),
    "mhc_expansion_rate": ("pos", 1, 1347),
    "engram_layers": ("list", [], 1372),
    "engram_max_ngram_size": ("int", 3, 1374),
    "engram_num_heads": ("int", 8, 1376),
    "engram_head_dim": ("int", 1280, 1378),
    "engram_kernel_size": ("int", 4, 1382),
}

BASE_DEFAULTS: dict[str, Any] = {k: v[1] for k, v in _KEYS.items()}

# pydantic's lax bool parsing (what MaxText's config accepts for a bool field).
_TRUE = {"true", "1", "yes", "y", "on", "t"}
_FALSE = {"false", "0", "no", "n", "off", "f"}


def _read(get: Getter, key: str) -> Any:
    """The value MaxText would hold for `key`: the config's, else base.yml's. A null counts as
    unset (the getter's own default)."""
    kind, default, _ = _KEYS[key]
    v = get(key, default)
    if v is None:
        v = default
    if kind in ("int", "nonneg", "pos"):
        if isinstance(v, float) and v.is_integer():
            v = int(v)  # pydantic accepts 4.0 for an int field
        if isinstance(v, bool) or not isinstance(v, int):
            raise ArithError(key, f"{key} must be a whole number, got {v!r}")
        if kind == "nonneg" and v < 0:
            raise ArithError(key, f"{key} must be >= 0, got {v}")
        if kind == "pos" and v < 1:
            raise ArithError(key, f"{key} must be >= 1, got {v}")
        return v
    if kind in ("num", "float"):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ArithError(key, f"{key} must be a number, got {v!r}")
        return float(v) if kind == "float" else v
    if kind == "bool":
        if isinstance(v, bool):
            return v
        if isinstance(v, int) and v in (0, 1):
            return bool(v)
        if isinstance(v, str) and v.strip().lower() in _TRUE | _FALSE:
            return v.strip().lower() in _TRUE
        raise ArithError(key, f"{key} must be true or false, got {v!r}")
    if kind == "str":
        if not isinstance(v, str):
            raise ArithError(key, f"{key} must be a string, got {v!r}")
        return v
    if kind == "list":
        if not isinstance(v, (list, tuple)):
            raise ArithError(key, f"{key} must be a list, got {v!r}")
        return list(v)
    return v


@dataclass(frozen=True)
class Derived:
    """The config attributes MaxText's formula reads, derived as types.py derives them.

    Names are MaxText's own, so each line of the port reads against the source.
    """

    model_name: str
    decoder_block: str
    attention_type: str
    per_device_batch_size: float | int
    max_target_length: int
    gradient_accumulation_steps: int
    base_emb_dim: int
    emb_dim: int
    num_query_heads: int
    num_kv_heads: int
    mlp_dim: int
    moe_mlp_dim: int
    num_decoder_layers: int
    head_dim: int
    global_head_dim: int
    global_num_kv_heads: int
    vocab_size: int
    num_mlp_activations: int
    share_kv_projections: bool
    num_experts: int
    num_experts_per_tok: int
    shared_experts: int
    first_num_dense_layers: int
    interleave_moe_layer_step: int
    inhomogeneous_layer_cycle_interval: int
    moe_expert_input_dim: int
    attention_output_dim: int
    sliding_window_size: int
    chunk_attn_window_size: int
    nope_layer_interval: int
    q_lora_rank: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    use_indexer: bool
    indexer_n_heads: int
    indexer_head_dim: int
    indexer_topk: int
    gdn_num_key_heads: int
    gdn_num_value_heads: int
    gdn_key_head_dim: int
    gdn_value_head_dim: int
    gdn_conv_kernel_dim: int
    num_kv_shared_layers: int
    use_double_wide_mlp: bool
    hidden_size_per_layer_input: int
    o_groups: int
    o_lora_rank: int
    compress_ratios: tuple[int, ...]
    mhc_expansion_rate: int
    mtp_num_layers: int
    num_engram_layers: int
    engram_kernel_size: int
    engram_max_ngram_size: int
    engram_num_heads: int
    engram_head_dim: int
    use_multimodal: bool
    freeze_vision_encoder_params: bool
    image_size_for_vit: Any
    num_channels_for_vit: int
    tile_size_for_vit: int
    patch_size_for_vit: int
    hidden_size_for_vit: int
    intermediate_size_for_vit: int
    num_hidden_layers_for_vit: int
    projector_input_dim_for_vit: int
    projector_output_dim_for_vit: int
    pixel_shuffle_ratio_for_vit: float
    use_dpo: bool
    notes: tuple[str, ...] = ()


def derive(get: Getter) -> Derived:
    """The derived view: dims scaled by `global_parameter_scale` (types.py:3393-3401), Qwen3-MoE's
    mlp_dim forced to the expert dim when every layer is MoE (types.py:3896-3905)."""
    r = {k: _read(get, k) for k in _KEYS}
    notes: list[str] = []
    block = r["decoder_block"].lower()  # types.py:4395-4396
    if block not in DECODER_BLOCKS:
        raise ArithError("decoder_block", f"unknown decoder_block {r['decoder_block']!r}")
    if r["attention_type"] not in ATTENTION_TYPES:
        raise ArithError("attention_type", f"unknown attention_type {r['attention_type']!r}")
    es, hs, ms, ls = individual_scales(r["global_parameter_scale"])
    base_mlp = r["base_mlp_dim"]
    if r["num_experts"] > 1:
        moe_mlp = (2**ms) * r["base_moe_mlp_dim"]
        if moe_mlp <= 0:  # types.py:3893-3895
            raise ArithError("base_moe_mlp_dim", "base_moe_mlp_dim must be > 0 for a MoE model (num_experts > 1)")
        fully_moe = (
            r["interleave_moe_layer_step"] == 1
            and r["first_num_dense_layers"] == 0
            and r["inhomogeneous_layer_cycle_interval"] == 1
        )
        if fully_moe and base_mlp != r["base_moe_mlp_dim"] and block == "qwen3_moe":
            base_mlp = r["base_moe_mlp_dim"]
            notes.append(f"qwen3_moe, every layer MoE: mlp_dim := moe_mlp_dim ({cite(_TYPES, 3902)})")
    ratios = r["compress_ratios"]
    for v in ratios:
        if isinstance(v, bool) or not isinstance(v, int):
            raise ArithError("compress_ratios", f"compress_ratios must be whole numbers, got {v!r}")
    acts = r["mlp_activations"]
    return Derived(
        model_name=r["model_name"],
        decoder_block=block,
        attention_type=r["attention_type"],
        per_device_batch_size=r["per_device_batch_size"],
        max_target_length=r["max_target_length"],
        gradient_accumulation_steps=r["gradient_accumulation_steps"],
        base_emb_dim=r["base_emb_dim"],
        emb_dim=(2**es) * r["base_emb_dim"],
        num_query_heads=(2**hs) * r["base_num_query_heads"],
        num_kv_heads=(2**hs) * r["base_num_kv_heads"],
        mlp_dim=(2**ms) * base_mlp,
        moe_mlp_dim=(2**ms) * r["base_moe_mlp_dim"],
        num_decoder_layers=(2**ls) * r["base_num_decoder_layers"],
        head_dim=r["head_dim"],
        global_head_dim=r["global_head_dim"],
        global_num_kv_heads=r["global_num_kv_heads"],
        vocab_size=r["vocab_size"],
        num_mlp_activations=len(acts),
        share_kv_projections=r["share_kv_projections"],
        num_experts=r["num_experts"],
        num_experts_per_tok=r["num_experts_per_tok"],
        shared_experts=r["shared_experts"],
        first_num_dense_layers=r["first_num_dense_layers"],
        interleave_moe_layer_step=r["interleave_moe_layer_step"],
        inhomogeneous_layer_cycle_interval=r["inhomogeneous_layer_cycle_interval"],
        moe_expert_input_dim=r["moe_expert_input_dim"],
        attention_output_dim=r["attention_output_dim"],
        sliding_window_size=r["sliding_window_size"],
        chunk_attn_window_size=r["chunk_attn_window_size"],
        nope_layer_interval=r["nope_layer_interval"],
        q_lora_rank=r["q_lora_rank"],
        kv_lora_rank=r["kv_lora_rank"],
        qk_nope_head_dim=r["qk_nope_head_dim"],
        qk_rope_head_dim=r["qk_rope_head_dim"],
        v_head_dim=r["v_head_dim"],
        use_indexer=r["use_indexer"],
        indexer_n_heads=r["indexer_n_heads"],
        indexer_head_dim=r["indexer_head_dim"],
        indexer_topk=r["indexer_topk"],
        gdn_num_key_heads=r["gdn_num_key_heads"],
        gdn_num_value_heads=r["gdn_num_value_heads"],
        gdn_key_head_dim=r["gdn_key_head_dim"],
        gdn_value_head_dim=r["gdn_value_head_dim"],
        gdn_conv_kernel_dim=r["gdn_conv_kernel_dim"],
        num_kv_shared_layers=r["num_kv_shared_layers"],
        use_double_wide_mlp=r["use_double_wide_mlp"],
        hidden_size_per_layer_input=r["hidden_size_per_layer_input"],
        o_groups=r["o_groups"],
        o_lora_rank=r["o_lora_rank"],
        compress_ratios=tuple(ratios),
        mhc_expansion_rate=r["mhc_expansion_rate"],
        mtp_num_layers=r["mtp_num_layers"],
        num_engram_layers=len(r["engram_layers"]),
        engram_kernel_size=r["engram_kernel_size"],
        engram_max_ngram_size=r["engram_max_ngram_size"],
        engram_num_heads=r["engram_num_heads"],
        engram_head_dim=r["engram_head_dim"],
        use_multimodal=r["use_multimodal"],
        freeze_vision_encoder_params=r["freeze_vision_encoder_params"],
        image_size_for_vit=r["image_size_for_vit"],
        num_channels_for_vit=r["num_channels_for_vit"],
        tile_size_for_vit=r["tile_size_for_vit"],
        patch_size_for_vit=r["patch_size_for_vit"],
        hidden_size_for_vit=r["hidden_size_for_vit"],
        intermediate_size_for_vit=r["intermediate_size_for_vit"],
        num_hidden_layers_for_vit=r["num_hidden_layers_for_vit"],
        projector_input_dim_for_vit=r["projector_input_dim_for_vit"],
        projector_output_dim_for_vit=r["projector_output_dim_for_vit"],
        pixel_shuffle_ratio_for_vit=r["pixel_shuffle_ratio_for_vit"],
        use_dpo=r["use_dpo"],
        notes=tuple(notes),
    )


@dataclass(frozen=True)
class MaxTextFlops:
    """One training step's TFLOPs per device, as MaxText computes and logs them.

    `total`, `learnable_weight` and `attention` are the three values MaxText's function returns
    (maxtext_utils.py:1392); `total` is what it logs as perf/per_device_tflops. With DPO, `attention`
    already holds the reference model's extra forward and `reference_model` (its weights' forward)
    is the rest: total = learnable_weight + attention + reference_model.

    `parts` splits the total by where it comes from (TFLOPs, training, gradient accumulation
    included); parts sum to `total` up to float rounding, the three fields above are exact.
    """

    total: float
    learnable_weight: float
    attention: float
    reference_model: float
    tokens: float  # per device per step: max_target_length * pdbs * gradient_accumulation_steps
    branch: str  # e.g. "deepseek: mla, routed + shared ffn (3 dense + 58 moe layers)"
    details: tuple[str, ...]  # each decision taken, in order
    sources: tuple[str, ...]  # path:line@commit of every branch taken
    notes: tuple[str, ...] = ()  # what MaxText's count leaves out or does oddly for this config
    parts: dict[str, float] = field(default_factory=dict)


class _Trace:
    def __init__(self) -> None:
        self.details: list[str] = []
        self.sources: list[str] = []
        self.notes: list[str] = []

    def take(self, detail: str, *lines: int, path: str = _UTILS) -> None:
        self.details.append(detail)
        self.sources.extend(cite(path, ln) for ln in lines if cite(path, ln) not in self.sources)


def _nonzero(v: float, key: str, what: str) -> None:
    if v == 0:
        raise ArithError(key, f"{key} = 0: MaxText's FLOP count divides by it ({what}) and fails")


# --- helpers, one per MaxText helper -----------------------------------------------------------


def _ffn_matmul(c: Derived, mlp_dim: int, in_dim: int | None = None) -> float:
    """calculate_ffn_mamtul_tflops_per_device (maxtext_utils.py:704-720): gate/up (one matmul per
    activation) and down projection, in_dim defaulting to emb_dim."""
    if in_dim is None:
        in_dim = c.emb_dim
    ffn1 = 2 * c.per_device_batch_size * c.max_target_length * mlp_dim * in_dim * c.num_mlp_activations
    ffn2 = 2 * c.per_device_batch_size * c.max_target_length * mlp_dim * in_dim
    return ffn1 + ffn2


def _shared_expert_mlp_dim(c: Derived) -> int:
    """get_shared_expert_mlp_dim (maxtext_utils.py:723-728): Gemma 4's shared expert is mlp_dim wide."""
    return c.mlp_dim if c.decoder_block == "gemma4" else c.moe_mlp_dim


def dense_moe_layers(c: Derived) -> tuple[int, int]:
    """get_dense_moe_layers (maxtext_utils.py:746-769): (dense, MoE) layer counts."""
    if c.decoder_block == "deepseek":  # :748-751, the first layers are dense
        return c.first_num_dense_layers, c.num_decoder_layers - c.first_num_dense_layers
    if c.decoder_block == "llama4":  # :752-755, every interleave_moe_layer_step-th layer is MoE
        _nonzero(c.interleave_moe_layer_step, "interleave_moe_layer_step", "layers // step")
        moe = c.num_decoder_layers // c.interleave_moe_layer_step
        return c.num_decoder_layers - moe, moe
    if c.decoder_block in ("qwen3_next", "qwen3_5", "deepseek4"):  # :756-757
        return 0, c.num_decoder_layers
    if c.decoder_block == "default":  # :758-759; unreachable from the routed path, which excludes it
        raise ArithError("decoder_block", "MaxText has no dense/MoE layer split for decoder_block 'default'")
    if c.num_experts > 1:  # :761-769
        return 0, c.num_decoder_layers
    return c.num_decoder_layers, 0


def _routed_and_shared_ffn(c: Derived) -> tuple[float, int, int]:
    """calculate_routed_and_shared_ffn_tflops_per_device (maxtext_utils.py:731-743): all layers'
    FFN FLOPs; MoE layers get gate + shared + top-k routed experts, dense layers an mlp_dim FFN."""
    gate = 2 * c.per_device_batch_size * c.max_target_length * c.emb_dim * c.num_experts
    dense_layers, moe_layers = dense_moe_layers(c)
    dense = _ffn_matmul(c, c.mlp_dim) * dense_layers
    shared = _ffn_matmul(c, _shared_expert_mlp_dim(c)) * c.shared_experts
    routed = _ffn_matmul(c, c.moe_mlp_dim) * c.num_experts_per_tok
    return dense + (gate + shared + routed) * moe_layers, dense_layers, moe_layers


def indexer_mask_ratio(topk: float, seq: float) -> float:
    """calculate_indexer_mask_ratio (maxtext_utils.py:574-619): the share of the T x T matrix a
    top-K query explores counted densely: (TK - K²/2) / T² = K/T - (K/T)²/2."""
    ratio = float(topk) / float(seq)
    return ratio - (0.5 * ratio**2)


def _indexer(c: Derived) -> tuple[float, float]:
    """calculate_indexer_tflops_per_device (maxtext_utils.py:622-645): (projection, scoring) FLOPs
    of DeepSeek 3.2's lightning indexer; scoring halved for the causal mask."""
    bl = c.per_device_batch_size * c.max_target_length
    q = 2 * bl * c.q_lora_rank * c.indexer_n_heads * c.indexer_head_dim
    k = 2 * bl * c.emb_dim * c.indexer_head_dim
    head_weight = 2 * bl * c.emb_dim * c.indexer_n_heads
    proj = q + k + head_weight
    qk = 2 * bl * c.max_target_length * c.indexer_n_heads * c.indexer_head_dim
    head_reduction = 2 * bl * c.max_target_length * c.indexer_n_heads
    return proj, (qk + head_reduction) / 2


def _mla(c: Derived, t: _Trace) -> tuple[float, float, float]:
    """calculate_mla_tflops_per_device (maxtext_utils.py:648-701): (qkv, causal attention, output
    projection) FLOPs per layer of multi-head latent attention."""
    bl = c.per_device_batch_size * c.max_target_length
    qk_sum = c.qk_nope_head_dim + c.qk_rope_head_dim
    if c.q_lora_rank == 0:  # :654-655
        q = 2 * bl * c.emb_dim * c.num_query_heads * qk_sum
        t.take("mla: query projected directly (q_lora_rank 0)", 654)
    else:  # :656-662, down to q_lora_rank then up
        q = 2 * bl * (c.emb_dim * c.q_lora_rank + c.q_lora_rank * c.num_query_heads * qk_sum)
        t.take(f"mla: query through rank {c.q_lora_rank}", 656)
    kv = (
        2
        * bl
        * (
            c.emb_dim * (c.kv_lora_rank + c.qk_rope_head_dim)
            + c.kv_lora_rank * c.num_query_heads * (c.qk_nope_head_dim + c.v_head_dim)
        )
    )
    qkv = q + kv
    if c.use_indexer and c.max_target_length > c.indexer_topk:  # :676-692
        proj, scoring = _indexer(c)
        qkv += proj
        mult = indexer_mask_ratio(c.indexer_topk, c.max_target_length)
        attn = 2 * bl * c.max_target_length * c.num_query_heads * (qk_sum + c.v_head_dim) * mult
        attn += scoring
        t.take(f"mla: sparse indexer, top-{c.indexer_topk} of {c.max_target_length} (mask ratio {mult:.6g})", 676, 683)
    else:  # :693-699, dense causal (also an indexer whose top-k covers the whole sequence)
        attn = 2 * bl * c.max_target_length * c.num_query_heads * (qk_sum + c.v_head_dim)
        attn = attn / 2
        why = "indexer bypassed: top-k >= sequence" if c.use_indexer else "dense causal"
        t.take(f"mla: {why}", 693)
    proj_out = 2 * bl * c.emb_dim * c.num_query_heads * c.v_head_dim
    return qkv, attn, proj_out


def _gated_delta_net(c: Derived) -> tuple[float, float]:
    """calculate_gated_delta_net_flops_per_device (maxtext_utils.py:772-820): (weights, core) FLOPs
    of one linear-attention layer: in/out projections and the short conv as weights, the recurrent
    state update (8·H_v·D_k·D_v per token) as attention."""
    b, s, e = c.per_device_batch_size, c.max_target_length, c.emb_dim
    h_v = c.gdn_num_value_heads
    k_dim = c.gdn_num_key_heads * c.gdn_key_head_dim
    v_dim = h_v * c.gdn_value_head_dim
    qkvz_ba = 2 * b * s * e * (2 * k_dim + 2 * v_dim + 2 * h_v)
    out = 2 * b * s * e * v_dim
    conv = 2 * b * s * c.gdn_conv_kernel_dim * (2 * k_dim + v_dim)
    core_per_token = h_v * (c.gdn_key_head_dim * c.gdn_value_head_dim) * 8
    core = b * s * core_per_token
    return (qkvz_ba + out) + conv, core


def _window_flops(c: Derived, head_dim: int) -> float:
    """Sliding-window causal attention, exact area T·W - W²/2 with W = min(window, T)."""
    w = min(c.sliding_window_size, c.max_target_length)
    return 4 * c.per_device_batch_size * (c.max_target_length * w - 0.5 * w**2) * c.num_query_heads * head_dim


def _global_causal(c: Derived, head_dim: int) -> float:
    return 2 * c.per_device_batch_size * c.max_target_length**2 * c.num_query_heads * head_dim


def _gemma2(
    c: Derived, ffn: float, qkv: float, proj: float, emb: float, parts: dict[str, float]
) -> tuple[float, float]:
    """calculate_gemma2_tflops_training_per_device (maxtext_utils.py:283-307): a decoder layer is a
    local and a global attention layer merged, so weights count twice per layer."""
    attn = _global_causal(c, c.head_dim) + _window_flops(c, c.head_dim)
    attention_tflops = attn * c.num_decoder_layers * 3 / 10**12
    learnable = ((ffn + qkv + proj) * c.num_decoder_layers * 2 + emb) * 3 / 10**12
    parts.update(
        ffn=ffn * c.num_decoder_layers * 2 * 3 / 1e12,
        attention_projections=(qkv + proj) * c.num_decoder_layers * 2 * 3 / 1e12,
        logits=emb * 3 / 1e12,
        attention=attention_tflops,
    )
    return attention_tflops, learnable


def _mixed(
    c: Derived, ffn_all: float, qkv: float, proj: float, emb: float, pattern: int, parts: dict[str, float]
) -> tuple[float, float]:
    """calculate_mixed_attention_model_tflops_training_per_device (maxtext_utils.py:310-352): one
    global layer in every `pattern` layers, the rest sliding-window."""
    n = c.num_decoder_layers
    n_global = n // pattern
    n_local = n - n_global
    attn = n_global * _global_causal(c, c.head_dim) + n_local * _window_flops(c, c.head_dim)
    attention_tflops = attn * 3 / 10**12
    total = ffn_all
    total += (qkv + proj) * n + emb
    parts.update(
        ffn=ffn_all * 3 / 1e12,
        attention_projections=(qkv + proj) * n * 3 / 1e12,
        logits=emb * 3 / 1e12,
        attention=attention_tflops,
    )
    return attention_tflops, total * 3 / 10**12


def _gemma4(c: Derived, ffn_all: float, emb: float, parts: dict[str, float]) -> tuple[float, float]:
    """calculate_gemma4_tflops_training_per_device (maxtext_utils.py:355-442): pattern of 6 (one
    global), global layers with their own head dim and KV heads and optionally one shared K=V
    projection; local layers always have separate K and V."""
    b, s, e = c.per_device_batch_size, c.max_target_length, c.emb_dim
    n = c.num_decoder_layers
    n_global = n // 6
    n_local = n - n_global
    kv_mult = 1 if c.share_kv_projections else 2
    g_hd = c.global_head_dim or c.head_dim
    g_kv = c.global_num_kv_heads or c.num_kv_heads
    g_attn = 2 * b * s**2 * c.num_query_heads * g_hd
    attn = n_global * g_attn + n_local * _window_flops(c, c.head_dim)
    attention_tflops = attn * 3 / 10**12
    g_qkv = 2 * b * s * e * (c.num_query_heads + kv_mult * g_kv) * g_hd
    g_proj = 2 * b * s * e * c.num_query_heads * g_hd
    l_qkv = 2 * b * s * e * (c.num_query_heads + 2 * c.num_kv_heads) * c.head_dim
    l_proj = 2 * b * s * e * c.num_query_heads * c.head_dim
    total = ffn_all
    total += (l_qkv + l_proj) * n_local + (g_qkv + g_proj) * n_global + emb
    parts.update(
        ffn=ffn_all * 3 / 1e12,
        attention_projections=((l_qkv + l_proj) * n_local + (g_qkv + g_proj) * n_global) * 3 / 1e12,
        logits=emb * 3 / 1e12,
        attention=attention_tflops,
    )
    return attention_tflops, total * 3 / 10**12


def gemma4_small_layer_is_global(layer: int, model_name: str) -> bool:
    """gemma4_small.get_attention_type (gemma4_small.py:36-65): E2B repeats 4 sliding + 1 global,
    any other model name (E4B, and unknown names) 5 sliding + 1 global."""
    period = 5 if model_name == "gemma4-e2b" else 6
    return layer % period == period - 1


def _gemma4_small(c: Derived, emb: float, parts: dict[str, float]) -> tuple[float, float]:
    """calculate_gemma4_small_tflops_training_per_device (maxtext_utils.py:445-526): per layer by
    attention type; the last num_kv_shared_layers layers own no K/V projection (and, with
    use_double_wide_mlp, run a 2x MLP); plus the per-layer-embedding block."""
    b, s, e = c.per_device_batch_size, c.max_target_length, c.emb_dim
    n = c.num_decoder_layers
    n_shared = c.num_kv_shared_layers
    # gemma4_small.first_kv_shared_layer_idx (gemma4_small.py:73-77)
    first_shared = n if n_shared <= 0 else max(0, n - n_shared)
    g_hd = c.global_head_dim or c.head_dim
    g_kv = c.global_num_kv_heads or c.num_kv_heads
    w = min(c.sliding_window_size, s)
    ffn_layer = 2 * b * s * c.mlp_dim * e * c.num_mlp_activations + 2 * b * s * c.mlp_dim * e
    attention_i: float | int = 0  # MaxText starts its sums from int 0
    projection_i: float | int = 0
    ffn_i: float | int = 0
    for layer in range(n):
        is_global = gemma4_small_layer_is_global(layer, c.model_name)
        if is_global:
            attention_i += 2 * b * s * s * c.num_query_heads * g_hd
        else:
            attention_i += 4 * b * (s * w - 0.5 * w**2) * c.num_query_heads * c.head_dim
        hd = g_hd if is_global else c.head_dim
        projection_i += 2 * b * s * e * c.num_query_heads * hd + 2 * b * s * e * c.num_query_heads * hd
        is_shared = n_shared > 0 and layer >= first_shared
        if not is_shared:
            kv_heads, kv_hd = (g_kv, g_hd) if is_global else (c.num_kv_heads, c.head_dim)
            projection_i += 2 * b * s * e * (2 * kv_heads) * kv_hd
        if is_shared and c.use_double_wide_mlp:
            ffn_i += 2 * ffn_layer
        else:
            ffn_i += ffn_layer
    attention, projection, ffn = attention_i, projection_i, ffn_i
    ple: float | int = 0
    ple_dim = c.hidden_size_per_layer_input
    if ple_dim > 0:  # :516-521
        ple += 2 * b * s * e * (n * ple_dim)
        ple += n * (2 * b * s * e * ple_dim + 2 * b * s * ple_dim * e)
    attention_tflops = attention * 3 / 10**12
    parts.update(
        ffn=ffn * 3 / 1e12,
        attention_projections=projection * 3 / 1e12,
        per_layer_embedding=ple * 3 / 1e12,
        logits=emb * 3 / 1e12,
        attention=attention_tflops,
    )
    return attention_tflops, (projection + ffn + ple + emb) * 3 / 10**12


def _llama4_attention(c: Derived) -> float:
    """calculate_llama4_attention_tflops (maxtext_utils.py:529-571): every nope_layer_interval-th
    layer global, the others chunked (sum of squared chunk lengths); all halved for causality."""
    n = c.num_decoder_layers
    s = c.max_target_length
    chunk = c.chunk_attn_window_size
    _nonzero(c.nope_layer_interval, "nope_layer_interval", "layers // interval")
    _nonzero(chunk, "chunk_attn_window_size", "seq // chunk")
    n_global = n // c.nope_layer_interval
    n_chunked = n - n_global
    g = 4 * c.per_device_batch_size * s**2 * c.num_query_heads * c.head_dim
    complexity = (s // chunk) * chunk**2 + (s % chunk) ** 2
    ch = 4 * c.per_device_batch_size * complexity * c.num_query_heads * c.head_dim
    noncausal = (n_global * g) + (n_chunked * ch)
    return noncausal / 2 * 3 / 10**12


def _mhc_per_layer(c: Derived) -> float:
    """calculate_mhc_flops_per_layer (maxtext_utils.py:992-1009): manifold-constrained
    hyper-connections, k = mhc_expansion_rate streams."""
    b, s, k, e = c.per_device_batch_size, c.max_target_length, c.mhc_expansion_rate, c.emb_dim
    pre_alpha = 2 * b * s * (k * e) * k
    pre_contract = 2 * b * s * k * e
    post_alpha = 2 * b * s * (k * e) * k
    post_outer = b * s * k * e
    res_alpha = 2 * b * s * (k * e) * (k**2)
    res_contract = 2 * b * s * (k**2) * e
    return pre_alpha + pre_contract + post_alpha + post_outer + res_alpha + res_contract


def _deepseek4(c: Derived, ffn_all: float, emb: float, t: _Trace, parts: dict[str, float]) -> tuple[float, float]:
    """calculate_deepseek4_tflops_training_per_device (maxtext_utils.py:1012-1146): per-layer
    compression ratio 0 (sliding window only), 128 (HCA) or 4 (CSA, with an indexer); low-rank Q,
    single KV projection, grouped low-rank output; mHC twice per layer."""
    b, s, w, n = c.per_device_batch_size, c.max_target_length, c.sliding_window_size, c.num_decoder_layers
    hca, csa = 128, 4
    if not c.compress_ratios:  # :1045-1047
        n_slide, n_hca, n_csa = 2, 20, 21
        t.take("deepseek4: no compress_ratios, MaxText assumes 2 sliding + 20 HCA + 21 CSA layers", 1047)
    else:  # :1048-1051; ratios other than 0, 4 and 128 are counted in no track
        n_slide = c.compress_ratios.count(0)
        n_hca = c.compress_ratios.count(hca)
        n_csa = c.compress_ratios.count(csa)
        t.take(f"deepseek4: {n_slide} sliding + {n_hca} HCA + {n_csa} CSA layers from compress_ratios", 1049)
        if n_slide + n_hca + n_csa != len(c.compress_ratios):
            t.notes.append("compress_ratios other than 0, 4 and 128 add no attention FLOPs in MaxText's count")
    wq = 2 * b * s * ((c.emb_dim * c.q_lora_rank) + (c.q_lora_rank * c.num_query_heads * c.head_dim))
    wkv = 2 * b * s * c.emb_dim * (c.num_kv_heads * c.head_dim)
    _nonzero(c.o_groups, "o_groups", "heads * head_dim // o_groups")
    grp = (c.num_query_heads * c.head_dim) // c.o_groups
    o = (2 * b * s * c.o_groups * grp * c.o_lora_rank) + (2 * b * s * (c.o_groups * c.o_lora_rank) * c.emb_dim)
    base_weights = wq + wkv + o
    mhc = _mhc_per_layer(c) if c.mhc_expansion_rate > 1 else 0  # :1076-1079
    prefix = 4 * b * (s * w - 0.5 * w**2) * c.num_query_heads * c.head_dim  # note: W not capped at T
    hca_pooler = 4 * b * s * c.emb_dim * c.head_dim
    hca_attn = prefix + 2 * b * s * (s / hca) * c.num_query_heads * c.head_dim
    idx_proj = 2 * b * s * ((c.q_lora_rank * c.indexer_n_heads * c.indexer_head_dim) + (c.emb_dim * c.indexer_n_heads))
    idx_score = b * s * (s / csa) * c.indexer_n_heads * c.indexer_head_dim
    idx_reduce = b * s * (s / csa) * c.indexer_n_heads
    idx_pool = 4 * b * s * c.emb_dim * (2 * c.indexer_head_dim)
    csa_indexer = idx_proj + idx_score + idx_reduce + idx_pool
    csa_pooler = 4 * b * s * c.emb_dim * (2 * c.head_dim)
    csa_k = min(c.indexer_topk, s // csa)
    _nonzero(s // csa, "max_target_length", "top-k ratio over seq // 4")
    csa_ratio = indexer_mask_ratio(csa_k, s // csa)
    csa_sparse = 4 * b * (s * (s / csa)) * c.num_query_heads * c.head_dim * csa_ratio
    csa_attn = prefix + csa_sparse + csa_indexer
    attn = (n_slide * prefix) + (n_hca * hca_attn) + (n_csa * csa_attn)
    weights = (n * base_weights) + (2 * n * mhc) + (n_hca * hca_pooler) + (n_csa * csa_pooler) + ffn_all + emb
    if w > s:
        t.notes.append("deepseek4: sliding_window_size > max_target_length; MaxText does not cap the window here")
    parts.update(
        ffn=ffn_all * 3 / 1e12,
        attention_projections=(n * base_weights + n_hca * hca_pooler + n_csa * csa_pooler) * 3 / 1e12,
        mhc=2 * n * mhc * 3 / 1e12,
        logits=emb * 3 / 1e12,
        attention=attn * 3 / 1e12,
    )
    return attn * 3 / 10**12, weights * 3 / 10**12


def _vit_encoder(b: float, seq: float, hidden: int, inter: int, layers: int) -> tuple[float, float]:
    """The ViT encoder's forward FLOPs in MaxText's vision formulas (maxtext_utils.py, Gemma 3 and Llama 4 alike):
    (qkv + output projection + MLP) x layers, and the attention's 4 b s^2 h x layers apart."""
    qkv = 3 * (2 * b * seq * hidden * hidden)
    attn_layer = 4 * b * seq * seq * hidden
    proj = 2 * b * seq * hidden * hidden
    mlp = 2 * (2 * b * seq * hidden * inter)
    attn = attn_layer * layers
    encoder = (+qkv + proj + mlp) * layers
    return encoder, attn


def _vision_tflops(learnable: float, attn: float, projector: float, frozen: bool) -> tuple[float, float, float]:
    """(total, learnable weights, attention) TFLOPs of a vision tower: with the encoder frozen only the
    projector trains (its backward pass, 2 x its forward, is added); else forward and backward, 3 x, throughout."""
    if frozen:
        learnable += 2 * projector
    else:
        learnable *= 3
        attn *= 3
    lw, at = learnable / 1e12, attn / 1e12
    return lw + at, lw, at


def _gemma3_vision(c: Derived) -> tuple[float, float, float]:
    """calculate_gemma3_vision_layers_tflops_per_device (maxtext_utils.py:823-875): SigLIP tower,
    its dims hard-coded in MaxText (patch 14, width 1152, MLP 4304, 27 layers, pooling 4)."""
    b, ch = c.per_device_batch_size, c.num_channels_for_vit
    size = c.image_size_for_vit
    if isinstance(size, bool) or not isinstance(size, int):
        raise ArithError("image_size_for_vit", f"Gemma 3's vision FLOPs need one image size, got {size!r}")
    patch, hidden, inter, layers, pool = 14, 1152, 4304, 27, 4
    nh = nw = size // patch
    seq = nh * nw
    patch_embed = 2 * b * seq * (ch * patch * patch) * hidden
    encoder, attn = _vit_encoder(b, seq, hidden, inter, layers)
    pooled = (nh // pool) * (nw // pool)
    embedder = 2 * b * pooled * hidden * c.emb_dim
    # :864-868: frozen, only the projector trains
    return _vision_tflops(patch_embed + encoder + embedder, attn, embedder, c.freeze_vision_encoder_params)


def _llama4_vision(c: Derived) -> tuple[float, float, float]:
    """calculate_llama4_vision_layers_tflops_per_device (maxtext_utils.py:878-938): ViT over one
    tile, pixel-shuffle MLP and projector to base_emb_dim (unscaled)."""
    b, ch = c.per_device_batch_size, c.num_channels_for_vit
    size = c.tile_size_for_vit
    patch = c.patch_size_for_vit
    _nonzero(patch, "patch_size_for_vit", "tile // patch")
    hidden, inter, layers = c.hidden_size_for_vit, c.intermediate_size_for_vit, c.num_hidden_layers_for_vit
    fc1_out, fc2_out = c.projector_input_dim_for_vit, c.projector_output_dim_for_vit
    n_patches = (size // patch) * (size // patch)
    shuffled = n_patches * c.pixel_shuffle_ratio_for_vit**2
    patch_embed = 2 * b * n_patches * (ch * patch * patch) * hidden
    seq = n_patches + 1  # class token
    encoder, attn = _vit_encoder(b, seq, hidden, inter, layers)
    fc1 = 2 * b * shuffled * inter * fc1_out
    fc2 = 2 * b * shuffled * fc1_out * fc2_out
    projector = 2 * b * shuffled * fc1_out * c.base_emb_dim
    # :927-931
    return _vision_tflops(
        patch_embed + encoder + (fc1 + fc2) + projector, attn, projector, c.freeze_vision_encoder_params
    )


# --- the formula -------------------------------------------------------------------------------


def training_tflops_per_device(get: Getter) -> MaxTextFlops:
    """MaxText's training TFLOPs per device per step for the config behind `get(key, default=None)`
    (calculate_tflops_training_per_device, maxtext_utils.py:1149-1392), with the branch it takes.

    Raises ArithError(key, ...) for a value MaxText's config would reject (not a number, negative
    where types.py forbids it, unknown decoder_block) or one its formula divides by when zero.
    """
    c = derive(get)
    t = _Trace()
    t.notes.extend(c.notes)
    parts: dict[str, float] = {}
    b, s = c.per_device_batch_size, c.max_target_length
    block = c.decoder_block

    # FFN (maxtext_utils.py:1151-1183)
    already_total = False
    n_dense, n_moe = c.num_decoder_layers, 0
    if c.num_experts > 1:
        if block in ("deepseek", "llama4", "qwen3_next", "qwen3_5", "gemma4", "deepseek4"):  # :1155-1164
            ffn, n_dense, n_moe = _routed_and_shared_ffn(c)
            already_total = True
            t.take(
                f"ffn: dropless routed top-{c.num_experts_per_tok} of {c.num_experts} + {c.shared_experts} shared"
                f" ({n_dense} dense + {n_moe} moe layers)",
                1163,
                731,
                746,
            )
        elif block == "qwen3_custom_moe":  # :1165-1172, experts see the compressed latent
            in_dim = c.moe_expert_input_dim
            gate = 2 * b * s * in_dim * c.num_experts
            ffn = gate + _ffn_matmul(c, c.moe_mlp_dim, in_dim=in_dim) * c.num_experts_per_tok
            n_dense, n_moe = 0, c.num_decoder_layers
            t.take(f"ffn: gate + top-{c.num_experts_per_tok} experts at moe_expert_input_dim {in_dim}", 1165)
            if in_dim <= 0:
                t.notes.append(
                    f"moe_expert_input_dim = {in_dim}: MaxText's FLOP count uses it as is (no fallback to emb_dim)"
                )
        else:  # :1173-1177
            gate = 2 * b * s * c.emb_dim * c.num_experts
            ffn = gate + _ffn_matmul(c, c.moe_mlp_dim) * c.num_experts_per_tok
            n_dense, n_moe = 0, c.num_decoder_layers
            t.take(f"ffn: gate + top-{c.num_experts_per_tok} of {c.num_experts} experts, every layer", 1174)
    else:  # :1178-1179
        ffn = _ffn_matmul(c, c.mlp_dim)
        t.take("ffn: dense", 1179)
    ffn_all = ffn if already_total else ffn * c.num_decoder_layers

    # Attention (maxtext_utils.py:1185-1214)
    if c.attention_type == "mla":
        qkv, causal, proj = _mla(c, t)
        t.take("attention: mla", 1187, 648)
    else:
        kv_mult = 1 if c.share_kv_projections else 2
        qkv = 2 * b * s * c.emb_dim * (c.num_query_heads + kv_mult * c.num_kv_heads) * c.head_dim
        noncausal = 4 * b * s**2 * c.num_query_heads * c.head_dim
        proj = 2 * b * s * c.emb_dim * c.num_query_heads * c.head_dim
        causal = noncausal / 2
        t.take("attention: causal, half of 4·B·T²·H·hd" + (", K = V shared" if kv_mult == 1 else ""), 1189, 1214)

    # Logits (maxtext_utils.py:1216-1218): the unembedding matmul only
    emb = 2 * b * s * c.emb_dim * c.vocab_size

    # Per-family layer sums (maxtext_utils.py:1220-1309)
    n = c.num_decoder_layers
    if block == "gemma2":
        attention, learnable = _gemma2(c, ffn, qkv, proj, emb, parts)
        branch = "gemma2: local + global layer pairs"
        t.take(branch, 1221, 283)
    elif block == "gemma3":
        attention, learnable = _mixed(c, ffn_all, qkv, proj, emb, 6, parts)
        branch = "gemma3: mixed attention, pattern 6"
        t.take(branch, 1225, 310)
    elif block == "gpt_oss":
        attention, learnable = _mixed(c, ffn_all, qkv, proj, emb, 2, parts)
        branch = "gpt_oss: mixed attention, pattern 2"
        t.take(branch, 1229, 310)
    elif block == "llama4":
        attention = _llama4_attention(c)
        learnable = (ffn_all + (qkv + proj) * n + emb) * 3 / 10**12
        branch = f"llama4: chunked attention (window {c.chunk_attn_window_size}), global every {c.nope_layer_interval}"
        t.take(branch, 1233, 540)
        parts.update(attention=attention)
        if c.nope_layer_interval < 0:
            t.notes.append(
                f"nope_layer_interval = {c.nope_layer_interval}: MaxText's count takes layers // interval as is"
                " (a negative number of global layers)"
            )
    elif block == "gemma4":
        attention, learnable = _gemma4(c, ffn_all, emb, parts)
        branch = "gemma4: mixed attention, pattern 6, own global head dim" + (
            ", K = V shared" if c.share_kv_projections else ""
        )
        t.take(branch, 1242, 355)
    elif block == "gemma4_small":
        attention, learnable = _gemma4_small(c, emb, parts)
        period = 5 if c.model_name == "gemma4-e2b" else 6
        branch = f"gemma4_small: pattern {period}, {c.num_kv_shared_layers} kv-shared layers" + (
            ", double-wide MLP on them" if c.use_double_wide_mlp else ""
        )
        t.take(branch, 1246, 445)
        t.take("gemma4_small: layer types", 36, 55, 68, 73, path=_G4S)
        if c.model_name not in ("gemma4-e2b", "gemma4-e4b"):
            t.notes.append(
                f"gemma4_small with model_name {c.model_name!r}: MaxText falls back to E4B's pattern"
                " (5 sliding + 1 global)"
            )
    elif block == "deepseek4":
        attention, learnable = _deepseek4(c, ffn_all, emb, t, parts)
        branch = "deepseek4: sliding / HCA / CSA tracks" + (
            f", mHC x{c.mhc_expansion_rate}" if c.mhc_expansion_rate > 1 else ""
        )
        t.take(branch, 1252, 1012)
    elif block == "deepseek":
        learnable = (ffn_all + (qkv + proj) * n + emb) * 3 / 10**12
        attention = causal * n * 3 / 10**12
        branch = "deepseek: " + ("mla" if c.attention_type == "mla" else c.attention_type)
        if c.attention_type == "mla" and c.use_indexer and s > c.indexer_topk:
            branch += " + indexer"
        t.take(branch, 1256)
    elif block == "qwen3_custom_moe":
        custom_proj = 2 * b * s * c.attention_output_dim * c.num_query_heads * c.head_dim
        up_proj = 2 * b * s * c.attention_output_dim * c.emb_dim
        per_layer = qkv + custom_proj + up_proj
        learnable = (ffn_all + per_layer * n + emb) * 3 / 10**12
        attention = causal * n * 3 / 10**12
        branch = f"qwen3_custom_moe: attention output {c.attention_output_dim}, up-projected per layer"
        t.take(branch, 1263)
        parts.update(attention_projections=per_layer * n * 3 / 1e12)
    elif block in ("qwen3_next", "qwen3_5"):
        gdn_w, gdn_a = _gated_delta_net(c)
        cycle = c.inhomogeneous_layer_cycle_interval
        _nonzero(cycle, "inhomogeneous_layer_cycle_interval", "layers // interval")
        n_full = n // cycle
        n_linear = n - n_full
        learnable = (ffn_all + emb + (qkv + proj) * n_full + gdn_w * n_linear) * 3 / 10**12
        attention = ((causal * n_full) + (gdn_a * n_linear)) * 3 / 10**12
        branch = f"{block}: gated delta net, every {cycle}th layer full attention ({n_full} full, {n_linear} linear)"
        t.take(branch, 1281, 772)
        parts.update(
            attention_projections=((qkv + proj) * n_full + gdn_w * n_linear) * 3 / 1e12,
            attention=attention,
        )
    else:
        learnable = (ffn_all + (qkv + proj) * n + emb) * 3 / 10**12
        attention = causal * n * 3 / 10**12
        branch = f"{block}: uniform layers"
        t.take(branch, 1302)
    if "ffn" not in parts:
        parts["ffn"] = ffn_all * 3 / 1e12
        parts.setdefault("attention_projections", (qkv + proj) * n * 3 / 1e12)
        parts["logits"] = emb * 3 / 1e12
        parts.setdefault("attention", attention)

    # MTP: each module is a copy of the last decoder layer (maxtext_utils.py:1311-1350)
    if c.mtp_num_layers > 0:
        if c.num_experts > 1:
            gate = 2 * b * s * c.emb_dim * c.num_experts
            routed = _ffn_matmul(c, c.moe_mlp_dim) * c.num_experts_per_tok
            if block in ("deepseek", "llama4", "qwen3_next", "gemma4"):  # :1321-1331
                shared = _ffn_matmul(c, _shared_expert_mlp_dim(c)) * c.shared_experts
                last_ffn = gate + shared + routed
                t.take(f"mtp: {c.mtp_num_layers} modules, last layer MoE with shared experts", 1321)
            else:  # :1332-1334 (qwen3_5 and deepseek4 land here: shared experts not counted)
                last_ffn = gate + routed
                t.take(f"mtp: {c.mtp_num_layers} modules, last layer MoE (routed only)", 1332)
                if c.shared_experts > 0:
                    t.notes.append(f"mtp on {block}: MaxText leaves the shared experts out of the MTP modules' FLOPs")
        else:
            last_ffn = _ffn_matmul(c, c.mlp_dim)
            t.take(f"mtp: {c.mtp_num_layers} modules, last layer dense", 1337)
        mtp_w = (last_ffn + qkv + proj) * c.mtp_num_layers
        mtp_a = causal * c.mtp_num_layers
        learnable += mtp_w * 3 / 10**12
        attention += mtp_a * 3 / 10**12
        parts["mtp_weights"] = mtp_w * 3 / 1e12
        parts["mtp_attention"] = mtp_a * 3 / 1e12
        if block in ("gemma2", "gemma3", "gpt_oss", "gemma4", "gemma4_small", "llama4", "qwen3_next", "qwen3_5"):
            t.notes.append("mtp: MaxText prices each module with the generic full-causal attention and projections")

    # Engram (maxtext_utils.py:1352-1356, 941-970)
    if c.num_engram_layers:
        g, d, k = c.mhc_expansion_rate, c.emb_dim, c.engram_kernel_size
        e_dim = c.engram_num_heads * c.engram_head_dim * (c.engram_max_ngram_size - 1)
        key = 2 * (b * s) * e_dim * (g * d)
        value = 2 * (b * s) * e_dim * d
        qk = 2 * (b * s) * g * d
        conv = 2 * (b * s) * k * (g * d)
        e_learn = c.num_engram_layers * (key + value + conv) * 3 / 1e12
        e_attn = c.num_engram_layers * qk * 3 / 1e12
        learnable += e_learn
        attention += e_attn
        parts["engram_weights"] = e_learn
        parts["engram_attention"] = e_attn
        t.take(f"engram: {c.num_engram_layers} layers", 1353, 941)

    # Vision tower (maxtext_utils.py:1358-1370, 973-989): by model_name, gemma3* and llama4* only
    if c.use_multimodal:
        if c.model_name.startswith("gemma3"):
            _, mm_w, mm_a = _gemma3_vision(c)
            t.take(
                "vision: gemma3 tower" + (" (frozen: projector only)" if c.freeze_vision_encoder_params else ""),
                975,
                823,
            )
        elif c.model_name.startswith("llama4"):
            _, mm_w, mm_a = _llama4_vision(c)
            t.take(
                "vision: llama4 tower" + (" (frozen: projector only)" if c.freeze_vision_encoder_params else ""),
                979,
                878,
            )
        else:
            mm_w = mm_a = 0
            t.take(f"vision: not counted for model_name {c.model_name!r}", 983)
            t.notes.append(
                f"vision tower not counted: MaxText prices vision FLOPs for gemma3* and llama4* model names only"
                f" ({c.model_name!r} counts as 0)"
            )
        learnable += mm_w
        attention += mm_a
        parts["vision_weights"] = mm_w
        parts["vision_attention"] = mm_a

    # Gradient accumulation, then DPO's reference forward (maxtext_utils.py:1372-1383)
    ga = c.gradient_accumulation_steps
    learnable = learnable * ga
    attention = attention * ga
    parts = {k: v * ga for k, v in parts.items()}
    if ga > 1:
        t.take(f"gradient accumulation: x{ga}", 1372)
    if c.use_dpo:
        reference = learnable / 3
        ref_attn = attention / 3
        attention = attention + ref_attn
        parts["dpo_reference"] = reference + ref_attn
        t.take("dpo: one more forward of the reference model", 1376)
    else:
        reference = 0
    total = learnable + attention + reference
    return MaxTextFlops(
        total=total,
        learnable_weight=learnable,
        attention=attention,
        reference_model=reference,
        tokens=s * b * ga,
        branch=branch,
        details=tuple(t.details),
        sources=tuple(t.sources),
        notes=tuple(t.notes),
        parts=parts,
    )
