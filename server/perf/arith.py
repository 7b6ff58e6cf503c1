"""Model arithmetic: the shape MaxText builds from a config, its parameter count, the FLOPs
of one training step (MaxText's own definition for MFU, and what the chips really execute
with rematerialisation), and bytes per parameter of weights, gradients and optimizer state.

Formulas: DOMAIN.md §4 (6·P·tokens + attention 12·B·T²·L·H·hd, causal halved), written per
matmul as MaxText's `calculate_tflops_training_per_device` does (src/maxtext/utils/maxtext_utils.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from server.common.dims import DecoderDims
from server.config.resolve import Config
from server.config.slices import ChipSpec
from server.perf.remat import RematPolicy, resolve

if TYPE_CHECKING:  # architecture.py imports ArithError from here
    from server.perf.architecture import Architecture

DTYPE_BYTES = {
    "float32": 4,
    "fp32": 4,
    "bfloat16": 2,
    "bf16": 2,
    "float16": 2,
    "fp16": 2,
    "int8": 1,
    "fp8": 1,
    "float8_e4m3fn": 1,
    "int4": 0.5,
}


class ArithError(ValueError):
    """A config ASAP cannot price, with the key to blame."""

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key


@dataclass(frozen=True)
class Shape(DecoderDims):
    """The model as MaxText builds it (after global_parameter_scale): its decoder dimensions, then the rest."""

    name: str
    experts: int = 1
    experts_per_tok: int = 1
    moe_mlp: int = 0
    shared_experts: int = 0
    n_mlp_in: int = 2  # input matrices of the MLP: 2 when gated (['silu','linear']), 1 when not
    tied_embedding: bool = False
    # The decoder as MaxText builds it (server/perf/architecture.py): layer groups, their parameters and
    # FLOPs. The fields above are then its representative layer (the most common group's attention, the
    # MoE group's experts), read by the mesh-dependent code; counts and FLOPs come from `arch` itself.
    arch: Architecture | None = None
    moe_layers: int = -1  # decoder layers with routed experts (-1: every layer when experts > 1)
    attention_block: int = 1  # the attention kernel's block: it computes every block its mask touches whole
    moe_tile: int = 0  # rows per m-tile of the grouped matmul on the dropless path (0: dense einsum path)
    moe_imbalance: float = 1.0  # busiest expert-parallel shard's routed tokens over the mean (dropless path)
    # bytes an element of the MoE combine's [tokens, top_k, emb] (MaxText's `float32_weight_sum`, default true: 4)
    moe_combine_bytes: int = 4

    @property
    def moe(self) -> bool:
        return self.experts > 1

    @property
    def routed_layers(self) -> int:
        """Decoder layers that route tokens to experts (DeepSeek's dense-first layers and Llama 4's
        interleaved dense layers do not)."""
        if not self.moe:
            return 0
        return self.layers if self.moe_layers < 0 else self.moe_layers


def _dim(cfg: Config, key: str, default: Any = None) -> int:
    v = cfg.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise ArithError(key, f"{key} must be a whole number > 0, got {v!r}")
    return v


def individual_scales(scale: int) -> tuple[int, int, int, int]:
    """MaxText's get_individual_scales: (emb, heads, mlp, layers) log2 multipliers of `global_parameter_scale`
    (src/maxtext/configs/types.py:2857-2873@e591f30cb)."""
    if scale <= 0:
        raise ArithError("global_parameter_scale", f"global_parameter_scale must be a power of two, got {scale}")
    log2 = math.floor(math.log2(scale))
    if 2**log2 != scale:
        raise ArithError("global_parameter_scale", f"global_parameter_scale must be a power of two, got {scale}")
    base, rem = divmod(log2, 3)
    heads = base + int(rem > 0)
    return base + int(rem > 1), heads, heads, base


def shape(cfg: Config) -> Shape:
    """The model MaxText builds from the resolved config (model file, the config chain, overrides):
    server/perf/architecture.py, with its representative layer's dims for the mesh-dependent code."""
    scale = cfg.get("global_parameter_scale", 1)
    if isinstance(scale, bool) or not isinstance(scale, int) or scale < 1:
        raise ArithError("global_parameter_scale", f"global_parameter_scale must be a power of two, got {scale!r}")
    from server.perf import architecture

    arch = architecture.build(cfg.get)
    tile = moe_tile(cfg)
    balanced = tile == 0 or cfg.get("use_random_routing", False) is True
    return replace(
        shape_of(arch),
        attention_block=attention_block(cfg),
        moe_tile=tile,
        moe_imbalance=1.0 if balanced else MOE_LOAD_IMBALANCE,
        moe_combine_bytes=2 if cfg.get("float32_weight_sum", True) is False else 4,
    )


# Learned routing does not spread tokens evenly: the expert-parallel shard holding the most-chosen experts
# gets more than its share, and on the dropless path (nothing dropped) every shard waits for it. Named and
# sourced, not fitted: 1.25 is the headroom over a uniform share that Switch Transformer (Fedus et al.,
# JMLR 2022, §2.2 and Table 1) found training needs with its load-balancing loss, and the capacity factor
# GShard and MaxText's capacity path pad to. None with `use_random_routing: true` (balanced by construction,
# as MaxText's benchmark recipes run) or on the capacity path (priced by its capacity factor instead).
MOE_LOAD_IMBALANCE = 1.25


def moe_tile(cfg: Config) -> int:
    """The m-tile of MaxText's grouped matmul when routed experts take the dropless path (`sparse_matmul`,
    the default: megablox, tokamax or ragged dot): `wi_tile_fwd_batch_seq` (base.yml:251@e591f30cb, 512).
    0 on the dense path (`sparse_matmul: false`: capacity-padded einsums, priced by moe_compute_factor)."""
    if cfg.get("sparse_matmul", True) is False:
        return 0
    tile = cfg.get("wi_tile_fwd_batch_seq", 512)
    return tile if isinstance(tile, int) and not isinstance(tile, bool) and tile > 0 else 512


def attention_block(cfg: Config) -> int:
    """The granularity at which MaxText's attention kernel computes the attention matrix: splash attention
    (`attention: flash`, and what `autoselected` picks on TPU) computes every (sa_block_q x sa_block_kv)
    block its causal/window mask touches (base.yml:1159@e591f30cb: 512 x 512); `dot_product` computes the
    whole seq x seq matrix and masks it."""
    seq = cfg.get("max_target_length", 2048)
    if str(cfg.get("attention", "autoselected")) == "dot_product" and isinstance(seq, int) and seq > 0:
        return seq
    blocks = [cfg.get(k, 512) for k in ("sa_block_q", "sa_block_kv")]
    return max((b for b in blocks if isinstance(b, int) and not isinstance(b, bool) and b > 0), default=512)


def shape_of(arch: Architecture) -> Shape:
    """The representative layer of `arch`: the attention of its most common group (full attention over a
    linear mixer when both exist), its dense MLP (or the expert width), and its MoE group's experts."""
    groups = arch.groups
    attn_groups = [g for g in groups if g.attention.kind != "gated_delta"] or list(groups)
    rep = max(attn_groups, key=lambda g: g.count)
    moe = [g for g in groups if g.ffn.kind == "moe"]
    dense = [g for g in groups if g.ffn.kind == "dense"]
    f_moe = max(moe, key=lambda g: g.count).ffn if moe else None
    f_dense = max(dense, key=lambda g: g.count).ffn if dense else None
    mlp = f_dense.mlp_dim if f_dense else (f_moe.mlp_dim if f_moe else arch.emb_dim)
    a = rep.attention
    return Shape(
        name=arch.name,
        emb=arch.emb_dim,
        q_heads=a.q_heads,
        kv_heads=a.kv_heads,
        head_dim=a.qk_head_dim,
        mlp=mlp,
        layers=arch.layers,
        vocab=arch.vocab,
        experts=f_moe.experts if f_moe else 1,
        experts_per_tok=f_moe.top_k if f_moe else 1,
        moe_mlp=f_moe.mlp_dim if f_moe else mlp,
        shared_experts=(f_moe.shared_dim // max(1, f_moe.mlp_dim)) if f_moe and f_moe.shared_dim else 0,
        n_mlp_in=f_dense.n_in if f_dense else 2,
        tied_embedding=arch.tied,
        arch=arch,
        moe_layers=sum(g.count for g in moe),
    )


@dataclass(frozen=True)
class Params:
    """Parameter counts (elements)."""

    attention: float  # per layer (the mean over the decoder's layers when they differ)
    mlp: float  # per layer: dense MLP, or all experts (+ shared experts and router)
    mlp_active: float  # per layer, what one token uses
    norms: float  # per layer (and the layer's other parameters: mHC, per-layer-embedding gates, ...)
    embedding: float  # input embedding (and parameters outside the layers: final norm, MTP, ...)
    logits: float  # output projection (0 when tied)
    routed: float = 0.0  # per layer: the routed experts' share of `mlp` (what expert parallelism splits)

    def per_layer(self, active: bool = False) -> float:
        return self.attention + (self.mlp_active if active else self.mlp) + self.norms

    def total(self, layers: int, active: bool = False) -> float:
        return layers * self.per_layer(active) + self.embedding + self.logits


def params(s: Shape) -> Params:
    if s.arch is not None:
        return _arch_params(s.arch)
    attn = s.emb * s.head_dim * (2 * s.q_heads + 2 * s.kv_heads)  # q, o; k, v
    one_mlp = (s.n_mlp_in + 1) * s.emb * s.mlp
    if s.moe:
        expert = (s.n_mlp_in + 1) * s.emb * s.moe_mlp
        router = s.emb * s.experts
        shared = s.shared_experts * expert
        mlp = s.experts * expert + router + shared
        active = s.experts_per_tok * expert + router + shared
    else:
        mlp = active = one_mlp
    emb = s.vocab * s.emb
    routed = s.experts * (s.n_mlp_in + 1) * s.emb * s.moe_mlp if s.moe else 0
    return Params(attn, mlp, active, 2 * s.emb, emb, 0 if s.tied_embedding else emb, routed)


def _arch_params(a: Architecture) -> Params:
    """Per-layer means of the decoder's groups, so that `total(a.layers)` is the architecture's total and
    `total(a.layers, active=True)` its active count (extras outside the layers ride with the embedding)."""
    n = max(1, a.layers)
    attn = sum(g.count * g.attention.params for g in a.groups) / n
    mlp = sum(g.count * g.ffn.params for g in a.groups) / n
    active = sum(g.count * g.ffn.active_params for g in a.groups) / n
    norms = sum(g.count * (g.norms + g.extra) for g in a.groups) / n
    # routed experts: the params a token does not use are (experts - top_k) experts' worth
    routed = (
        sum(
            g.count * (g.ffn.params - g.ffn.active_params) * g.ffn.experts / (g.ffn.experts - g.ffn.top_k)
            for g in a.groups
            if g.ffn.kind == "moe" and g.ffn.experts > g.ffn.top_k
        )
        / n
    )
    extras = sum(e.params for e in a.extras)
    return Params(attn, mlp, active, norms, a.embedding + extras, a.logits, routed)


@dataclass(frozen=True)
class Flops:
    """FLOPs of one training step over all devices."""

    model: float  # MaxText's count for MFU: 3 x forward matmuls + attention (causal halved)
    executed: float  # what runs: model + rematerialised forward matmuls and attention
    per_layer_forward: dict[str, float] = field(default_factory=dict)  # by matmul, all tokens
    attention_forward: float = 0.0  # all layers
    logits_forward: float = 0.0

    @property
    def recompute(self) -> float:
        return self.executed - self.model


def moe_compute_factor(cfg: Config, s: Shape) -> float:
    """How many times the routed tokens' expert FLOPs really run: 1 with sparse (megablox) matmuls;
    with MaxText's dense path, `capacity_factor` (tokens padded to each expert's capacity), or every
    expert on every token (experts / experts_per_tok) when it does not drop."""
    if not s.moe or cfg.get("sparse_matmul", True) is not False:
        return 1.0
    cf = cfg.get("capacity_factor", -1)
    if isinstance(cf, (int, float)) and not isinstance(cf, bool) and cf > 0:
        return float(cf)
    return s.experts / s.experts_per_tok


def step_flops(
    s: Shape,
    tokens: float,
    seq: int,
    remat: RematPolicy,
    causal: bool = True,
    moe_factor: float = 1.0,
    model_flops: float | None = None,
) -> Flops:
    """FLOPs for `tokens` tokens in sequences of `seq`, as MaxText counts them (`model_flops`, from
    server/perf/maxtext_flops.py, when given) and as they run: every layer group's matmuls, the attention
    core as the kernel computes it (block-granular masks, sliding windows, linear attention), rematerialised
    forwards, and MoE experts at `moe_factor` times their routed share."""
    if s.arch is None:
        return _uniform_step_flops(s, tokens, seq, remat, causal, moe_factor, model_flops)
    a = s.arch
    n = max(1, a.layers)
    # Per-layer means (all tokens) of each matmul kind: the attention module's projections split into the
    # output projection (heads x v_head_dim -> emb) and the rest; the FFN into its input and output matrices.
    fwd = {"qkv": 0.0, "out_proj": 0.0, "mlpwi": 0.0, "mlpwo": 0.0}
    attn_kernel = attn_exact = 0.0
    for g in a.groups:
        at, ff = g.attention, g.ffn
        out_w = min(at.matmul_weights, at.q_heads * at.v_head_dim * a.emb_dim)
        fwd["qkv"] += g.count * 2 * (at.matmul_weights - out_w)
        fwd["out_proj"] += g.count * 2 * out_w
        mlp_w = ff.matmul_weights + g.extra_matmul
        share_in = ff.n_in / (ff.n_in + 1)
        fwd["mlpwi"] += g.count * 2 * mlp_w * share_in
        fwd["mlpwo"] += g.count * 2 * mlp_w * (1 - share_in)
        attn_kernel += g.count * g.attention_flops(seq, s.attention_block if causal else 1)
        attn_exact += g.count * g.attention_flops(seq, 1)
    extra_mm = 2.0 * sum(e.matmul_weights for e in a.extras)
    fwd["mlpwi"] += extra_mm  # MTP modules, per-layer-embedding projections: outside the layers
    fwd = {k: v * tokens / n for k, v in fwd.items()}
    attn = attn_kernel * tokens / n
    if not causal:  # the pre-2025 count MaxText published with: full, not halved, attention
        attn = 2 * attn_exact * tokens / n
    logits = a.logits_flops * tokens
    layer_fwd = sum(fwd.values())
    derived = 3 * (n * layer_fwd + logits) + 3 * attn_exact * tokens * (1.0 if causal else 2.0)
    model = derived if model_flops is None else model_flops
    rec = remat.recomputed()
    redo = sum(v for k, v in fwd.items() if k in rec) + (attn if "attention" in rec else 0.0)
    executed = 3 * (n * layer_fwd + logits) + 3 * n * attn + n * redo
    run = dict(fwd)
    if moe_factor != 1.0 and s.moe:
        routed = s.routed_layers / n * 2 * tokens * s.experts_per_tok * 3 * s.emb * s.moe_mlp
        extra = (moe_factor - 1.0) * routed
        executed += n * extra * (3 + sum(k in rec for k in ("mlpwi", "mlpwo")) / 2)
        share = {"mlpwi": 2 / 3, "mlpwo": 1 / 3}
        for k in share:
            run[k] += extra * share[k]
    return Flops(model, executed, {**run, "attention": attn}, n * attn, logits)


def _uniform_step_flops(
    s: Shape,
    tokens: float,
    seq: int,
    remat: RematPolicy,
    causal: bool,
    moe_factor: float,
    model_flops: float | None,
) -> Flops:
    """A Shape built by hand (no architecture): every layer alike, llama2-style."""
    q = s.q_heads * s.head_dim
    kv = s.kv_heads * s.head_dim
    mlp_in = s.experts_per_tok * s.moe_mlp if s.moe else s.mlp
    if s.moe:
        mlp_in += s.shared_experts * s.moe_mlp
    fwd = {
        "qkv": 2 * tokens * s.emb * (q + 2 * kv),
        "out_proj": 2 * tokens * q * s.emb,
        "mlpwi": 2 * tokens * s.emb * mlp_in * s.n_mlp_in + (2 * tokens * s.emb * s.experts if s.moe else 0),
        "mlpwo": 2 * tokens * mlp_in * s.emb,
    }
    # QK^T and PV: 2 matmuls of 2*T*T*hd per head per sequence, i.e. 4*tokens*T*q; causal halves it.
    attn = 4 * tokens * seq * q * (0.5 if causal else 1.0)
    logits = 2 * tokens * s.emb * s.vocab
    layer_fwd = sum(fwd.values())
    derived = 3 * (s.layers * layer_fwd + logits) + 3 * s.layers * attn
    model = derived if model_flops is None else model_flops
    rec = remat.recomputed()
    redo = sum(v for k, v in fwd.items() if k in rec) + (attn if "attention" in rec else 0.0)
    executed = derived + s.layers * redo
    run = dict(fwd)
    if moe_factor != 1.0:
        extra = (moe_factor - 1.0) * (fwd["mlpwi"] + fwd["mlpwo"])
        executed += s.layers * extra * (3 + sum(k in rec for k in ("mlpwi", "mlpwo")) / 2)
        run["mlpwi"] *= moe_factor
        run["mlpwo"] *= moe_factor
    return Flops(model, executed, {**run, "attention": attn}, s.layers * attn, logits)


@dataclass(frozen=True)
class BytesPerParam:
    weights: float
    grads: float
    optimizer: float

    @property
    def total(self) -> float:
        return self.weights + self.grads + self.optimizer


def _dtype(cfg: Config, key: str, default: str) -> float:
    v = cfg.get(key, default) or default
    if not isinstance(v, str) or v not in DTYPE_BYTES:  # a list or mapping is unhashable: not a dtype either
        raise ArithError(key, f"{key}: unknown dtype {v!r}; known: {', '.join(DTYPE_BYTES)}")
    return DTYPE_BYTES[v]


def bytes_per_param(cfg: Config) -> BytesPerParam:
    """Weights in weight_dtype (fp32 by default), gradients in grad_dtype, and optimizer state:
    AdamW keeps two moments in mu_dtype (defaults to weight_dtype); SGD none; Adafactor ~factored."""
    w = _dtype(cfg, "weight_dtype", "float32")
    g = _dtype(cfg, "grad_dtype", "float32")
    mu = cfg.get("mu_dtype") or cfg.get("weight_dtype", "float32")
    mu_b = DTYPE_BYTES.get(mu, w) if isinstance(mu, str) else w
    opt = str(cfg.get("opt_type", "adamw")).lower()
    state = {"adamw": 2 * mu_b, "adam_pax": 2 * mu_b, "sgd": 0.0, "adafactor": 0.1 * mu_b}.get(opt, 2 * mu_b)
    return BytesPerParam(w, g, state)


def remat_policy(cfg: Config) -> RematPolicy:
    name = cfg.get("remat_policy", "full")
    pol = resolve(name, {k: cfg.get(k) for k in cfg.values})  # checked values, as every consumer reads them
    if pol is None:
        raise ArithError("remat_policy", f"unknown remat_policy {name!r}")
    return pol


def matmul_speedup(quantization: str, chip: ChipSpec) -> float:
    """How much faster the decoder layers' weight matmuls (q/k/v, output, MLP) run than in bf16 under MaxText's
    `quantization` on this chip, their three passes together: the chip's peak for the dtype the mode multiplies
    in over its bf16 peak, on the passes the mode quantizes (server/perf/quantization.py: the modes, read from
    MaxText's quantizations.py; server/config/slices.py: the peaks). 1 for weight-only modes, fp8 before TPU7x and
    int8 on TPU7x; attention and logits matmuls are never quantized, so steptime keeps them at the bf16 peak."""
    from server.perf.quantization import matmul_plan

    return matmul_plan(quantization, chip).speedup
