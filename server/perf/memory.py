"""HBM per chip: weights, gradients and optimizer state divided by the axes that shard them,
activations kept for the backward pass under the remat policy, the loss' buffers (logits, the
gathered output head) and one layer's backward working set (with MoE dispatch and context
parallelism's gathered keys and values), the peak being the larger of the loss and the backward
phase; compared with the slice's HBM. The buffers are those the TPU compiler's buffer assignment
of MaxText's own train step shows (bench/memory_vs_compiler.py, tests/data/verify/memory_compiled.json).

Formulas: DOMAIN.md §4 (state bytes = params x bytes/param / S_w, S_w = product of the axes
that shard weights, `data` excluded; activations = layers x local tokens x kept bytes).
"""

from __future__ import annotations

from dataclasses import dataclass

from server.perf.arith import BytesPerParam, Params, Shape
from server.perf.layout import CONTEXT, DATA, TENSOR, WEIGHT_SHARDING, Layout
from server.perf.remat import RematPolicy

ACT_BYTES = 2  # bf16 activations (`dtype`)
# XLA's temporaries beyond what the model keeps: the working set of one layer's backward pass
# (each of its tensors once more) and one layer's gathered bf16 weights (XLA gathers them matrix
# by matrix, prefetching the next). A stated allowance, not a measurement: compile for the slice
# (issue 8) for the exact figure; `Memory.verdict` leaves a band for it (TIGHT_BAND).
TEMP_LAYERS = 1.0
# The loss, as the TPU compiler lays it out for MaxText's own train step (libtpu 0.0.52, maxtext 0.2.5; buffer
# assignments of bench/memory_vs_compiler.py's llama3 cases, named below). With `num_vocab_tiling: 1` the loss is the
# step's memory peak at large vocabularies: besides the kept activations, the compiler holds
#   - two bf16 [tokens, vocab / tensor] buffers, the logits (the output head's dot, `fusion.427{1}`) and one more of
#     their shape (their gradient, `multiply_convert_fusion`, or the softmax's exponentials, a `reduce_sum` fusion):
#     llama3-8b on v6e-16 fsdp 16, pdbs 2, seq 8192: 2 x bf16[2,8192,128256] (3.91 GiB each); the same at fsdp 32,
#     64 and 128 (v6e-32/64/128, pdbs 1: 2 x bf16[8192,128256]) and at fsdp 4 x tensor 4 (2 x bf16[8,2048,32064]).
#     MaxText casts the logits to float32 (`cast_logits_to_fp32`) but XLA fuses the cast into the softmax, so no
#     float32 [tokens, vocab] buffer exists.
#   - the output head's weight gathered in bf16, [emb, vocab / tensor] (`all-gather.21`, bf16[4096,128256]).
#   - the final hidden state in float32 and bf16 (the final norm; f32[2,8192,4096] and bf16[2,8192,4096]).
LOGITS_BUFFERS = 2
HIDDEN_BYTES = 4 + ACT_BYTES
# ... except when a device holds fewer than this many rows of the output head's embed dimension (emb over MaxText's
# `embed_vocab` axes): then the compiler reduces the head's weight gradient with one all-reduce of the whole bf16
# [emb, vocab / tensor] gradient (`all-reduce.18`) and recomputes the logits' gradient inside the two dots that use it,
# so it keeps one logits buffer and two head-sized ones (llama3.1-8b on v5e-256, fsdp 256 = 16 rows, pdbs 1 and 2:
# bf16[8192,128256] + 2 x bf16[4096,128256]; llama3-8b on v6e-256 alike). Seen at 16 rows, not at 32 (fsdp 128).
HEAD_ALLREDUCE_ROWS = 32
# MaxText's `embed_vocab` logical axis (the output head's and embedding table's embed dimension; base.yml
# logical_axis_rules): the mesh axes that split it.
EMBED_VOCAB = ("fsdp", "fsdp_transpose", "context", "context_usp_ulysses", "expert")
# Components live in only one phase of the step; the others are live throughout it. The gradients are allocated by the
# backward pass (none is live at the loss: buffer assignments above), the logits and the gathered head only around
# the loss, so the peak is the larger of the two phases.
LOSS_PHASE = ("logits", "output_head")
BACKWARD_PHASE = ("gradients", "temporaries")
# The band around the usable HBM where the estimate cannot decide ('tight', a warning): from 10% under
# to 15% over. Published runs that did run (bench/references.py) come out up to 13% over the usable
# HBM in this model (v5p 32B, `minimal` remat), so an error needs more than that.
TIGHT_BAND = (0.90, 1.15)
# HBM the runtime keeps for itself (program, XLA's reserved scratch), as a fraction of capacity.
RUNTIME_RESERVE = 0.04


def tensor_dims(s: Shape, tensors: frozenset[str]) -> float:
    """Elements per token of the named per-layer tensors (see server/perf/remat.py)."""
    q, kv = s.q_heads * s.head_dim, s.kv_heads * s.head_dim
    mlp = (s.experts_per_tok + s.shared_experts) * s.moe_mlp if s.moe else s.mlp
    dims = {
        "decoder_layer_input": s.emb,
        "query_proj": q,
        "key_proj": kv,
        "value_proj": kv,
        "context": q,
        "out_proj": s.emb,
        "mlpwi": s.n_mlp_in * mlp,
        "mlpwo": s.emb,
    }
    return float(sum(v for k, v in dims.items() if k in tensors))


# Decoder blocks whose MLP output feeds a norm (`use_post_ffw_norm`: MaxText's gemma2.py:132, gemma3.py, gemma4.py,
# envy.py) rather than the residual sum alone.
POST_FFW_NORM_BLOCKS = frozenset({"gemma2", "gemma3", "gemma4", "gemma4_small", "envy"})


def mlpwo_is_residual(s: Shape) -> bool:
    """Whether the backward pass needs the MLP's output (`mlpwo`), so that a policy naming it keeps it. In a dense
    block it only feeds the residual sum (`layer_output = mlp_lnx + intermediate_inputs`, MaxText's llama2.py:201),
    whose gradient needs neither operand, so JAX never makes it a residual and no policy keeps it (the TPU
    compiler's buffer assignment of MaxText's llama3.1-70b step with `mlpwo: device`: five stacked [layers, tokens,
    ...] buffers, decoder_layer_input, query_proj, key_proj, value_proj and context, none for mlpwo; 0.90 GB per layer
    at 16384 tokens, which is those five). A post-FFN norm needs its input, and MoE's combine needs each expert's
    output for the router weights' gradient (moe.py: `moe_mlpwo`)."""
    block = s.arch.decoder_block if s.arch is not None else ""
    return s.moe or block in POST_FFW_NORM_BLOCKS


def kept_dims(s: Shape, remat: RematPolicy) -> float:
    """Elements per token kept per layer in HBM for the backward pass (offloaded ones excluded)."""
    kept = remat.saved - remat.offloaded
    if not mlpwo_is_residual(s):
        kept = kept - {"mlpwo"}
    return tensor_dims(s, kept)


def all_dims(s: Shape) -> float:
    """Elements per token of every tensor of a layer (the backward working set)."""
    q, kv = s.q_heads * s.head_dim, s.kv_heads * s.head_dim
    mlp = (s.experts_per_tok + s.shared_experts) * s.moe_mlp if s.moe else s.mlp
    return float(3 * s.emb + 2 * q + 2 * kv + s.n_mlp_in * mlp + mlp)


# bf16 [rows, emb] buffers of a MoE layer's expert-parallel dispatch live in its backward: the routed rows received,
# the experts' output rows, and the two gradients (bench/moe_vs_compiler.py's compiles: qwen3-30b-a3b, expert 8,
# 2048 tokens, top 8: bf16[131072,2048] and bf16[131072,2,1024] buffers; deepseek3 32 experts, expert 4: bf16[65536,
# 7168] and bf16[65536,2,3584]).
DISPATCH_BUFFERS = 4


def moe_dispatch(s: Shape, lay: Layout, tokens: float) -> float:
    """Bytes a MoE layer's expert-parallel dispatch adds to the backward working set on MaxText's dropless path
    (`sparse_matmul`): the ragged all-to-all's receive buffer is sized for the worst case, every routed row of the
    expert group landing on one shard, `local rows x min(expert, experts / top_k)` (moe.py get_ragged_buffer_size with
    the default `ragged_buffer_factor: -1`), and the grouped matmuls run over all of it: DISPATCH_BUFFERS emb-wide
    buffers and the expert MLP's (n_in + 1) mlp-wide ones at that many rows, less the balanced rows' MLP that
    all_dims counts already. None without expert parallelism (the tokens are only sorted) or on the dense path."""
    ep = lay.degree("expert")
    if not s.moe or s.moe_tile <= 0 or ep <= 1:
        return 0.0
    routed = tokens * s.experts_per_tok
    rows = routed * min(ep, s.experts / max(1, s.experts_per_tok))
    mlp = (s.n_mlp_in + 1) * s.moe_mlp
    return (rows * (DISPATCH_BUFFERS * s.emb + mlp) - routed * mlp) * ACT_BYTES


@dataclass(frozen=True)
class Memory:
    components: dict[str, float]  # bytes per chip
    hbm_bytes: float

    @property
    def total(self) -> float:
        """Peak bytes: the model state, weight casts and kept activations are live throughout the step; the loss'
        buffers (LOSS_PHASE) and the backward pass' (BACKWARD_PHASE: the gradients and one layer's working set)
        are not live at once, so the larger of the two phases counts."""
        c = self.components
        loss = sum(c.get(k, 0.0) for k in LOSS_PHASE)
        backward = sum(c.get(k, 0.0) for k in BACKWARD_PHASE)
        return sum(v for k, v in c.items() if k not in LOSS_PHASE + BACKWARD_PHASE) + max(loss, backward)

    @property
    def usable(self) -> float:
        return self.hbm_bytes * (1 - RUNTIME_RESERVE)

    @property
    def fits(self) -> bool:
        return self.total <= self.usable

    @property
    def verdict(self) -> str:
        """'fits', 'tight' (within TIGHT_BAND of the usable HBM) or 'does not fit'."""
        low, high = TIGHT_BAND
        if self.total <= low * self.usable:
            return "fits"
        return "tight" if self.total <= high * self.usable else "does not fit"

    @property
    def headroom(self) -> float:
        return self.usable - self.total

    def to_json(self) -> dict[str, object]:
        return {
            "components": {k: round(v) for k, v in self.components.items()},
            "total_bytes": round(self.total),
            "hbm_bytes": round(self.hbm_bytes),
            "usable_bytes": round(self.usable),
            "headroom_bytes": round(self.headroom),
            "fits": self.fits,
            "verdict": self.verdict,
        }


def memory(
    s: Shape,
    p: Params,
    bpp: BytesPerParam,
    lay: Layout,
    pdbs: float,
    seq: int,
    remat: RematPolicy,
    vocab_tiles: int = 1,
    iota_embed: bool = False,
    moe_dispatch_expert_parallel: bool = False,
) -> Memory:
    """Bytes per chip (per JAX device; a tpu7x chip holds two) for one microbatch. `vocab_tiles`: MaxText's
    `num_vocab_tiling`; `iota_embed`: its `use_iota_embed` (the token embedding as a one-hot matmul);
    `moe_dispatch_expert_parallel`: its `moe_dispatch_no_expert_sharding` (the capacity path's dispatch stays
    expert-parallel)."""
    chip = lay.slice.chip
    hbm = chip.hbm_bytes / chip.devices_per_chip
    shards = lay.degree(*WEIGHT_SHARDING)
    total_params = p.total(s.layers)
    tp = lay.degree(*TENSOR)
    # Local tokens of a device: its batch shard's sequences, split over the non-batch axes that split
    # tokens or hidden dims (tensor, context, pipeline): pdbs x seq in every case.
    tokens = pdbs * seq
    acts = s.layers * tokens * kept_dims(s, remat) * ACT_BYTES
    if "context" in remat.saved - remat.offloaded:
        # The flash kernel's softmax statistics come with its output: float32 [heads, tokens] per layer, kept beside
        # `context` (llama3.1-70b 128k recipe: f32[80,1,64,16384] stacked with the five kept tensors).
        acts += s.layers * tokens * s.q_heads * 4
    # One layer's weights gathered in bf16 for its matmuls. Expert parallelism splits the routed experts only, and not
    # on the capacity path, whose dispatch keeps the tokens where they are and gathers every expert onto every device
    # unless `moe_dispatch_no_expert_sharding` (mixtral-8x7b fsdp 4 x expert 2, capacity 1.25: bf16[1,8,14336,4096]
    # x 3 beside the shard's bf16[1,4,4096,14336]; server/perf/steptime.py's _moe_weights_over_expert).
    # The largest layer counts: Params holds means over the decoder's layers, and a MoE layer's routed experts are
    # all in the layers that route (DeepSeek's dense-first layers have none).
    ep = lay.degree("expert")
    split = ep if s.moe and (s.moe_tile > 0 or moe_dispatch_expert_parallel) else 1
    routed = p.routed * s.layers / max(1, s.routed_layers) if s.moe else 0.0
    gathered = (p.per_layer() - p.routed + routed / split) * ACT_BYTES / max(1, tp)
    working = TEMP_LAYERS * tokens * all_dims(s) * ACT_BYTES + gathered + moe_dispatch(s, lay, tokens)
    # Context parallelism: the attention's backward gathers the keys and values of the whole sequence over the context
    # axis and accumulates their gradients there in float32 before reduce-scattering them (llama3.1-70b, context 8,
    # 131072 tokens, flash: bf16[1,8,131072,128] per gathered K and V, f32[8,131072,128] `dk_alias`/`dv_alias`).
    cp = lay.degree(*CONTEXT)
    kv_dims = 2 * s.kv_heads * s.head_dim
    cp_kv = tokens * cp * kv_dims * (ACT_BYTES + 4) if cp > 1 else 0.0
    # Tensor parallelism splits the vocabulary, not the batch: a device holds the logits of its tensor group's
    # pdbs x tp sequences over vocab / tp columns, pdbs x seq x vocab in all (MaxText's
    # activation_embed_and_logits_batch rule has no tensor axis). `num_vocab_tiling` computes the loss over that
    # many chunks of the tokens, one at a time (MaxText's vocabulary_tiling.py: a scan in a custom VJP).
    logit_buf = tokens * s.vocab * ACT_BYTES / max(1, vocab_tiles)
    head = s.emb * s.vocab * ACT_BYTES / max(1, tp)
    allreduce_path = s.emb / lay.degree(*EMBED_VOCAB) < HEAD_ALLREDUCE_ROWS
    if allreduce_path:
        logits, heads, carried = logit_buf, 2 * head, 0.0
    else:
        # Without data parallelism the second logits-sized buffer outlives the loss: the head's gradient is
        # reduce-scattered over fsdp in a loop the compiler schedules after the layers' backward, which reads it
        # (llama3-8b on v6e-16, fsdp 16: the logits' gradient live through the whole backward scan; fsdp 4 x tensor 4:
        # bf16[8,2048,32064] beside the float32 layer gradients at the backward's peak; `default` on v5p-32, fsdp 16).
        # With data parallelism the gradient is also reduced over `data`, right after the loss (`default` on v5p-32,
        # data 2 x fsdp 8, and v5e-8, data 2 x fsdp 4: the buffer dies within a few instructions). Nor with vocabulary
        # tiling, whose custom VJP finishes the head's gradient before the layers' backward (num_vocab_tiling 4 on
        # v6e-16 fsdp 16: no logits buffer live at the backward's peak).
        logits, heads = LOGITS_BUFFERS * logit_buf, head
        carried = logit_buf if vocab_tiles <= 1 and lay.degree(*DATA) == 1 else 0.0
    hidden = tokens * s.emb * HIDDEN_BYTES
    # `use_iota_embed`: the lookup is one_hot(tokens) @ table (MaxText's embeddings.py:132). Where the head's gradient
    # takes the all-reduce path, so does the table's, and the compiler keeps the one-hot, pred[tokens, vocab] (one byte
    # an element), from the forward's lookup to the table's gradient at the end of the backward (llama3.1-70b on
    # tpu7x-512: `fusion.376` pred[16384,128256], 2.0 GiB, live throughout the layers' backward; llama3.1-8b on
    # v5e-256, fsdp 256: 1.03 GB more temp than without it). On the reduce-scatter path XLA fuses the one-hot into
    # its dots (llama3-8b v6e-16 fsdp 16: 0.16 GB more).
    one_hot = tokens * s.vocab * 1.0 if iota_embed and allreduce_path else 0.0
    # A bf16 copy of the scanned layers' weights, sharded like them: each layer casts its (float32) weights to
    # the activation dtype, and XLA converts the whole stack once, before the forward scan, for the forward,
    # the rematerialised forward and the backward scans to slice from (buffer assignment of the same compile:
    # bf16[layers, ...] beside every float32 weight stack). None when the weights already are bf16.
    casts = s.layers * p.per_layer() * ACT_BYTES / shards if bpp.weights > ACT_BYTES else 0.0
    return Memory(
        {
            "weights": total_params * bpp.weights / shards,
            "weight_casts": casts,
            "gradients": total_params * bpp.grads / shards,
            "optimizer": total_params * bpp.optimizer / shards,
            "activations": acts,
            "embedding_one_hot": one_hot,
            "logits": logits + hidden,
            "output_head": heads,
            "temporaries": working + carried + cp_kv,
        },
        hbm,
    )
