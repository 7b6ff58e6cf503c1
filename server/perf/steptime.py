"""Step time and MFU: compute, HBM and communication time of one training step on one mesh,
combined by an explicit overlap model.

Overlap model (what hides what): every collective term (the collectives of one kind over one mesh-axis group)
takes from the measured overlap table (server/perf/overlap.py, compiled MaxText train steps under the run's XLA
flags) the share `hidden` of its time the compiled schedule runs asynchronously, and the compute it runs behind
(its window); the rows of the kinds the compiler turns it into (collective matmul's permutes, a tensor all-reduce's
all-gather and reduce-scatter: _compiled_kinds) mix by their time. That share hides behind at most the window's
seconds:
    exposed = t x (1 - hidden) + max(0, t x hidden - window)
Terms behind the same window share it (they wait for the same compute). The windows, per step:
- "layer": the layers' compute (matmuls, attention, memory-bound work): the scan prefetches the next layer's
  weights and reduce-scatters the last layer's gradients while a layer computes;
- "matmul": the matmuls the collective feeds (collective matmul's windowed einsums): tensor-parallel collectives
  the layer's weight matmuls, context-parallel ones attention, the expert all-to-all the MLP matmuls;
- "forward" / "backward": the layers' compute of that pass (the backward with its recompute);
- "none": nothing.
The data-parallel gradient all-reduce runs once a step, after the last microbatch's gradients: its windows are
that microbatch's. Where the table has no row the model assumes what it always did (ASSUMED_*): FSDP weight
all-gathers and gradient reduce-scatters (and MoE's weight collectives over the expert axis: the dense weights'
gathers over fsdp x expert, the capacity path's expert-weight gathers) hide behind the layer's compute; tensor,
context, expert (MoE's token dispatch and combine) and pipeline collectives and the data-parallel all-reduce are
exposed. StepTime.overlap records each term's figures and where they came from.

Host offload: offloaded activations go to host memory during the forward pass and come back during the backward
pass, over the chip's PCIe link, which a tpu7x chip's two devices share; a layer's copy out hides only behind the
forward pass' compute, its copy back only behind the backward pass' (ASSUMED_HOST_*).

Matmuls, attention and memory-bound ops (norms, activations, optimizer update) run one after another on a
TensorCore: their times add. Pipeline parallelism adds the bubble (stages-1)/(microbatches+stages-1).

The global constants below are the model's only calibration; each is justified where it stands
and none is fitted per configuration (bench/mfu_references.py shows how they do).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from server.config.slices import ChipSpec
from server.config.xla_flags import XlaFlags
from server.perf import overlap, roofline
from server.perf.arith import BytesPerParam, Flops, Params, Shape
from server.perf.collectives import Collective, CommPlan, Path, path, price
from server.perf.layout import CONTEXT, DATA, EXPERT, FSDP, PIPELINE, TENSOR, WEIGHT_SHARDING, Layout
from server.perf.memory import tensor_dims
from server.perf.remat import RematPolicy

# The fraction of the bf16 peak that large matmuls sustain is a per-generation figure in the chip
# table (ChipSpec.mxu_efficiency, with its source); memory effects come on top from the roofline.
# Flash attention runs its softmax on the vector units between two matmuls, and its backward pass
# recomputes the scores and probabilities (two more matmuls per block than the FLOP count has) and
# runs the softmax gradient on the vector units: 0.4 of peak on the counted FLOPs.
ATTENTION_EFFICIENCY = 0.4
# Fraction of HBM bandwidth that fused memory-bound kernels sustain.
HBM_EFFICIENCY = 0.8
# What the overlap table is taken to say where it has no row for a collective term (overlap.lookup's `assumed`):
# (hidden share, window), the model as it stood before the table. The scan's weight prefetch and gradient
# reduce-scatters are asynchronous behind the layer's compute:
ASSUMED_PREFETCH = (1.0, "layer")
# Tensor, context, expert and pipeline collectives and the data-parallel gradient all-reduce: exposed. (The TPU
# compiler's defaults do run collective matmul, issue 26; the table says how much that hides, this does not guess.)
ASSUMED_EXPOSED = (0.0, "none")
# Host offload's copies are asynchronous: out behind the forward pass' compute, back behind the backward pass'.
ASSUMED_HOST_OUT = (1.0, "forward")
ASSUMED_HOST_IN = (1.0, "backward")
# Elementwise traffic per token per layer in the forward pass, in units of hidden elements:
# two RMSNorms (read+write: 2D each), two residual adds (3D each), rotary on q and k, the gated
# activation (read the n_in MLP inputs, write one). The backward pass moves about twice that.
NORM_RESIDUAL_ELEMS = 10
# What XLA really moves for that memory-bound work, as a multiple of the minimal traffic above:
# fp32 upcasts inside norms and their gradients, unfused converts, the scan's dynamic-update-slices
# of stacked activations and gradients, copies around collectives. In XProf's real TPU v5 training profile
# (tests/data/profiles/xprof-real-tpu-v5-training) HBM-bound ops take 53% of device time, dynamic-update-slice
# alone 14%:
# far above the minimal count. Twice the minimal traffic is the value that bench/mfu_references.py
# supports best among 1-4 (a global constant; see that benchmark's output for what it buys).
MEMORY_BOUND_FACTOR = 2.0
ACT_BYTES = 2
GRAD_COMM_BYTES = 4  # gradients are reduced in float32 (weights and grads default to float32)
WEIGHT_COMM_BYTES = 2  # weights are cast to bf16 before they are gathered
# Bytes an on-the-fly quantize moves per element: a bf16 read for the absmax scale, then a bf16 read and a
# 1-byte write for the cast.
QUANTIZE_BYTES = 5
ADAM_BYTES_PER_PARAM = 28  # AdamW update: read param, grad, mu, nu (4 x 4 B), write param, mu, nu (3 x 4 B)
# MoE collectives as the TPU compiler lays out MaxText's MoE layer (bench/moe_vs_compiler.py: maxtext 0.2.5, libtpu
# 0.0.52, reduced-layer Mixtral, Qwen3 MoE and DeepSeek-style configs on v5p-16; moe.py lines at e591f30cb):
# - The routed experts' gradients are reduced in bf16, the dtype their gathered weights are cast to: with expert
#   parallelism a reduce-scatter over fsdp of the device's experts (mixtral fsdp 4 x expert 2: `fusion.806`
#   bf16[4,1024,14336], unscattered bf16[4,4096,14336]); without it the dropless path's shard_map takes the weights
#   replicated over fsdp (moe.py:1663, `remove_mesh_axes_from_partition_spec(w0_pspec, ("fsdp",))`), so its
#   transpose is an all-reduce of every expert's whole bf16 gradient (mixtral fsdp 8: `psum.27`
#   bf16[8,4096,14336], replica_groups the 8 fsdp devices; qwen3-30b-a3b fsdp 8: `psum.27` bf16[128,2048,768]).
ROUTED_GRAD_COMM_BYTES = 2
# Collective purposes that move weights or their gradients inside the layer scan: prefetched, hidden behind the
# layer's compute (overlap model above), on the axes a MoE model's weights are sharded over.
MOE_WEIGHT_AXES = frozenset({"fsdp", "fsdp+expert", "expert"})
LAYER_WEIGHT_PURPOSES = frozenset(
    {
        "weights (forward)",
        "weights (backward)",
        "gradients",
        "routed expert weights (forward)",
        "routed expert weights (backward)",
        "routed expert gradients",
        "embedding weights",
        "embedding gradients",
    }
)


_SECONDS = operator.attrgetter("seconds")


class OverlapTerm(NamedTuple):  # a tuple: the cost model makes one per term of every mesh it prices
    """One collective term of a step (the collectives of one kind over one mesh-axis group, or host offload's copies
    one way) and what the overlap model exposes of it: `seconds` as if nothing overlapped, the `hidden` share the
    schedule runs asynchronously, the `window` it runs behind (overlap.WINDOWS) and that window's compute in seconds
    (shared by every term behind it), the `exposed_s` left on the critical path, and where `hidden` comes from."""

    axis: str
    kind: str
    seconds: float
    hidden: float
    window: str
    window_s: float
    exposed_s: float
    source: str

    def to_json(self) -> dict[str, Any]:
        return {
            "axis": self.axis,
            "kind": self.kind,
            "seconds": self.seconds,
            "hidden": self.hidden,
            "window": self.window,
            "window_s": self.window_s,
            "exposed_s": self.exposed_s,
            "source": self.source,
        }


def exposed_seconds(seconds: float, hidden: float, window_s: float, pool_s: float | None = None) -> float:
    """What stays on the critical path of a term of `seconds` whose `hidden` share runs behind `window_s` of compute:
    the synchronous share, and whatever of the asynchronous share outlasts the window. When other terms wait behind
    the same window, `pool_s` is the asynchronous seconds of them all (this one's included): what outlasts the window
    is exposed in proportion to each one's asynchronous seconds."""
    async_s = seconds * hidden
    pool_s = async_s if pool_s is None else pool_s
    over = pool_s - window_s
    return seconds * (1.0 - hidden) + (over * async_s / pool_s if over > 0 else 0.0)


@dataclass
class StepTime:
    compute_s: float  # matmuls and attention at their roofline bound
    hbm_s: float  # memory-bound ops: norms, activations, optimizer, weight slicing of the scan
    comm_s: float  # all collectives, as if nothing overlapped
    exposed_comm_s: float  # what the overlap model leaves on the critical path
    bubble_s: float
    step_s: float
    comm: CommPlan
    points: list[roofline.Point] = field(default_factory=list)
    comm_by_axis: dict[str, float] = field(default_factory=dict)
    exposed_by_axis: dict[str, float] = field(default_factory=dict)
    _overlap: _Overlap | None = None

    @property
    def overlap(self) -> list[OverlapTerm]:
        """Per collective term and host offload's copies: what the overlap model hid and exposed, and why."""
        return self._overlap.records() if self._overlap is not None else []

    def bottleneck(self) -> tuple[str, float, dict[str, float]]:
        """What the step waits on most (compute, HBM or communication), the margin to the runner-up
        as a fraction of the step, and the attribution it rests on."""
        parts = {"compute": self.compute_s, "hbm": self.hbm_s, "communication": self.exposed_comm_s}
        ranked = sorted(parts.items(), key=lambda kv: kv[1], reverse=True)
        margin = (ranked[0][1] - ranked[1][1]) / self.step_s if self.step_s else 0.0
        return ranked[0][0], margin, parts


@dataclass(frozen=True)
class _Work:
    points: tuple[roofline.Point, ...]  # the layers' and the loss' (the scanned state's: _state_traffic)
    compute: float
    compute_logits: float
    ew: roofline.Point
    # The overlap windows' compute, per microbatch (all layers): the forward pass' share of the layers' compute and
    # memory-bound work (the rest is the backward pass', recompute included), the weight matmuls, the MLP's, attention.
    forward: float = 0.0
    matmuls: float = 0.0
    mlp: float = 0.0
    attention: float = 0.0


def _work(
    s: Shape,
    p: Params,
    bpp: BytesPerParam,
    fl: Flops,
    chip: ChipSpec,
    n: int,
    tokens: float,
    rec: frozenset[str],
    tp: int,
    ep: int,
    matmul_speedup: float,
    grouped_speedup: float,
    moe_factor: float = 1.0,
    dispatch_expert_parallel: bool = False,
    moe_wo_again: bool = False,
    quant_passes: int = 0,
) -> _Work:
    """Compute and memory-bound time of one microbatch's layers and loss: depends on the mesh only through the
    tensor and expert degrees."""
    passes_fwd = {k: 1 + 2 + (1 if k in rec else 0) for k in ("qkv", "out_proj", "mlpwi", "mlpwo", "attention")}
    # -- compute: per matmul kind, at its roofline bound (flops and the bytes it streams) ----------
    points: list[roofline.Point] = []
    # A device's share of one layer's MLP weights: expert parallelism splits the routed experts only, and only on
    # the dropless path: the capacity path gathers every expert onto every device (`_moe_weights_over_expert`).
    mlp_local = (p.mlp - p.routed) / tp + p.routed / (
        tp * (1 if _moe_weights_over_expert(s, ep, dispatch_expert_parallel) else ep)
    )
    layer_w_local = {
        "qkv": s.emb * s.head_dim * (s.q_heads + 2 * s.kv_heads) / tp,
        "out_proj": s.emb * s.head_dim * s.q_heads / tp,
        "mlpwi": mlp_local * s.n_mlp_in / (s.n_mlp_in + 1),
        "mlpwo": mlp_local / (s.n_mlp_in + 1),
    }
    io_dims = {
        "qkv": s.emb + s.head_dim * (s.q_heads + 2 * s.kv_heads) / tp,
        "out_proj": s.emb + s.head_dim * s.q_heads / tp,
        "mlpwi": s.emb + s.n_mlp_in * s.mlp / tp,
        "mlpwo": s.emb + s.mlp / tp,
    }
    # The dimension tensor parallelism splits, per chip: below the MXU's side (128 on v4/v5e/v5p, 256 on
    # v6e/tpu7x) part of the systolic array idles (scaling book, TPU chapter: matmuls want multiples of it).
    mlp_dim = s.moe_mlp if s.moe else s.mlp
    split_dim = {
        "qkv": s.q_heads * s.head_dim / tp,
        "out_proj": s.q_heads * s.head_dim / tp,
        "mlpwi": mlp_dim / tp,
        "mlpwo": mlp_dim / tp,
    }
    compute = 0.0
    forward = mlp = 0.0  # the forward pass' share of the layers' time, the MLP matmuls' (_Work)
    # Grouped matmuls (megablox/tokamax gmm, the dropless path) visit every m-tile of the routed rows once,
    # plus one more visit for each group boundary that falls inside a tile: between tiles_m and
    # tiles_m + groups - 1 visits (src/maxtext/kernels/megablox/backend.py:159@e591f30cb). Routing puts
    # boundaries anywhere, so a device's gmm over its local experts does about (groups - 1) extra tiles of
    # `moe_tile` rows: a fraction (experts/ep - 1) x tile / (tokens x top_k) more MXU work on routed experts.
    routed_rows = tokens * s.experts_per_tok
    gmm_extra = (
        (max(1, s.experts // max(1, ep)) - 1) * s.moe_tile / routed_rows
        if s.moe and s.moe_tile > 0 and routed_rows > 0
        else 0.0
    )
    # the routed experts' forward FLOPs per layer per device (input matrices 2, output 1), mean over layers
    routed_fwd = 2 * tokens * s.experts_per_tok * s.emb * s.moe_mlp * s.routed_layers / s.layers if s.moe else 0.0
    routed_share = {"mlpwi": 2 * routed_fwd, "mlpwo": routed_fwd}
    # with expert parallelism every shard waits for the busiest (arith.MOE_LOAD_IMBALANCE): its routed work
    # is the mean's times the imbalance, and the tile visits come on top
    routed_scale = (s.moe_imbalance if ep > 1 else 1.0) * (1 + gmm_extra)
    # A rematerialised MoE layer runs its routed experts' output matmul again: the combine's gradient with respect
    # to the router weights needs every expert's output (moe.py names it `moe_mlpwo`), which a dense layer's
    # backward never needs (remat.recomputed). Compiled, full remat: the dropless path's backward has the wo gmm's
    # [8192,4096] output twice besides the two input-gradient gmms (mixtral fsdp 4 x expert 2: four per layer, one
    # in the forward), the capacity path's `[8,640,14336] x [8,14336,4096] -> [8,640,4096]` in its backward loop.
    wo_again = routed_share["mlpwo"] * routed_scale * (moe_factor if s.moe_tile == 0 else 1.0) if moe_wo_again else 0.0
    for k in ("qkv", "out_proj", "mlpwi", "mlpwo"):
        flops = fl.per_layer_forward[k] / n * passes_fwd[k]  # forward, 2 backward matmuls, recompute
        routed = routed_share.get(k, 0.0) * routed_scale * passes_fwd[k] if s.moe_tile else 0.0
        flops += routed_share.get(k, 0.0) * (routed_scale - 1) * passes_fwd[k]
        if k == "mlpwo" and wo_again > 0:
            flops += wo_again
            routed += wo_again if s.moe_tile else 0.0
        nbytes = (layer_w_local[k] * ACT_BYTES + tokens * io_dims[k] * ACT_BYTES) * passes_fwd[k]
        # Quantized matmuls (int8/fp8) run at the chip's low-precision peak: matmul_speedup x bf16; the grouped
        # matmuls of routed experts only where the mode quantizes them too (`grouped_speedup`).
        speed = matmul_speedup
        if routed > 0 and grouped_speedup != matmul_speedup and flops > 0:
            speed = flops / ((flops - routed) / matmul_speedup + routed / grouped_speedup)
        eff = chip.mxu_efficiency * speed * min(1.0, split_dim[k] / chip.mxu_dim)
        pt = roofline.point(k, flops * s.layers, nbytes * s.layers, chip, eff, HBM_EFFICIENCY)
        points.append(pt)
        compute += pt.seconds
        # one of the point's passes is the forward (the MoE output matmul's extra run is in the backward)
        again = wo_again if k == "mlpwo" and flops > 0 else 0.0
        forward += pt.seconds * (1.0 - again / flops if flops > 0 else 1.0) / passes_fwd[k]
        if k in ("mlpwi", "mlpwo"):
            mlp += pt.seconds
    matmuls = compute
    attn_flops = fl.per_layer_forward["attention"] / n * passes_fwd["attention"] * s.layers
    attn_bytes = tokens * s.head_dim * (2 * s.q_heads + 2 * s.kv_heads) / tp * ACT_BYTES * passes_fwd["attention"]
    pt = roofline.point("attention", attn_flops, attn_bytes * s.layers, chip, ATTENTION_EFFICIENCY, HBM_EFFICIENCY)
    points.append(pt)
    compute += pt.seconds
    attention = pt.seconds
    forward += pt.seconds / passes_fwd["attention"]
    logit_flops = fl.logits_forward / n * 3
    logit_bytes = (s.emb * s.vocab / tp * ACT_BYTES + tokens * (s.emb + s.vocab / tp) * ACT_BYTES) * 3
    pt = roofline.point("logits", logit_flops, logit_bytes, chip, chip.mxu_efficiency, HBM_EFFICIENCY)
    points.append(pt)
    compute_logits = pt.seconds

    # -- memory-bound work ------------------------------------------------------------------------
    mlp_tok = (s.experts_per_tok + s.shared_experts) * s.moe_mlp if s.moe else s.mlp
    ew_elems = NORM_RESIDUAL_ELEMS * s.emb + (s.n_mlp_in + 1) * mlp_tok / tp
    ew_elems += 2 * s.head_dim * (s.q_heads + s.kv_heads) / tp
    ew_passes = (3 + (1 if rec else 0)) * MEMORY_BOUND_FACTOR
    ew = roofline.point(
        "elementwise",
        0.0,
        tokens * ew_elems * ACT_BYTES * ew_passes * s.layers,
        chip,
        chip.mxu_efficiency,
        HBM_EFFICIENCY,
    )
    # Quantized training casts both operands of every quantized weight matmul in every quantized pass: the forward
    # quantizes the input and the weight, the activation gradient the output's gradient and the weight, the weight
    # gradient the input and the output's gradient (Qwix/AQT quantize on the fly; quantizations.py). Each cast
    # is memory-bound: a read for the scale (absmax), a read and a narrow write (QUANTIZE_BYTES per element).
    ew_all = ew  # the memory-bound work the step waits on: elementwise, MoE's permutes, the quantized casts
    forward += ew.seconds / (3 + (1 if rec else 0))  # the forward pass moves a third of it (a quarter with remat)
    if s.moe and s.moe_tile > 0:
        # The dropless path sorts each token's top_k copies into expert order and back (moe.py permute/unpermute:
        # a gather of tokens x top_k rows of emb, written once; after the experts a gather of them back and the
        # router-weighted sum over top_k), and the backward pass runs their transposes (scatter-adds): per token
        # and routed layer (3 top_k + 1) emb-wide rows in each pass, memory-bound, like the activations.
        rows = 3 * s.experts_per_tok + 1
        permute_passes = 3 + (1 if {"mlpwi", "mlpwo"} & rec else 0)
        permute = roofline.point(
            "moe permute",
            0.0,
            tokens * rows * s.emb * ACT_BYTES * permute_passes * s.routed_layers,
            chip,
            chip.mxu_efficiency,
            HBM_EFFICIENCY,
        )
        points.append(permute)
        ew_all = roofline.Point(ew.name, 0.0, ew.bytes + permute.bytes, ew.seconds + permute.seconds, ew.bound)
        forward += permute.seconds / permute_passes
    if quant_passes:
        elems = sum(2 * tokens * io_dims[k] + 2 * layer_w_local[k] for k in layer_w_local) * quant_passes / 3
        elems += sum(tokens * io_dims[k] / 2 + layer_w_local[k] for k in layer_w_local if k in rec)
        quant = roofline.point(
            "quantize", 0.0, elems * QUANTIZE_BYTES * s.layers, chip, chip.mxu_efficiency, HBM_EFFICIENCY
        )
        points.append(quant)
        ew_all = roofline.Point(ew.name, 0.0, ew_all.bytes + quant.bytes, ew_all.seconds + quant.seconds, ew.bound)
        # the forward pass casts in one of the quantized passes (about: each pass casts two operands)
        forward += quant.seconds / (quant_passes + (1 if rec else 0))
    points.append(ew)

    return _Work(tuple(points), compute, compute_logits, ew_all, forward, matmuls, mlp, attention)


def _state_traffic(
    s: Shape, p: Params, bpp: BytesPerParam, chip: ChipSpec, shards_w: int
) -> tuple[roofline.Point, roofline.Point]:
    """The memory-bound work on a device's share of the model state, once per step: the layer scan's slicing of the
    weights and gradients and the optimizer update. Depends on the mesh only through the weight-sharding degree."""
    local_params = p.total(s.layers) / shards_w
    scan = roofline.point(
        "scan weights and grads", 0.0, 3 * local_params * bpp.weights, chip, chip.mxu_efficiency, HBM_EFFICIENCY
    )
    opt = roofline.point(
        "optimizer update", 0.0, local_params * ADAM_BYTES_PER_PARAM, chip, chip.mxu_efficiency, HBM_EFFICIENCY
    )
    return scan, opt


def _moe_weights_over_expert(s: Shape, ep: int, dispatch_expert_parallel: bool = False) -> bool:
    """Whether the routed experts' weights are gathered over the expert axis: on MaxText's capacity path
    (`sparse_matmul: false`) its dispatch and MLP activations keep 'expert' on both their expert and batch dimensions
    (activation_exp and activation_batch_moe; moe.py:2804-2809@e591f30cb calls this the FSDP-style fallback), so
    the compiler keeps the tokens where they are, gathers every
    expert's weights onto every device and reduce-scatters their gradients over the expert axis. Compiled (mixtral
    2 layers, fsdp 4 x expert 2, capacity 1.25): `all-gather.146` bf16[1,8,4096,14336] over expert after
    `all-gather.145` bf16[1,4,4096,14336] over fsdp, twice a layer per matrix; `fusion.874` reduce-scatter over
    expert of the bf16 gradient of all 8 experts; no all-to-all. The dropless path's shard_map keeps them split.
    MaxText since PR #4007 (2026-05-28): its commit ea41360c4 describes this fallback from the all-to-all and adds
    the opt-in `moe_dispatch_no_expert_sharding` (`dispatch_expert_parallel`), which keeps the all-to-all."""
    return s.moe and s.moe_tile == 0 and ep > 1 and not dispatch_expert_parallel


@dataclass(frozen=True)
class _Group:
    """An axis group's links on one mesh: its path, and what collectives.price reads of it."""

    path: Path
    # ICI and DCN degree, ICI bandwidth, ring steps, hop latency: paths that differ only in the physical axes they
    # name (x or y, say) price every collective alike
    numbers: tuple[int, int, float, int, float]


def _group(lay: Layout, axes: tuple[str, ...], memo: dict[Any, Any]) -> _Group:
    """The group of these mesh axes, memoised in `memo` (one slice) on all that collectives.path reads of the layout:
    the group's ICI and DCN degrees and the physical axes its ICI part occupies."""
    key = (axes, lay.links(*axes))
    hit = memo.get(key)
    if hit is None:
        pt = path(lay, axes)
        hit = memo[key] = _Group(pt, (pt.ici_degree, pt.dcn_degree, pt.ici_bw, pt.ring_steps, pt.hop_latency))
    return hit


# The mesh-axis groups a step's collectives run over (CommPlan.paths, in this order; MoE adds "fsdp+expert").
GROUPS = (
    ("fsdp", FSDP),
    ("tensor", TENSOR),
    ("context", CONTEXT),
    ("expert", EXPERT),
    ("data", DATA[:1]),
    ("pipeline", PIPELINE),
)

Spec = tuple[str, str, float, float]  # a collective's kind, purpose, count per step and bytes each (Collective)


@dataclass(frozen=True)
class _Step:
    """What the step's collectives depend on besides the mesh: step_time's model, batch and remat arguments."""

    s: Shape
    p: Params
    tokens: float  # per device, per microbatch
    rec: frozenset[str]  # remat.recomputed()
    grad_accum: int
    microbatches: int | None
    moe_factor: float
    dispatch_expert_parallel: bool


# The collectives of a step, in groups that each run over one axis group's links and read of the mesh only the
# degrees they take as arguments (step_time's `add` memoises them on the numbers of the group's path and those degrees).


def _dense_weights(st: _Step, tp: int) -> list[Spec]:
    """A dense model's layer weights over fsdp: what one device gathers of a layer (tensor parallelism splits every
    matrix), forward and backward, and its gradients reduce-scattered."""
    layer_w = st.p.per_layer() / tp
    layers = st.s.layers * st.grad_accum
    return [
        ("all-gather", "weights (forward)", layers, layer_w * WEIGHT_COMM_BYTES),
        ("all-gather", "weights (backward)", layers, layer_w * WEIGHT_COMM_BYTES),
        ("reduce-scatter", "gradients", layers, layer_w * GRAD_COMM_BYTES),
    ]


def _moe_weight_axis(ep: int, f_deg: int) -> str:
    """The axis group a MoE model's dense weights (and the embedding and output head: `embed` axes too) are gathered
    over, as the compiler lays out MaxText's program.

    Dense weights (attention, norms, router, shared experts, dense-first layers' MLPs) are sharded on MaxText's
    `embed` axes, which include the expert axis (base.yml logical_axis_rules: embed -> fsdp, fsdp_transpose, context,
    context_usp_ulysses, expert), so they are gathered over fsdp x expert (mixtral fsdp 4 x expert 2: `all-gather.94`
    bf16[4096,32,128] with replica groups of all 8 devices; qwen3-30b-a3b expert 8, fsdp 1: `all-gather.58`
    bf16[2048,32,128] over the 8 expert devices, which a plan over fsdp alone misses; the output head likewise,
    deepseek3 fsdp 2 x expert 4: `all-gather.58` bf16[7168,129280] over all 8 devices)."""
    if ep > 1:
        return "fsdp+expert" if f_deg > 1 else "expert"
    return "fsdp"


def _moe_dense_weights(st: _Step, tp: int) -> list[Spec]:
    """A MoE model's dense weights, over _moe_weight_axis."""
    dense_w = (st.p.per_layer() - st.p.routed) / tp
    layers = st.s.layers * st.grad_accum
    return [
        ("all-gather", "weights (forward)", layers, dense_w * WEIGHT_COMM_BYTES),
        ("all-gather", "weights (backward)", layers, dense_w * WEIGHT_COMM_BYTES),
        ("reduce-scatter", "gradients", layers, dense_w * GRAD_COMM_BYTES),
    ]


def _moe_routed_over_fsdp(st: _Step, tp: int, ep: int) -> list[Spec]:
    """Routed experts are sharded over expert (their `exp` dimension) and fsdp (their embed dimension): a device
    gathers its experts over fsdp in bf16, forward and backward (`all-gather.107` bf16[1,4,4096,14336], twice a layer
    per matrix), and reduces their gradients in bf16 (ROUTED_GRAD_COMM_BYTES: a reduce-scatter with expert
    parallelism, the whole bf16 gradient all-reduced without it on the dropless path)."""
    routed = st.p.routed / tp  # every expert of a layer (mean over the layers), one device's tensor shard
    local = routed / ep
    layers = st.s.layers * st.grad_accum
    if ep == 1 and st.s.moe_tile > 0:
        grads: Spec = ("all-reduce", "routed expert gradients", layers, routed * ROUTED_GRAD_COMM_BYTES)
    else:
        grads = ("reduce-scatter", "routed expert gradients", layers, local * ROUTED_GRAD_COMM_BYTES)
    return [
        ("all-gather", "routed expert weights (forward)", layers, local * WEIGHT_COMM_BYTES),
        ("all-gather", "routed expert weights (backward)", layers, local * WEIGHT_COMM_BYTES),
        grads,
    ]


def _moe_routed_over_expert(st: _Step, tp: int, ep: int) -> list[Spec]:
    """On the capacity path with expert parallelism every expert is gathered onto every device over the expert axis
    as well, and its gradient reduce-scattered there (_moe_weights_over_expert)."""
    if not _moe_weights_over_expert(st.s, ep, st.dispatch_expert_parallel):
        return []
    routed = st.p.routed / tp
    layers = st.s.layers * st.grad_accum
    return [
        ("all-gather", "routed expert weights (forward)", layers, routed * WEIGHT_COMM_BYTES),
        ("all-gather", "routed expert weights (backward)", layers, routed * WEIGHT_COMM_BYTES),
        ("reduce-scatter", "routed expert gradients", layers, routed * ROUTED_GRAD_COMM_BYTES),
    ]


def _embedding(st: _Step, tp: int) -> list[Spec]:
    """The embedding table and output head, gathered twice a step and their gradients reduce-scattered once."""
    embed_w = (st.p.embedding + st.p.logits) / tp
    return [
        ("all-gather", "embedding weights", 2 * st.grad_accum, embed_w * WEIGHT_COMM_BYTES),
        ("reduce-scatter", "embedding gradients", st.grad_accum, embed_w * GRAD_COMM_BYTES),
    ]


def _tensor_activations(st: _Step, tp: int) -> list[Spec]:
    tp_passes = 2 + (1 if {"out_proj", "mlpwo"} & st.rec else 0)
    count = 2 * tp_passes * st.s.layers * st.grad_accum
    return [("all-reduce", "activations", count, st.tokens * tp * st.s.emb * ACT_BYTES)]


def _context_kv(st: _Step, tp: int, c: int) -> list[Spec]:
    s = st.s
    cp_passes = 2 + (1 if "attention" in st.rec else 0)
    nbytes = st.tokens * c * 2 * s.kv_heads * s.head_dim / tp * ACT_BYTES
    return [("all-gather", "keys and values", cp_passes * s.layers * st.grad_accum, nbytes)]


def _token_dispatch(st: _Step, ep: int) -> list[Spec]:
    """The dropless path's token dispatch and combine: ragged all-to-alls over the expert axis (moe.py
    ra2a_and_route and unsort_output_and_ra2a, 1805 and 2059@e591f30cb), each moving a device's routed rows,
    [tokens x top_k, emb] bf16: forward 2, backward 2 (their transposes), and 2 more when the layer is
    rematerialised (qwen3-30b-a3b, expert 8, full remat: 6 a layer, `ragged-all-to-all-start`...`.5`, sending
    bf16[16384,2048]). MaxText sizes the receive buffer for the worst case (get_ragged_buffer_size: x
    min(expert, experts / top_k) when ragged_buffer_factor <= 0), but only the routed rows travel. On the
    capacity path with `moe_dispatch_no_expert_sharding` the compiler's all-to-all moves the dispatched
    [experts, capacity, emb] tensor instead: the routed rows padded by the capacity factor. None where the capacity
    path gathers the experts instead (_moe_weights_over_expert)."""
    s = st.s
    if not s.moe or _moe_weights_over_expert(s, ep, st.dispatch_expert_parallel):
        return []
    moe_passes = 2 + (1 if "mlpwi" in st.rec else 0)
    padded = st.moe_factor if s.moe_tile == 0 else 1.0
    return [
        (
            "all-to-all",
            "token dispatch and combine",
            2 * moe_passes * s.routed_layers * st.grad_accum,
            st.tokens * s.experts_per_tok * padded * s.emb * ACT_BYTES * ep,
        )
    ]


def _data_gradients(st: _Step, shards_w: int) -> list[Spec]:
    return [("all-reduce", "gradients", 1, st.p.total(st.s.layers) / shards_w * GRAD_COMM_BYTES)]


def _stage_activations(st: _Step, stages: int) -> list[Spec]:
    count = 2 * st.grad_accum * (st.microbatches or stages)
    return [("collective-permute", "stage activations", count, st.tokens * st.s.emb * ACT_BYTES)]


# Whether a modelled collective that the compiler turns into other kinds (collective matmul's permutes; a tensor
# all-reduce's all-gather and reduce-scatter) reads those rows mixed by their seconds (server/perf/data/overlap.json
# states them). Off: such terms keep the stated assumption and say why. Measured with it on (issue 26, this table):
# bench/mfu_references.py dense median |error| 2.16 -> 3.11 points, max 11.0 -> 18.2 (synthetic-128b on v5e-256 at
# fsdp 16 x tensor 16 predicted 74% against 56% published); bench/proposals.py first-rank hits, folded, development
# 22/26 -> 18/26 and held-out 88/146 -> 75/146 (fsdp x tensor 2 meshes ranked above the tuned pure FSDP). The
# compiled schedule's "compute between start and done" (server/profiles/hlo_schedule.py) overstates what hides on the
# chip, or a cost of collective matmul (smaller matmuls per step, a hop's latency per step) is missing; until one of
# them is settled against a profile, the mixing stays off. The terms whose own kind has a row read it as measured.
MIX_COMPILED_FORMS = False

# The overlap table's axis for a plan's axis group where the table has no row of its own: a MoE model's dense weights
# gathered over fsdp x expert are the scan's FSDP prefetch (_moe_weight_axis).
_TABLE_AXIS = {"fsdp+expert": "fsdp"}


def _compiled_kinds(axis: str, kind: str, collective_matmul: bool) -> tuple[str, ...]:
    """The collective kinds the TPU compiler turns a modelled collective into, its own first. A matmul fed by an
    all-gather or feeding a reduce-scatter runs, while collective matmul is on (libtpu's default; off when the flags
    raise `xla_jf_spmd_threshold_for_windowed_einsum_mib` past any operand), as a windowed einsum: collective-permutes
    in a loop. A tensor-parallel all-reduce of activations compiles to an all-gather and a reduce-scatter, or to such
    loops. Compiled (issue 26, bench/overlap_table.py's cached modules, llama2-7b 2 layers, libtpu 0.0.52): fsdp 16
    on v5p moves 15.6 ms of its 19.4 ms of FSDP traffic as permutes behind their matmuls and 3.1 ms as synchronous
    all-gathers; fsdp 4 x tensor 4 on v5e moves 14.9 of 37.3 ms of tensor traffic as permutes, the rest as
    all-gathers and reduce-scatters."""
    kinds = [kind]
    if axis == "tensor" and kind == "all-reduce":
        kinds += ["all-gather", "reduce-scatter"]
    if collective_matmul and axis not in ("data", "pipeline") and {"all-gather", "reduce-scatter"} & set(kinds):
        kinds.append("collective-permute")
    return tuple(kinds)


def _table_overlap(
    generation: str, axis: str, kind: str, flags: XlaFlags | None, assumed: tuple[float, str], tab: overlap.Table
) -> overlap.Overlap:
    """The overlap table's answer for a term of the plan: the rows of the kinds it compiles to (_compiled_kinds) on
    its axis group (else on the group that stands for it, _TABLE_AXIS): its own kind's row alone as it is; rows of
    other kinds mixed by their seconds (the share hidden weighted by time; the window that hides the most), or, where
    the table states no time to weigh them by, the assumption; with no row, the assumption."""
    if kind == "all-reduce" and assumed == ASSUMED_PREFETCH:
        # the routed experts' gradient all-reduce of the dropless path without expert parallelism
        # (_moe_routed_over_fsdp): no compiled case has it, and the table's all-reduce rows over fsdp are the small
        # all-reduces of other programs (norm scales, the loss)
        why = f"assumed: no compiled case has the routed experts' all-reduce over {axis}"
        return overlap.Overlap(*assumed, why, False)
    collective_matmul = (flags or overlap.DEFAULT_FLAGS).enabled().get("collective_matmul") is not False
    kinds = _compiled_kinds(axis, kind, collective_matmul)
    for a in [axis, _TABLE_AXIS[axis]] if axis in _TABLE_AXIS else [axis]:
        found = [(k, ov) for k in kinds if (ov := overlap.lookup(generation, a, k, flags, assumed, tab)).measured]
        if not found:
            continue
        if [k for k, _ in found] == [kind]:
            return found[0][1]
        if not MIX_COMPILED_FORMS or any(ov.seconds <= 0 for _, ov in found):
            # a row of another kind does not say how much of the term it covers (fsdp 16 on v5p: synchronous
            # all-gathers beside hidden permutes), and without their time the rows cannot be weighed: the assumption
            named = ", ".join(k for k, _ in found)
            return overlap.Overlap(
                *assumed, f"assumed: the table's rows for {named} over {a} state no time to weigh them by", False
            )
        total = sum(ov.seconds for _, ov in found)
        hidden = sum(ov.hidden * ov.seconds for _, ov in found) / total
        behind: dict[str, float] = {}
        for _, ov in found:
            if ov.hidden > 0:
                behind[ov.behind] = behind.get(ov.behind, 0.0) + ov.hidden * ov.seconds
        window = max(behind, key=lambda w: behind[w]) if behind else "none"
        parts = ", ".join(f"{k} {ov.hidden:.2f} behind {ov.behind} ({ov.seconds / total:.0%})" for k, ov in found)
        source = f"measured: {kind} as compiled, by time: {parts}; {found[0][1].source.removeprefix('measured: ')}"
        return overlap.Overlap(hidden, window, source, True, total)
    return overlap.lookup(generation, axis, kind, flags, assumed, tab)


def _host_offload(
    s: Shape,
    chip: ChipSpec,
    tokens: float,
    offloaded: frozenset[str],
    windows: dict[str, float],
    lookup: Callable[[str, str, tuple[float, str]], overlap.Overlap],
) -> tuple[OverlapTerm, ...]:
    """Host offload's copies of a step (`tokens` per device, all microbatches): every layer's offloaded tensors go to
    host memory during the forward pass and come back during the backward pass, over the chip's PCIe link, which the
    chip's devices share (ChipSpec.pcie_bw is per chip: a tpu7x device gets half). A copy runs in its own pass: its
    hidden share hides behind at most that pass' compute, layer by layer (every layer the same, so the step's sums)."""
    dims = tensor_dims(s, offloaded)
    if dims <= 0:
        return ()
    one_way = tokens * s.layers * dims * ACT_BYTES / (chip.pcie_bw / chip.devices_per_chip)
    out = []
    for kind, assumed, during in (
        ("device-to-host", ASSUMED_HOST_OUT, "forward"),
        ("host-to-device", ASSUMED_HOST_IN, "backward"),
    ):
        ov = lookup("host", kind, assumed)
        window = ov.behind if ov.behind in overlap.WINDOWS else "none"
        window_s = min(windows[window], windows[during])
        exposed = exposed_seconds(one_way, ov.hidden, window_s)
        out.append(OverlapTerm("host", kind, one_way, ov.hidden, window, window_s, exposed, ov.source))
    return tuple(out)


# How the overlap model reads a term (the collectives of one kind over one axis group, the scan's weight traffic apart
# from the rest): its key, the table's answer, the window it hides behind, and the pool of terms sharing that window
# (whether it runs once a step, the window's key in the step's windows).
_How = tuple[tuple[str, str, bool], overlap.Overlap, str, tuple[bool, str]]


class _Priced(NamedTuple):
    """A priced group (one axis' collectives from one `add` of step_time) as the overlap model reads it."""

    seconds: float  # its collectives' seconds, summed from 0.0 in order
    axis: str
    sync_s: float  # the seconds of its terms' synchronous shares
    hidden: tuple[tuple[tuple[bool, str], float], ...]  # per window pool, its terms' asynchronous seconds
    terms: tuple[tuple[float, _How], ...]  # per term, its seconds and how the model reads it


def _read(
    colls: tuple[Collective, ...], moe: bool, lookup: Callable[[str, str, tuple[float, str]], overlap.Overlap]
) -> _Priced:
    """One priced group's terms, each with how the overlap model reads it (overlap.lookup, once per memo)."""
    total = 0.0
    by_term: dict[tuple[str, str, bool], float] = {}
    for c in colls:
        total += c.seconds
        prefetch = c.axis == "fsdp" or (moe and c.axis in MOE_WEIGHT_AXES and c.purpose in LAYER_WEIGHT_PURPOSES)
        tk = (c.axis, c.kind, prefetch)
        by_term[tk] = by_term.get(tk, 0.0) + c.seconds
    terms = []
    sync = 0.0
    hidden: dict[tuple[bool, str], float] = {}
    for tk, secs in by_term.items():
        axis, kind, prefetch = tk
        ov = lookup(axis, kind, ASSUMED_PREFETCH if prefetch else ASSUMED_EXPOSED)
        window = ov.behind if ov.behind in overlap.WINDOWS else "none"
        # the data-parallel all-reduce runs once, after the last microbatch; collective matmul's window is the
        # matmuls the collective feeds (module docstring)
        pool = (axis == "data", f"matmul:{axis}" if window == "matmul" and axis in ("context", "expert") else window)
        terms.append((secs, (tk, ov, window, pool)))
        sync += secs * (1.0 - ov.hidden)
        if ov.hidden > 0:
            hidden[pool] = hidden.get(pool, 0.0) + secs * ov.hidden
    return _Priced(total, colls[0].axis if colls else "", sync, tuple(hidden.items()), tuple(terms))


def _window_s(windows: dict[str, float], pool: tuple[bool, str], grad_accum: int) -> float:
    """A pool's window in seconds: the step's, or the last microbatch's for what runs once a step."""
    return windows[pool[1]] / grad_accum if pool[0] else windows[pool[1]]


class _Overlap(NamedTuple):
    """What the overlap model read of a step, kept to write StepTime.overlap's records when asked (an enumeration
    prices thousands of meshes and reads the records of a few)."""

    host: tuple[OverlapTerm, ...]
    groups: tuple[_Priced, ...]
    windows: dict[str, float]
    grad_accum: int

    def records(self) -> list[OverlapTerm]:
        """Host offload's copies, then one record per term, in plan order."""
        terms: dict[tuple[str, str, bool], list[Any]] = {}  # term key -> [seconds, how]
        for g in self.groups:
            for secs, how in g.terms:
                t = terms.get(how[0])
                if t is None:
                    terms[how[0]] = [secs, how]
                else:
                    t[0] += secs
        pools: dict[tuple[bool, str], float] = {}
        for secs, (_, ov, _, pool) in terms.values():
            pools[pool] = pools.get(pool, 0.0) + secs * ov.hidden
        out = list(self.host)
        for secs, ((axis, kind, _), ov, window, pool) in terms.values():
            window_s = _window_s(self.windows, pool, self.grad_accum)
            exposed = exposed_seconds(secs, ov.hidden, window_s, pools[pool])
            out.append(OverlapTerm(axis, kind, secs, ov.hidden, window, window_s, exposed, ov.source))
        return out


def _exposure(
    groups: tuple[_Priced, ...], windows: dict[str, float], host: tuple[OverlapTerm, ...], grad_accum: int
) -> tuple[float, dict[str, float], dict[str, float], float, _Overlap]:
    """The overlap model on a step's priced groups of collectives (module docstring): the collectives' total
    seconds, the seconds per axis in plan order, the exposed seconds per axis (those above 0), the exposed total, and
    what the terms' records are written from. What outlasts a pool's window is exposed in proportion to each term's
    asynchronous seconds (exposed_seconds, summed per axis: the enumeration runs this for every mesh)."""
    comm = 0.0
    by_axis: dict[str, float] = {}
    exposed: dict[str, float] = {}
    pools: dict[tuple[bool, str], dict[str, float]] = {}  # pool -> axis -> asynchronous seconds
    for total, axis, sync, hidden, _ in groups:
        comm += total
        if axis in by_axis:
            by_axis[axis] += total
            exposed[axis] += sync
        else:
            by_axis[axis] = 0.0 + total
            exposed[axis] = 0.0 + sync
        for pool, h in hidden:
            per = pools.get(pool)
            if per is None:
                pools[pool] = {axis: h}
            else:
                per[axis] = per.get(axis, 0.0) + h
    for pool, per in pools.items():
        pool_s = sum(per.values())
        over = pool_s - _window_s(windows, pool, grad_accum)
        if over > 0:
            for axis, h in per.items():
                exposed[axis] += over * h / pool_s
    made = _Overlap(host, groups, windows, grad_accum)
    return comm, by_axis, {k: v for k, v in exposed.items() if v > 0}, sum(exposed.values()), made


def step_time(
    s: Shape,
    p: Params,
    bpp: BytesPerParam,
    fl: Flops,
    lay: Layout,
    pdbs: float,
    seq: int,
    remat: RematPolicy,
    grad_accum: int = 1,
    microbatches: int | None = None,
    matmul_speedup: float = 1.0,
    memo: dict[Any, Any] | None = None,
    grouped_speedup: float | None = None,
    moe_factor: float = 1.0,
    moe_dispatch_expert_parallel: bool = False,
    quant_passes: int = 0,
    flags: XlaFlags | None = None,
    table: overlap.Table | None = None,
) -> StepTime:
    """`memo`: a dict shared across calls with the same arguments but `lay`, on one slice (an enumeration), so
    what depends on only part of the mesh is priced once per value of that part: the layers' compute and memory-bound
    work per (tensor, expert) degrees, the scanned state's per weight-sharding degree, each axis group's path per its
    links (Layout.links), the collectives over it per the path's numbers and the degrees they read. `moe_factor`:
    arith.moe_compute_factor (the capacity path's capacity factor, which sizes its dispatch and combine);
    `moe_dispatch_expert_parallel`: MaxText's `moe_dispatch_no_expert_sharding` (_moe_weights_over_expert).
    `flags`: the run's XLA flags (None: libtpu's defaults), which pick the overlap table's rows; `table`: the overlap
    table (default the committed one, overlap.table())."""
    if memo is None:
        memo = {}
    chip = lay.slice.chip
    tab = table if table is not None else overlap.table()

    def lookup(axis: str, kind: str, assumed: tuple[float, str]) -> overlap.Overlap:
        """The overlap of `kind` over `axis` under the run's flags, once per memo (slice, flags and table fixed)."""
        k = ("overlap", axis, kind, assumed)
        ov = memo.get(k)
        if ov is None:
            ov = memo[k] = _table_overlap(chip.generation, axis, kind, flags, assumed, tab)
        return ov

    st = memo.get("step")  # the same for every mesh (`memo`)
    if st is None:
        st = memo["step"] = _Step(
            s, p, pdbs * seq, remat.recomputed(), grad_accum, microbatches, moe_factor, moe_dispatch_expert_parallel
        )
    tokens, rec = st.tokens, st.rec

    # the degrees of the axis groups (GROUPS), each read once
    f_deg, tp, c, ep, dp, stages, shards_w = lay.degrees(
        FSDP, TENSOR, CONTEXT, EXPERT, DATA[:1], PIPELINE, WEIGHT_SHARDING
    )

    # -- compute and memory-bound work: the same for every mesh with these degrees ----------------
    key = ("work", tp, ep, shards_w)
    hit = memo.get(key)
    if hit is None:
        work = memo.get(("layers", tp, ep))
        if work is None:
            grouped = matmul_speedup if grouped_speedup is None else grouped_speedup
            work = memo["layers", tp, ep] = _work(
                s,
                p,
                bpp,
                fl,
                chip,
                lay.slice.devices,
                tokens,
                rec,
                tp,
                ep,
                matmul_speedup,
                grouped,
                moe_factor,
                moe_dispatch_expert_parallel,
                s.moe and bool(rec) and "mlpwo" not in (remat.saved | remat.offloaded),
                quant_passes,
            )
        scan, opt = _state_traffic(s, p, bpp, chip, shards_w)
        # the overlap windows' compute, per step (all microbatches; module docstring)
        layers_s = (work.compute + work.ew.seconds) * grad_accum
        forward_s = work.forward * grad_accum
        windows = {
            "none": 0.0,
            "layer": layers_s,
            "forward": forward_s,
            "backward": layers_s - forward_s,
            "matmul": work.matmuls * grad_accum,
            "matmul:context": work.attention * grad_accum,
            "matmul:expert": work.mlp * grad_accum,
        }
        host = _host_offload(s, chip, tokens * grad_accum, remat.offloaded, windows, lookup)
        compute_total = (work.compute + work.compute_logits) * grad_accum
        hbm_total = work.ew.seconds * grad_accum + scan.seconds + opt.seconds + sum(t.exposed_s for t in host)
        hit = memo[key] = ((*work.points, scan, opt), windows, host, compute_total, hbm_total)
    points, windows, host, compute_total, hbm_total = hit

    # -- communication ----------------------------------------------------------------------------
    plan = CommPlan()
    groups: dict[str, _Group] = {}
    for (name, axes), d in zip(GROUPS, (f_deg, tp, c, ep, dp, stages), strict=True):
        if d > 1:
            g = groups[name] = _group(lay, axes, memo)
            plan.paths[name] = g.path
    dcn_bw = chip.dcn_bw
    collectives = plan.collectives

    priced = memo.get("collectives")
    if priced is None:
        priced = memo["collectives"] = {}

    # the priced groups this mesh's plan is made of, in order (`priced`'s values: their collectives and terms)
    made_of: list[tuple[tuple[Collective, ...], _Priced]] = []
    moe = s.moe

    def add(axis: str, build: Callable[..., list[Spec]], *degrees: int) -> None:
        """Append the collectives `build` lists, priced on `axis`' path (none when the mesh has no such group, or for
        a zero count or size). Memoised on the axis, what collectives.price reads of its path (_Group.numbers), `build`
        and `degrees`, all `build` reads of the mesh: the Collective objects are shared by the plans of every mesh
        with those (nothing changes a priced Collective), and so is what the overlap model makes of them."""
        g = groups.get(axis)
        if g is None:
            return
        key = (axis, g.numbers, build, degrees)
        hit = priced.get(key)
        if hit is None:
            colls = tuple(
                price(Collective(axis, kind, purpose, count, nbytes), g.path, dcn_bw)
                for kind, purpose, count, nbytes in build(st, *degrees)
                if count > 0 and nbytes > 0
            )
            hit = priced[key] = (colls, _read(colls, moe, lookup))
        if hit[0]:
            collectives.extend(hit[0])
            made_of.append(hit)

    if not moe:
        add("fsdp", _dense_weights, tp)
        embed_axis = "fsdp"
    else:
        embed_axis = _moe_weight_axis(ep, f_deg)
        if ep > 1 and embed_axis not in groups:
            g = groups[embed_axis] = _group(lay, FSDP + EXPERT, memo)
            plan.paths[embed_axis] = g.path
        add(embed_axis, _moe_dense_weights, tp)
        add("fsdp", _moe_routed_over_fsdp, tp, ep)
        add("expert", _moe_routed_over_expert, tp, ep)
    add(embed_axis, _embedding, tp)
    add("tensor", _tensor_activations, tp)
    add("context", _context_kv, tp, c)
    add("expert", _token_dispatch, ep)
    add("data", _data_gradients, shards_w)
    add("pipeline", _stage_activations, stages)

    # -- overlap and step -------------------------------------------------------------------------
    # The same for every mesh with these degrees and priced collectives: once per memo.
    ekey = ("exposure", key, *map(id, made_of))  # (`priced`'s values live as long as memo: their ids are theirs)
    hit_e = memo.get(ekey)
    if hit_e is None:
        hit_e = memo[ekey] = _exposure(tuple(h[1] for h in made_of), windows, host, grad_accum)
    comm_s, by_axis, exposed_by_axis, exposed_total, made = hit_e
    busy = compute_total + hbm_total + exposed_total
    m = microbatches or stages
    bubble = busy * (stages - 1) / (m + stages - 1) if stages > 1 else 0.0
    # positional (in the order of StepTime's fields): a dataclass with default factories takes keywords slowly
    return StepTime(
        compute_total,  # compute_s
        hbm_total,  # hbm_s
        comm_s,  # comm_s (the collectives as if nothing overlapped)
        exposed_total,  # exposed_comm_s
        bubble,  # bubble_s
        busy + bubble,  # step_s
        plan,  # comm
        list(points),
        by_axis,  # comm_by_axis
        exposed_by_axis,  # exposed_by_axis
        made,  # _overlap
    )
