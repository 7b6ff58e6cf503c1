"""Each decoder block as MaxText builds it: the text decoder's layers grouped by structure, their
parameters (total and per token), forward matmul FLOPs per token, attention-core FLOPs at a sequence
length as the kernel computes them, and the per-token tensor sizes a layer's activations keep.

`build(get)` reads a resolved MaxText config through `get(key, default=None)` (the raw keys:
`base_emb_dim`, `decoder_block`, `num_experts`, ...) and returns an `Architecture`. Keys `get` does not
know take MaxText's defaults (`BASE_DEFAULTS`, from base.yml and types.py). Every structure cites the
MaxText file and line it comes from, at AI-Hypercomputer/maxtext commit e591f30cb (2026-08-22); the
default code path is the pure-NNX decoder (`pure_nnx_decoder: true`, layers/nnx_decoders.py).

Counting rules, as MaxText's parameter tree has them: every `nnx.Param` counts (kernels, biases, norm
scales, sinks, scalars); RMSNorms built `with_scale=False` and L2 norms have none; non-trainable
variables (DeepSeek V4's hash-routing table and its router bias, `MoEBiasVar`) do not count. Routed
experts always have two input matrices (`wi_0`, `wi_1`) whatever `mlp_activations` says; dense MLPs
have one input matrix per entry of `mlp_activations`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from server.common.dims import MAX_DIM, MAX_LAYERS, whole_number

COMMIT = "e591f30cb"


def _error(key: str, message: str) -> Exception:
    """server.perf.arith.ArithError(key, message), imported when raised: arith imports this module."""
    from server.perf.arith import ArithError

    return ArithError(key, message)


_M = "src/maxtext"


def _src(path: str, line: int) -> str:
    return f"{_M}/{path}:{line}@{COMMIT}"


# MaxText's defaults for the keys this module reads: configs/base.yml@e591f30cb (line given), and
# configs/types.py where base.yml has no entry (vocab_size: types.py:1370; padded_base_moe_mlp_dim: 878).
BASE_DEFAULTS: dict[str, Any] = {
    "model_name": "default",  # base.yml:23
    "decoder_block": "llama2",  # base.yml:170
    "global_parameter_scale": 1,  # base.yml:175
    "base_emb_dim": 2048,  # base.yml:176
    "base_num_query_heads": 16,
    "base_num_kv_heads": 16,
    "base_mlp_dim": 7168,
    "base_num_decoder_layers": 16,
    "head_dim": 128,  # base.yml:182
    "attention_output_dim": -1,
    "global_head_dim": 0,
    "global_num_kv_heads": 0,
    "mlp_activations": ["silu", "linear"],  # base.yml:187
    "logits_via_embedding": False,  # base.yml:190
    "mtp_num_layers": 0,  # base.yml:203
    "num_experts": 1,  # base.yml:213
    "num_experts_per_tok": 1,
    "moe_expert_input_dim": -1,  # base.yml:225
    "base_moe_mlp_dim": -1,  # base.yml:226
    "padded_base_moe_mlp_dim": None,  # types.py:878
    "prefuse_moe_weights": False,
    "first_num_dense_layers": 0,  # base.yml:289
    "shared_experts": 0,
    "routed_bias": False,  # base.yml:293
    "mlp_bias": False,  # base.yml:295
    "first_num_hash_layers": 0,  # base.yml:297
    "inhomogeneous_layer_cycle_interval": 1,  # base.yml:307
    "attention_type": "global",  # base.yml:393
    "share_kv_projections": False,
    "attention_bias": False,
    "attention_sink": False,
    "sliding_window_size": 0,  # base.yml:397
    "chunk_attn_window_size": 0,
    "use_post_attn_norm": False,  # base.yml:405
    "use_post_ffw_norm": False,
    "v_norm_with_scale": True,
    "qk_norm_with_scale": True,
    "hidden_size_per_layer_input": 0,  # base.yml:414
    "vocab_size_per_layer_input": 0,
    "num_kv_shared_layers": 0,  # base.yml:419
    "use_double_wide_mlp": False,
    "use_indexer": False,  # base.yml:432
    "indexer_head_dim": 128,
    "indexer_n_heads": 64,
    "indexer_topk": 2048,
    "q_lora_rank": 0,  # base.yml:448
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "o_lora_rank": 0,  # base.yml:456
    "o_groups": 0,
    "compress_ratios": [],  # base.yml:458
    "fused_qkv": False,  # base.yml:466
    "trainable_position_size": -1,  # base.yml:1010
    "use_qk_norm": False,  # base.yml:1221
    "nope_layer_interval": -1,  # base.yml:1223
    "interleave_moe_layer_step": 1,  # base.yml:1225
    "use_multimodal": False,  # base.yml:1232
    "use_audio": False,
    "vision_encoder_block": "none",  # types.py:2300
    "gdn_conv_kernel_dim": 4,  # base.yml:1314
    "gdn_key_head_dim": 128,
    "gdn_value_head_dim": 128,
    "gdn_num_key_heads": 16,
    "gdn_num_value_heads": 32,
    "gdn_chunk_size": 64,
    "mhc_expansion_rate": 1,  # base.yml:1347
    "enable_mhc_lite": False,  # base.yml:1358
    "engram_layers": [],  # base.yml:1372
    "engram_max_ngram_size": 3,
    "engram_num_heads": 8,
    "engram_head_dim": 1280,
    "engram_vocab_bases": [],
    "engram_kernel_size": 4,
    "vocab_size": 32_000,  # types.py:1370
}


# --------------------------------------------------------------------------------------------------
# Specs
# --------------------------------------------------------------------------------------------------


def _avg_causal_keys(seq: int, window: int = 0, chunk: int = 0, block: int = 1) -> float:
    """Keys a causal kernel computes per query, averaged over a sequence of `seq` tokens.

    `window` > 0: query t sees keys (t-window, t]; `chunk` > 0: keys of its own chunk up to t
    (Llama 4's chunked attention). With `block` > 1 the count is block-granular, as a block-sparse
    kernel (splash attention: sa_block_q/sa_block_kv, 512 by default) computes every block the mask
    touches whole; `block` = 1 is the mask's exact area.
    """
    if seq <= 0:
        return 0.0
    if block <= 1:
        if chunk > 0:
            n, r = divmod(seq, chunk)
            return (n * chunk * (chunk + 1) / 2 + r * (r + 1) / 2) / seq
        if 0 < window < seq:
            return (window * (window + 1) / 2 + (seq - window) * window) / seq
        return (seq + 1) / 2
    if -(-seq // block) > _BLOCK_LOOP_MAX:  # a sequence of millions of blocks: counted without visiting each
        closed = _block_keys(seq, window, chunk, block)
        if closed is None:  # a chunk whose pattern repeats only every millions of blocks: the mask's area
            return _avg_causal_keys(seq, window, chunk, 1)
        return min(closed / seq, float(seq))
    total = 0.0
    for q0 in range(0, seq, block):
        q1 = min(q0 + block, seq) - 1
        kblocks = q1 // block - _first_key(q0, window, chunk) // block + 1
        total += kblocks * block * (q1 - q0 + 1)
    return min(total / seq, float(seq))


_BLOCK_LOOP_MAX = 1 << 16  # query blocks counted one by one; beyond, _block_keys counts them in closed form


def _first_key(q0: int, window: int, chunk: int) -> int:
    """The first key the queries from `q0` on may see."""
    if chunk > 0:
        return (q0 // chunk) * chunk
    if window > 0:
        return max(0, q0 - window + 1)
    return 0


def _block_keys(seq: int, window: int, chunk: int, block: int) -> int | None:
    """The block-granular key count _avg_causal_keys sums block by block (times `seq`), in closed form: the
    query blocks before the last are whole, and the key blocks each sees follow a pattern (causal: one more per
    block; a window: one more until the window is full, then constant; a chunk: periodic with period
    chunk / gcd(chunk, block) blocks). None when that period is itself longer than _BLOCK_LOOP_MAX blocks.
    Exact, in integers: max_target_length is read as any whole number, and the loop would take years."""
    full, rest = divmod(seq, block)

    def kblocks(i: int) -> int:  # key blocks whole query block i sees
        return i - _first_key(i * block, window, chunk) // block + 1

    if chunk > 0 and chunk < seq:
        period = chunk // math.gcd(chunk, block)
        if period > _BLOCK_LOOP_MAX:
            return None
        repeats, left = divmod(full, period)
        blocks = repeats * sum(kblocks(i) for i in range(period)) + sum(kblocks(i) for i in range(left))
    elif window > 0 and chunk <= 0:
        ramp = min(-(-(window - 1) // block), full)  # whole blocks before the window is full: i + 1 each
        blocks = ramp * (ramp + 1) // 2 + (full - ramp) * (1 - (1 - window) // block)
    else:  # causal (or a chunk no shorter than the sequence)
        blocks = full * (full + 1) // 2
    total = blocks * block * block
    if rest:
        last = full * block
        total += ((seq - 1) // block - _first_key(last, window, chunk) // block + 1) * block * rest
    return total


def _avg_compressed_keys(seq: int, ratio: int) -> float:
    """Compressed KV entries (one per `ratio` tokens, DeepSeek V4) a query at t sees: floor((t+1)/ratio),
    averaged over the sequence."""
    if ratio <= 0 or seq <= 0:
        return 0.0
    n = seq // ratio
    return (n * (seq + 1) - ratio * n * (n + 1) / 2) / seq


@dataclass(frozen=True)
class AttentionSpec:
    """One layer's attention (or linear-attention mixer) as MaxText builds it.

    kind: "mha" (MHA, GQA, MQA), "mla" (DeepSeek's multi-head latent attention, optionally with the
    DeepSeek 3.2 sparse-attention indexer), "compressed" (DeepSeek V4: sliding window plus compressed
    KV), "gated_delta" (Qwen3-Next / 3.5 linear attention: q/k heads and dims are the delta net's).
    """

    kind: str
    q_heads: int
    kv_heads: int
    qk_head_dim: int
    v_head_dim: int
    params: int  # every parameter of the attention module (projections, biases, its norms, sinks)
    matmul_weights: int  # weight elements one token's forward multiplies through
    window: int = 0  # sliding window in tokens (0: none)
    chunk: int = 0  # chunked attention (Llama 4), 0: none
    global_attention: bool = True  # sees every earlier token (no window, no chunk)
    rope: bool = True  # False: NoPE layer (Llama 4)
    sinks: bool = False
    qk_norm: str = ""  # "", "head", "global" (OLMo 3), "l2" (Llama 4, no parameters)
    bias: bool = False
    kv_shared: bool = False  # Gemma 4 small: reuses K/V of an earlier layer (no K/V projections)
    q_gate: bool = False  # Qwen3-Next: the query projection also yields an output gate
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    rope_head_dim: int = 0
    indexer_heads: int = 0  # sparse-attention indexer (DeepSeek 3.2; DeepSeek V4 CSA layers)
    indexer_head_dim: int = 0
    indexer_topk: int = 0
    compress_ratio: int = 0  # DeepSeek V4: 0 sliding only, 4 CSA (indexed), >4 HCA
    conv_kernel: int = 0  # gated delta net
    gdn_chunk: int = 0
    activations: tuple[tuple[str, int], ...] = ()  # per-token elements of the tensors it produces

    def score_flops(self, seq: int, block: int = 1) -> float:
        """Forward FLOPs per token of the attention core (QK^T and PV, or the delta-rule state updates)
        at sequence length `seq`, as the kernel computes them: causal, windowed or chunked masks skip
        what they mask (block-granular with `block` > 1; see `_avg_causal_keys`).

        Linear attention (jax_chunk_gated_delta_rule, models/qwen3.py:187): per chunk of C tokens and
        value head, K·K^T, the WY solve (~C^3), A·V, A·K, q·h, w·h, q·k^T, attn·v and the state update,
        i.e. H_v·(6·Dk·Dv + C·(6·Dk + 4·Dv) + C²) per token, independent of `seq`. MaxText's MFU count
        uses 8·H_v·Dk·Dv instead (utils/maxtext_utils.py:772).

        MLA with the DeepSeek 3.2 indexer: the indexer scores every causal key (2·n_idx·(d_idx+1) per
        key), and the main attention applies its top-k as a mask, so the kernel still computes every
        causal block (MaxText's MFU count credits only the top-k: maxtext_utils.py:648).
        DeepSeek V4: the sliding window over raw keys plus the causal compressed keys (T/ratio), the CSA
        indexer scoring those; the top-k is again a mask (layers/attention_compressed.py:1099).
        """
        per_key = 2.0 * self.q_heads * (self.qk_head_dim + self.v_head_dim)
        if self.kind == "gated_delta":
            c, dk, dv = self.gdn_chunk, self.qk_head_dim, self.v_head_dim
            return float(self.q_heads * (6 * dk * dv + c * (6 * dk + 4 * dv) + c * c))
        if self.kind == "compressed":
            local = _avg_causal_keys(seq, window=self.window, block=block)
            comp = _avg_compressed_keys(seq, self.compress_ratio)
            idx = comp * 2.0 * self.indexer_heads * (self.indexer_head_dim + 1) if self.indexer_heads else 0.0
            return per_key * (local + comp) + idx
        keys = _avg_causal_keys(seq, window=self.window, chunk=self.chunk, block=block)
        idx = keys * 2.0 * self.indexer_heads * (self.indexer_head_dim + 1) if self.indexer_heads else 0.0
        return per_key * keys + idx

    @property
    def label(self) -> str:
        if self.kind == "gated_delta":
            return "linear(gated-delta)"
        if self.kind == "compressed":
            r = self.compress_ratio
            return f"sliding{self.window}" if r == 0 else (f"csa{r}" if r == 4 else f"hca{r}")
        base = "mla" if self.kind == "mla" else ("local" if self.window else ("chunked" if self.chunk else "global"))
        if self.kind == "mla" and self.indexer_heads:
            base += "+indexer"
        if not self.rope:
            base += "(nope)"
        if self.kv_shared:
            base += "(kv-shared)"
        return base


@dataclass(frozen=True)
class FFNSpec:
    """One layer's feed-forward block: a dense MLP or a mixture of experts.

    Dense: `mlp_dim` and `n_in` input matrices (one per `mlp_activations` entry). MoE: `experts`
    routed experts of `mlp_dim` (two input matrices each), `top_k` per token, a router over `in_dim`,
    and optionally shared experts, built by MaxText as one MLP of `shared_dim` (all shared experts
    together) that every token passes through.
    """

    kind: str  # "dense" | "moe"
    in_dim: int
    mlp_dim: int
    n_in: int
    params: int
    active_params: int
    matmul_weights: int  # per token: active experts, router, shared experts
    experts: int = 0
    top_k: int = 0
    shared_experts: int = 0
    shared_dim: int = 0
    router_bias: bool = False
    bias: bool = False
    hash_routing: bool = False
    activations: tuple[tuple[str, int], ...] = ()

    @property
    def label(self) -> str:
        if self.kind == "dense":
            return "dense"
        s = f"+{self.shared_experts}shared" if self.shared_dim else ""
        return f"moe{self.experts}top{self.top_k}{s}{'(hash)' if self.hash_routing else ''}"


@dataclass(frozen=True)
class LayerGroup:
    """`count` identical decoder layers (counted as real layers: a Gemma 2 MaxText layer is two)."""

    count: int
    attention: AttentionSpec
    ffn: FFNSpec
    norms: int  # the layer's own norm scales/biases (not those inside attention or the FFN)
    extra: int = 0  # other per-layer parameters: mHC, per-layer-embedding gate, engram, layer scalar...
    extra_matmul: int = 0  # per-token matmul weights of `extra`
    extra_activations: tuple[tuple[str, int], ...] = ()
    residual: int = 0  # width of the residual stream (emb_dim, or mhc_expansion_rate x emb_dim)
    what: str = ""  # extra's parts, for display

    @property
    def name(self) -> str:
        return f"{self.attention.label}/{self.ffn.label}" + (f"+{self.what}" if self.what else "")

    @property
    def params(self) -> int:
        """Parameters of one layer of the group."""
        return self.attention.params + self.ffn.params + self.norms + self.extra

    @property
    def active_params(self) -> int:
        """Parameters one token uses in one layer (routed experts at top_k of them)."""
        return self.attention.params + self.ffn.active_params + self.norms + self.extra

    @property
    def matmul_flops(self) -> float:
        """Forward matmul FLOPs per token of one layer: 2 x the weights the token multiplies through."""
        return 2.0 * (self.attention.matmul_weights + self.ffn.matmul_weights + self.extra_matmul)

    def attention_flops(self, seq: int, block: int = 1) -> float:
        """Forward attention-core FLOPs per token of one layer (see AttentionSpec.score_flops)."""
        return self.attention.score_flops(seq, block)

    @property
    def activations(self) -> dict[str, int]:
        """Per-token elements of the layer's tensors, by MaxText's checkpoint names (remat policies):
        decoder_layer_input, query_proj, key_proj, value_proj, context (attention output), out_proj,
        mlpwi (all input projections' outputs), mlpwo, plus block-specific ones (mla_q, mla_kv,
        moe_dispatch: the routed copies of the token, ...)."""
        out: dict[str, int] = {"decoder_layer_input": self.residual}
        for k, v in (*self.attention.activations, *self.ffn.activations, *self.extra_activations):
            out[k] = out.get(k, 0) + v
        return out


@dataclass(frozen=True)
class Extra:
    """Parameters outside the decoder layers (final norm, per-layer embeddings, MTP, ...)."""

    name: str
    params: int
    active_params: int
    matmul_weights: int = 0  # per token
    source: str = ""


@dataclass(frozen=True)
class Architecture:
    """The text decoder as MaxText builds it for training."""

    name: str
    decoder_block: str
    emb_dim: int
    vocab: int
    groups: tuple[LayerGroup, ...]
    embedding: int  # input token embedding (vocab x emb_dim)
    logits: int  # output projection; 0 when tied (logits_via_embedding)
    extras: tuple[Extra, ...] = ()
    maxtext_layers: int = 0  # num_decoder_layers as MaxText counts them (Gemma 2: pairs)
    # MaxText layers in one iteration of its layer scan: a scannable block (SCAN_BLOCKS) scans several at once
    scan_block: int = 1
    notes: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()

    @property
    def tied(self) -> bool:
        return self.logits == 0

    @property
    def layers(self) -> int:
        """Real decoder layers (Gemma 2: local and global counted separately)."""
        return sum(g.count for g in self.groups)

    @property
    def layer_params(self) -> int:
        return sum(g.count * g.params for g in self.groups)

    @property
    def total_params(self) -> int:
        return self.layer_params + self.embedding + self.logits + sum(e.params for e in self.extras)

    @property
    def active_params(self) -> int:
        """Parameters one token uses: everything but the routed experts it is not sent to (embeddings
        included, as in `total_params`)."""
        layers = sum(g.count * g.active_params for g in self.groups)
        return layers + self.embedding + self.logits + sum(e.active_params for e in self.extras)

    @property
    def moe(self) -> bool:
        return any(g.ffn.kind == "moe" for g in self.groups)

    @property
    def logits_flops(self) -> float:
        """Forward FLOPs per token of the output projection (tied or not)."""
        return 2.0 * self.emb_dim * self.vocab

    @property
    def matmul_flops(self) -> float:
        """Forward matmul FLOPs per token over the whole model (layers, logits, extras)."""
        layers = sum(g.count * g.matmul_flops for g in self.groups)
        return layers + self.logits_flops + 2.0 * sum(e.matmul_weights for e in self.extras)

    def attention_flops(self, seq: int, block: int = 1) -> float:
        """Forward attention-core FLOPs per token over all layers at sequence length `seq`."""
        return sum(g.count * g.attention_flops(seq, block) for g in self.groups)

    def forward_flops(self, seq: int, block: int = 1) -> float:
        """Forward FLOPs per token (matmuls + attention core) at sequence length `seq`."""
        return self.matmul_flops + self.attention_flops(seq, block)

    def summary(self) -> str:
        """One line: the decoder block and its layer groups ("deepseek: 3x mla/dense, 58x mla/moe256top8+1shared")."""
        parts = [f"{g.count}x {g.name}" for g in self.groups]
        return f"{self.decoder_block}: " + ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        """JSON-serialisable description (for `asap models --json`, hovers and agent tools)."""

        def spec(x: AttentionSpec | FFNSpec) -> dict[str, Any]:
            d = asdict(x)
            d["activations"] = dict(x.activations)
            return {k: v for k, v in d.items() if v not in (0, False, "", None) or k in ("params", "kind")}

        return {
            "name": self.name,
            "decoder_block": self.decoder_block,
            "summary": self.summary(),
            "layers": self.layers,
            "maxtext_layers": self.maxtext_layers,
            "total_params": self.total_params,
            "active_params": self.active_params,
            "embedding": self.embedding,
            "logits": self.logits,
            "tied": self.tied,
            "groups": [
                {
                    "count": g.count,
                    "name": g.name,
                    "params": g.params,
                    "active_params": g.active_params,
                    "norms": g.norms,
                    "extra": g.extra,
                    "matmul_flops_per_token": g.matmul_flops,
                    "attention": spec(g.attention),
                    "ffn": spec(g.ffn),
                    "activations": g.activations,
                }
                for g in self.groups
            ],
            "extras": [asdict(e) for e in self.extras],
            "notes": list(self.notes),
            "sources": list(self.sources),
        }


# --------------------------------------------------------------------------------------------------
# Reading the config
# --------------------------------------------------------------------------------------------------

Getter = Callable[..., Any]


class _Keys:
    """The config through `get`, MaxText's defaults behind it, values checked as read."""

    def __init__(self, get: Getter):
        self._get = get

    def raw(self, key: str) -> Any:
        v = self._get(key, None)
        return BASE_DEFAULTS.get(key) if v is None else v

    def num(self, key: str, minimum: int | None = 1) -> int:
        """A whole-number key (a command-line override arrives as text; MaxText's pydantic config coerces it),
        checked once here: the type, `minimum`, and at most MAX_DIM in size, so no product overflows."""
        raw = self.raw(key)
        v = whole_number(raw)
        if v is None:
            raise _error(key, f"{key} must be a whole number, got {raw!r}")
        if minimum is not None and v < minimum:
            raise _error(key, f"{key} must be >= {minimum}, got {v}")
        if abs(v) > MAX_DIM:
            raise _error(key, f"{key} must be at most {MAX_DIM} (2^40), got {raw!r}")
        return v

    def flag(self, key: str) -> bool:
        v = self.raw(key)
        if isinstance(v, str):
            if v.strip().lower() in ("true", "1", "yes"):
                return True
            if v.strip().lower() in ("false", "0", "no", ""):
                return False
            raise _error(key, f"{key} must be true or false, got {v!r}")
        return bool(v)

    def text(self, key: str) -> str:
        v = self.raw(key)
        return "" if v is None else str(v).strip().strip('"').strip("'")

    def ints(self, key: str) -> list[int]:
        v = self.raw(key)
        if v is None or v == "":
            return []
        if isinstance(v, str):
            v = [s for s in v.strip("[]").replace(" ", "").split(",") if s]
        if not isinstance(v, (list, tuple)):
            raise _error(key, f"{key} must be a list of whole numbers, got {v!r}")
        out = []
        for x in v:
            n = whole_number(x)
            if n is None or abs(n) > MAX_DIM:
                raise _error(key, f"{key} must be a list of whole numbers up to {MAX_DIM}, got {v!r}")
            out.append(n)
        return out

    def activations(self) -> int:
        v = self.raw("mlp_activations")
        if isinstance(v, str):
            v = [s for s in v.strip("[]").split(",") if s.strip()]
        if not isinstance(v, (list, tuple)) or not v:
            raise _error("mlp_activations", f"mlp_activations must be a non-empty list, got {v!r}")
        return len(v)


@dataclass
class _Ctx:
    k: _Keys
    block: str
    model: str
    D: int  # emb_dim
    H: int  # num_query_heads
    K: int  # num_kv_heads
    hd: int  # head_dim
    F: int  # mlp_dim
    Fm: int  # moe_mlp_dim (<= 0 when unset)
    L: int  # num_decoder_layers (as MaxText counts them)
    V: int  # vocab_size
    n_in: int  # input matrices of a dense MLP
    experts: int
    top_k: int
    notes: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    extras: list[Extra] = field(default_factory=list)
    final_norm: int = 0

    def src(self, path: str, line: int) -> None:
        s = _src(path, line)
        if s not in self.sources:
            self.sources.append(s)

    def moe_dim(self) -> int:
        if self.Fm <= 0:
            raise _error("base_moe_mlp_dim", f"base_moe_mlp_dim must be > 0 for a MoE model, got {self.Fm}")
        return self.Fm


def _dims(k: _Keys) -> _Ctx:
    from server.perf.arith import individual_scales  # arith imports this module: imported when used

    scale = k.num("global_parameter_scale")
    es, hs, ms, ls = individual_scales(scale)  # configs/types.py:2857, applied at types.py:3396
    block = k.text("decoder_block") or "llama2"
    experts = k.num("num_experts")
    top_k = k.num("num_experts_per_tok")
    if experts > 1 and top_k > experts:
        raise _error("num_experts_per_tok", f"num_experts_per_tok ({top_k}) exceeds num_experts ({experts})")
    moe_base = k.num("base_moe_mlp_dim", minimum=None)
    c = _Ctx(
        k=k,
        block=block,
        model=k.text("model_name"),
        D=k.num("base_emb_dim") * 2**es,
        H=k.num("base_num_query_heads") * 2**hs,
        K=k.num("base_num_kv_heads") * 2**hs,
        hd=k.num("head_dim"),
        F=k.num("base_mlp_dim") * 2**ms,
        Fm=moe_base * 2**ms if moe_base > 0 else moe_base,
        L=k.num("base_num_decoder_layers") * 2**ls,
        V=k.num("vocab_size"),
        n_in=k.activations(),
        experts=experts,
        top_k=top_k,
    )
    c.src("configs/types.py", 3396)
    if c.L > MAX_LAYERS:  # each layer is built one by one below
        raise _error(
            "base_num_decoder_layers",
            f"the model would have {c.L} decoder layers (base_num_decoder_layers x global_parameter_scale's layer "
            f"factor): ASAP prices at most {MAX_LAYERS}",
        )
    if c.H % c.K:
        raise _error("base_num_kv_heads", f"query heads ({c.H}) must be a multiple of kv heads ({c.K})")
    # A fully-MoE qwen3_moe model takes mlp_dim from moe_mlp_dim (configs/types.py:3896).
    fully_moe = (
        k.num("interleave_moe_layer_step", None) == 1
        and k.num("first_num_dense_layers", 0) == 0
        and k.num("inhomogeneous_layer_cycle_interval", None) == 1
    )
    if experts > 1 and fully_moe and block == "qwen3_moe" and c.Fm > 0:
        c.F = c.Fm
    return c


# --------------------------------------------------------------------------------------------------
# Building blocks
# --------------------------------------------------------------------------------------------------


def _mha(
    c: _Ctx,
    *,
    q_heads: int | None = None,
    kv_heads: int | None = None,
    head_dim: int | None = None,
    out_dim: int | None = None,
    window: int = 0,
    chunk: int = 0,
    rope: bool = True,
    qk_norm: str = "",
    v_norm: bool = False,
    bias: bool = False,
    out_bias: bool | None = None,
    sinks: bool = False,
    share_kv_projections: bool = False,
    kv_shared: bool = False,
    q_gate: bool = False,
    qk_scale: bool | None = None,
) -> AttentionSpec:
    """MaxText's Attention (layers/attentions.py:229): query, key, value and out projections
    (_init_projections: attentions.py:648), optional biases (the output's dropped for qwen2:
    attentions.py:833), sinks (477), q/k norms per head or over all heads (486), v norm (542)."""
    H = q_heads or c.H
    K = kv_heads or c.K
    hd = head_dim or c.hd
    out = out_dim or c.D
    q_out = H * hd * (2 if q_gate else 1)
    q = c.D * q_out
    k_w = 0 if kv_shared else c.D * K * hd
    v_w = 0 if (kv_shared or share_kv_projections) else c.D * K * hd
    o = H * hd * out
    params = q + k_w + v_w + o
    if bias:
        params += q_out + (0 if kv_shared else K * hd) + (0 if (kv_shared or share_kv_projections) else K * hd)
    if out_bias if out_bias is not None else bias:
        params += out
    if sinks:
        params += H
    if qk_scale is None:
        qk_scale = c.k.flag("qk_norm_with_scale")
    if qk_norm == "head" and qk_scale:
        params += hd + (0 if kv_shared else hd)
    elif qk_norm == "global" and qk_scale:
        params += H * hd + (0 if kv_shared else K * hd)
    if v_norm and not kv_shared:
        params += hd
    acts = (
        ("query_proj", q_out),
        ("key_proj", 0 if kv_shared else K * hd),
        ("value_proj", 0 if (kv_shared or share_kv_projections) else K * hd),
        ("context", H * hd),
        ("out_proj", out),
    )
    c.src("layers/attentions.py", 648)
    return AttentionSpec(
        kind="mha",
        q_heads=H,
        kv_heads=K,
        qk_head_dim=hd,
        v_head_dim=hd,
        params=params,
        matmul_weights=q + k_w + v_w + o,
        window=window,
        chunk=chunk,
        global_attention=not window and not chunk,
        rope=rope,
        sinks=sinks,
        qk_norm=qk_norm,
        bias=bias,
        kv_shared=kv_shared,
        q_gate=q_gate,
        activations=acts,
    )


def _mla(c: _Ctx) -> AttentionSpec:
    """DeepSeek's multi-head latent attention (layers/attention_mla.py:590, projections at 785): q
    through a low-rank wq_a -> q_norm -> wq_b when q_lora_rank > 0, else one projection; wkv_a to
    kv_lora_rank + rope dims, kv_norm, wkv_b up to per-head nope-K and V; out from v_head_dim. With
    use_indexer (DeepSeek 3.2) the Indexer (attention_mla.py:85): wq_b from the q latent, wk, a
    LayerNorm with bias on the key, weights_proj."""
    k = c.k
    if k.text("attention_type") != "mla":
        raise _error(
            "attention_type", f"the deepseek decoder block needs attention_type: mla, got {k.text('attention_type')!r}"
        )
    if c.H != c.K:
        raise _error("base_num_kv_heads", f"MLA needs as many kv heads as query heads ({c.K} != {c.H})")
    rq = k.num("q_lora_rank", minimum=0)
    rkv = k.num("kv_lora_rank")
    nope = k.num("qk_nope_head_dim")
    rope = k.num("qk_rope_head_dim")
    vd = k.num("v_head_dim")
    H, D = c.H, c.D
    dqk = nope + rope
    q = D * H * dqk if rq == 0 else D * rq + rq * H * dqk
    q_norm = rq
    kv = D * (rkv + rope) + rkv * H * (nope + vd)
    o = H * vd * D
    matmul = q + kv + o
    params = matmul + q_norm + rkv
    acts: list[tuple[str, int]] = []
    if rq:
        acts.append(("mla_q", rq))
    acts += [
        ("mla_kv", rkv + rope),
        ("query_proj", H * dqk),
        ("key_proj", H * dqk),
        ("value_proj", H * vd),
        ("context", H * vd),
        ("out_proj", D),
    ]
    nI = dI = topk = 0
    if k.flag("use_indexer"):
        nI, dI, topk = k.num("indexer_n_heads"), k.num("indexer_head_dim"), k.num("indexer_topk")
        if rq == 0:
            raise _error("q_lora_rank", "the sparse-attention indexer reads the q latent: q_lora_rank must be > 0")
        idx = rq * nI * dI + D * dI + D * nI
        matmul += idx
        params += idx + 2 * dI
        c.src("layers/attention_mla.py", 85)
    c.src("layers/attention_mla.py", 785)
    return AttentionSpec(
        kind="mla",
        q_heads=H,
        kv_heads=H,
        qk_head_dim=dqk,
        v_head_dim=vd,
        params=params,
        matmul_weights=matmul,
        q_lora_rank=rq,
        kv_lora_rank=rkv,
        rope_head_dim=rope,
        indexer_heads=nI,
        indexer_head_dim=dI,
        indexer_topk=topk,
        activations=tuple(acts),
    )


def _compressed(c: _Ctx, ratio: int) -> AttentionSpec:
    """DeepSeek V4's CompressedAttention (layers/attention_compressed.py:1099, projections at 1206):
    q through wq_a -> q_norm -> wq_b (+ an unweighted per-head norm), one shared K=V projection (wkv)
    with kv_norm, per-head sinks, a grouped low-rank output (o_a: grouped, o_b). HCA layers (ratio > 4)
    add a compressor (kv/gate projections to head_dim, position bias, norm: 428/504); CSA layers
    (ratio 4) a compressor at 2 x head_dim plus an indexer (665, 917)."""
    k = c.k
    D, H, K, hd = c.D, c.H, c.K, c.hd
    rq = k.num("q_lora_rank")
    groups = k.num("o_groups")
    o_rank = k.num("o_lora_rank")
    if (H * hd) % groups:
        raise _error("o_groups", f"o_groups ({groups}) must divide num_query_heads x head_dim ({H * hd})")
    q = D * rq + rq * H * hd
    kv = D * K * hd
    o = H * hd * o_rank + groups * o_rank * D
    matmul = q + kv + o
    params = matmul + rq + hd + H  # q_norm, kv_norm, sinks
    nI = dI = topk = 0
    acts: list[tuple[str, int]] = [
        ("mla_q", rq),
        ("query_proj", H * hd),
        ("key_proj", K * hd),
        ("context", H * hd),
        ("out_proj", D),
    ]
    if ratio > 4:
        comp = 2 * D * hd
        matmul += comp
        params += comp + ratio * hd + hd
        acts.append(("compressor", 2 * hd))
    elif ratio == 4:
        comp = 2 * D * 2 * hd
        nI, dI, topk = k.num("indexer_n_heads"), k.num("indexer_head_dim"), k.num("indexer_topk")
        idx = rq * nI * dI + 2 * D * 2 * dI + D * nI
        matmul += comp + idx
        params += comp + ratio * 2 * hd + hd + idx + ratio * 2 * dI + dI
        acts.append(("compressor", 4 * hd + 4 * dI + nI * dI))
    elif ratio != 0:
        raise _error("compress_ratios", f"compress_ratios entries must be 0, 4 or > 4, got {ratio}")
    c.src("layers/attention_compressed.py", 1206)
    return AttentionSpec(
        kind="compressed",
        q_heads=H,
        kv_heads=K,
        qk_head_dim=hd,
        v_head_dim=hd,
        params=params,
        matmul_weights=matmul,
        window=k.num("sliding_window_size"),
        global_attention=False,
        sinks=True,
        q_lora_rank=rq,
        indexer_heads=nI,
        indexer_head_dim=dI,
        indexer_topk=topk,
        compress_ratio=ratio,
        activations=tuple(acts),
    )


def _gated_delta(c: _Ctx) -> AttentionSpec:
    """Qwen3-Next / 3.5 gated delta net (models/qwen3.py:433): in_proj_qkvz (2 key dims + 2 value
    dims), in_proj_ba (2 per value head), a depthwise causal conv over q/k/v, A_log and dt_bias per
    value head, a gated RMSNorm over the value head dim, out_proj."""
    k = c.k
    Hk, Hv = k.num("gdn_num_key_heads"), k.num("gdn_num_value_heads")
    dk, dv = k.num("gdn_key_head_dim"), k.num("gdn_value_head_dim")
    conv, chunk = k.num("gdn_conv_kernel_dim"), k.num("gdn_chunk_size")
    if Hv % Hk:
        raise _error(
            "gdn_num_value_heads", f"gdn_num_value_heads ({Hv}) must be a multiple of gdn_num_key_heads ({Hk})"
        )
    kd, vd = Hk * dk, Hv * dv
    proj = c.D * (2 * kd + 2 * vd) + c.D * 2 * Hv
    conv_w = conv * (2 * kd + vd)
    out = vd * c.D
    matmul = proj + conv_w + out
    c.src("models/qwen3.py", 433)
    return AttentionSpec(
        kind="gated_delta",
        q_heads=Hv,
        kv_heads=Hk,
        qk_head_dim=dk,
        v_head_dim=dv,
        params=matmul + 2 * Hv + dv,
        matmul_weights=matmul,
        global_attention=False,
        rope=False,
        conv_kernel=conv,
        gdn_chunk=chunk,
        activations=(
            ("query_proj", kd),
            ("key_proj", kd),
            ("value_proj", vd),
            ("gdn_z", vd),
            ("context", vd),
            ("out_proj", c.D),
        ),
    )


def _dense(c: _Ctx, mlp_dim: int | None = None, *, in_dim: int | None = None, bias: bool = False) -> FFNSpec:
    """MaxText's MlpBlock (layers/linears.py:422): one input matrix per mlp_activations entry (wi_0,
    wi_1, or a single wi), wo, optional biases."""
    F = c.F if mlp_dim is None else mlp_dim
    d = in_dim or c.D
    w = (c.n_in + 1) * d * F
    p = w + ((c.n_in * F + d) if bias else 0)
    c.src("layers/linears.py", 422)
    return FFNSpec(
        kind="dense",
        in_dim=d,
        mlp_dim=F,
        n_in=c.n_in,
        params=p,
        active_params=p,
        matmul_weights=w,
        bias=bias,
        activations=(("mlpwi", c.n_in * F), ("mlpwo", d)),
    )


def _moe(
    c: _Ctx,
    expert_dim: int,
    *,
    in_dim: int | None = None,
    shared_dim: int = 0,
    shared_count: int = 0,
    shared_gate: bool = False,
    router_bias: bool | None = None,
    per_expert_scale: bool = False,
    hash_routing: bool = False,
) -> FFNSpec:
    """Routed experts (RoutedMoE, layers/moe.py:395): a router (GateLogit, moe.py:247, with a bias
    when routed_bias), wi_0 and wi_1 (num_experts x in x mlp) and wo; mlp_bias adds per-expert biases
    (moe.py:617); Gemma 4 a per-expert scale (640). Shared experts (RoutedAndSharedMoE, moe.py:3259)
    are one MlpBlock of shared_experts x shared dim."""
    k = c.k
    E, top = c.experts, c.top_k
    d = in_dim or c.D
    F = expert_dim
    padded = k.raw("padded_base_moe_mlp_dim")
    wi = int(padded) if isinstance(padded, int) and not isinstance(padded, bool) and padded > 0 else F
    per_expert = 2 * d * wi + F * d
    mlp_bias = k.flag("mlp_bias")
    per_expert_b = (2 * F + d) if mlp_bias else 0
    rb = k.flag("routed_bias") if router_bias is None else router_bias
    router = d * E + (E if rb and not hash_routing else 0)
    shared_w = (c.n_in + 1) * d * shared_dim if shared_dim else 0
    gate = d if shared_gate else 0
    pes = E if per_expert_scale else 0
    params = E * (per_expert + per_expert_b) + router + shared_w + gate + pes
    active = top * (per_expert + per_expert_b) + router + shared_w + gate + pes
    matmul = top * per_expert + d * E + shared_w + gate
    c.src("layers/moe.py", 395)
    if shared_dim:
        c.src("layers/moe.py", 3259)
    acts = [
        ("moe_dispatch", top * d),
        ("mlpwi", top * 2 * wi + (c.n_in * shared_dim if shared_dim else 0)),
        ("mlpwo", top * d + (d if shared_dim else 0)),
    ]
    return FFNSpec(
        kind="moe",
        in_dim=d,
        mlp_dim=F,
        n_in=2,
        params=params,
        active_params=active,
        matmul_weights=matmul,
        experts=E,
        top_k=top,
        shared_experts=shared_count,
        shared_dim=shared_dim,
        router_bias=rb and not hash_routing,
        bias=mlp_bias,
        hash_routing=hash_routing,
        activations=tuple(acts),
    )


def _mhc(c: _Ctx) -> tuple[int, int]:
    """One manifold-constrained hyper connection (layers/mhc.py:78): a norm over k x D, three scalars,
    res/pre/post alpha matrices (k·D x k², k, k; k! instead of k² with mHC-lite) and their biases.
    Returns (params, matmul weights)."""
    r = c.k.num("mhc_expansion_rate")
    res = math.factorial(r) if c.k.flag("enable_mhc_lite") else r * r
    w = r * c.D * (res + 2 * r)
    return w + r * c.D + 3 + res + 2 * r, w


def _layer(
    c: _Ctx,
    attn: AttentionSpec,
    ffn: FFNSpec,
    norms: int,
    *,
    extra: int = 0,
    extra_matmul: int = 0,
    extra_acts: tuple[tuple[str, int], ...] = (),
    what: str = "",
) -> LayerGroup:
    rate = c.k.num("mhc_expansion_rate")
    return LayerGroup(
        count=1,
        attention=attn,
        ffn=ffn,
        norms=norms,
        extra=extra,
        extra_matmul=extra_matmul,
        extra_activations=extra_acts,
        residual=c.D * (rate if rate > 1 else 1),
        what=what,
    )


def _group(layers: list[LayerGroup]) -> tuple[LayerGroup, ...]:
    """Merge identical layers into groups, in order of first appearance."""
    out: dict[LayerGroup, int] = {}
    for layer in layers:
        key = replace(layer, count=1)
        out[key] = out.get(key, 0) + layer.count
    return tuple(replace(g, count=n) for g, n in out.items())


# --------------------------------------------------------------------------------------------------
# Decoder blocks
# --------------------------------------------------------------------------------------------------


def _llama2(c: _Ctx) -> list[LayerGroup]:
    """llama2 / mistral / default: pre-attention RMSNorm, attention, post-attention RMSNorm, MLP
    (models/llama2.py:43, models/mistral.py:39). Global causal attention: the layer never passes
    attention_type, so the config's is not used (layers/attention_op.py:89)."""
    c.src("models/llama2.py" if c.block != "mistral" else "models/mistral.py", 43 if c.block != "mistral" else 39)
    return [replace(_layer(c, _mha(c), _dense(c), 2 * c.D), count=c.L)]


def _gemma(c: _Ctx) -> list[LayerGroup]:
    """Gemma 1 (models/gemma.py:37): pre-attention and pre-FFW RMSNorms."""
    c.src("models/gemma.py", 37)
    return [replace(_layer(c, _mha(c), _dense(c), 2 * c.D), count=c.L)]


def _gemma_norms(c: _Ctx) -> int:
    k = c.k
    return c.D * (2 + int(k.flag("use_post_attn_norm")) + int(k.flag("use_post_ffw_norm")))


def _gemma2(c: _Ctx) -> list[LayerGroup]:
    """Gemma 2 (models/gemma2.py:38): each MaxText layer is a local (sliding-window) and a global
    attention layer, each with its own MLP and pre/post norms; base_num_decoder_layers counts pairs."""
    w = c.k.num("sliding_window_size")
    if w <= 0:
        raise _error("sliding_window_size", "gemma2's local layers need sliding_window_size > 0")
    norms = _gemma_norms(c)
    local = _layer(c, _mha(c, window=w), _dense(c), norms)
    glob = _layer(c, _mha(c), _dense(c), norms)
    c.notes.append(
        "Gemma 2: each MaxText layer is a local and a global attention layer (layers = 2 x num_decoder_layers)"
    )
    c.src("models/gemma2.py", 38)
    return [replace(local, count=c.L), replace(glob, count=c.L)]


def _gemma3(c: _Ctx) -> list[LayerGroup]:
    """Gemma 3 (models/gemma3.py:63): pattern of 5 sliding-window layers then 1 global
    (GEMMA3_ATTENTION_PATTERN, gemma3.py:37, by layer index), q/k norms per head, pre/post norms."""
    w = c.k.num("sliding_window_size")
    norms = _gemma_norms(c)
    qk = "head"  # Gemma 3 always builds q/k norms (models/gemma3.py:125)
    local = _layer(c, _mha(c, window=w, qk_norm=qk), _dense(c), norms)
    glob = _layer(c, _mha(c, qk_norm=qk), _dense(c), norms)
    c.src("models/gemma3.py", 37)
    return [glob if i % 6 == 5 else local for i in range(c.L)]


def _gemma4_ffn(c: _Ctx) -> tuple[FFNSpec, int]:
    """Gemma 4's FFN: dense, or (num_experts > 1) Gemma4MoE (models/gemma4.py:57): routed experts at
    moe_mlp_dim with a per-expert scale, a shared MLP at shared_experts x mlp_dim, and four more
    norm-sized parameters (a router scale and three RMSNorms; the gate norm has no scale)."""
    if c.experts > 1:
        shared = c.k.num("shared_experts", minimum=0)
        c.src("models/gemma4.py", 57)
        return _moe(c, c.moe_dim(), shared_dim=shared * c.F, shared_count=shared, per_expert_scale=True), 4 * c.D
    return _dense(c), 0


def _gemma4(c: _Ctx) -> list[LayerGroup]:
    """Gemma 4 (models/gemma4.py:150): 5 local : 1 global (gemma4.py:42); global layers use
    global_num_kv_heads / global_head_dim and, with share_kv_projections, one K=V projection; q/k/v
    norms (the v norm without scale unless v_norm_with_scale); a layer scalar."""
    k = c.k
    w = k.num("sliding_window_size")
    gkv = k.num("global_num_kv_heads", minimum=0) or c.K
    ghd = k.num("global_head_dim", minimum=0) or c.hd
    share = k.flag("share_kv_projections")
    qk = "head"
    vn = k.flag("v_norm_with_scale")
    ffn, ffn_norms = _gemma4_ffn(c)
    norms = _gemma_norms(c) + ffn_norms
    local = _layer(c, _mha(c, window=w, qk_norm=qk, v_norm=vn), ffn, norms, extra=1)
    glob_attn = _mha(c, kv_heads=gkv, head_dim=ghd, qk_norm=qk, v_norm=vn, share_kv_projections=share)
    glob = _layer(c, glob_attn, ffn, norms, extra=1)
    c.src("models/gemma4.py", 150)
    return [glob if i % 6 == 5 else local for i in range(c.L)]


def _gemma4_small(c: _Ctx) -> list[LayerGroup]:
    """Gemma 4 small, E2B/E4B (models/gemma4_small.py:227): sliding:global 4:1 for gemma4-e2b, 5:1
    otherwise (gemma4_small.py:38, by model_name); the last num_kv_shared_layers layers reuse K/V of an
    earlier layer (no K/V projections, gemma4_small.py:80) and, with use_double_wide_mlp, have a 2x MLP;
    four norms, a layer scalar and, with per-layer embeddings, a per-layer gate/projection/norm.
    The per-layer embedding table and its projection are decoder-level (Gemma4SmallPLE, 147)."""
    k = c.k
    period = 5 if c.model == "gemma4-e2b" else 6
    n_shared = k.num("num_kv_shared_layers", minimum=0)
    first = c.L - n_shared if n_shared > 0 else c.L
    double = k.flag("use_double_wide_mlp")
    ple = k.num("hidden_size_per_layer_input", minimum=0)
    vocab_ple = k.num("vocab_size_per_layer_input", minimum=0)
    w = k.num("sliding_window_size")
    gkv = k.num("global_num_kv_heads", minimum=0) or c.K
    ghd = k.num("global_head_dim", minimum=0) or c.hd
    qk = "head"
    vn = k.flag("v_norm_with_scale")
    extra = 1 + ((2 * c.D * ple + c.D) if ple else 0)
    extra_mm = 2 * c.D * ple if ple else 0
    out = []
    for i in range(c.L):
        is_global = i % period == period - 1
        shared = i >= first > 0
        if is_global:
            attn = _mha(c, kv_heads=gkv, head_dim=ghd, qk_norm=qk, v_norm=vn, kv_shared=shared)
        else:
            attn = _mha(c, window=w, qk_norm=qk, v_norm=vn, kv_shared=shared)
        ffn = _dense(c, 2 * c.F if shared and double else c.F)
        acts = (("per_layer_input", ple),) if ple else ()
        out.append(
            _layer(
                c, attn, ffn, 4 * c.D, extra=extra, extra_matmul=extra_mm, extra_acts=acts, what="ple" if ple else ""
            )
        )
    if ple and vocab_ple:
        table = vocab_ple * c.L * ple
        proj = c.D * c.L * ple
        c.extras.append(
            Extra(
                "per_layer_embeddings",
                table + proj + ple,
                table + proj + ple,
                proj,
                _src("models/gemma4_small.py", 147),
            )
        )
    if n_shared:
        c.notes.append(
            f"Gemma 4 small: the last {n_shared} layers reuse K/V of earlier layers"
            + (" and have a 2x MLP" if double else "")
        )
    c.src("models/gemma4_small.py", 227)
    return out


def _gpt3(c: _Ctx) -> list[LayerGroup]:
    """GPT-3 (models/gpt3.py:392): LayerNorms with bias before attention and (MlpBlock's pre-norm)
    before the MLP, fused QKV with biases on every projection (gpt3.py:166), MLP with biases; as many
    kv heads as query heads."""
    attn = _mha(c, kv_heads=c.H, bias=True)
    c.src("models/gpt3.py", 392)
    return [replace(_layer(c, attn, _dense(c, bias=True), 4 * c.D), count=c.L)]


def _gpt_oss(c: _Ctx) -> list[LayerGroup]:
    """gpt-oss (models/gpt_oss.py:57): alternating sliding-window and global layers (gpt_oss.py:45),
    attention with biases (attention_bias) and sinks (attention_sink), RoutedMoE at mlp_dim with
    expert biases (mlp_bias) and a router bias (routed_bias)."""
    k = c.k
    w = k.num("sliding_window_size")
    bias, sinks = k.flag("attention_bias"), k.flag("attention_sink")
    ffn = _moe(c, c.F)
    local = _layer(c, _mha(c, window=w, bias=bias, sinks=sinks), ffn, 2 * c.D)
    glob = _layer(c, _mha(c, bias=bias, sinks=sinks), ffn, 2 * c.D)
    c.src("models/gpt_oss.py", 45)
    return [glob if i % 2 == 1 else local for i in range(c.L)]


def _mixtral(c: _Ctx) -> list[LayerGroup]:
    """Mixtral (models/mixtral.py:40): llama2 attention, RoutedMoE whose experts are mlp_dim wide."""
    c.src("models/mixtral.py", 40)
    return [replace(_layer(c, _mha(c), _moe(c, c.F), 2 * c.D), count=c.L)]


def _llama4(c: _Ctx) -> list[LayerGroup]:
    """Llama 4 (models/llama4.py:308): every nope_layer_interval-th layer (1-based) is a global NoPE
    layer, the others chunked attention (chunk_attn_window_size); every interleave_moe_layer_step-th
    layer is MoE (routed experts at moe_mlp_dim plus shared experts), the rest dense at mlp_dim
    (llama4.py:267, 281). Q/K L2-norm: no parameters."""
    k = c.k
    nope_every = k.num("nope_layer_interval", minimum=None)
    moe_every = k.num("interleave_moe_layer_step", minimum=None)
    chunk = k.num("chunk_attn_window_size", minimum=0)
    qk = "l2" if k.flag("use_qk_norm") else ""
    shared = k.num("shared_experts", minimum=0)
    out = []
    for i in range(c.L):
        nope = nope_every > 0 and (i + 1) % nope_every == 0
        is_moe = c.experts > 1 and moe_every > 0 and (i + 1) % moe_every == 0
        attn = _mha(c, rope=False, qk_norm=qk) if nope else _mha(c, chunk=chunk, qk_norm=qk)
        ffn = _moe(c, c.moe_dim(), shared_dim=shared * c.moe_dim(), shared_count=shared) if is_moe else _dense(c)
        out.append(_layer(c, attn, ffn, 2 * c.D))
    c.src("models/llama4.py", 267)
    return out


def _engram(c: _Ctx) -> tuple[int, int]:
    """Engram memory (layers/engram.py:496) on a DeepSeek layer: n-gram hash embeddings (one table per
    head and n-gram order, each a prime >= its engram_vocab_bases entry, engram.py:222: counted at the
    base), key (per mHC branch) and value projections with biases, per-branch norms, a depthwise
    causal conv, plus the layer's engram norm (models/deepseek.py:106). Returns (params, matmul)."""
    k = c.k
    heads, hdim = k.num("engram_num_heads"), k.num("engram_head_dim")
    orders = k.num("engram_max_ngram_size", minimum=2) - 1
    bases = k.ints("engram_vocab_bases")
    if len(bases) != orders:
        raise _error(
            "engram_vocab_bases", f"engram_vocab_bases needs {orders} entries (max_ngram_size - 1), got {bases}"
        )
    g = max(1, k.num("mhc_expansion_rate"))
    kernel = k.num("engram_kernel_size")
    edim = hdim * heads * orders
    table = sum(heads * b for b in bases) * hdim
    proj = edim * g * c.D + edim * c.D
    params = table + proj + g * c.D + c.D + 2 * g * c.D + g * c.D + kernel * g * c.D + c.D
    c.src("layers/engram.py", 496)
    return params, proj + kernel * g * c.D


def _deepseek(c: _Ctx) -> list[LayerGroup]:
    """DeepSeek 2/3/3.2, Kimi-K2 (models/deepseek.py:54): MLA, first_num_dense_layers dense layers
    (DeepSeekDenseLayer, 315) then MoE layers with routed experts at moe_mlp_dim and shared experts
    (DeepSeekMoELayer, 401); with mhc_expansion_rate > 1 two hyper connections per layer (178);
    engram on the engram_layers indices."""
    k = c.k
    dense_n = k.num("first_num_dense_layers", minimum=0)
    if dense_n > c.L:
        raise _error("first_num_dense_layers", f"first_num_dense_layers ({dense_n}) exceeds the layers ({c.L})")
    attn = _mla(c)
    shared = k.num("shared_experts", minimum=0)
    moe = _moe(c, c.moe_dim(), shared_dim=shared * c.moe_dim(), shared_count=shared) if c.experts > 1 else None
    extra = extra_mm = 0
    what = ""
    if k.num("mhc_expansion_rate") > 1:
        p, w = _mhc(c)
        extra, extra_mm, what = 2 * p, 2 * w, "mhc"
        c.src("layers/mhc.py", 78)
    engram = set(k.ints("engram_layers"))
    e_p = e_w = 0
    if engram:
        e_p, e_w = _engram(c)
        c.notes.append("engram tables are counted at their configured vocab bases (MaxText rounds each up to a prime)")
    out = []
    for i in range(c.L):
        ffn = _dense(c) if i < dense_n or moe is None else moe
        if i in engram:
            out.append(
                _layer(
                    c,
                    attn,
                    ffn,
                    2 * c.D,
                    extra=extra + e_p,
                    extra_matmul=extra_mm + e_w,
                    what=(what + "+engram").lstrip("+"),
                )
            )
        else:
            out.append(_layer(c, attn, ffn, 2 * c.D, extra=extra, extra_matmul=extra_mm, what=what))
    c.src("models/deepseek.py", 54)
    return out


def _deepseek4(c: _Ctx) -> list[LayerGroup]:
    """DeepSeek V4 (models/deepseek4.py:34): every layer MoE (routed + shared at moe_mlp_dim), the first
    first_num_hash_layers routed by a token-id table (not a parameter), compressed attention with
    compress_ratios[i] (0: sliding window, 4: CSA, 128: HCA), two hyper connections per layer and a
    hyper head before the final norm (layers/mhc.py:375). The router bias is a non-trainable
    MoEBiasVar (layers/moe.py:247), not counted."""
    k = c.k
    ratios = k.ints("compress_ratios")
    hash_n = k.num("first_num_hash_layers", minimum=0)
    shared = k.num("shared_experts", minimum=0)
    rate = k.num("mhc_expansion_rate")
    extra = extra_mm = 0
    if rate > 1:
        p, w = _mhc(c)
        extra, extra_mm = 2 * p, 2 * w
        c.extras.append(
            Extra(
                "hyper_head",
                rate * c.D * rate + rate + 1,
                rate * c.D * rate + rate + 1,
                rate * c.D * rate,
                _src("layers/mhc.py", 375),
            )
        )
    if len(ratios) < c.L:
        # The scanned path (layers/nnx_decoders.py:553) runs the hash layers unrolled, then [128, 4] blocks.
        c.notes.append("compress_ratios shorter than the layers: the rest follow the scanned [128, 4] blocks")
        ratios = ratios + [128 if (i - max(hash_n, len(ratios))) % 2 == 0 else 4 for i in range(len(ratios), c.L)]
    out = []
    for i in range(c.L):
        ffn = _moe(
            c,
            c.moe_dim(),
            shared_dim=shared * c.moe_dim(),
            shared_count=shared,
            router_bias=False,
            hash_routing=i < hash_n,
        )
        out.append(
            _layer(
                c,
                _compressed(c, ratios[i]),
                ffn,
                2 * c.D,
                extra=extra,
                extra_matmul=extra_mm,
                what="mhc" if rate > 1 else "",
            )
        )
    if hash_n:
        c.notes.append(f"DeepSeek V4: the first {hash_n} layers route by a token-id table (vocab x top-k, not trained)")
    c.src("models/deepseek4.py", 34)
    return out


def _qwen2(c: _Ctx) -> list[LayerGroup]:
    """Qwen 2 / 2.5 (models/qwen2.py:151): q/k/v biases with attention_bias, none on the output
    (layers/attentions.py:833); optional per-head q/k norms."""
    k = c.k
    attn = _mha(c, bias=k.flag("attention_bias"), out_bias=False, qk_norm="head" if k.flag("use_qk_norm") else "")
    c.src("models/qwen2.py", 151)
    return [replace(_layer(c, attn, _dense(c), 2 * c.D), count=c.L)]


def _qwen3_attn(c: _Ctx) -> AttentionSpec:
    return _mha(c, qk_norm="head" if c.k.flag("use_qk_norm") else "")


def _qwen3(c: _Ctx) -> list[LayerGroup]:
    """Qwen 3 dense (models/qwen3.py:1529; attention with per-head q/k norms: AttentionWithNorm, 1421)."""
    c.src("models/qwen3.py", 1529)
    return [replace(_layer(c, _qwen3_attn(c), _dense(c), 2 * c.D), count=c.L)]


def _qwen3_moe(c: _Ctx) -> list[LayerGroup]:
    """Qwen 3 MoE (models/qwen3.py:1592): RoutedMoE at moe_mlp_dim, no shared expert."""
    c.src("models/qwen3.py", 1592)
    return [replace(_layer(c, _qwen3_attn(c), _moe(c, c.moe_dim()), 2 * c.D), count=c.L)]


def _qwen3_custom(c: _Ctx) -> list[LayerGroup]:
    """qwen3_custom_moe (models/qwen3_custom.py:67): the attention projects to attention_output_dim
    (37), a latent norm, routed experts over moe_expert_input_dim (= attention_output_dim), and an
    up-projection back to emb_dim."""
    k = c.k
    a = k.num("attention_output_dim")
    m = k.num("moe_expert_input_dim")
    if a != m:
        raise _error("moe_expert_input_dim", f"moe_expert_input_dim ({m}) must equal attention_output_dim ({a})")
    attn = _mha(c, out_dim=a, qk_norm="head" if k.flag("use_qk_norm") else "")
    up = a * c.D if a != c.D else 0
    c.src("models/qwen3_custom.py", 67)
    layer = _layer(
        c, attn, _moe(c, c.moe_dim(), in_dim=a), 2 * c.D + a, extra=up, extra_matmul=up, what="up-proj" if up else ""
    )
    return [replace(layer, count=c.L)]


def _qwen3_next(c: _Ctx) -> list[LayerGroup]:
    """Qwen3-Next and Qwen 3.5 (models/qwen3.py:1279, models/qwen3_5.py:111): every
    inhomogeneous_layer_cycle_interval-th layer full attention with an output gate in the query
    projection and per-head q/k norms (qwen3.py:1017), the others a gated delta net (433); every layer
    MoE with one shared expert at moe_mlp_dim and a shared-expert gate (1107)."""
    cycle = c.k.num("inhomogeneous_layer_cycle_interval")
    ffn = _moe(c, c.moe_dim(), shared_dim=c.moe_dim(), shared_count=1, shared_gate=True)
    # With use_qk_norm the norms follow qk_norm_with_scale; otherwise Qwen3NextRMSNorm, always scaled
    # (layers/attentions.py:486, 521).
    qk_scale = None if c.k.flag("use_qk_norm") else True
    full = _layer(c, _mha(c, qk_norm="head", qk_scale=qk_scale, q_gate=True), ffn, 2 * c.D)
    linear = _layer(c, _gated_delta(c), ffn, 2 * c.D)
    c.src("models/qwen3.py", 1279)
    return [full if (i + 1) % cycle == 0 else linear for i in range(c.L)]


def _envy(c: _Ctx) -> list[LayerGroup]:
    """Envy (models/envy.py:37): every interleave_moe_layer_step-th layer (1-based) a RoutedMoE at
    moe_mlp_dim, the others dense; per-head q/k norms; a post-FFW norm with use_post_ffw_norm."""
    k = c.k
    step = k.num("interleave_moe_layer_step", minimum=None)
    norms = c.D * (2 + int(k.flag("use_post_ffw_norm")))
    attn = _qwen3_attn(c)
    out = []
    for i in range(c.L):
        is_moe = c.experts > 1 and step > 0 and (i + 1) % step == 0
        out.append(_layer(c, attn, _moe(c, c.moe_dim()) if is_moe else _dense(c), norms))
    c.src("models/envy.py", 37)
    return out


def _olmo3(c: _Ctx) -> list[LayerGroup]:
    """OLMo 3 (models/olmo3.py:61): 3 sliding-window layers then 1 global (olmo3.py:47), q/k norms
    over all heads (GlobalRMSNorm, layers/attentions.py:486), post-attention and post-MLP norms."""
    k = c.k
    w = k.num("sliding_window_size")
    qk = "global" if k.flag("use_qk_norm") else ""
    bias = k.flag("attention_bias")
    local = _layer(c, _mha(c, window=w, qk_norm=qk, bias=bias), _dense(c), 2 * c.D)
    glob = _layer(c, _mha(c, qk_norm=qk, bias=bias), _dense(c), 2 * c.D)
    c.src("models/olmo3.py", 47)
    return [glob if i % 4 == 3 else local for i in range(c.L)]


_BUILDERS: dict[str, Callable[[_Ctx], list[LayerGroup]]] = {
    "default": _llama2,
    "llama2": _llama2,
    "mistral": _llama2,
    "mixtral": _mixtral,
    "gemma": _gemma,
    "gemma2": _gemma2,
    "gemma3": _gemma3,
    "gemma4": _gemma4,
    "gemma4_small": _gemma4_small,
    "gpt3": _gpt3,
    "gpt_oss": _gpt_oss,
    "llama4": _llama4,
    "deepseek": _deepseek,
    "deepseek4": _deepseek4,
    "qwen2": _qwen2,
    "qwen3": _qwen3,
    "qwen3_moe": _qwen3_moe,
    "qwen3_custom_moe": _qwen3_custom,
    "qwen3_next": _qwen3_next,
    "qwen3_5": _qwen3_next,
    "envy": _envy,
    "olmo3": _olmo3,
}

DECODER_BLOCKS = tuple(_BUILDERS)

# Decoder blocks MaxText scans in blocks of several layers (layers/nnx_decoders.py at maxtext 0.2.5): Gemma 3 and 4 by
# their attention pattern (5 local, 1 global: _init_scanned_gemma3, 712; gemma4, 741), the `get_scannable` ones
# (1234-1249) by inhomogeneous_layer_cycle_interval (_init_scanned_generic, 823).
PATTERN_BLOCKS = {"gemma3": 6, "gemma4": 6}
CYCLE_BLOCKS = frozenset({"deepseek4", "gpt_oss", "qwen3_next", "qwen3_5", "llama4", "olmo3", "envy"})


def scan_block(block: str, k: _Keys) -> int:
    """MaxText layers in one iteration of the layer scan of this decoder block (1: a layer a step)."""
    if block in PATTERN_BLOCKS:
        return PATTERN_BLOCKS[block]
    if block in CYCLE_BLOCKS:
        return max(1, k.num("inhomogeneous_layer_cycle_interval", minimum=0) or 1)
    return 1


def build(get: Getter) -> Architecture:
    """The text decoder MaxText builds for the config behind `get(key, default=None)`.

    Raises ArithError(key, message) for a value MaxText cannot build from (a non-numeric or zero
    dimension, more experts per token than experts, ...). An unknown decoder_block is priced as the
    llama2-style dense block, with a note.
    """
    k = _Keys(get)
    c = _dims(k)
    builder = _BUILDERS.get(c.block)
    if builder is None:
        c.notes.append(f"unknown decoder_block {c.block!r}: priced as the llama2-style dense block")
        builder = _llama2
    if c.experts <= 1 and builder in (_llama4, _envy):
        c.notes.append(f"num_experts=1: the {c.block} MoE layers are priced as dense MLPs")
    if c.experts > 1 and builder in (_llama2, _gemma, _gemma2, _gemma3, _qwen2, _qwen3, _olmo3, _gpt3):
        c.notes.append(f"num_experts={c.experts} is ignored: the {c.block} decoder block has no MoE layers")
    groups = _group(builder(c))

    # Decoder-level parameters (layers/nnx_decoders.py:380): token embedding (models/models.py:353),
    # final norm (nnx_decoders.py:414, 1270), logits unless tied (422), GPT-3's position embedding (401).
    c.src("models/models.py", 353)
    c.src("layers/nnx_decoders.py", 414)
    norm = 2 * c.D if c.block == "gpt3" else c.D
    extras = [Extra("final_norm", norm, norm, 0, _src("layers/nnx_decoders.py", 414)), *c.extras]
    pos = k.num("trainable_position_size", minimum=None)
    if pos > 0:
        extras.append(Extra("position_embedding", pos * c.D, pos * c.D, 0, _src("layers/nnx_decoders.py", 401)))
    mtp = k.num("mtp_num_layers", minimum=0)
    if mtp:
        last = groups[-1]
        per = 2 * c.D + 2 * c.D * c.D
        extras.append(
            Extra(
                "mtp",
                mtp * (per + last.params),
                mtp * (per + last.active_params),
                mtp * (2 * c.D * c.D + int(last.matmul_flops) // 2),
                _src("layers/multi_token_prediction.py", 152),
            )
        )
        c.notes.append(f"{mtp} multi-token-prediction module(s), each a copy of the last decoder layer")
    tied = k.flag("logits_via_embedding")
    vision = k.text("vision_encoder_block").lower() not in ("", "none") or k.flag("use_multimodal")
    if vision or k.flag("use_audio"):
        what = "vision/audio" if k.flag("use_audio") else "vision"
        c.notes.append(f"{what}-language model: text decoder only (the {what} encoder is not counted)")
    return Architecture(
        name=c.model,
        decoder_block=c.block,
        emb_dim=c.D,
        vocab=c.V,
        groups=groups,
        embedding=c.V * c.D,
        logits=0 if tied else c.D * c.V,
        extras=tuple(extras),
        maxtext_layers=c.L,
        scan_block=scan_block(c.block, k),
        notes=tuple(c.notes),
        sources=tuple(c.sources),
    )
