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


# The same tiling pads every activation: its minor dimension is its hidden width (emb, the MLP's, a head's), stored in
# whole 128-lane rows, so a width that is not a multiple of 128 takes the next one. gpt-oss-20b (emb and expert width
# 2880, head_dim 64) on v5p-32: every routed-row buffer bf16[131072,2880] takes 736 MiB for 720 MiB of values (2944
# lanes), the attention's q and output bf16[4,64,8192,64] 512 MiB for 256 (head_dim 64 in 128 lanes), the MoE combine
# f32[32768,4,2880] 1472 MiB for 1440. The logits are not padded: the compiler lays a vocabulary that is not a multiple
# of 128 out sequence-minor (Llama 4's 202048: bf16[8,8192,202048]{1,2,0}, 25256 MiB, exactly its values).
def lanes(width: float) -> float:
    """Elements a row of `width` elements occupies in the TPU's tiles: whole TILE_LANES-lane rows."""
    return math.ceil(width / TILE_LANES) * TILE_LANES if width > 0 else 0.0


def least_padded(*widths: float) -> float:
    """The padding factor of a weight (bytes stored / bytes of values) whose dimensions are `widths` (per device): the
    compiler chooses a parameter's layout, and it puts minor the dimension that wastes the fewest lanes. gpt-oss-20b on
    v5p-32 (fsdp 16): the experts' f32[32,12,180,2880] minor in the expert width (2880 in 2944 lanes: 2%) rather than
    emb / fsdp (180 in 256: 42%); the attention's f32[180,12,64,64] minor in emb / fsdp (180) rather than head_dim 64
    (64 in 128: 100%); 0.51 GiB of its 15.19 GiB of arguments is this padding. Where a dimension is a multiple of 128
    nothing is padded (every other compiled case: llama3.1-8b at 16 of emb a device lays q out head_dim-minor)."""
    return min((lanes(w) / w for w in widths if w >= 1), default=1.0)


# Components live in only one phase of the step; the others are live throughout it. The gradients are allocated by the
# backward pass (none is live at the loss: buffer assignments above), the logits and the gathered head only around
# the loss, so the peak is the largest of the phases. Between the forward's last write of an offloaded stack and the
# backward's first read (OFFLOAD_PHASE: the loss' forward, before any head gradient exists) the compiler may relay
# the stack through HBM (`offload_relayout`), beside the logits, the final hidden state and the gathered head
# (llama3.1-8b recipe on v6e-256: copy-start{0} and copy.757, bf16[32,4,8192,4096] each, live with the logits
# fusion.418{1} bf16[4,8192,128256] and the gathered head all-gather.17 at the step's peak, 25.86 GiB at once).
LOSS_PHASE = ("logits", "output_head", "output_head_gradient", "head_gradient")
OFFLOAD_PHASE = ("logits", "output_head", "offload_relayout")
BACKWARD_PHASE = ("gradients", "temporaries", "output_head_carried")
_ONE_PHASE = frozenset(LOSS_PHASE + OFFLOAD_PHASE + BACKWARD_PHASE)
# What the phases count is what the compiler holds at once. The heap it reports can be larger where there is room: its
# layout is not the tightest, and it lays a large buffer out above the smaller ones of the layers' passes. Llama 4
# Scout on v5p-256 (fsdp 128, pdbs 8): 54.7 GiB of temp live at once at the loss, a 66.4 GiB heap, the two
# bf16[8,8192,202048] buffers at 17.1-66.4 GiB above the layers' working region; at pdbs 12, where it must fit (93.3
# of 95.7 GiB), the same buffers lie at the bottom and the heap is 7.2 GiB over the 76.5 live. The verdict follows
# what is live (both fit, as estimated: -15.8% and -3.9%); that slack is not modelled.
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
    q, kv = s.q_heads * lanes(s.head_dim), s.kv_heads * lanes(s.head_dim)
    copies = s.experts_per_tok + s.shared_experts if s.moe else 1
    mlp = copies * lanes(s.moe_mlp) if s.moe else lanes(s.mlp)
    emb = lanes(s.emb)
    dims = {
        "decoder_layer_input": emb,
        "query_proj": q,
        "key_proj": kv,
        "value_proj": kv,
        "context": q,
        "out_proj": emb,
        "mlpwi": s.n_mlp_in * mlp,
        "mlpwo": copies * emb,
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
    `maxtext_layers`), and fewer still where MaxText scans a block of layers as one step (the architecture's
    `scan_block`: Gemma 3's six, gpt-oss' and Llama 4's inhomogeneous_layer_cycle_interval)."""
    a = s.arch
    if a is None:
        return s.layers
    layers = a.maxtext_layers if 0 < a.maxtext_layers < s.layers else s.layers
    return max(1, layers // a.scan_block) if a.scan_block > 1 else layers


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
    """Elements per token of every tensor of a layer in its backward (the working set): its emb-wide and attention
    tensors once, and the MLP's intermediates (its n_in input projections and their product) twice, the recomputed
    forward's and their gradients, which the MLP's backward holds at once (llama3-8b on v6e-16, fsdp 16, pdbs 2 at 8k,
    num_vocab_tiling 4, remat full: eight bf16[2,8192,14336]-sized buffers live in a layer's backward, the
    intermediates, their gradients and transposed copies, fusion.626 to fusion.694)."""
    return attention_dims(s) + mlp_dims(s)


def attention_dims(s: Shape) -> float:
    """Elements per token of a layer's working set outside its MLP: its emb-wide tensors and the attention's (q, k, v,
    their gradients), in the widths the tiles store (`lanes`)."""
    q, kv = s.q_heads * lanes(s.head_dim), s.kv_heads * lanes(s.head_dim)
    return float(3 * lanes(s.emb) + 2 * q + 2 * kv)


def mlp_dims(s: Shape) -> float:
    """Elements per token of a layer's MLP intermediates and their gradients (every routed copy's, on MoE)."""
    mlp = (s.experts_per_tok + s.shared_experts) * lanes(s.moe_mlp) if s.moe else lanes(s.mlp)
    return float(2 * (s.n_mlp_in + 1) * mlp)


# bf16 [rows, emb] buffers of a MoE layer's expert-parallel dispatch live in its backward: the routed rows received,
# the experts' output rows, and the two gradients (bench/moe_vs_compiler.py's compiles: qwen3-30b-a3b, expert 8,
# 2048 tokens, top 8: bf16[131072,2048] and bf16[131072,2,1024] buffers; deepseek3 32 experts, expert 4: bf16[65536,
# 7168] and bf16[65536,2,3584]).
DISPATCH_BUFFERS = 4
# Without expert parallelism (no all-to-all: the tokens are only sorted by expert), three at the routed rows: the sorted
# rows, the grouped matmul's output and one gradient (DeepSeek-V3 on v5p-1024, fsdp 512, pdbs 6 at 8k, top 8: gmm.17,
# custom-call.708 and .709, bf16[393216,7168] each, live at once in a MoE layer's backward).
SORTED_BUFFERS = 3


def moe_dispatch(s: Shape, lay: Layout, tokens: float) -> float:
    """Bytes a MoE layer's expert-parallel dispatch adds to the backward working set on MaxText's dropless path
    (`sparse_matmul`): the ragged all-to-all's receive buffer is sized for the worst case, every routed row of the
    expert group landing on one shard, `local rows x min(expert, experts / top_k)` (moe.py get_ragged_buffer_size with
    the default `ragged_buffer_factor: -1`), and the grouped matmuls run over all of it: DISPATCH_BUFFERS emb-wide
    buffers and the expert MLP's (n_in + 1) mlp-wide ones at that many rows, less the balanced rows' MLP that
    all_dims counts already. Without expert parallelism the tokens are only sorted: SORTED_BUFFERS emb-wide copies
    at the routed rows. None on the dense path."""
    return _moe_dispatch(s, lay.degree("expert"), tokens)


def _moe_dispatch(s: Shape, ep: int, tokens: float) -> float:
    if not s.moe or s.moe_tile <= 0:
        return 0.0
    routed = tokens * s.experts_per_tok
    rows = routed * min(ep, s.experts / max(1, s.experts_per_tok))
    mlp = (s.n_mlp_in + 1) * lanes(s.moe_mlp)
    buffers = DISPATCH_BUFFERS if ep > 1 else SORTED_BUFFERS
    return (rows * (buffers * lanes(s.emb) + mlp) - routed * mlp) * ACT_BYTES


# Host offload (remat `custom` with `offload`, `qkv_proj_offloaded`, `minimal_offloaded`): the forward writes each
# layer's offloaded tensors into a stack in host memory ([layers, batch, seq, ...] one a tensor, dynamic-update-slices
# into memory space S(5)) and the backward reads them back a layer at a time (dynamic-slices), so one layer's worth is
# on the device while it is computed (the working set counts it). But where the forward writes a stack in another
# layout than
# the backward reads it, the compiler copies the whole stack to the device, relays it there and copies it back
# (copy-start, copy, copy-start of the host stack, one stack at a time): twice the stack in HBM. Seen for the emb-wide
# stacks of dense layers, the layer input and out_proj, written seq-minor ({2,3,1,0}) and read emb-minor ({3,2,1,0}):
# MaxText's llama3.1-8b recipe on v6e-256 (pdbs 4 at 8k: copy-start{0} and copy.757, bf16[32,4,8192,4096] each, 16
# GiB at once beside the logits, the step's peak) and DeepSeek-V3's three dense layers on v5p-1024 (bf16[3,6,8192,7168]
# on the device in both layouts); not for the head-split q/k/v stacks, nor for the MoE layers' stacks, written
# emb-minor (DeepSeek-V3: bf16[58,6,8192,7168]{3,2,1,0} only on the host). Each of those three offloaded out_proj too;
# MaxText's llama3.1-70b 8k recipe, which offloads the layer input and q/k/v but not out_proj, writes and reads its
# input stack in one layout (bf16[80,5,8192,8192]{2,3,1,0} on the host only, nothing relaid). Whether layouts differ
# is the compiler's layout assignment, which the model cannot know: it counts the relayout wherever a dense layer
# offloads out_proj (an upper bound, said in Memory.uncertain).
OFFLOAD_RELAYOUT_TENSORS = frozenset({"decoder_layer_input", "out_proj"})


def offload_relayout(s: Shape, remat: RematPolicy, tokens: float, tp: int = 1) -> float:
    """Bytes of the largest offloaded emb-wide stack of the dense layers, twice (its copy on the device and the
    relaid copy); 0 when no such tensor is offloaded. The layer input is stacked once per scan iteration (a Gemma 2
    pair: one), out_proj once per decoder layer; a device's stack holds emb / tp of each token (MaxText's
    `activation_embed` axis is `tensor`)."""
    off = remat.offloaded & OFFLOAD_RELAYOUT_TENSORS
    if "out_proj" not in off:
        return 0.0
    dense = s.layers - s.routed_layers
    if dense <= 0:
        return 0.0
    per_iteration = scan_iterations(s) / s.layers
    stacked = max(dense * (per_iteration if t == "decoder_layer_input" else 1.0) for t in off)
    return 2 * stacked * tokens * lanes(s.emb / max(1, tp)) * ACT_BYTES


# Not counted: tile padding of the float32 gradients. The TPU stores an array in (8, 128) tiles, its minor dimension in
# whole 128-lane rows (TILE_LANES), and where FSDP leaves fewer than 128 of emb a device a gradient laid out emb-minor
# is padded: DeepSeek-V3 on v5p-1024 (fsdp 512, emb 7168: 14 a device) accumulates the routed experts' wo gradient as
# f32[58,256,2048,14]{3,2,1,0}, 14,848 MiB for 1,624 MiB of values, while its wi gradients, mlp minor, are not padded
# (f32[58,256,14,2048], 1,856 MiB), and llama3.1-8b on v6e-256 (16 a device) lays its wo gradient out mlp-minor
# (f32[32,14336,16]{1,2,0}, unpadded). Which gradients the compiler lays out so is not known beforehand, and counting
# every emb-output gradient padded would price meshes that differ only in how the expert axis splits emb differently
# (and tens of GiB over for Llama 4 at fsdp 128); that step's verdict does not depend on it.


def layer_padding(s: Shape, p: Params, ev: float, tp: float) -> float:
    """Stored over counted bytes of a decoder layer's weights on a device (`least_padded`): attention by emb over the
    embed axes, heads over tensor or head_dim; the MLP's and experts' by emb over the embed axes or their width over
    tensor."""
    emb = s.emb / max(1.0, ev)
    attn = least_padded(emb, s.q_heads / max(1.0, tp), s.head_dim)
    ffn = least_padded(emb, (s.moe_mlp if s.moe else s.mlp) / max(1.0, tp))
    per_layer = p.per_layer()
    return (p.attention * attn + p.mlp * ffn + p.norms) / per_layer if per_layer > 0 else 1.0


def padded_params(s: Shape, p: Params, ev: float, tp: float) -> float:
    """The parameter count as the tiles store it on a device, over all layers and the tables (the token embedding and
    output head by the vocabulary over tensor or emb over the embed axes)."""
    tables = least_padded(s.vocab / max(1.0, tp), s.emb / max(1.0, ev))
    return s.layers * p.per_layer() * layer_padding(s, p, ev, tp) + p.total(0) * tables


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


def _peak(c: dict[str, float]) -> float:
    """The components live throughout the step plus the largest of the phases (LOSS_PHASE, OFFLOAD_PHASE when an
    offloaded stack is relaid, BACKWARD_PHASE)."""
    loss = sum([c.get(k, 0.0) for k in LOSS_PHASE])
    offload = sum([c.get(k, 0.0) for k in OFFLOAD_PHASE]) if c.get("offload_relayout") else 0.0
    backward = sum([c.get(k, 0.0) for k in BACKWARD_PHASE])
    return sum([v for k, v in c.items() if k not in _ONE_PHASE]) + max(loss, offload, backward)


@dataclass(frozen=True)
class Memory:
    components: dict[str, float]  # bytes per chip
    hbm_bytes: float
    # what the TPU compiler lets one program use per device (slices.ChipSpec.compiler_hbm_bytes, measured);
    # None: the capacity less RUNTIME_RESERVE
    compiler_limit: float | None = None
    # components the model cannot know the compiler keeps, counted in full (the estimate errs high there): (the
    # component, why it is an upper bound)
    uncertain: tuple[tuple[str, str], ...] = ()

    def uncertain_notes(self) -> list[str]:
        """One line a component counted in full that the compiler may not keep: its name, bytes and why."""
        return [f"{k} ({self.components.get(k, 0.0) / 2**30:.2f} GiB): {why}" for k, why in self.uncertain]

    @cached_property
    def total(self) -> float:
        """Peak bytes: the model state, weight casts and kept activations are live throughout the step; the loss'
        buffers (LOSS_PHASE), an offloaded stack's relayout (OFFLOAD_PHASE) and the backward pass' (BACKWARD_PHASE:
        the gradients and one layer's working set) are not live at once, so the largest phase counts. Computed once:
        `components` is never changed after construction (an enumeration reads it of each mesh several times, and
        many meshes share a Memory)."""
        return _peak(self.components)

    @cached_property
    def certain_total(self) -> float:
        """The peak without the components the compiler may not keep (`uncertain`): what the step needs for sure."""
        if not self.uncertain:
            return self.total
        drop = {k for k, _ in self.uncertain}
        return _peak({k: (0.0 if k in drop else v) for k, v in self.components.items()})

    @property
    def usable(self) -> float:
        return usable_hbm(self.hbm_bytes, self.compiler_limit)

    @property
    def fits(self) -> bool:
        return self.total <= self.usable

    @cached_property
    def verdict(self) -> str:
        """'fits', 'tight' (within TIGHT_BAND of the usable HBM, or over it only by components the compiler may not
        keep: the estimate cannot decide) or 'does not fit'. Decided once, like `total`."""
        low, high = TIGHT_BAND
        if self.total <= low * self.usable:
            return "fits"
        return "tight" if self.certain_total <= high * self.usable else "does not fit"

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
            "uncertain": self.uncertain_notes(),
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
    # The state as the tiles store it (`least_padded`): a weight's dimensions on a device are emb over the embed axes
    # (embed_vocab's degree), the MLP's or heads over tensor, head_dim, the vocabulary over tensor. The gradients are
    # not padded so: their layout is the backward's dots', not chosen for them (the note above row_major_fill).
    stored_params = padded_params(s, p, ev, tp)
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
    pad = layer_padding(s, p, 1, tp)  # gathered whole over the embed axes
    gathered = pad * (p.per_layer() - p.routed + routed / split) * ACT_BYTES / max(1, tp)
    # The backward recomputes one scan iteration's forward and holds the working set of every layer in it: a Gemma 2
    # pair holds both MLPs' intermediates at once (gemma2-9b on v5e-16, remat full: six bf16[1,2048,14336] in the
    # backward scan's body, three a layer), while its weights are still gathered matrix by matrix (two
    # bf16[1,3584,14336] and two bf16[1,16,256,3584] live at once).
    # A scanned block of MoE layers holds every layer's routed buffers and gathered experts at once (gpt-oss-20b on
    # v5p-32, fsdp 16, pdbs 4 at 8k, blocks of two layers: eighteen bf16[131072,2880] routed-row buffers, nine a layer,
    # and six bf16[1,32,2880,2880] expert matrices live in the backward's body). MoE's combine weighs each token's
    # top_k expert outputs in float32 (`float32_weight_sum`: f32[32768,4,2880] there, reshape.5592).
    # (Each layer's gathered weights are one value in the body, used by its recomputed forward and its backward, so
    # they outlive the later layers'.) A block of several layers counts its MoE layers' share of them: Llama 4
    # Maverick's blocks of four hold two MoE and two dense layers.
    # That is the block's backward when only its input is saved (remat `full`: gpt-oss-20b, gemma3-12b's blocks of six,
    # all six working sets): the forward is recomputed through the block, each layer's from the one before, before any
    # layer's backward runs. Where the policy saves every layer's input (MaxText names each decoder layer's input
    # `decoder_layer_input`, llama4.py, gpt_oss.py, gemma3.py, and the host keeps it when offloaded), each layer is
    # recomputed from its own input and the scheduler recomputes its MLP just before that layer's backward: the block
    # holds every layer's emb-wide and attention tensors and gathered weights, and one layer's MLP intermediates and
    # routed rows. Llama 4 Scout, blocks of four (v5p-256, fsdp 128, pdbs 8 at 8k, decoder_layer_input offloaded):
    # the backward's body holds the q, attention output and emb-wide buffers of the block's four layers
    # (bf16[8,40,8192,128], bf16[8,8192,5120], live from its start to each layer's backward) and eight
    # bf16[1,16,5120,8192] expert matrices, but the grouped matmuls' bf16[65536,8192] outputs of one layer only (gmm.36,
    # .37, .43, recomputed in that layer's backward; 32 grouped matmuls in the body, none of them the forward wo's).
    per_iteration = s.layers / scan_iterations(s)
    independent = per_iteration > 1 and "decoder_layer_input" in remat.offloaded
    moe_share = s.routed_layers / s.layers if s.moe else 0.0
    routed_rows = (1.0 if independent else per_iteration * moe_share) if per_iteration > 1 else 1.0
    routed_rows *= _moe_dispatch(s, ep, tokens)
    if s.moe and per_iteration > 1:
        gathered = per_iteration * pad * (p.per_layer() - p.routed + p.routed / split) * ACT_BYTES / max(1, tp)
    combine = tokens * s.experts_per_tok * lanes(s.emb) * s.moe_combine_bytes if s.moe and s.moe_tile > 0 else 0.0
    layer_dims = per_iteration * attention_dims(s) + mlp_dims(s) if independent else per_iteration * all_dims(s)
    working = TEMP_LAYERS * tokens * layer_dims * ACT_BYTES + gathered + routed_rows + combine
    # Context parallelism: the attention's backward gathers the keys and values of the whole sequence over the context
    # axis and accumulates their gradients there in float32 before reduce-scattering them (llama3.1-70b, context 8,
    # 131072 tokens, flash: bf16[1,8,131072,128] per gathered K and V, f32[8,131072,128] `dk_alias`/`dv_alias`).
    kv_dims = 2 * s.kv_heads * lanes(s.head_dim)
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
    # Without data parallelism one logits-sized buffer outlives the loss. On the reduce-scatter path, the head's
    # gradient is reduce-scattered over fsdp in a loop the compiler schedules after the layers' backward, which reads
    # it (llama3-8b on v6e-16, fsdp 16: the logits' gradient live through the whole backward scan; fsdp 4 x tensor 4:
    # bf16[8,2048,32064] beside the float32 layer gradients at the backward's peak; `default` on v5p-32, fsdp 16). On
    # the all-reduce path, the forward logits, from which the compiler recomputes their gradient inside the head's
    # weight-gradient dot, when it schedules that dot after the layers' backward, as it did in both compiles whose
    # remat policy offloads to the host (llama3.1-8b recipe on v6e-256, fsdp 256: fusion.418{1} bf16[4,8192,128256]
    # live from the loss to the backward's end; DeepSeek-V3 on v5p-1024, fsdp 512: multiply_convert_fusion.1
    # bf16[6,8192,129280] alike) and in none of the three that keep everything on the device (llama3.1-8b on
    # v5e-256, fsdp 256, pdbs 1 and 2, with and without use_iota_embed: within 1% of the compiler without it, 5% and
    # 15% over with it). With data parallelism the gradient is also reduced over
    # `data`, right after the loss (`default` on v5p-32, data 2 x fsdp 8, and v5e-8, data 2 x fsdp 4: the buffer dies
    # within a few instructions). Nor with vocabulary tiling, whose custom VJP finishes the head's gradient before the
    # layers' backward (num_vocab_tiling 4 on v6e-16 fsdp 16: no logits buffer live at the backward's peak). A tied
    # table's head gradient in a loop (TIED_HEAD_LOOP_DEVICES) is finished right after the loss: nothing carried
    # either.
    carried = logit_buf if vocab_tiles <= 1 and data == 1 and not tied_loop else 0.0
    if allreduce_path and not remat.offloaded:
        carried = 0.0
    # A vocabulary that is not a multiple of 128 lanes is laid out sequence-minor (`lanes`), and then the logits'
    # gradient is materialised at the loss and consumed there: the head's weight gradient is computed and reduced right
    # after the loss and only it, bf16 [emb, vocab / tensor], lives through the backward. Llama 4 Scout (vocabulary
    # 202048) on v5p-256, fsdp 128, offloading: bf16[8,8192,202048]{1,2,0} logits and their gradient dead at the
    # loss' end (2624-2658), `all-reduce.100` bf16[5120,202048] from there to the update; the same at pdbs 12
    # (bf16[12,8192,202048], dead at 2643 of 7555). Every vocabulary that is a multiple of 128 (Llama 3's 128256,
    # gpt-oss' 201088, DeepSeek's 129280) keeps a logits-sized buffer as above.
    head_carried = 0.0
    if carried and s.vocab % TILE_LANES:
        carried, head_carried = 0.0, head
    if allreduce_path:
        # the gathered head and its whole gradient, all-reduced
        logits, head_allreduced = logit_buf, head
    else:
        logits, head_allreduced = LOGITS_BUFFERS * logit_buf, 0.0
    # A tied table's head gradient in a loop: its two bf16 accumulators, allocated at the step's start, live at the
    # loss.
    head_grad = 2 * s.vocab * s.emb / ev * ACT_BYTES / max(1, tp) if tied_loop else 0.0
    hidden = tokens * lanes(s.emb) * HIDDEN_BYTES
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
    stored_layers = s.layers * p.per_layer() * layer_padding(s, p, ev, tp)
    casts = stored_layers * ACT_BYTES / shards if bpp.weights > ACT_BYTES else 0.0
    relayout_offloaded = offload_relayout(s, remat, tokens, tp)
    uncertain: list[tuple[str, str]] = []
    if relayout_offloaded:
        uncertain.append(
            (
                "offload_relayout",
                "an offloaded layer-input or out_proj stack of the dense layers relaid through HBM (twice its size), "
                "where the compiler writes it in another layout than the backward reads it",
            )
        )
    if one_hot:
        uncertain.append(
            (
                "embedding_one_hot",
                "kept from the token lookup to the table's gradient; the compiler recomputes it instead when keeping "
                "it would not fit",
            )
        )
    components = {
        "weights": stored_params * bpp.weights / shards,
        "weight_casts": casts,
        "gradients": total_params * bpp.grads / shards,
        "optimizer": stored_params * bpp.optimizer / shards,
        "activations": acts,
        "embedding_one_hot": one_hot,
        "embedding_relayout": relayout,
        "logits": logits + hidden,
        "output_head": head,
        "output_head_gradient": head_allreduced,
        "head_gradient": head_grad,
        "offload_relayout": relayout_offloaded,
        "temporaries": working + carried + cp_kv,
        "output_head_carried": head_carried,
    }
    # A logits-sized buffer carried through the layers' backward is the scheduler's choice, and XLA's scheduler and
    # rematerialization work under the HBM limit: where the step would not fit with it, the compiler does without it.
    # MaxText's llama3.1-70b 8k recipe on v6e-256 (fsdp 256, pdbs 5, offload): the forward logits are recomputed at the
    # end of the backward (`fusion.419.remat`, bf16[5,8192,128256], live for 7 instructions there) and the gathered
    # head, bf16[8192,128256], is what lives from the loss to the backward's end: one head-sized buffer carried
    # instead of the logits (as where the vocabulary is laid out sequence-minor, above); the note says the estimate
    # relies on it. Only where the step
    # then fits clear of the band where the estimate cannot decide (TIGHT_BAND): nearer the limit the estimate keeps the
    # logits, erring high (DeepSeek-V3 on v5p-1024, pure FSDP: 99.7% of the usable HBM without them, and the compiler
    # kept them, multiply_convert_fusion.1 bf16[6,8192,129280], and ran out of memory).
    usable = usable_hbm(hbm, chip.compiler_hbm_bytes)
    without = {**components, "temporaries": components["temporaries"] - carried, "output_head_carried": head}
    if carried and _peak(components) > usable and _peak(without) <= TIGHT_BAND[0] * usable:
        components = without
        uncertain.append(
            (
                "output_head_carried",
                "the logits are not carried through the backward pass, which with them would not fit: the compiler "
                "then recomputes them at its end and carries the gathered head instead",
            )
        )
    return Memory(components, hbm, chip.compiler_hbm_bytes, uncertain=tuple(uncertain))
