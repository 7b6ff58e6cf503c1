"""Compiler verification (issue 8): compile a config's train step ahead of time for its real TPU slice
on this machine (libtpu, no TPU), read back per-chip memory and every collective a step runs, and set
them beside ASAP's analytic estimate. Where the two differ by more than 15%, trust the compiler.

What is compiled: the reference transformer of server/compile/ref_model.py (an approximation of MaxText's
program, built from the config's dims, dtypes, remat policy, scan setting and MaxText's logical-axis
rules); or, with `maxtext_python` (setting `asap.maxtextPython`, CLI `--maxtext-python`), MaxText's own
`train_compile` of the saved config in the user's MaxText environment (server/compile/verify_maxtext.py), so the
verification is of the real program, compiled whole.

Layer reduction: a model deeper than `max_layers` is compiled twice, with L_a = max_layers // 2 and
L_b = max_layers layers, and every memory component and every collective count is extrapolated
linearly to the full depth, c(L) = c(L_b) + (c(L_b) - c(L_a)) / (L_b - L_a) * (L - L_b): per-layer
weights, gradients and optimizer state grow by one layer's bytes per layer, and so do the activations
a scanned model saves under its remat policy (the scan stacks one checkpoint per layer) and the
collectives of the layer loop (its trip count is the layer count); what is outside the layers (the
embedding, the logits, the loss) stays constant. The result says when it was extrapolated.

The compile runs in a child process (server/compile/verify_worker.py) with a time and memory limit,
cancellable through a CancelToken, reporting progress; results are cached in ASAP's sqlite store by a
hash of the compiled job (model spec, mesh, slice, layer plan) and the jax and libtpu versions. Another process
that compiles for verify (a Ray sweep, server/compile/ray_sweep.py) uses the public side of that cache:
`compile_key` (the compile of a (config, mesh) and its key), `read_verdict` and `keep_verdict`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from enum import StrEnum
from importlib import metadata, util
from pathlib import Path
from typing import Any

from server.common import childproc, store
from server.common.childproc import default_max_memory
from server.common.codes import DiagCode
from server.common.findings import Severity
from server.common.progress import CancelToken, Progress
from server.compile import schedule_sim
from server.compile.ref_model import JNP_DTYPES, RefSpec
from server.config import resolve as config_mod
from server.config.axes import AXES
from server.config.mesh import MeshCheck, check
from server.config.resolve import RUN_DOCUMENT_MARKER, Config
from server.config.slices import GiB, Slice
from server.perf import arith, wording
from server.perf.estimate import Estimate, EstimateError, estimate
from server.perf.layout import CONTEXT, DATA, EXPERT, FSDP, PIPELINE, TENSOR, Layout, build
from server.perf.memory import usable_hbm

log = logging.getLogger("asap")

SCHEMA = 3  # bump when what is cached changes (2: splash attention and MaxText's loss in ref_model; 3: each
# run's simulated schedule, server/compile/schedule_sim.py, for which the job names its slice)
TOLERANCE = 0.15  # estimate vs compiler: a relative difference above this is a disagreement
# Estimate vs the compiled program's simulated step: a difference above this is a disagreement. It is the larger of the
# two models' error bounds on published runs (bench/schedule_vs_published.py: the analytical estimate's largest
# |error| there is 16.3%; issue 27 bounds the simulation's at 20%), so that a flagged gap is more than either errs by.
STEP_TOLERANCE = 0.20
ENABLE_HINT = "pip install 'asap[compile]' (or '.[compile]' in a checkout: jax[tpu]==0.10.2 with libtpu==0.0.42.1)"
DEFAULT_MAX_LAYERS = 4
DEFAULT_TIMEOUT_S = 900.0

# libtpu's topology names and chip configs, as MaxText's accelerator map asks for them.
_TOPOLOGY_PREFIX = {"v5p": "v5"}
_CHIP_CONFIG = {"v4": "megacore_dense", "v5p": "megacore"}

# Mesh axis -> the estimate's axis group (server/perf/steptime.py), for comparing collectives by axis.
_GROUP_OF: dict[str, str] = {
    **dict.fromkeys(FSDP, "fsdp"),
    **dict.fromkeys(TENSOR, "tensor"),
    **dict.fromkeys(CONTEXT, "context"),
    **dict.fromkeys(EXPERT, "expert"),
    **dict.fromkeys(DATA, "data"),
    **dict.fromkeys(PIPELINE, "pipeline"),
    "stage": "pipeline",
}


class VerifyError(ValueError):
    """A config that cannot be verified (no slice, an invalid mesh, a model the reference cannot build)."""


def compiler_hbm_bytes(sl: Slice) -> float:
    """HBM one program may use per JAX device (the slice table's compiler_hbm_bytes, measured with libtpu); else
    the capacity less server/perf/memory.py's RUNTIME_RESERVE."""
    return usable_hbm(sl.chip.hbm_bytes / sl.chip.devices_per_chip, sl.chip.compiler_hbm_bytes)


def versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for dist in ("jax", "jaxlib", "libtpu"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


def libtpu_available() -> bool:
    return util.find_spec("libtpu") is not None


# -- the job ------------------------------------------------------------------------------------------
# Decoder blocks whose layers the reference decoder (ref_model.py: llama2-style, uniform) builds faithfully enough
# to stand in for MaxText's program: the llama2 layer and its near relatives (GQA, qk-norm or qkv biases aside).
REFERENCE_BLOCKS = frozenset({"default", "llama2", "mistral", "qwen2", "qwen3"})


def ref_spec(cfg: Config, sl: Slice) -> RefSpec:
    """The reference model's spec for a config on a slice. Raises VerifyError at what it cannot build."""
    try:
        s = arith.shape(cfg)
        remat = arith.remat_policy(cfg)
    except arith.ArithError as e:
        raise VerifyError(f"{e.key}: {e}") from None
    if s.moe:
        raise VerifyError("the reference model has no MoE layers: verify MoE models with MaxText's train_compile")
    block = s.arch.decoder_block if s.arch is not None else "llama2"
    if block not in REFERENCE_BLOCKS or (s.arch is not None and len(s.arch.groups) > 1):
        raise VerifyError(
            f"the reference model is MaxText's llama2-style decoder (uniform layers); {block} "
            f"({s.arch.summary() if s.arch is not None else block}) needs MaxText's own train_compile "
            "(--maxtext-python / asap.maxtextPython)"
        )
    if s.q_heads % s.kv_heads:
        raise VerifyError(f"query heads ({s.q_heads}) must be a multiple of kv heads ({s.kv_heads})")
    problem = cfg.problem("per_device_batch_size")  # ASAP112's check: a finite number in range
    if problem is not None:
        raise VerifyError(problem)
    pdbs = cfg.get("per_device_batch_size", 12.0)
    seq = cfg.get("max_target_length", 2048)
    if isinstance(seq, bool) or not isinstance(seq, int) or seq <= 0:
        raise VerifyError(f"max_target_length must be a whole number > 0, got {seq!r}")

    def dtype(key: str, default: str) -> str:
        v = cfg.get(key, default) or default
        if not isinstance(v, str) or v not in JNP_DTYPES:  # a list or mapping is unhashable: not a dtype either
            raise VerifyError(f"{key}: the reference model compiles {', '.join(JNP_DTYPES)}, not {v!r}")
        return JNP_DTYPES[v]

    weight = dtype("weight_dtype", "float32")
    mu = cfg.get("mu_dtype") or weight
    return RefSpec(
        **s.dims(),
        n_mlp_in=min(2, s.n_mlp_in),
        tied_embedding=s.tied_embedding,
        batch=max(1, int(pdbs * sl.devices)),  # MaxText's global batch of one microbatch
        seq=seq,
        dtype=dtype("dtype", "bfloat16"),
        weight_dtype=weight,
        mu_dtype=JNP_DTYPES.get(str(mu), weight),
        opt_type="sgd" if str(cfg.get("opt_type", "adamw")).lower() == "sgd" else "adamw",
        remat_saved=tuple(sorted(remat.saved - {"decoder_layer_input"})),
        remat_offloaded=tuple(sorted(remat.offloaded)),
        remat_policy=remat.name,
        scan_layers=cfg.get("scan_layers", True) is not False,
    )


def layer_plan(layers: int, max_layers: int) -> list[int]:
    """The layer counts to compile: all of them, or two reduced depths to extrapolate from."""
    if layers <= max_layers:
        return [layers]
    # Two layers at least in the smaller compile: XLA simplifies a one-iteration scan away, and its
    # temporaries then do not lie on the line through the deeper compiles.
    high = max(3, max_layers)
    return [max(2, high // 2), high]


def topology_job(sl: Slice) -> dict[str, Any]:
    gen = sl.chip.generation
    return {
        "name": f"{_TOPOLOGY_PREFIX.get(gen, gen)}:{sl.topology_str}",
        "chip_config_name": _CHIP_CONFIG.get(gen),
        "num_slices": sl.num_slices,
    }


def mesh_job(chk: MeshCheck, allow_split: bool) -> dict[str, Any]:
    return {
        "axes": [a.mesh_axis for a in AXES],
        "ici": [int(chk.ici[i].degree or 1) for i in range(len(AXES))],
        "dcn": [int(chk.dcn[i].degree or 1) for i in range(len(AXES))],
        "allow_split_physical_axes": allow_split,
    }


# -- results ------------------------------------------------------------------------------------------
@dataclass
class Compiled:
    """What the compiler said, per JAX device (chip), for the full model depth."""

    memory_per_chip_bytes: float  # argument + output - alias + temp + generated code (MaxText's formula)
    components: dict[str, float]
    hbm_limit_bytes: float
    fits: bool
    collectives: list[dict[str, Any]]
    compile_s: float
    layers_compiled: list[int]
    layers: int
    extrapolated: bool
    unknown_trip_counts: list[str] = field(default_factory=list)
    # the compiled program's step simulated on the slice (server/compile/schedule_sim.py: step_s, busy_s per
    # category, groups' seconds and exposed part), extrapolated like the memory; None when the compile has none
    schedule: dict[str, Any] | None = None

    def collectives_by_axis(self) -> dict[str, dict[str, float]]:
        """Bytes per step by estimate axis group and kind (see _group_label), in the cost model's convention
        (hlo_program.CollectiveSummary.v_bytes: an all-to-all's V is the whole group's array, one device's
        payload times the group size), so that they compare with the estimate's."""
        out: dict[str, dict[str, float]] = {}
        for c in self.collectives:
            label = _group_label(c["axes"])
            kinds = out.setdefault(label, {})
            kinds[c["kind"]] = kinds.get(c["kind"], 0.0) + _v_bytes(c) * float(c["count"])
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "memory_per_chip_bytes": round(self.memory_per_chip_bytes),
            "components": {k: round(v) for k, v in self.components.items()},
            "hbm_limit_bytes": round(self.hbm_limit_bytes),
            "fits": self.fits,
            "collectives": self.collectives,
            "collectives_by_axis": {
                a: {k: round(v) for k, v in d.items()} for a, d in self.collectives_by_axis().items()
            },
            "compile_s": round(self.compile_s, 2),
            "layers": self.layers,
            "layers_compiled": self.layers_compiled,
            "extrapolated": self.extrapolated,
            "unknown_trip_counts": self.unknown_trip_counts,
            "schedule": self.schedule,
        }


class VerifyStatus(StrEnum):
    """How a verification ended; its value is what `asap verify --json` and the editor's results carry."""

    OK = "ok"  # compiled, and it fits
    DOES_NOT_FIT = "does-not-fit"  # compiled (or the compiler ran out of memory): it does not fit
    UNPLACEABLE = "unplaceable"  # JAX cannot place the mesh on the slice
    INVALID = "invalid"  # the config or its mesh cannot be compiled as it stands
    UNAVAILABLE = "unavailable"  # no compiler here (libtpu, MaxText), or not compiled yet (cached_only)
    ERROR = "error"  # the compile failed or timed out
    CANCELLED = "cancelled"


@dataclass
class VerifyResult:
    """What a verification found; `status` says how it ended (VerifyStatus)."""

    status: VerifyStatus
    message: str
    slice: str | None = None
    mesh: dict[str, Any] | None = None
    compiled: Compiled | None = None
    estimate: dict[str, Any] | None = None
    disagreements: list[dict[str, Any]] = field(default_factory=list)
    program: str = "reference"
    versions: dict[str, str | None] = field(default_factory=dict)
    cached: bool = False
    detail: str = ""  # the compiler's or JAX's own words, when they are not the message
    needs_bytes: float | None = None  # does-not-fit: what the compiler asked for
    available_bytes: float | None = None

    @property
    def fits(self) -> bool | None:
        if self.status == VerifyStatus.DOES_NOT_FIT:
            return False
        return self.compiled.fits if self.compiled is not None else None

    def to_json(self) -> dict[str, Any]:
        return {
            "status": str(self.status),  # the plain value in the JSON
            "message": self.message,
            "slice": self.slice,
            "mesh": self.mesh,
            "program": self.program,
            "fits": self.fits,
            "compiled": self.compiled.to_json() if self.compiled else None,
            "estimate": self.estimate,
            "disagreements": self.disagreements,
            "versions": self.versions,
            "cached": self.cached,
            "detail": self.detail or None,
            "needs_bytes": self.needs_bytes,
            "available_bytes": self.available_bytes,
        }


def _size(n: float) -> str:
    return f"{n / GiB:.2f} GiB" if n >= GiB / 10 else f"{n / 2**20:.1f} MiB"


def _group_label(axes: list[str] | tuple[str, ...]) -> str:
    groups: list[str] = []
    for a in axes:
        g = _GROUP_OF.get(a, a)
        if g not in groups:
            groups.append(g)
    return "+".join(groups) or "none"


def estimate_json(est: Estimate) -> dict[str, Any]:
    """The estimate's per-chip memory and collective bytes per step by axis group and kind."""
    by_axis: dict[str, dict[str, float]] = {}
    for c in est.time.comm.collectives:
        kinds = by_axis.setdefault(c.axis, {})
        kinds[c.kind] = kinds.get(c.kind, 0.0) + c.count * c.bytes
    return {
        "memory_per_chip_bytes": round(est.memory.total),
        "components": {k: round(v) for k, v in est.memory.components.items()},
        "fits": est.memory.fits,
        "step_s": est.time.step_s,
        "mfu": est.mfu,
        "time": time_json(est),
        "collectives_by_axis": {a: {k: round(v) for k, v in d.items()} for a, d in by_axis.items()},
    }


def time_json(est: Estimate) -> dict[str, Any]:
    """The estimate's step in the simulated schedule's categories (server/compile/schedule_sim.py), to say where the
    two differ: compute (matmuls and attention at their roofline bound), memory-bound ops, the pipeline bubble, and
    the exposed seconds of each collective group and of host offload's copies (the step model counts the latter in
    its HBM time; here they are apart, as the simulation keeps them)."""
    t = est.time
    host = sum(o.exposed_s for o in t.overlap if o.axis == "host")
    exposed = {k: float(v) for k, v in t.exposed_by_axis.items()}
    if host > 0:
        exposed["host"] = host
    return {
        "compute_s": t.compute_s,
        "memory_bound_s": max(0.0, t.hbm_s - host),
        "bubble_s": t.bubble_s,
        "exposed_s": exposed,
    }


# The categories a step is compared in, as people read them; "exposed:<group>" for a collective group's (or host
# offload's) exposed seconds.
_CATEGORY_WORDS = {
    "compute": "compute (matmuls, grouped matmuls, attention)",
    "memory-bound": "memory-bound ops",
    "bubble": "the pipeline bubble",
}


def category_words(k: str, short: bool = False) -> str:
    """A step category as people read it ('exposed tensor collectives'; short: 'exposed tensor', for a table)."""
    if k.startswith("exposed:"):
        g = k.removeprefix("exposed:")
        if short:
            return "exposed host offload" if g == "host" else f"exposed {g}"
        return "exposed host-offload copies" if g == "host" else f"exposed {g} collectives"
    if short:
        return {"bubble": "pipeline bubble"}.get(k, k)
    return _CATEGORY_WORDS.get(k, k)


def step_categories(est: dict[str, Any] | None, sch: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """Per category, (the estimate's seconds, the simulated schedule's seconds) of one step; the estimate's side is
    0 where the estimate has no `time` (a result cached before it)."""
    t = dict((est or {}).get("time") or {})
    busy = dict(sch.get("busy_s") or {})
    out: dict[str, tuple[float, float]] = {
        "compute": (
            float(t.get("compute_s", 0.0)),
            sum(float(busy.get(k, 0.0)) for k in ("matmul", "grouped matmul", "attention", "other kernel")),
        ),
        "memory-bound": (float(t.get("memory_bound_s", 0.0)), float(busy.get("memory-bound", 0.0))),
    }
    if float(t.get("bubble_s", 0.0)) > 0:
        out["bubble"] = (float(t["bubble_s"]), 0.0)  # the simulation walks one stage's program: no bubble of its own
    e_exp = dict(t.get("exposed_s") or {})
    s_exp = {k: float(dict(g).get("exposed_s", 0.0)) for k, g in dict(sch.get("groups") or {}).items()}
    for g in sorted(set(e_exp) | set(s_exp)):
        out[f"exposed:{g}"] = (float(e_exp.get(g, 0.0)), s_exp.get(g, 0.0))
    return out


def step_disagreement(
    est: dict[str, Any] | None, sch: dict[str, Any] | None, tolerance: float = STEP_TOLERANCE
) -> dict[str, Any] | None:
    """The estimate's step against the compiled program's simulated step, when they differ by more than
    `tolerance` (relative to the simulation), with the category whose seconds differ most; None otherwise."""
    if not est or not sch or not est.get("step_s") or not sch.get("step_s"):
        return None
    e, c = float(est["step_s"]), float(sch["step_s"])
    rel = (e - c) / c
    if abs(rel) <= tolerance:
        return None
    cats = step_categories(est, sch)
    worst = max(cats, key=lambda k: abs(cats[k][0] - cats[k][1])) if "time" in est else None
    out: dict[str, Any] = {
        "what": "step_s",
        "estimate": e,
        "compiled": c,
        "relative": round(rel, 3),
        "category": worst,
    }
    msg = (
        f"step: estimate {wording.seconds(e)}, the TPU compiler's schedule simulated {wording.seconds(c)} ({rel:+.0%})"
    )
    if worst is not None:
        ew, cw = cats[worst]
        out["category_estimate_s"], out["category_compiled_s"] = ew, cw
        msg += (
            f"; the largest difference is in {category_words(worst)}: estimate {wording.seconds(ew)}, schedule "
            f"{wording.seconds(cw)}"
        )
    out["message"] = msg
    return out


def with_schedule_mfu(sch: dict[str, Any] | None, est: dict[str, Any] | None) -> dict[str, Any] | None:
    """The simulated schedule with its MFU: the estimate's FLOP count (its MFU times its step) over the simulated
    step, so that both MFUs count the same FLOPs (MaxText's convention)."""
    if not sch or not sch.get("step_s") or not est or not est.get("mfu") or not est.get("step_s"):
        return sch
    return {**sch, "mfu": float(est["mfu"]) * float(est["step_s"]) / float(sch["step_s"])}


def schedule_words(sch: dict[str, Any] | None) -> str:
    """'TPU compiler's schedule: step 3.71 s, MFU 24.6%' ('' without a simulated step)."""
    if not sch or not sch.get("step_s"):
        return ""
    mfu = f", MFU {float(sch['mfu']):.1%}" if sch.get("mfu") else ""
    return f"TPU compiler's schedule: step {wording.seconds(float(sch['step_s']))}{mfu}"


def disagreements(compiled: Compiled, est: dict[str, Any], tolerance: float = TOLERANCE) -> list[dict[str, Any]]:
    """Where the estimate and the compiler differ by more than `tolerance` (relative to the compiler)."""
    out: list[dict[str, Any]] = []

    def rel(e: float, c: float) -> float:
        return (e - c) / c if c else float("inf")

    e_mem, c_mem = float(est["memory_per_chip_bytes"]), compiled.memory_per_chip_bytes
    if c_mem and abs(rel(e_mem, c_mem)) > tolerance:
        out.append(
            {
                "what": "memory_per_chip_bytes",
                "estimate": round(e_mem),
                "compiled": round(c_mem),
                "relative": round(rel(e_mem, c_mem), 3),
                "message": f"per-chip memory: estimate {e_mem / GiB:.2f} GiB, compiler {c_mem / GiB:.2f} GiB "
                f"({rel(e_mem, c_mem):+.0%}); trust the compiler",
            }
        )
    if bool(est.get("fits")) != compiled.fits:
        out.append(
            {
                "what": "fits",
                "estimate": bool(est.get("fits")),
                "compiled": compiled.fits,
                "message": f"the estimate says it {'fits' if est.get('fits') else 'does not fit'}, the compiler says "
                f"it {'fits' if compiled.fits else 'does not fit'}; trust the compiler",
            }
        )
    step = step_disagreement(est, compiled.schedule)
    if step is not None:
        out.append(step)
    if not compiled.collectives:
        # No collective read back at all: the optimized HLO was not available (a MaxText run that left no dump);
        # a program sharded over several devices always communicates, so this is not "the compiler has none".
        return out
    e_axes = {a: sum(d.values()) for a, d in est["collectives_by_axis"].items()}
    c_axes = {a: sum(d.values()) for a, d in compiled.collectives_by_axis().items()}
    total = max(sum(c_axes.values()), 1.0)
    for axis in sorted(set(e_axes) | set(c_axes)):
        e, c = float(e_axes.get(axis, 0.0)), float(c_axes.get(axis, 0.0))
        if max(e, c) < 0.01 * total:  # a scalar all-reduce of the loss is not a disagreement
            continue
        if c and abs(rel(e, c)) <= tolerance:
            continue
        out.append(
            {
                "what": f"collective_bytes[{axis}]",
                "estimate": round(e),
                "compiled": round(c),
                "relative": round(rel(e, c), 3) if c else None,
                "message": f"collectives on {axis}: estimate {e / 2**20:.1f} MiB per step, compiler "
                f"{c / 2**20:.1f} MiB" + (f" ({rel(e, c):+.0%})" if c else " (the compiled program has none)"),
            }
        )
    return out


# -- extrapolation ------------------------------------------------------------------------------------
def _line(a: float, b: float, la: int, lb: int, layers: int) -> float:
    return max(0.0, b + (b - a) / (lb - la) * (layers - lb))


def combine(runs: list[dict[str, Any]], layers: int, hbm_limit: float) -> Compiled:
    """The full-depth result from one compile (exact) or two reduced ones (extrapolated linearly)."""
    keys = ("argument", "output", "alias", "temp", "generated_code")
    compile_s = sum(float(r["compile_s"]) + float(r["lower_s"]) for r in runs)
    unknown = [u for r in runs for u in r.get("unknown_trip_counts", [])]
    schedules = [r.get("schedule") for r in runs]
    schedule = None
    if len(runs) == 1:
        mem = {k: float(runs[0]["memory"][k]) for k in keys}
        colls = list(runs[0]["collectives"])
        exact = runs[0]["layers"] == layers
        schedule = schedules[0] if isinstance(schedules[0], dict) and "step_s" in schedules[0] else None
    else:
        a, b = runs
        la, lb = int(a["layers"]), int(b["layers"])
        mem = {k: _line(float(a["memory"][k]), float(b["memory"][k]), la, lb, layers) for k in keys}
        # generated code does not grow with a scanned model's depth; keep the larger compile's
        mem["generated_code"] = float(b["memory"]["generated_code"])
        colls = _extrapolate_collectives(a["collectives"], b["collectives"], la, lb, layers)
        exact = False
        sa, sb = schedules
        if isinstance(sa, dict) and isinstance(sb, dict) and "step_s" in sa and "step_s" in sb:
            schedule = schedule_sim.extrapolate(sa, sb, la, lb, layers)
    total = mem["argument"] + mem["output"] - mem["alias"] + mem["temp"] + mem["generated_code"]
    return Compiled(
        memory_per_chip_bytes=total,
        components=mem,
        hbm_limit_bytes=hbm_limit,
        fits=total <= hbm_limit,
        collectives=colls,
        compile_s=compile_s,
        layers_compiled=[int(r["layers"]) for r in runs],
        layers=layers,
        extrapolated=not exact,
        unknown_trip_counts=unknown,
        schedule=schedule,
    )


def _v_bytes(c: dict[str, Any]) -> float:
    """One execution's V (hlo_program.CollectiveSummary.v_bytes); derived for results cached before it was stored."""
    if c.get("v_bytes") is not None:
        return float(c["v_bytes"])
    group = int(c.get("group_size") or 1)
    return float(c["payload_bytes"]) * (max(1, group) if c["kind"] in ("all-to-all", "ragged-all-to-all") else 1)


def _extrapolate_collectives(
    a: list[dict[str, Any]], b: list[dict[str, Any]], la: int, lb: int, layers: int
) -> list[dict[str, Any]]:
    def key(c: dict[str, Any]) -> tuple[Any, ...]:
        return (c["kind"], tuple(c["axes"]), c["payload_bytes"], c["group_size"])

    counts_a = {key(c): int(c["count"]) for c in a}
    out = []
    for c in b:
        n = round(_line(counts_a.get(key(c), 0), int(c["count"]), la, lb, layers))
        if n > 0:
            out.append({**c, "count": n, "total_bytes": round(c["payload_bytes"] * n)})
    out.sort(key=lambda c: -c["total_bytes"])
    return out


# -- cache --------------------------------------------------------------------------------------------
def cache_key(job: dict[str, Any], vers: dict[str, str | None]) -> str:
    blob = json.dumps({"schema": SCHEMA, "job": job, "versions": vers}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


_CACHE = store.BlobCache("verifications", "result")  # key -> {"runs", "error", "versions"}


def read_verdict(db: Any, key: str) -> dict[str, Any] | None:
    """The compile ASAP's store `db` keeps under `key` ({"runs", "error", "versions"}, as `verdict_value` makes
    it); None when there is none. With `compile_key`, how another process (a Ray sweep) finds what verify keeps."""
    hit = _CACHE.get(db, key)
    return dict(hit) if hit is not None else None


def keep_verdict(db: Any, key: str, value: dict[str, Any]) -> None:
    """Keep a compile's result (`verdict_value`) in ASAP's store `db` under `key` (one upsert: a reader sees the
    whole value or none); `verify` then answers that (config, mesh) from the store."""
    _CACHE.put(db, key, value)


def verdict_value(runs: list[dict[str, Any]], error: dict[str, Any] | None, versions: dict[str, Any]) -> dict[str, Any]:
    """What is kept of a compile: the worker's runs (one per depth), its error event, the jax/libtpu versions."""
    return {"runs": runs, "error": error, "versions": versions}


@dataclass(frozen=True)
class PlannedCompile:
    """The compile `verify` runs for a (config, mesh), and the key its result is kept under. `program`:
    "reference" (`job` is the verify_worker's job) or "maxtext" (`mesh_axes` and `versions`: the MaxText
    environment's, part of the key). `layers`: the model's full depth."""

    key: str
    program: str
    layers: int
    slice: Slice
    job: dict[str, Any] = field(default_factory=dict)
    mesh_axes: list[tuple[str, int]] = field(default_factory=list)
    versions: dict[str, str | None] = field(default_factory=dict)
    layout: Layout | None = None  # MaxText's: the mesh on the slice, for the compiled step's simulation


def _blocking(chk: MeshCheck) -> list[Any]:
    """The mesh check's errors that stop a compile (an unplaceable axis does not: JAX's own words are wanted)."""
    return [f for f in chk.findings if f.severity == Severity.ERROR and f.code != DiagCode.AXIS_NOT_PLACEABLE]


def reference_compile(
    cfg: Config, chk: MeshCheck, spec: RefSpec, max_layers: int, vers: dict[str, str | None]
) -> PlannedCompile:
    """The reference program's compile of `spec` (ref_spec of `cfg`) for the checked mesh; keyed with `vers`."""
    assert chk.slice is not None
    job = {
        "slice": chk.slice.name,
        "topology": topology_job(chk.slice),
        "mesh": mesh_job(chk, cfg.get("allow_split_physical_axes", False) is True),
        "model": spec.to_json(),
        "layers": layer_plan(spec.layers, max_layers),
    }
    return PlannedCompile(cache_key(job, vers), "reference", spec.layers, chk.slice, job=job)


def maxtext_source(cfg: Config, overrides: dict[str, Any]) -> tuple[Path, dict[str, Any]]:
    """What MaxText's train_compile is given for `cfg` asked with `overrides`: the config file and the command-line
    keys. A launch command's run (server/launch/: its document is ASAP's, never MaxText's) compiles as the command
    runs: the config the command names (`src/maxtext/configs/base.yml` when it is MaxText's own, which MaxText's
    resolve_config_path finds in the package it runs), its `key=value` overrides, then `overrides`."""
    assert cfg.path is not None
    doc = cfg.document
    if doc is None or not doc.lines or doc.lines[0] != RUN_DOCUMENT_MARKER:
        return cfg.path, overrides
    base = doc.entries.get("base_config")
    name = str(base.value) if base is not None else "base.yml"
    path = Path(name) if Path(name).is_absolute() else Path("src/maxtext/configs") / name
    return path, {**{k: v.value for k, v in cfg.command_values.items()}, **overrides}


def maxtext_compile(
    cfg: Config, chk: MeshCheck, overrides: dict[str, Any], vers: dict[str, str | None]
) -> PlannedCompile:
    """MaxText's train_compile of the saved config `cfg` with `overrides` for the checked mesh, in the
    environment whose versions are `vers` (verify_maxtext.versions)."""
    from server.compile import verify_maxtext

    assert chk.slice is not None and cfg.path is not None
    job = mesh_job(chk, cfg.get("allow_split_physical_axes", False) is True)
    mesh_axes = [(a, i * d) for a, i, d in zip(job["axes"], job["ici"], job["dcn"], strict=True)]
    source, keys = maxtext_source(cfg, overrides)
    key = verify_maxtext.cache_key(source, chk.slice, keys, vers)
    layers = cfg.model.num_decoder_layers if cfg.model is not None else 0
    return PlannedCompile(key, "maxtext", layers, chk.slice, mesh_axes=mesh_axes, versions=vers, layout=_layout(chk))


def compile_key(
    source: Config | Path | str,
    mesh: dict[str, Any] | None = None,
    *,
    slice_name: str | None = None,
    max_layers: int = DEFAULT_MAX_LAYERS,
    maxtext_python: str | None = None,
) -> PlannedCompile | None:
    """The compile `verify(source, mesh, slice_name=..., max_layers=..., maxtext_python=...)` would run, with the
    key it keeps the result under (`read_verdict`, `keep_verdict`), computed by the same code; None when verify
    would compile nothing (no slice, an invalid mesh, a model the reference cannot build, no MaxText for
    `maxtext_python`, an unsaved config for MaxText): verify says why at once. Needs no compiler here."""
    cfg, chk = _prepare(source, mesh, slice_name)
    if chk.slice is None or not chk.consistent or _blocking(chk):
        return None
    if maxtext_python:
        from server.compile import verify_maxtext

        vers = verify_maxtext.versions(maxtext_python)
        if vers.get("maxtext") is None or cfg.path is None:
            return None
        return maxtext_compile(cfg, chk, mesh or {}, vers)
    try:
        spec = ref_spec(cfg, chk.slice)
    except VerifyError:
        return None
    return reference_compile(cfg, chk, spec, max_layers, versions())


def worth_keeping(run: _Run) -> bool:
    """Whether a reference compile's run is a verdict to keep: it compiled, or the compiler's answer does not depend
    on this machine (out of memory, unplaceable); never a timeout, a crash or a compile error that may be transient."""
    deterministic = run.error is None or run.error.get("kind") in ("oom", "placement")
    return deterministic and bool(run.runs or run.error) and run.returncode in (0, 3) and not run.timed_out


def _cached_run(db: Any, key: str) -> _Run | None:
    """A compile kept in the store, as the run it came from; None when there is none."""
    hit = read_verdict(db, key)
    if hit is None:
        return None
    return _Run(runs=hit["runs"], error=hit["error"], versions=hit.get("versions", {}), cached=True)


@dataclass
class _Cache:
    """One verification's compile cache: ASAP's store (opened on the first lookup; None: keep nothing), whether
    it is read at all (use_cache), and whether only a compile it keeps may answer (cached_only: never compile)."""

    db: Any
    use: bool
    only: bool

    def lookup(self, key: str) -> _Run | None:
        """The compile kept under `key`; None when there is none or the cache is not read."""
        self.db = _open_db(self.db, self.use)
        return _cached_run(self.db, key) if self.use else None

    def keep(self, key: str, run: _Run) -> None:
        keep_verdict(self.db, key, verdict_value(run.runs, run.error, run.versions))


# -- the child process --------------------------------------------------------------------------------
@dataclass
class _Run:
    runs: list[dict[str, Any]] = field(default_factory=list)
    error: dict[str, Any] | None = None
    versions: dict[str, Any] = field(default_factory=dict)
    timed_out: bool = False
    returncode: int = 0
    stderr: str = ""
    cached: bool = False  # read from the verification cache, not compiled by this call


def parallel_depths() -> bool:
    """Whether the two reduced depths compile side by side, in two children (ASAP_VERIFY_PARALLEL=0/1 decides; else
    when the machine has two cores or more). The TPU compiler's backend keeps about one core busy per compile, and the
    two depths are independent programs: on two idle cores the current mesh's verdict comes in about half the time."""
    env = os.environ.get(PARALLEL_ENV, "").strip()
    if env in ("0", "1"):
        return env == "1"
    return (os.cpu_count() or 1) >= 2


PARALLEL_ENV = "ASAP_VERIFY_PARALLEL"


def run_worker(
    job: dict[str, Any],
    progress: Progress | None = None,
    cancel: CancelToken | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_memory: int | None = None,
    hlo_dir: Path | None = None,
    parallel: bool | None = None,
) -> _Run:
    """Run server/compile/verify_worker.py on `job`; its events, collected. A job of several depths compiles them in
    one child each, at the same time, when `parallel` (default: parallel_depths()); the runs are merged as one
    child would have written them (by depth; the shallowest error)."""
    plan = list(job["layers"])
    if not (parallel if parallel is not None else parallel_depths()) or len(plan) < 2:
        return _run_child(job, progress, cancel, timeout_s, max_memory, hlo_dir)
    done: list[int] = []
    lock = threading.Lock()
    # the children's own token: the caller's cancel reaches both, and a compiler error in one (an out-of-memory at
    # the smaller depth) stops the other, whose compile can no longer change the verdict
    siblings = CancelToken()
    if cancel is not None:
        cancel.on_cancel(siblings.cancel)

    def depth_progress(layers: int) -> Progress:
        def report(message: str, fraction: float | None) -> None:
            if progress is None or not message.startswith("compiling"):
                return
            with lock:
                n = len(done)
            progress(f"compiling {' and '.join(map(str, plan))} layers side by side ({n} of {len(plan)} done)", None)

        return report

    results: dict[int, _Run] = {}

    def one(layers: int) -> None:
        try:
            depth = {**job, "layers": [layers]}
            r = _run_child(depth, depth_progress(layers), siblings, timeout_s, max_memory, hlo_dir)
        except OSError as e:  # the child could not start
            r = _Run(returncode=-1, stderr=str(e))
        results[layers] = r
        if r.error is not None:
            siblings.cancel()
        with lock:
            done.append(layers)
            n = len(done)
        if progress is not None and r.runs:
            progress(f"compiled {layers} layers ({n} of {len(plan)} done)", n / len(plan))

    threads = [threading.Thread(target=one, args=(layers,), name=f"asap-verify-{layers}") for layers in plan]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return _merge([results[layers] for layers in plan])


def _merge(runs: list[_Run]) -> _Run:
    """One run of several children's, in depth order, as one child compiling the depths in turn reports them: the
    shallowest error; every compile only when each child compiled (a child that stopped without a result makes the
    run one without a result); timed out when one was."""
    failed = next((r for r in runs if r.error is not None), None)  # its exit status is the run's (the other killed)
    return _Run(
        runs=[ev for r in runs for ev in r.runs] if all(r.runs for r in runs) else [],
        error=failed.error if failed is not None else None,
        versions=next((r.versions for r in runs if r.versions), {}),
        timed_out=any(r.timed_out for r in runs),
        returncode=failed.returncode if failed is not None else next((r.returncode for r in runs if r.returncode), 0),
        stderr="".join(r.stderr for r in runs),
    )


def _run_child(
    job: dict[str, Any],
    progress: Progress | None = None,
    cancel: CancelToken | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_memory: int | None = None,
    hlo_dir: Path | None = None,
) -> _Run:
    """One child process compiling every depth of `job` in turn."""
    limit = max_memory or default_max_memory()
    out = _Run()

    def on_event(ev: dict[str, Any]) -> None:
        kind = ev.get("event")
        if kind == "start":
            out.versions = {"jax": ev.get("jax"), "libtpu": ev.get("libtpu")}
        elif kind == "progress" and progress is not None:
            progress(str(ev.get("message", "")), ev.get("fraction"))
        elif kind == "compiled":
            out.runs.append(ev)
        elif kind == "error":
            out.error = ev

    with tempfile.TemporaryDirectory(prefix="asap-verify-") as tmp:
        job_path = Path(tmp) / "job.json"
        job_path.write_text(json.dumps(job))
        env = childproc.python_env(
            limit,
            JAX_PLATFORMS="cpu",  # the topology is libtpu's; no TPU backend is initialised
            # libtpu takes /tmp/libtpu_lockfile for the life of a process that loads it (the language
            # server does, for placement): without this the child aborts while any other such process lives
            ALLOW_MULTIPLE_LIBTPU_LOAD="1",
        )
        cmd = [sys.executable, "-m", "server.compile.verify_worker", str(job_path)]
        if hlo_dir is not None:
            cmd.append(str(hlo_dir))
        child = childproc.run(cmd, env=env, on_event=on_event, timeout_s=timeout_s, cancel=cancel)
    out.returncode, out.timed_out, out.stderr = child.returncode, child.timed_out, child.stderr
    return out


# -- the verifier -------------------------------------------------------------------------------------
def _prepare(
    source: Config | Path | str, mesh: dict[str, Any] | None, slice_name: str | None
) -> tuple[Config, MeshCheck]:
    cfg = source if isinstance(source, Config) else config_mod.load(Path(source))
    if mesh:
        cfg = config_mod.with_overrides(cfg, mesh)
    return cfg, check(cfg, slice_name)


def verify(
    source: Config | Path | str,
    mesh: dict[str, Any] | None = None,
    *,
    slice_name: str | None = None,
    max_layers: int = DEFAULT_MAX_LAYERS,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_memory: int | None = None,
    progress: Progress | None = None,
    cancel: CancelToken | None = None,
    db: Any = None,
    use_cache: bool = True,
    hlo_dir: Path | None = None,
    maxtext_python: str | None = None,
    cached_only: bool = False,
) -> VerifyResult:
    """Compile `source`'s train step (a config path or a loaded Config) with the mesh keys
    in `mesh` overriding the config's (e.g. {"ici_fsdp_parallelism": 8, "ici_tensor_parallelism": 2}) for
    its slice (`slice_name` when the config declares none), and compare with the estimate.
    Never raises for a config, mesh or compiler problem: the result's status and message say what happened.
    """
    vers = versions()
    cfg, chk = _prepare(source, mesh, slice_name)
    sl = chk.slice
    if sl is None:
        return VerifyResult(
            VerifyStatus.INVALID, "no TPU slice declared (compile_topology, or a slice setting)", versions=vers
        )
    mesh_desc = chk.mesh_dict()
    mesh_desc.pop("placement", None)
    base: dict[str, Any] = {"slice": sl.name, "mesh": mesh_desc, "versions": vers}
    placement_findings = [f for f in chk.findings if f.code == DiagCode.AXIS_NOT_PLACEABLE]
    blocking = _blocking(chk)
    if blocking or not chk.consistent:
        msg = "; ".join(f.message for f in blocking) or "the mesh does not resolve for the slice"
        return VerifyResult(VerifyStatus.INVALID, msg, **base)
    cache = _Cache(db, use_cache, cached_only)
    if maxtext_python:
        return _verify_maxtext(
            maxtext_python,
            cfg,
            chk,
            mesh or {},
            base,
            placement_findings,
            timeout_s,
            progress,
            cancel,
            cache,
        )
    try:
        spec = ref_spec(cfg, sl)
    except VerifyError as e:
        return VerifyResult(VerifyStatus.INVALID, str(e), **base)

    est_json = None if placement_findings else _estimate_or_none(cfg, chk)

    if not libtpu_available():
        return VerifyResult(
            VerifyStatus.UNAVAILABLE,
            f"compiling for a TPU slice needs libtpu next to jax: {ENABLE_HINT}",
            estimate=est_json,
            **base,
        )

    planned = reference_compile(cfg, chk, spec, max_layers, vers)
    job, key = planned.job, planned.key
    run = cache.lookup(key)
    if run is None:
        if cache.only:
            return VerifyResult(VerifyStatus.UNAVAILABLE, "not compiled yet (asap verify)", estimate=est_json, **base)
        run = run_worker(job, progress, cancel, timeout_s, max_memory, hlo_dir)
        if cancel is not None and cancel.cancelled:
            return VerifyResult(VerifyStatus.CANCELLED, "verification cancelled", estimate=est_json, **base)
        if run.timed_out:
            return VerifyResult(
                VerifyStatus.ERROR,
                f"the compile took longer than {timeout_s:.0f} s and was stopped",
                estimate=est_json,
                **base,
            )
        if worth_keeping(run):
            cache.keep(key, run)
    return _result(run, spec.layers, sl, est_json, placement_findings, base)


def _layout(chk: MeshCheck) -> Layout | None:
    """The checked mesh's layout on its slice, for the schedule simulation of MaxText's compile; None if it has none."""
    try:
        assert chk.slice is not None
        ici = {a.name: int(chk.ici[i].degree or 1) for i, a in enumerate(AXES)}
        dcn = {a.name: int(chk.dcn[i].degree or 1) for i, a in enumerate(AXES)}
        return build(chk.slice, ici, dcn)
    except Exception as e:  # the simulation is extra: never the reason a verify fails
        log.info("verify: no layout for the schedule simulation: %s", e)
        return None


def _estimate_or_none(cfg: Config, chk: MeshCheck) -> dict[str, Any] | None:
    try:
        return estimate_json(estimate(cfg, chk))
    except EstimateError as e:
        log.info("verify: no estimate to compare with: %s", e)
        return None


def _open_db(db: Any, use_cache: bool) -> Any:
    """ASAP's store for the cache, unless given or not wanted; None on a read-only cache directory."""
    if db is not None or not use_cache:
        return db
    try:
        return store.connect()
    except Exception as e:  # a read-only cache directory: verify without keeping results
        log.warning("verification cache unavailable (%s)", e)
        return None


def _verify_maxtext(
    python: str,
    cfg: Config,
    chk: MeshCheck,
    overrides: dict[str, Any],
    base: dict[str, Any],
    placement_findings: list[Any],
    timeout_s: float,
    progress: Progress | None,
    cancel: CancelToken | None,
    cache: _Cache,
) -> VerifyResult:
    """MaxText's own train_compile of the saved config (server/compile/verify_maxtext.py), read like the reference."""
    from server.compile import verify_maxtext

    sl = chk.slice
    assert sl is not None
    base = {**base, "program": "maxtext"}
    if cfg.path is None:
        return VerifyResult(VerifyStatus.INVALID, "MaxText compiles a config file: save it first", **base)
    est_json = None if placement_findings else _estimate_or_none(cfg, chk)
    vers = verify_maxtext.versions(python)
    base["versions"] = {**base["versions"], **{f"maxtext_env_{k}": v for k, v in vers.items()}}
    if vers.get("maxtext") is None:
        return VerifyResult(
            VerifyStatus.UNAVAILABLE,
            f"MaxText is not installed for {python} (Python >= 3.12: pip install 'maxtext[tpu]')",
            estimate=est_json,
            **base,
        )
    planned = maxtext_compile(cfg, chk, overrides, vers)
    mesh_axes, key, layers = planned.mesh_axes, planned.key, planned.layers
    run = cache.lookup(key)
    if run is None:
        if cache.only:
            return VerifyResult(VerifyStatus.UNAVAILABLE, "not compiled yet (asap verify)", estimate=est_json, **base)
        source, keys = maxtext_source(cfg, overrides)
        out = verify_maxtext.run(python, source, sl, keys, mesh_axes, timeout_s, progress, cancel, layout=_layout(chk))
        if out["cancelled"]:
            return VerifyResult(VerifyStatus.CANCELLED, "verification cancelled", estimate=est_json, **base)
        if out["timed_out"]:
            return VerifyResult(
                VerifyStatus.ERROR,
                f"MaxText's compile took longer than {timeout_s:.0f} s and was stopped",
                estimate=est_json,
                **base,
            )
        runs = [{**out["run"], "layers": layers}] if "run" in out else []
        run = _Run(runs=runs, error=out.get("error"), versions={"jax": vers.get("jax"), "libtpu": vers.get("libtpu")})
        run.stderr = out.get("tail", "")
        if runs or (run.error is not None and run.error.get("kind") in ("oom", "placement")):
            cache.keep(key, run)
    if run.error is not None and run.error.get("kind") == "no-maxtext":
        return VerifyResult(VerifyStatus.UNAVAILABLE, str(run.error["message"]), estimate=est_json, **base)
    res = _result(run, layers, sl, est_json, placement_findings, base)
    res.program = "maxtext"
    if res.status == VerifyStatus.OK:
        res.message += " (MaxText's own train step)"
    return res


def _result(
    run: _Run,
    layers_total: int,
    sl: Slice,
    est_json: dict[str, Any] | None,
    placement_findings: list[Any],
    base: dict[str, Any],
) -> VerifyResult:
    err = run.error
    cached = run.cached
    limit = compiler_hbm_bytes(sl)
    if err is not None:
        kind, raw = err.get("kind"), str(err.get("message", ""))
        if kind == "placement":
            if placement_findings:
                return VerifyResult(
                    VerifyStatus.UNPLACEABLE,
                    placement_findings[0].message,
                    detail=raw,
                    cached=cached,
                    estimate=est_json,
                    **base,
                )
            return VerifyResult(
                VerifyStatus.UNPLACEABLE,
                f"JAX cannot place this mesh on {sl.name} (ASAP's static check did not predict it): {raw}",
                detail=raw,
                cached=cached,
                estimate=est_json,
                **base,
            )
        if kind == "oom":
            needed = err.get("needed_bytes")
            avail = err.get("available_bytes") or limit
            layers = int(err.get("layers", layers_total))
            what = err.get("what") or "the program"
            at_least = "at least " if layers < layers_total or what != "total" else ""
            needs = f"{at_least}{_size(needed)}" if needed else "more than it has"
            reduced = f" (with {layers} of {layers_total} layers)" if layers < layers_total else ""
            return VerifyResult(
                VerifyStatus.DOES_NOT_FIT,
                f"does not fit: needs {needs} of {_size(avail)} per chip on {sl.name}"
                f" ({what}{reduced}, as the TPU compiler reports it)",
                detail=raw,
                needs_bytes=needed,
                available_bytes=avail,
                cached=cached,
                estimate=est_json,
                **base,
            )
        if kind == "no-libtpu":
            return VerifyResult(
                VerifyStatus.UNAVAILABLE, f"libtpu is not installed: {ENABLE_HINT}", estimate=est_json, **base
            )
        return VerifyResult(VerifyStatus.ERROR, f"the compile failed: {raw}", detail=raw, estimate=est_json, **base)
    if not run.runs:
        tail = run.stderr.strip().splitlines()[-1:] if run.stderr.strip() else []
        why = f" (exit {run.returncode})" + (f": {tail[0][:300]}" if tail else "")
        if run.returncode < 0:
            why = f" (killed by signal {-run.returncode}; a memory limit?)"
        return VerifyResult(
            VerifyStatus.ERROR, "the compiler process stopped without a result" + why, estimate=est_json, **base
        )
    compiled = combine(run.runs, layers_total, limit)
    how = (
        f", extrapolated from {' and '.join(map(str, compiled.layers_compiled))} of {layers_total} layers"
        if compiled.extrapolated
        else ""
    )
    verdict = "fits" if compiled.fits else "does not fit"
    status = VerifyStatus.OK if compiled.fits else VerifyStatus.DOES_NOT_FIT
    msg = (
        f"verified by the TPU compiler: {_size(compiled.memory_per_chip_bytes)} of "
        f"{_size(compiled.hbm_limit_bytes)} per chip, {verdict}{how}"
        if compiled.fits
        else f"does not fit: needs {_size(compiled.memory_per_chip_bytes)} of {_size(compiled.hbm_limit_bytes)} "
        f"per chip on {sl.name}{how}"
    )
    compiled.schedule = with_schedule_mfu(compiled.schedule, est_json)
    if compiled.fits and compiled.schedule:
        msg += f"; {schedule_words(compiled.schedule)}"
    res = VerifyResult(status, msg, compiled=compiled, estimate=est_json, cached=cached, **base)
    if not compiled.fits:
        res.needs_bytes, res.available_bytes = compiled.memory_per_chip_bytes, compiled.hbm_limit_bytes
    if run.versions:
        res.versions = {**res.versions, **{k: v for k, v in run.versions.items() if v}}
    if est_json is not None:
        res.disagreements = disagreements(compiled, est_json)
    return res
