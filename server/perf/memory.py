"""HBM per chip: weights, gradients and optimizer state divided by the axes that shard them,
activations kept for the backward pass under the remat policy (the layer scan's carry once per
iteration: a Gemma 2 pair keeps one), the loss' buffers (logits, the gathered output head, a tied
table's head-gradient accumulators) and one scan iteration's backward working set (with MoE dispatch
and context parallelism's gathered keys and values), the peak being the larger of the loss and the
backward phase, plus the row-major copies of a tied table's state the compiler makes for its update;
compared with the slice's HBM. The buffers are those the TPU compiler's buffer assignment of MaxText's
own train step shows (bench/memory_vs_compiler.py, tests/data/verify/memory_compiled.json).

Formulas: DOMAIN.md §4 (state bytes = params x bytes/param / S_w, S_w = product of the axes
that shard weights, `data` excluded; activations = layers x local tokens x kept bytes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from server.config.slices import ChipSpec
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
# A tied table (`logits_via_embedding`) takes the all-reduce path at more rows: gemma2-9b on v5e-64, fsdp 64 = 56 rows,
# keeps one logits buffer beside the gathered table and its whole bf16 gradient (`fusion.659` bf16[256128,3584]), and
# reduce-scatters at 112 rows (v5e-32) and more; the threshold lies between the two.
TIED_HEAD_ALLREDUCE_ROWS = 64
# MaxText's `embed_vocab` logical axis (the output head's and embedding table's embed dimension; base.yml
# logical_axis_rules): the mesh axes that split it.
EMBED_VOCAB = ("fsdp", "fsdp_transpose", "context", "context_usp_ulysses", "expert")
# A tied table (`logits_via_embedding`: the token embedding is also the output head) on the reduce-scatter path: the
# head's gradient is the table's, [vocab / tensor, emb / embed_vocab], reduced over the embed_vocab axes by a
# bidirectional collective matmul into two bf16 accumulators (one a direction, summed before the update: together the
# bytes of the table's float32 gradient, which `gradients` counts in the backward). Over more than this many devices the
# compiler runs that collective matmul as a loop (`windowed_dot_general_body_rs`) right after the loss: it allocates the
# two accumulators by then (`AllocateBuffer` custom-calls; on v5e at the start of the step), so they are live at the
# loss, and materialises the logits' gradient there (`transpose(jvp())/div`, the final soft cap's) only to consume it at
# once, so no logits-sized buffer is carried into the layers' backward. Seen in the buffer assignments of MaxText's
# gemma2-9b on v5e-16 (fsdp 16, pdbs 1 and 2: `custom-call.38/39` bf16[256128,224], live from the step's start to the
# update, and the logits' gradient bf16[1,2048,256128] dead before the layers' backward) and on v5e-32 (fsdp 32,
# bf16[256128,112] x 2), gemma2-2b on v5e-8 and v5e-16 (bf16[256128,288] and [256128,144] x 2), gemma2-27b on v5p-16
# (fsdp 8, bf16[256128,576] x 2 allocated at the loss, the logits' gradient dead before the backward). Over 4 devices
# the compiler unrolls it instead and splits it around the layers' backward, keeping the forward logits for the second
# half: no accumulators at the loss, the logits carried (gemma-2b and gemma2-2b on v5e-4, fsdp 4: bf16[2048,256128] live
# through the backward scan, the accumulators bf16[256128,512] / [256128,576] x 2 only after the loss).
TIED_HEAD_LOOP_DEVICES = 4
# The TPU keeps a 2-D array in (8, 128) tiles, its minor dimension in whole 128-lane rows of a tile. A table shard whose
# embed width (emb / embed_vocab) is not a multiple of 128 is stored vocab-minor, [vocab, emb] with vocab in the lanes
# (every float32 [vocab, emb / fsdp] table of those buffer assignments is laid out {0,1}, and llama3's at 16 rows too;
# widths of 256 and 512 are {1,0}). The lookup's gradient (a scatter-add) is row-major; the Adam update of a tied table
# whose head gradient runs in a loop then either transposes that bf16 gradient or runs row-major on copies of the
# float32 table and both of its moments, [vocab, emb / fsdp] each, and the compiler does the latter when the row-major
# tiles are nearly full: at 7/8 of their lanes or more (gemma2-9b at 224 and 112 rows of 256 and 128 lanes, v5e-16 and
# v5e-32: `copy.444`, `.441`, `.442` f32[256128,224] and f32[256128,112] of the table and its mu and nu; gemma2-27b on
# v5p-16, fsdp 8, 576 of 640: f32[256128,576] x 3), not at 3/4 or less (gemma2-2b at 288 and 144 rows, v5e-8 and v5e-16:
# the bf16 gradient is transposed, `copy.440`). When they are live depends on the scheduler: from the step's start to
# the update on v5e (copy.444: 272-6201 of 6522, live at the loss and through the backward), only around the update on
# v5p (and on v5e under memory pressure: gemma2-9b at pdbs 3 and 4 on v5e-16); counted as live throughout.
TILE_LANES = 128
ROW_MAJOR_UPDATE_FILL = 7 / 8
# Components live in only one phase of the step; the others are live throughout it. The gradients are allocated by the
# backward pass (none is live at the loss: buffer assignments above), the logits and the gathered head only around
# the loss, so the peak is the larger of the two phases.
LOSS_PHASE = ("logits", "output_head", "head_gradient")
BACKWARD_PHASE = ("gradients", "temporaries")
_ONE_PHASE = frozenset(LOSS_PHASE + BACKWARD_PHASE)
# The band around the usable HBM where the estimate cannot decide ('tight', a warning): from 10% under
# to 15% over. Published runs that did run (bench/references.py) come out up to 13% over the usable
# HBM in this model (v5p 32B, `minimal` remat), so an error needs more than that.
TIGHT_BAND = (0.90, 1.15)
# HBM the runtime keeps for itself (program, XLA's reserved scratch), as a fraction of capacity.
RUNTIME_RESERVE = 0.04


def tensor_dims(s: Shape, tensors: frozenset[str]) -> float:
    """Elements per token of the named per-layer tensors (see server/perf/remat.py). An MoE layer's `mlpwo` is every
    routed copy's expert output before the combine, [tokens x top_k, emb] (moe.py:2243@e591f30cb names the grouped
    matmul's output; the shared experts' MlpBlock names its own, linears.py:624), not the combined [tokens, emb]; the
    capacity path's padding (x capacity_factor, moe.py:2967) is not counted."""
    q, kv = s.q_heads * s.head_dim, s.kv_heads * s.head_dim
    copies = s.experts_per_tok + s.shared_experts if s.moe else 1
    mlp = copies * s.moe_mlp if s.moe else s.mlp
    dims = {
        "decoder_layer_input": s.emb,
        "query_proj": q,
        "key_proj": kv,
        "value_proj": kv,
        "context": q,
        "out_proj": s.emb,
        "mlpwi": s.n_mlp_in * mlp,
        "mlpwo": copies * s.emb,
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


def kept_tensors(s: Shape, remat: RematPolicy) -> frozenset[str]:
    """The per-layer tensors kept in HBM for the backward pass (offloaded ones excluded)."""
    kept = remat.saved - remat.offloaded
    if not mlpwo_is_residual(s):
        kept = kept - {"mlpwo"}
    return kept


def kept_dims(s: Shape, remat: RematPolicy) -> float:
    """Elements per token kept per layer in HBM for the backward pass (offloaded ones excluded)."""
    return tensor_dims(s, kept_tensors(s, remat))


# The tensor the layer scan keeps once per iteration: its carry, the input of a MaxText layer (`decoder_layer_input`).
SCAN_CARRY = frozenset({"decoder_layer_input"})


def scan_iterations(s: Shape) -> int:
    """Iterations of the decoder's layer scan: MaxText's num_decoder_layers, fewer than the decoder layers where one
    MaxText layer holds several (Gemma 2: a local and a global attention layer, models/gemma2.py; the architecture's
    `maxtext_layers`). Blocks scanned as one unit elsewhere (Gemma 3's and Llama 4's scannable blocks) are not modelled
    here: each of their layers counts as an iteration."""
    a = s.arch
    if a is not None and 0 < a.maxtext_layers < s.layers:
        return a.maxtext_layers
    return s.layers


def kept_activations(s: Shape, remat: RematPolicy, tokens: float) -> float:
    """Bytes of the activations kept for the backward pass over all layers. The scan keeps its carry, the MaxText
    layer's input, once per iteration, and the tensors a policy names once per decoder layer that names them: Gemma 2
    names `decoder_layer_input` only at the start of its pair and the global half's input is recomputed from it (the
    TPU compiler's buffer assignment of MaxText's gemma2-9b on v5e-16, remat full: `while.257{2}` bf16[21,1,2048,3584],
    21 pairs, beside no per-layer input; gemma2-2b on v5e-4, 8 and 16: bf16[13,1,2048,2304])."""
    kept = kept_tensors(s, remat)
    carry = tensor_dims(s, kept & SCAN_CARRY)
    named = tensor_dims(s, kept - SCAN_CARRY)
    return (scan_iterations(s) * carry + s.layers * named) * tokens * ACT_BYTES


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
    return _moe_dispatch(s, lay.degree("expert"), tokens)


def _moe_dispatch(s: Shape, ep: int, tokens: float) -> float:
    if not s.moe or s.moe_tile <= 0 or ep <= 1:
        return 0.0
    routed = tokens * s.experts_per_tok
    rows = routed * min(ep, s.experts / max(1, s.experts_per_tok))
    mlp = (s.n_mlp_in + 1) * s.moe_mlp
    return (rows * (DISPATCH_BUFFERS * s.emb + mlp) - routed * mlp) * ACT_BYTES


def row_major_fill(width: float) -> float:
    """The share of a row-major tile row's lanes that `width` elements fill (1 for a multiple of TILE_LANES)."""
    if width <= 0:
        return 0.0
    return width / (math.ceil(width / TILE_LANES) * TILE_LANES)


def tied_table_relayout(s: Shape, bpp: BytesPerParam, ev: float, tp: float) -> float:
    """Bytes of the row-major copies of a tied table's state (the table in its weight dtype and the optimizer's
    moments) that the TPU compiler makes for the Adam update when the table is stored vocab-minor and its row-major
    tiles would be nearly full (ROW_MAJOR_UPDATE_FILL); 0 otherwise. For a table whose head gradient runs in a loop."""
    width = s.emb / ev
    vocab = s.vocab / max(1, tp)
    vocab_minor = width % TILE_LANES != 0 and vocab % TILE_LANES == 0
    if not vocab_minor or row_major_fill(width) < ROW_MAJOR_UPDATE_FILL:
        return 0.0
    return vocab * width * (bpp.weights + bpp.optimizer)


def usable_hbm(hbm_bytes: float, compiler_limit: float | None) -> float:
    """HBM one program may use per device: the compiler's stated limit (slices.ChipSpec.compiler_hbm_bytes), else
    the capacity less RUNTIME_RESERVE."""
    return compiler_limit if compiler_limit is not None else hbm_bytes * (1 - RUNTIME_RESERVE)


@dataclass(frozen=True)
class Memory:
    components: dict[str, float]  # bytes per chip
    hbm_bytes: float
    # what the TPU compiler lets one program use per device (slices.ChipSpec.compiler_hbm_bytes, measured);
    # None: the capacity less RUNTIME_RESERVE
    compiler_limit: float | None = None

    @cached_property
    def total(self) -> float:
        """Peak bytes: the model state, weight casts and kept activations are live throughout the step; the loss'
        buffers (LOSS_PHASE) and the backward pass' (BACKWARD_PHASE: the gradients and one layer's working set)
        are not live at once, so the larger of the two phases counts. Computed once: `components` is never changed
        after construction (an enumeration reads it of each mesh several times, and many meshes share a Memory)."""
        c = self.components
        loss = sum([c.get(k, 0.0) for k in LOSS_PHASE])
        backward = sum([c.get(k, 0.0) for k in BACKWARD_PHASE])
        return sum([v for k, v in c.items() if k not in _ONE_PHASE]) + max(loss, backward)

    @property
    def usable(self) -> float:
        return usable_hbm(self.hbm_bytes, self.compiler_limit)

    @property
    def fits(self) -> bool:
        return self.total <= self.usable

    @cached_property
    def verdict(self) -> str:
        """'fits', 'tight' (within TIGHT_BAND of the usable HBM) or 'does not fit'. Decided once, like `total`."""
        low, high = TIGHT_BAND
        if self.total <= low * self.usable:
            return "fits"
        return "tight" if self.total <= high * self.usable else "does not fit"

    @property
    def launches(self) -> bool:
        """ASAP's one memory rule for "does this mesh launch": anything but 'does not fit'. A 'tight' mesh (within
        the band where the estimate cannot decide) is a warning everywhere, never "does not launch"."""
        return self.verdict != "does not fit"

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
    return memory_on(
        s,
        p,
        bpp,
        lay.slice.chip,
        mesh_degrees(lay),
        pdbs,
        seq,
        remat,
        vocab_tiles,
        iota_embed=iota_embed,
        moe_dispatch_expert_parallel=moe_dispatch_expert_parallel,
    )


MeshDegrees = tuple[int, int, int, int, int, int]


def mesh_degrees(lay: Layout) -> MeshDegrees:
    """All `memory` reads of a layout besides its slice's chip: the degrees of the weight-sharding, tensor, expert,
    context, embed_vocab and data axes (`memory_on`'s `degrees`; a key for memoising it over the meshes of a slice)."""
    shards, tp, ep, cp, ev, data = lay.degrees(WEIGHT_SHARDING, TENSOR, ("expert",), CONTEXT, EMBED_VOCAB, DATA)
    return shards, tp, ep, cp, ev, data


def activations(s: Shape, remat: RematPolicy, tokens: float) -> float:
    """Bytes of the activations a device keeps for the backward pass (`Memory.components["activations"]`): the same
    on every mesh."""
    acts = kept_activations(s, remat, tokens)
    if "context" in remat.saved - remat.offloaded:
        # The flash kernel's softmax statistics come with its output: float32 [heads, tokens] per layer, kept beside
        # `context` (llama3.1-70b 128k recipe: f32[80,1,64,16384] stacked with the five kept tensors).
        acts += s.layers * tokens * s.q_heads * 4
    return acts


def memory_on(
    s: Shape,
    p: Params,
    bpp: BytesPerParam,
    chip: ChipSpec,
    degrees: MeshDegrees,
    pdbs: float,
    seq: int,
    remat: RematPolicy,
    vocab_tiles: int = 1,
    iota_embed: bool = False,
    moe_dispatch_expert_parallel: bool = False,
    kept: float | None = None,
) -> Memory:
    """`memory` on a chip, for a mesh given by what it reads of it (`mesh_degrees`). `kept`: `activations(s, remat,
    pdbs * seq)` when already known (pricing many meshes)."""
    shards, tp, ep, cp, ev, data = degrees
    hbm = chip.hbm_bytes / chip.devices_per_chip
    total_params = p.total(s.layers)
    # Local tokens of a device: its batch shard's sequences, split over the non-batch axes that split
    # tokens or hidden dims (tensor, context, pipeline): pdbs x seq in every case.
    tokens = pdbs * seq
    acts = activations(s, remat, tokens) if kept is None else kept
    # One layer's weights gathered in bf16 for its matmuls. Expert parallelism splits the routed experts only, and not
    # on the capacity path, whose dispatch keeps the tokens where they are and gathers every expert onto every device
    # unless `moe_dispatch_no_expert_sharding` (mixtral-8x7b fsdp 4 x expert 2, capacity 1.25: bf16[1,8,14336,4096]
    # x 3 beside the shard's bf16[1,4,4096,14336]; server/perf/steptime.py's _moe_weights_over_expert).
    # The largest layer counts: Params holds means over the decoder's layers, and a MoE layer's routed experts are
    # all in the layers that route (DeepSeek's dense-first layers have none).
    split = ep if s.moe and (s.moe_tile > 0 or moe_dispatch_expert_parallel) else 1
    routed = p.routed * s.layers / max(1, s.routed_layers) if s.moe else 0.0
    gathered = (p.per_layer() - p.routed + routed / split) * ACT_BYTES / max(1, tp)
    # The backward recomputes one scan iteration's forward and holds the working set of every layer in it: a Gemma 2
    # pair holds both MLPs' intermediates at once (gemma2-9b on v5e-16, remat full: six bf16[1,2048,14336] in the
    # backward scan's body, three a layer), while its weights are still gathered matrix by matrix (two
    # bf16[1,3584,14336] and two bf16[1,16,256,3584] live at once).
    per_iteration = s.layers / scan_iterations(s)
    working = TEMP_LAYERS * per_iteration * tokens * all_dims(s) * ACT_BYTES + gathered + _moe_dispatch(s, ep, tokens)
    # Context parallelism: the attention's backward gathers the keys and values of the whole sequence over the context
    # axis and accumulates their gradients there in float32 before reduce-scattering them (llama3.1-70b, context 8,
    # 131072 tokens, flash: bf16[1,8,131072,128] per gathered K and V, f32[8,131072,128] `dk_alias`/`dv_alias`).
    kv_dims = 2 * s.kv_heads * s.head_dim
    cp_kv = tokens * cp * kv_dims * (ACT_BYTES + 4) if cp > 1 else 0.0
    # Tensor parallelism splits the vocabulary, not the batch: a device holds the logits of its tensor group's
    # pdbs x tp sequences over vocab / tp columns, pdbs x seq x vocab in all (MaxText's
    # activation_embed_and_logits_batch rule has no tensor axis). `num_vocab_tiling` computes the loss over that
    # many chunks of the tokens, one at a time (MaxText's vocabulary_tiling.py: a scan in a custom VJP).
    logit_buf = tokens * s.vocab * ACT_BYTES / max(1, vocab_tiles)
    head = s.emb * s.vocab * ACT_BYTES / max(1, tp)
    rows = s.emb / ev
    allreduce_path = rows < (TIED_HEAD_ALLREDUCE_ROWS if s.tied_embedding else HEAD_ALLREDUCE_ROWS)
    tied_loop = s.tied_embedding and not allreduce_path and ev > TIED_HEAD_LOOP_DEVICES
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
        # A tied table's head gradient in a loop (TIED_HEAD_LOOP_DEVICES) is finished right after the loss: nothing
        # carried either.
        logits, heads = LOGITS_BUFFERS * logit_buf, head
        carried = logit_buf if vocab_tiles <= 1 and data == 1 and not tied_loop else 0.0
    # A tied table's head gradient in a loop: its two bf16 accumulators, allocated at the step's start, live at the
    # loss.
    head_grad = 2 * s.vocab * s.emb / ev * ACT_BYTES / max(1, tp) if tied_loop else 0.0
    hidden = tokens * s.emb * HIDDEN_BYTES
    relayout = tied_table_relayout(s, bpp, ev, tp) if tied_loop else 0.0
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
            "embedding_relayout": relayout,
            "logits": logits + hidden,
            "output_head": heads,
            "head_gradient": head_grad,
            "temporaries": working + carried + cp_kv,
        },
        hbm,
        chip.compiler_hbm_bytes,
    )
