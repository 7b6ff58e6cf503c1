"""The estimate of one config on its declared slice: model arithmetic, memory per chip,
collectives, step time, MFU and the predicted bottleneck, for the config's own mesh or any
other layout. Plain data with a stable JSON form (`asap estimate --json`, docs/cli.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from server.common.dims import whole_number
from server.config.mesh import MeshCheck
from server.config.resolve import Config
from server.config.xla_flags import XlaFlags
from server.perf import arith, layout, memory, roofline, steptime, wording
from server.perf.arith import ArithError, BytesPerParam, Flops, Params, Shape
from server.perf.layout import Layout
from server.perf.maxtext_flops import MaxTextFlops, training_tflops_per_device
from server.perf.memory import Memory
from server.perf.quantization import MatmulPlan, matmul_plan
from server.perf.remat import RematPolicy
from server.perf.steptime import StepTime

FORMULAS = {
    "params": "server/perf/arith.py params(): attention D*hd*(2H+2K), MLP (n_in+1)*D*F (x experts), "
    "embedding V*D (+ logits V*D unless tied)",
    "flops_per_step": "server/perf/arith.py step_flops(): 3 x forward matmuls (2*tokens*D*...) + "
    "3 x attention 4*tokens*T*H*hd/2 (causal), as MaxText counts them for MFU",
    "memory": "server/perf/memory.py: params x bytes/param / product of weight-sharding axes; activations "
    "layers x pdbs*T x kept dims x 2 B (remat policy); temporaries allowance",
    "collectives": "server/perf/collectives.py: V(X-1)/X over the axis' bidirectional ICI bandwidth "
    "(x2 all-reduce, /4 all-to-all), DCN share at the chip's DCN bandwidth",
    "step_s": "server/perf/steptime.py: compute + HBM + exposed communication (+ pipeline bubble)",
    "mfu": "flops_per_step / (step_s x chips x peak bf16 FLOP/s per chip) (MaxText's definition, whatever dtype the "
    "matmuls run in)",
    "mfu_at_matmul_peak": "flops_per_step / (step_s x chips x matmuls.effective_peak_flops_per_chip): the share of "
    "the peak the step's FLOPs run at, each at the peak of its matmul (server/perf/quantization.py); <= 1",
}


def step_tokens(pdbs: float, seq: int, devices: int, grad_accum: int = 1) -> float:
    """Tokens one optimizer step trains on: per_device_batch_size x max_target_length x devices x
    gradient_accumulation_steps (Estimate.tokens_per_step; the batch hover shows the same number)."""
    return pdbs * seq * devices * grad_accum


class EstimateError(ValueError):
    """Why a config cannot be estimated, and the key to show it at."""

    def __init__(self, key: str | None, message: str):
        super().__init__(message)
        self.key = key


@dataclass
class Estimate:
    layout: Layout
    shape: Shape
    params: Params
    flops: Flops
    bpp: BytesPerParam
    remat: RematPolicy
    memory: Memory
    time: StepTime
    pdbs: float
    seq: int
    grad_accum: int
    quantization: str = ""  # MaxText's `quantization`: at which peak the weight matmuls run (`matmuls`)

    @property
    def tokens_per_step(self) -> float:
        return step_tokens(self.pdbs, self.seq, self.layout.slice.devices, self.grad_accum)

    @property
    def model_flops_per_step(self) -> float:
        return self.flops.model * self.grad_accum

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_per_step / self.time.step_s

    @property
    def tflops_per_chip(self) -> float:
        return self.model_flops_per_step / self.layout.slice.total_chips / self.time.step_s / 1e12

    @property
    def mfu(self) -> float:
        """MaxText's MFU: model FLOPs / (step time x chips x the chip's bf16 peak), whatever dtype the matmuls run
        in (MaxText logs TFLOP/s per device and its MFU against the bf16 peak). With int8 or fp8 matmuls it can
        pass what bf16 allows, even 1: `mfu_at_matmul_peak` is the utilisation of the peak the work runs at."""
        sl = self.layout.slice
        return self.model_flops_per_step / (self.time.step_s * sl.total_chips * sl.chip.peak_bf16_flops)

    @cached_property
    def matmuls(self) -> MatmulPlan:
        """The peak the decoder layers' weight matmuls run at under `quantization`: the one steptime priced them
        at (arith.matmul_speedup reads the same plan)."""
        return matmul_plan(self.quantization, self.layout.slice.chip)

    @property
    def matmul_peak_flops(self) -> float:
        """Per chip, the peak the quantized weight matmuls run at (its dtype: `matmuls.dtype`); the bf16 peak
        when none runs faster."""
        return self.matmuls.peak.flops if self.matmuls.quantized else self.layout.slice.chip.peak_bf16_flops

    @property
    def quantized_flops_fraction(self) -> float:
        """Share of the model FLOPs that run in the quantized dtype: the decoder layers' weight matmuls (the model
        FLOPs less attention and logits, which no mode quantizes) on the passes the mode quantizes."""
        fl = self.flops
        if not self.matmuls.quantized or fl.model <= 0:
            return 0.0
        weights = fl.model - 3 * (fl.attention_forward + fl.logits_forward)
        return min(1.0, max(0.0, weights / fl.model)) * self.matmuls.pass_share

    @property
    def effective_peak_flops(self) -> float:
        """The peak the step's model FLOPs run at, per chip: each FLOP at the peak of the matmul it is in (the
        quantized ones at the quantized peak, the rest at bf16), i.e. their FLOP-weighted harmonic mean. The bf16
        peak when nothing runs quantized."""
        q, bf16 = self.quantized_flops_fraction, self.layout.slice.chip.peak_bf16_flops
        return 1.0 / (q / self.matmul_peak_flops + (1.0 - q) / bf16) if q else bf16

    @property
    def mfu_at_matmul_peak(self) -> float:
        """Model FLOPs / (step time x chips x `effective_peak_flops`): how close the step comes to the peak its
        work runs at. Equals `mfu` without quantized matmuls; never above 1, since no matmul is priced faster
        than its peak."""
        sl = self.layout.slice
        return self.model_flops_per_step / (self.time.step_s * sl.total_chips * self.effective_peak_flops)

    def on(self, lay: Layout) -> Estimate:
        """This estimate for another layout that the cost model cannot tell from its own (enumeration._cost_key):
        the same numbers, its parts shared, not copied (dataclasses.replace with `layout`, without its overhead)."""
        return Estimate(
            lay,
            self.shape,
            self.params,
            self.flops,
            self.bpp,
            self.remat,
            self.memory,
            self.time,
            self.pdbs,
            self.seq,
            self.grad_accum,
            self.quantization,
        )

    def _mfu_text(self) -> str:
        text = f"{self.mfu:.0%} MFU"
        if self.matmuls.quantized:
            return text + f" (bf16 peak; {self.mfu_at_matmul_peak:.0%} of the peak with {self.matmuls.dtype} matmuls)"
        if self.quantization:
            return text + f" ({self.quantization} runs at the bf16 peak on {self.layout.slice.chip.generation})"
        return text

    def summary(self) -> str:
        """One line for the editor, e.g. 'Estimated: 61% MFU, communication-bound (tensor collectives 34%
        of step), HBM 71.0 of 94.75 GiB usable' (the usable figure as every surface says it, wording.gib); a close
        runner-up (within 15% of the step) is named too. With quantized matmuls the MFU (MaxText's, against the
        bf16 peak) has the utilisation of the peak they run at beside it:
        '86% MFU (bf16 peak; 52% of the peak with int8 matmuls)'."""
        kind, margin, parts = self.time.bottleneck()
        step = self.time.step_s
        top_axis = max(self.time.exposed_by_axis.items(), key=lambda kv: kv[1], default=None)

        def detail(k: str) -> str:
            if k == "communication" and top_axis:
                return f"{top_axis[0]} collectives {top_axis[1] / step:.0%} of step"
            return f"{k} {parts[k] / step:.0%} of step"

        why = f" ({detail(kind)})" if kind == "communication" else ""
        if margin < 0.15:
            runner = sorted(parts, key=lambda k: parts[k], reverse=True)[1]
            why += f", {detail(runner)} close behind" if runner != kind else ""
        gib = 1024**3
        return (
            f"Estimated: {self._mfu_text()}, {kind}-bound{why}, "
            f"HBM {self.memory.total / gib:.1f} of {wording.gib(self.memory.usable)} GiB usable"
        )

    def to_json(self) -> dict[str, Any]:
        sl = self.layout.slice
        kind, margin, parts = self.time.bottleneck()
        points = [p.to_json(sl.chip) for p in self.time.points]
        if self.matmuls.quantized:  # the weight matmuls' points against the peak they run at
            peak = sl.chip.peak_bf16_flops / sl.chip.devices_per_chip * self.matmuls.speedup
            bw = sl.chip.hbm_bw / sl.chip.devices_per_chip
            for p, pt in zip(self.time.points, points, strict=True):
                if p.name in ("qkv", "out_proj", "mlpwi", "mlpwo"):
                    pt.update(peak_flops_per_s=peak, attainable_flops_per_s=min(peak, p.intensity * bw))
                    pt["dtype"] = self.matmuls.dtype
        return {
            "slice": {
                "name": sl.name,
                "chips": sl.chips,
                "devices": sl.devices,
                "num_slices": sl.num_slices,
                "topology": list(sl.topology),
            },
            "mesh": {
                "ici": {k: v for k, v in self.layout.ici.items()},
                "dcn": {k: v for k, v in self.layout.dcn.items()},
            },
            "model": {
                "name": self.shape.name,
                "emb": self.shape.emb,
                "layers": self.shape.layers,
                "q_heads": self.shape.q_heads,
                "kv_heads": self.shape.kv_heads,
                "mlp": self.shape.mlp,
                "vocab": self.shape.vocab,
                "experts": self.shape.experts,
            },
            "params": self.params.total(self.shape.layers),
            "active_params": self.params.total(self.shape.layers, active=True),
            "tokens_per_step": self.tokens_per_step,
            "flops_per_step": self.model_flops_per_step,
            "executed_flops_per_step": self.flops.executed * self.grad_accum,
            "remat_policy": self.remat.name,
            "bytes_per_param": {
                "weights": self.bpp.weights,
                "gradients": self.bpp.grads,
                "optimizer": self.bpp.optimizer,
            },
            "memory": self.memory.to_json(),
            "time": {
                "compute_s": self.time.compute_s,
                "hbm_s": self.time.hbm_s,
                "comm_s": self.time.comm_s,
                "exposed_comm_s": self.time.exposed_comm_s,
                "bubble_s": self.time.bubble_s,
                "comm_by_axis": self.time.comm_by_axis,
                "exposed_comm_by_axis": self.time.exposed_by_axis,
                "step_s": self.time.step_s,
            },
            "collectives": [c.to_json() for c in self.time.comm.collectives],
            "links": {
                k: {
                    "ici_degree": p.ici_degree,
                    "dcn_degree": p.dcn_degree,
                    "ici_bytes_per_s": p.ici_bw,
                    "physical": p.physical,
                }
                for k, p in self.time.comm.paths.items()
            },
            "tokens_per_s": self.tokens_per_s,
            "tflops_per_chip": self.tflops_per_chip,
            "mfu": self.mfu,
            "mfu_at_matmul_peak": self.mfu_at_matmul_peak,
            "matmuls": {
                **self.matmuls.to_json(),
                "bf16_peak_flops_per_chip": sl.chip.peak_bf16_flops,
                "quantized_flops_fraction": self.quantized_flops_fraction,
                "effective_peak_flops_per_chip": self.effective_peak_flops,
            },
            "bottleneck": kind,
            "margin": margin,
            "attribution_s": parts,
            "roofline": {
                "ridge_points": roofline.ridge_points(sl.chip),
                "points": points,
            },
            "assumptions": {
                "mxu_efficiency": sl.chip.mxu_efficiency,
                "attention_efficiency": steptime.ATTENTION_EFFICIENCY,
                "hbm_efficiency": steptime.HBM_EFFICIENCY,
                "memory_bound_factor": steptime.MEMORY_BOUND_FACTOR,
                "roofline_overlap": roofline.OVERLAP,
                # per collective term (and host offload's copies): the share hidden, behind which compute, what
                # stays exposed, and whether the share was measured on the compiler or assumed (server/perf/overlap.py)
                "overlap": [t.to_json() for t in self.time.overlap],
            },
            "sources": {"chip": {k: v for k, v in sl.chip.sources.items()}, "formulas": FORMULAS},
        }


# The longest sequence and the most accumulation steps ASAP prices: far beyond any run, and small enough that
# every FLOP and byte count formed from them stays a finite float.
MAX_SEQ = 2**26
MAX_ACCUMULATION = 2**20


def _num(cfg: Config, key: str, default: Any, positive: bool = True, whole: bool = False, cap: float = math.inf) -> Any:
    """A numeric input read once, where it is read: finite, > 0 (when `positive`), whole (when `whole`, as MaxText
    coerces it: 4.0 is 4) and at most `cap`. Raises EstimateError at the key otherwise, with the config's own
    check's words for a key it checks (per_device_batch_size: ASAP112's range, subnormal and huge values too)."""
    problem = cfg.problem(key)
    if problem is not None:
        raise EstimateError(key, problem)
    v = cfg.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or (positive and v <= 0):
        raise EstimateError(key, f"{key} must be a finite number > 0, got {v!r}")
    if whole:
        n = whole_number(v)
        if n is None:
            raise EstimateError(key, f"{key} must be a whole number, got {v!r}")
        v = n
    if v > cap:
        raise EstimateError(key, f"{key} {v:g} is beyond what ASAP prices (at most {cap:,.0f})")
    return v


@dataclass(frozen=True)
class Inputs:
    """Everything of a config the cost model needs that does not depend on the mesh."""

    shape: Shape
    params: Params
    bpp: BytesPerParam
    remat: RematPolicy
    pdbs: float
    seq: int
    grad_accum: int
    vocab_tiles: int
    microbatches: int | None
    moe_factor: float
    quantization: str = ""
    # MaxText's own count of this config's training FLOPs (server/perf/maxtext_flops.py): per device, per
    # step (gradient accumulation included), the numerator of the MFU MaxText logs.
    maxtext: MaxTextFlops | None = None
    # MaxText's `moe_dispatch_no_expert_sharding`: the capacity path's dispatch stays expert-parallel (all-to-all)
    # instead of gathering every expert's weights (server/perf/steptime.py, _moe_weights_over_expert)
    moe_dispatch_expert_parallel: bool = False
    # MaxText's `use_iota_embed`: the token embedding as a one-hot matmul, whose one-hot the compiler can keep
    # (server/perf/memory.py)
    iota_embed: bool = False
    # The run's XLA flags (LIBTPU_INIT_ARGS / XLA_FLAGS, server/config/xla_flags.py) and where they were read; None:
    # libtpu's defaults assumed. The overlap of each collective depends on them (server/perf/overlap.py).
    flags: XlaFlags | None = None
    flags_source: str = "libtpu defaults assumed"


def inputs(cfg: Config) -> Inputs:
    """Read the mesh-independent inputs of a config. Raises EstimateError at the key to blame."""
    pdbs = float(_num(cfg, "per_device_batch_size", 12.0))
    seq = int(_num(cfg, "max_target_length", 2048, whole=True, cap=MAX_SEQ))
    gas = int(_num(cfg, "gradient_accumulation_steps", 1, whole=True, cap=MAX_ACCUMULATION))
    try:
        s = arith.shape(cfg)
        bpp = arith.bytes_per_param(cfg)
        remat = arith.remat_policy(cfg)
        mt = training_tflops_per_device(cfg.get)
    except ArithError as e:
        raise EstimateError(e.key, str(e)) from None
    tiles = cfg.get("num_vocab_tiling", 1)
    micro = cfg.get("num_pipeline_microbatches", None)
    return Inputs(
        s,
        arith.params(s),
        bpp,
        remat,
        pdbs,
        seq,
        gas,
        tiles if isinstance(tiles, int) and tiles > 0 else 1,
        micro if isinstance(micro, int) and micro > 0 else None,
        arith.moe_compute_factor(cfg, s),
        str(cfg.get("quantization", "") or ""),
        mt,
        cfg.get("moe_dispatch_no_expert_sharding", False) is True,
        cfg.get("use_iota_embed", False) is True,
        flags=cfg.run_flags.flags,
        flags_source=cfg.run_flags.describe(),
    )


def step_flops(inp: Inputs, devices: int) -> Flops:
    """The step's FLOPs over `devices`, per microbatch: MaxText's count (its per-device TFLOPs of the step,
    divided by the gradient accumulation steps it multiplied by) and what the chips execute."""
    model = inp.maxtext.total * 1e12 / inp.grad_accum * devices if inp.maxtext is not None else None
    return arith.step_flops(
        inp.shape, inp.pdbs * inp.seq * devices, inp.seq, inp.remat, moe_factor=inp.moe_factor, model_flops=model
    )


def price(inp: Inputs, lay: Layout, fl: Flops | None = None, memo: dict[Any, Any] | None = None) -> Estimate:
    """The estimate of these inputs on one layout (no validation: see server/config/mesh.py).
    `fl`: the step's FLOPs when already known (they depend on the device count, not the mesh); `memo`: a
    dict shared while pricing many meshes of one slice with these inputs (an enumeration): what depends on only part
    of the mesh is computed once per value of that part (memory here, more in server/perf/steptime.py)."""
    fl = fl or step_flops(inp, lay.slice.devices)
    # What does not depend on the mesh, once per memo: the peak the weight matmuls run at (arith.matmul_speedup reads
    # the same plan; MaxText quantizes the routed experts' grouped matmuls, megablox/tokamax gmm, only in the modes
    # that say so, server/perf/quantization.py: fp8_full; the dense path's einsums follow the weight matmuls) and the
    # activations kept for the backward pass.
    fixed = memo.get("price") if memo is not None else None
    if fixed is None:
        plan = matmul_plan(inp.quantization, lay.slice.chip)
        fixed = (
            plan.speedup,
            plan.speedup if (plan.mode is not None and plan.mode.grouped_moe) else 1.0,
            len(plan.passes) if plan.dtype != "bf16" else 0,
            memory.activations(inp.shape, inp.remat, inp.pdbs * inp.seq),
        )
        if memo is not None:
            memo["price"] = fixed
    speedup, grouped, quant_passes, kept = fixed
    # Memory reads a handful of degrees of the mesh: many meshes of one slice share its estimate (the same object).
    degrees = memory.mesh_degrees(lay)
    mem = memo.get(("memory", degrees)) if memo is not None else None
    if mem is None:
        mem = memory.memory_on(
            inp.shape,
            inp.params,
            inp.bpp,
            lay.slice.chip,
            degrees,
            inp.pdbs,
            inp.seq,
            inp.remat,
            inp.vocab_tiles,
            moe_dispatch_expert_parallel=inp.moe_dispatch_expert_parallel,
            iota_embed=inp.iota_embed,
            kept=kept,
        )
        if memo is not None:
            memo["memory", degrees] = mem
    st = steptime.step_time(
        inp.shape,
        inp.params,
        inp.bpp,
        fl,
        lay,
        inp.pdbs,
        inp.seq,
        inp.remat,
        inp.grad_accum,
        inp.microbatches,
        speedup,
        memo,
        grouped,
        moe_factor=inp.moe_factor,
        moe_dispatch_expert_parallel=inp.moe_dispatch_expert_parallel,
        quant_passes=quant_passes,
        flags=inp.flags,
    )
    return Estimate(
        lay, inp.shape, inp.params, fl, inp.bpp, inp.remat, mem, st, inp.pdbs, inp.seq, inp.grad_accum, inp.quantization
    )


def estimate(cfg: Config, chk: MeshCheck, lay: Layout | None = None) -> Estimate:
    """Estimate the config on its slice with its own mesh (or `lay`). Raises EstimateError."""
    if chk.slice is None:
        raise EstimateError("compile_topology", "no TPU slice declared: nothing to estimate against")
    if lay is None:
        lay = layout.from_check(chk)
        if lay is None:
            raise EstimateError(None, "the mesh is not valid for the slice: fix the mesh errors first")
    return price(inputs(cfg), lay)
