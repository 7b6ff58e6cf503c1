"""Model arithmetic: the shape MaxText builds from a config, its parameter count, the FLOPs
of one training step (MaxText's own definition for MFU, and what the chips really execute
with rematerialisation), and bytes per parameter of weights, gradients and optimizer state.

Formulas: DOMAIN.md §4 (6·P·tokens + attention 12·B·T²·L·H·hd, causal halved), written per
matmul as MaxText's `calculate_tflops_training_per_device` does (src/maxtext/utils/maxtext_utils.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from server.perf.config import Config
from server.perf.remat import RematPolicy, resolve
from server.perf.slices import ChipSpec

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
class Shape:
    """The model as MaxText builds it (after global_parameter_scale)."""

    name: str
    emb: int
    q_heads: int
    kv_heads: int
    head_dim: int
    mlp: int
    layers: int
    vocab: int
    experts: int = 1
    experts_per_tok: int = 1
    moe_mlp: int = 0
    shared_experts: int = 0
    n_mlp_in: int = 2  # input matrices of the MLP: 2 when gated (['silu','linear']), 1 when not
    tied_embedding: bool = False

    @property
    def moe(self) -> bool:
        return self.experts > 1


def _dim(cfg: Config, key: str, default: Any = None) -> int:
    v = cfg.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise ArithError(key, f"{key} must be a whole number > 0, got {v!r}")
    return v


def individual_scales(scale: int) -> tuple[int, int, int, int]:
    """MaxText's get_individual_scales: (emb, heads, mlp, layers) log2 multipliers."""
    log2 = int(math.log2(scale))
    if 2**log2 != scale:
        raise ArithError("global_parameter_scale", f"global_parameter_scale must be a power of two, got {scale}")
    base, rem = divmod(log2, 3)
    heads = base + int(rem > 0)
    return base + int(rem > 1), heads, heads, base


def shape(cfg: Config) -> Shape:
    """Resolve the model's dims (model file, then explicit base_* keys, then the scale)."""
    m = cfg.model
    if m is None:
        raise ArithError("model_name", "no model dimensions: unknown model_name and no explicit base_* keys")
    scale = cfg.get("global_parameter_scale", 1)
    if isinstance(scale, bool) or not isinstance(scale, int) or scale < 1:
        raise ArithError("global_parameter_scale", f"global_parameter_scale must be a power of two, got {scale!r}")
    es, hs, ms, ls = individual_scales(scale)
    acts = m.mlp_activations if isinstance(m.mlp_activations, (list, tuple)) else ("silu", "linear")
    moe_mlp = m.base_moe_mlp_dim if isinstance(m.base_moe_mlp_dim, int) and m.base_moe_mlp_dim > 0 else m.mlp_dim
    dims = {
        "emb_dim": m.emb_dim,
        "num_query_heads": m.num_query_heads,
        "num_kv_heads": m.num_kv_heads,
        "mlp_dim": m.mlp_dim,
        "num_decoder_layers": m.num_decoder_layers,
        "head_dim": m.head_dim,
        "vocab_size": m.vocab_size,
    }
    for k, v in dims.items():
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise ArithError(
                f"base_{k}" if k not in ("head_dim", "vocab_size") else k, f"{k} must be a whole number > 0, got {v!r}"
            )
    return Shape(
        name=m.name,
        emb=m.emb_dim * 2**es,
        q_heads=m.num_query_heads * 2**hs,
        kv_heads=m.num_kv_heads * 2**hs,
        head_dim=m.head_dim,
        mlp=m.mlp_dim * 2**ms,
        layers=m.num_decoder_layers * 2**ls,
        vocab=m.vocab_size,
        experts=max(1, int(m.num_experts)),
        experts_per_tok=max(1, int(m.num_experts_per_tok)),
        moe_mlp=moe_mlp * 2**ms,
        shared_experts=int(m.shared_experts or 0),
        n_mlp_in=max(1, len(acts)),
        tied_embedding=bool(m.logits_via_embedding),
    )


@dataclass(frozen=True)
class Params:
    """Parameter counts (elements)."""

    attention: int  # per layer
    mlp: int  # per layer: dense MLP, or all experts (+ shared experts and router)
    mlp_active: int  # per layer, what one token uses
    norms: int  # per layer
    embedding: int  # input embedding
    logits: int  # output projection (0 when tied)

    def per_layer(self, active: bool = False) -> int:
        return self.attention + (self.mlp_active if active else self.mlp) + self.norms

    def total(self, layers: int, active: bool = False) -> int:
        return layers * self.per_layer(active) + self.embedding + self.logits


def params(s: Shape) -> Params:
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
    return Params(attn, mlp, active, 2 * s.emb, emb, 0 if s.tied_embedding else emb)


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
    s: Shape, tokens: float, seq: int, remat: RematPolicy, causal: bool = True, moe_factor: float = 1.0
) -> Flops:
    """FLOPs for `tokens` tokens in sequences of `seq`, as MaxText counts them (and as they run:
    rematerialised forwards, and MoE experts at `moe_factor` times their routed share)."""
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
    model = 3 * (s.layers * layer_fwd + logits) + 3 * s.layers * attn
    rec = remat.recomputed()
    redo = sum(v for k, v in fwd.items() if k in rec) + (attn if "attention" in rec else 0.0)
    executed = model + s.layers * redo
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
    if v not in DTYPE_BYTES:
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
    pol = resolve(name, {k: v.value for k, v in cfg.values.items()})
    if pol is None:
        raise ArithError("remat_policy", f"unknown remat_policy {name!r}")
    return pol


def matmul_speedup(quantization: str, chip: ChipSpec) -> float:
    """How much faster the decoder layers' weight matmuls (q/k/v, output, MLP) run than in bf16 under MaxText's
    `quantization` on this chip, their three passes together: the chip's peak for the dtype the mode multiplies
    in over its bf16 peak, on the passes the mode quantizes (server/perf/quantization.py: the modes, read from
    MaxText's quantizations.py; server/perf/slices.py: the peaks). 1 for weight-only modes, fp8 before TPU7x and
    int8 on TPU7x; attention and logits matmuls are never quantized, so steptime keeps them at the bf16 peak."""
    from server.perf.quantization import matmul_plan

    return matmul_plan(quantization, chip).speedup
