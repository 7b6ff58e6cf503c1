"""What a profile says the accelerators did: KPIs, top ops, collectives and a bottleneck verdict,
read from XProf's own tool output (overview_page, hlo_stats, roofline_model, input_pipeline_analyzer).

Input is the parsed JSON of XProf's tools, however it was obtained (the real conversion of
`.xplane.pb` files in `profile_convert.py`, or tool JSON a user exported). Nothing here converts,
caches or knows about the editor.

Units as XProf writes them: self times in microseconds, FLOP rates in GFLOP/s, bandwidths in
GiB/s, step times in milliseconds. XProf's device planes are TensorCores: on v4, v5p and tpu7x a
chip has two, so per-device peaks are the chip's divided by `ChipSpec.tensorcores`.

The verdict (rule order, thresholds from XProf's own analyses where it has them):
  1. input-bound: the device waits for input >= 20% of the step (XProf input_pipeline_analyzer
     calls >= 20% "highly input-bound").
  2. host-bound: the device is idle for other reasons >= 20% of the step.
  3. communication-bound: collectives >= 30% of the step (XProf overview's collective-bound hint;
     XProf itself labels collectives "HBM", so ASAP counts them here).
  4. otherwise the largest of compute-bound ops, HBM-bound ops (XProf's per-op `bound_by`, collectives
     excluded), collectives, input wait and other idle.
Ops whose FLOPs are implausible (more than the chip's peak) are flagged and their `bound_by`, which
XProf derives from those FLOPs, is not believed: their time counts as unattributed.
Confidence starts from how far the winner clears its threshold or the runner-up, and drops for
step-time noise, few steps, missing KPIs and unattributed time.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from server.config.slices import CHIPS, ChipSpec, GiB
from server.profiles import hlo

INPUT_BOUND = 0.20
HOST_BOUND = 0.20
COMM_BOUND = 0.30
OUTLIER_LOW, OUTLIER_HIGH = 0.5, 1.5  # a step outside [0.5, 1.5] x median is not a training step
TOP_N = 5
IMPLAUSIBLE = 1.0  # FLOP rate above the device's peak: the op's FLOP count is overstated


class ProfileError(ValueError):
    """A profile ASAP cannot read; the message says what is wrong and where."""


# ---------------------------------------------------------------------------------------------------
# gviz DataTables
# ---------------------------------------------------------------------------------------------------
@dataclass
class Table:
    cols: list[str]
    rows: list[dict[str, Any]]
    p: dict[str, Any]


def tables(obj: Any) -> list[Table]:
    """The gviz DataTables in one tool's JSON (a table or a list of them); cells may be null."""
    items = obj if isinstance(obj, list) else [obj]
    out = []
    for t in items:
        if not isinstance(t, dict) or "cols" not in t:
            continue
        cols = [str(c.get("id") or c.get("label") or i) for i, c in enumerate(t.get("cols") or [])]
        rows = []
        for r in t.get("rows") or []:
            cells = r.get("c") if isinstance(r, dict) else None
            if not isinstance(cells, list):
                continue
            rows.append(
                {c: (cell.get("v") if isinstance(cell, dict) else None) for c, cell in zip(cols, cells, strict=False)}
            )
        out.append(Table(cols, rows, dict(t.get("p") or {})))
    return out


def _table_with(tool: Any, col: str) -> Table | None:
    return next((t for t in tables(tool) if col in t.cols), None)


def _num(v: Any) -> float | None:
    """A number from a gviz cell or a `p` string like '15.7%' or '96.3'; None when absent."""
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v) if math.isfinite(v) else None
    m = re.match(r"^\s*(-?[\d.]+(?:e[-+]?\d+)?)\s*%?\s*$", str(v), re.I)
    return float(m.group(1)) if m else None


# ---------------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------------
@dataclass
class Steps:
    times_ms: list[float]
    used_ms: list[float]  # without outliers
    outliers: list[tuple[str, float]]  # (step number, ms)

    @property
    def n(self) -> int:
        return len(self.times_ms)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.used_ms)

    @property
    def mean_ms(self) -> float:
        return statistics.fmean(self.used_ms)

    @property
    def stddev_ms(self) -> float:
        return statistics.pstdev(self.used_ms) if len(self.used_ms) > 1 else 0.0

    @property
    def cv(self) -> float:
        return self.stddev_ms / self.mean_ms if self.mean_ms else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "count": self.n,
            "used": len(self.used_ms),
            "mean_ms": self.mean_ms,
            "median_ms": self.median_ms,
            "stddev_ms": self.stddev_ms,
            "raw_mean_ms": statistics.fmean(self.times_ms),
            "raw_stddev_ms": statistics.pstdev(self.times_ms) if self.n > 1 else 0.0,
            "outliers": [{"step": s, "ms": ms} for s, ms in self.outliers],
        }


@dataclass
class Kpis:
    device_type: str | None
    generation: str | None  # ASAP's name for it, when known
    cores: int | None  # TensorCores (XProf devices) in the profile
    hosts: int | None
    peak_flops: float | None  # per device, FLOP/s, as XProf reports it
    peak_hbm_bw: float | None  # per device, bytes/s
    steps: Steps | None
    busy_fraction: float | None  # device busy / step time
    input_fraction: float | None  # waiting for input / step time
    mxu_utilization: float | None
    goodput: float | None
    # FLOP rate over device time vs the declared peak, implausible ops' FLOPs excluded
    program_flop_utilization: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "device_type": self.device_type,
            "generation": self.generation,
            "cores": self.cores,
            "hosts": self.hosts,
            "peak_flops_per_core": self.peak_flops,
            "peak_hbm_bw_per_core": self.peak_hbm_bw,
            "steps": self.steps.to_json() if self.steps else None,
            "duty_cycle": self.busy_fraction,
            "idle_fraction": None if self.busy_fraction is None else 1 - self.busy_fraction,
            "input_fraction": self.input_fraction,
            "mxu_utilization": self.mxu_utilization,
            "goodput": self.goodput,
            "flop_utilization": self.program_flop_utilization,
        }


@dataclass
class Op:
    name: str
    category: str
    occurrences: int
    self_time_us: float
    self_time_fraction: float  # of all device op time
    flop_rate: float | None  # FLOP/s
    flop_utilization: float | None  # vs the declared per-device peak
    hbm_bw: float | None  # bytes/s
    hbm_bw_utilization: float | None
    operational_intensity: float | None
    bound_by: str | None
    framework_op: str | None
    layer: str | None  # e.g. "mlp/wi_0 (backward)"
    implausible: bool = False
    expression: str = ""
    claimed_efficiency: float | None = None  # FLOP/s over XProf's device peak

    def flag_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "category": self.category,
            "self_time_fraction": self.self_time_fraction,
            "claimed_efficiency": self.claimed_efficiency,
            "framework_op": self.framework_op,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "category": self.category,
            "occurrences": self.occurrences,
            "self_time_us": self.self_time_us,
            "self_time_fraction": self.self_time_fraction,
            "flop_utilization": self.flop_utilization,
            "hbm_bw_utilization": self.hbm_bw_utilization,
            "operational_intensity": self.operational_intensity,
            "bound_by": self.bound_by,
            "framework_op": self.framework_op,
            "layer": self.layer,
            "implausible_flops": self.implausible,
        }


@dataclass
class CollectiveGroup:
    """Collectives of one kind (or one mesh axis), summed."""

    self_time_us: float = 0.0
    fraction: float = 0.0  # of step time
    occurrences: int = 0
    payload_bytes: float = 0.0  # summed over occurrences
    achieved_bw: float | None = None  # bytes/s, synchronous ops only
    bw_utilization: float | None = None  # by kind: vs one ICI link pair; by axis: vs the axis' ICI bandwidth
    group_sizes: dict[int, int] = field(default_factory=dict)
    crosses_slices: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "self_time_us": self.self_time_us,
            "fraction": self.fraction,
            "occurrences": self.occurrences,
            "payload_bytes": self.payload_bytes,
            "achieved_bw": self.achieved_bw,
            "bw_utilization": self.bw_utilization,
            "group_sizes": {str(k): v for k, v in sorted(self.group_sizes.items())},
            "crosses_slices": self.crosses_slices,
        }


@dataclass
class Collectives:
    share: float  # of step time
    by_kind: dict[str, CollectiveGroup]
    by_axis: dict[str, CollectiveGroup]
    bw_reference: str  # what achieved bandwidth is compared with

    def to_json(self) -> dict[str, Any]:
        return {
            "share": self.share,
            "by_kind": {k: v.to_json() for k, v in self.by_kind.items()},
            "by_axis": {k: v.to_json() for k, v in self.by_axis.items()},
            "bw_reference": self.bw_reference,
        }


@dataclass
class Verdict:
    bottleneck: str  # compute | hbm | communication | input | host | unknown
    confidence: float
    rule: str
    evidence: list[str]
    shares: dict[str, float]  # of step time

    def to_json(self) -> dict[str, Any]:
        return {
            "bottleneck": self.bottleneck,
            "confidence": self.confidence,
            "rule": self.rule,
            "evidence": self.evidence,
            "shares": self.shares,
        }


@dataclass
class Report:
    source: str
    kpis: Kpis
    top_ops: list[Op]
    top_categories: list[tuple[str, float]]
    collectives: Collectives
    verdict: Verdict
    warnings: list[str] = field(default_factory=list)
    comparison: dict[str, Any] | None = None  # measured vs the performance model's expectation
    implausible_ops: list[Op] = field(default_factory=list)  # flagged: FLOP or byte counts above the peaks
    host_only: bool = False  # per-op times from the host trace (a CPU-only profile): collectives are mostly waits

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "kpis": self.kpis.to_json(),
            "top_ops": [o.to_json() for o in self.top_ops],
            "top_categories": [{"category": c, "self_time_fraction": f} for c, f in self.top_categories],
            "collectives": self.collectives.to_json(),
            "verdict": self.verdict.to_json(),
            "comparison": self.comparison,
            "implausible_ops": [o.flag_json() for o in self.implausible_ops],
            "warnings": self.warnings,
        }


@dataclass(frozen=True)
class MeshAxis:
    name: str
    ici: int
    dcn: int = 1

    @property
    def size(self) -> int:
        return self.ici * self.dcn


# ---------------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------------
def generation_of(device_type: str | None) -> str | None:
    """ASAP's generation name for XProf's device type string ('TPU v5 lite' -> 'v5e')."""
    if not device_type:
        return None
    norm = device_type.strip().lower()
    for gen, chip in CHIPS.items():
        if chip.device_kind.lower() == norm:
            return gen
    return None


# XProf's step table for host-driven steps (CPU, GPU) carries the step's total next to its parts
# ('hostComputeTimeMs', 'otherTimeMs', ..., 'stepTimeMs'); the TPU table only has the parts.
STEP_TOTAL = "stepTimeMs"


def _step_parts(t: Table) -> list[str]:
    """The step table's time columns that partition a step (the total left out)."""
    return [c for c in t.cols if c.endswith("TimeMs") and c != STEP_TOTAL]


def _steps(overview: Any, pipeline: Any) -> Steps | None:
    t = _table_with(pipeline, "stepnum") or _table_with(overview, "stepnum")
    if t is None or not t.rows:
        return None
    times: list[tuple[str, float]] = []
    for r in t.rows:
        total = _num(r.get(STEP_TOTAL)) if STEP_TOTAL in t.cols else None
        parts = [_num(r.get(c)) for c in _step_parts(t)]
        ms = total if total is not None else sum(x for x in parts if x is not None)
        times.append((str(r.get("stepnum")), ms))
    med = statistics.median(ms for _, ms in times)
    used = [(s, ms) for s, ms in times if OUTLIER_LOW * med <= ms <= OUTLIER_HIGH * med] or times
    outliers = [(s, ms) for s, ms in times if (s, ms) not in used]
    return Steps([ms for _, ms in times], [ms for _, ms in used], outliers)


def _busy_and_input(overview: Any, pipeline: Any) -> tuple[float | None, float | None]:
    t = _table_with(pipeline, "stepnum") or _table_with(overview, "stepnum")
    busy = inp = None
    if t is not None and t.rows:
        total = idle = infeed = 0.0
        for r in t.rows:
            for c in _step_parts(t):
                v = _num(r.get(c)) or 0.0
                total += v
                if c == "tcIdleTimeMs":
                    idle += v
                elif "infeed" in c.lower():  # tcInfeedTimeMs (TPU), infeedTimeMs (host steps)
                    infeed += v
        if total > 0:
            busy = 1 - (idle + infeed) / total
            inp = infeed / total
    if inp is None:
        for tb in tables(pipeline) + tables(overview):
            pct = _num(tb.p.get("infeed_percent_average"))
            if pct is not None:
                inp = pct / 100
                break
    if busy is None:
        for tb in tables(overview):
            duty = _num(tb.p.get("device_duty_cycle_percent"))
            if duty:
                busy = duty / 100
    return busy, inp


def _p(tool: Any, key: str) -> Any:
    for t in tables(tool):
        if key in t.p:
            return t.p[key]
    return None


_PASS = (("transpose(jvp(", "backward"), ("jvp(", "forward"))


def layer_of(framework_op: str | None) -> str | None:
    """'jit(train_step)/jit(main)/transpose(jvp(Transformer))/decoder/while/body/checkpoint/layers/mlp/wi_0/
    dot_general[...]' -> 'mlp/wi_0 (backward)': the module path inside the model and the pass."""
    if not framework_op:
        return None
    path = re.sub(r"\[.*$", "", framework_op).rstrip(":")
    which = next((name for marker, name in _PASS if marker in path), None)
    parts = [p for p in path.split("/") if p and "(" not in p]
    skip = {"while", "body", "checkpoint", "rematted_computation", "decoder", "layers", "cond"}
    mod = [p for p in parts[:-1] if p not in skip]
    if not mod:
        mod = parts[-1:]
    label = "/".join(mod[-2:])
    return f"{label} ({which})" if which else label


def analyze(
    tools: dict[str, Any],
    chip: ChipSpec | None = None,
    mesh: list[MeshAxis] | None = None,
    source: str = "",
    axis_bw: Callable[[tuple[str, ...]], float | None] | None = None,
) -> Report:
    """The report for one profile from its XProf tool JSON (`tools`: tool name -> parsed JSON).

    `chip`: the declared slice's chip (peaks for utilization); None = use what XProf reports.
    `mesh`: the config's mesh axes in MaxText order (with ICI and DCN degrees), to name the axis
    each collective runs over. `axis_bw`: the ICI bandwidth (bytes/s per device, both directions) the
    slice gives a group of mesh axes, to compare each axis' achieved collective bandwidth with."""
    overview = tools.get("overview_page")
    pipeline = tools.get("input_pipeline_analyzer")
    hlo_stats = tools.get("hlo_stats")
    roofline = tools.get("roofline_model")
    warnings: list[str] = []
    host_only = False
    if hlo_stats is None and roofline is None and overview is None and "host_trace" not in tools:
        raise ProfileError("no XProf tool output found (expected overview_page, hlo_stats or roofline_model)")

    # -- device and peaks -------------------------------------------------------------------------
    device_type = _p(roofline, "device_type") or _p(overview, "device_type")
    gen = generation_of(device_type)
    peak_gflops = _num(_p(roofline, "peak_flop_rate"))
    peak_gib = _num(_p(roofline, "peak_hbm_bw"))
    cores = _num(_p(overview, "device_core_count"))
    hosts = _num(_p(overview, "host_count"))
    if chip is None and gen:
        chip = CHIPS[gen]
    peak_f: float | None
    peak_bw: float | None
    if chip is not None:
        peak_f = chip.peak_bf16_flops / chip.tensorcores
        peak_bw = chip.hbm_bw / chip.tensorcores
    else:
        peak_f = peak_gflops * 1e9 if peak_gflops else None
        peak_bw = peak_gib * GiB if peak_gib else None

    steps = _steps(overview, pipeline)
    busy, inp = _busy_and_input(overview, pipeline)
    mxu = _num(_p(overview, "mxu_utilization_percent"))
    goodput = next(
        (_num(v) for t in tables(overview) for k, v in t.p.items() if "goodput" in k.lower() and _num(v) is not None),
        None,
    )

    # -- ops ----------------------------------------------------------------------------------------
    op_table = _table_with(hlo_stats, "hlo_op_name")
    host = tools.get("host_trace")
    if (op_table is None or not op_table.rows) and isinstance(host, dict):
        # A CPU-only profile: XProf's device tools are empty; the host trace gives per-op times.
        op_table = _table_with(host.get("hlo_stats"), "hlo_op_name")
        warnings.append(f"no accelerator in this profile (CPU only): {host.get('note', '')}")
        host_only = True
    ops: list[Op] = []
    if op_table is not None:
        total = sum(_num(r.get("total_self_time")) or 0.0 for r in op_table.rows)
        for r in op_table.rows:
            t_us = _num(r.get("total_self_time")) or 0.0
            gf = _num(r.get("model_flop_rate"))
            gib = _num(r.get("hbm_bw"))
            rate = gf * 1e9 if gf is not None else None
            bw = gib * GiB if gib is not None else None
            xprof_peak = peak_gflops * 1e9 if peak_gflops else peak_f
            # More FLOP/s than the device has: XProf's FLOP count for the op is overstated (custom calls
            # such as splash attention report FLOPs of their own).
            # Only FLOPs decide: async copies and collectives report bytes over a start/done op's short
            # self time, so an HBM rate above the peak there is an artefact of timing, not a false count.
            claimed = rate / xprof_peak if rate and xprof_peak else 0.0
            implausible = claimed > IMPLAUSIBLE
            fw = r.get("tf_op_name") or None
            ops.append(
                Op(
                    name=str(r.get("hlo_op_name") or ""),
                    category=str(r.get("category") or ""),
                    occurrences=int(_num(r.get("occurrences")) or 0),
                    self_time_us=t_us,
                    self_time_fraction=t_us / total if total else 0.0,
                    flop_rate=rate,
                    flop_utilization=None if implausible or rate is None or not peak_f else rate / peak_f,
                    hbm_bw=bw,
                    hbm_bw_utilization=None if implausible or bw is None or not peak_bw else bw / peak_bw,
                    operational_intensity=_num(r.get("operational_intensity")),
                    bound_by=(str(r["bound_by"]) if r.get("bound_by") else None),
                    framework_op=fw,
                    layer=layer_of(fw),
                    implausible=implausible,
                    expression=str(r.get("hlo_op_expression") or ""),
                    claimed_efficiency=claimed or None,
                )
            )
    else:
        warnings.append("hlo_stats is missing: no per-op times, collectives or bound_by")
    ops.sort(key=lambda o: o.self_time_us, reverse=True)
    device_us = sum(o.self_time_us for o in ops)

    cats: dict[str, float] = {}
    for o in ops:
        cats[o.category] = cats.get(o.category, 0.0) + o.self_time_fraction
    top_categories = sorted(cats.items(), key=lambda kv: kv[1], reverse=True)[:TOP_N]

    flops = sum((o.flop_rate or 0.0) * o.self_time_us for o in ops if not o.implausible)
    program_util = flops / device_us / peak_f if device_us and peak_f else None

    # -- collectives --------------------------------------------------------------------------------
    busy_share = busy if busy is not None else 1.0
    coll_ops: list[tuple[Op, hlo.CollectiveOp]] = []
    for o in ops:
        c = hlo.parse_collective(o.expression, o.category) if o.expression or o.category else None
        if c is None and hlo.collective_kind(o.category, o.expression) is not None:
            kind, phase = hlo.collective_kind(o.category, o.expression) or ("", "")
            c = hlo.CollectiveOp(kind, phase, 0.0, 0.0, None, None, None, None)
        if c is not None:
            coll_ops.append((o, c))
    coll = _collectives(coll_ops, device_us, busy_share, chip, mesh, warnings, axis_bw)

    # -- verdict ------------------------------------------------------------------------------------
    kpis = Kpis(
        device_type=device_type,
        generation=gen,
        cores=int(cores) if cores else None,
        hosts=int(hosts) if hosts else None,
        peak_flops=peak_gflops * 1e9 if peak_gflops else None,
        peak_hbm_bw=peak_gib * GiB if peak_gib else None,
        steps=steps,
        busy_fraction=busy,
        input_fraction=inp,
        mxu_utilization=mxu / 100 if mxu is not None and not host_only else None,
        goodput=goodput / 100 if goodput is not None and goodput > 1 else goodput,
        program_flop_utilization=program_util,
    )
    coll_names = {id(o) for o, _ in coll_ops}
    verdict = _verdict(ops, coll_names, device_us, kpis, coll, warnings, host_only)
    flagged = [o for o in ops if o.implausible]
    return Report(
        source, kpis, ops[:TOP_N], top_categories, coll, verdict, warnings, implausible_ops=flagged, host_only=host_only
    )


def _collectives(
    coll_ops: list[tuple[Op, hlo.CollectiveOp]],
    device_us: float,
    busy_share: float,
    chip: ChipSpec | None,
    mesh: list[MeshAxis] | None,
    warnings: list[str],
    axis_bw: Callable[[tuple[str, ...]], float | None] | None = None,
) -> Collectives:
    by_kind: dict[str, CollectiveGroup] = {}
    by_axis: dict[str, CollectiveGroup] = {}
    # Achieved bandwidth is compared with one bidirectional ICI link pair of the chip: what one ring
    # on one physical axis gets (DOMAIN.md §4). A collective spread over k axes can reach k times it.
    ref_bw = 2 * chip.ici_link_bw if chip else None
    ref_label = (
        f"one bidirectional ICI link pair of {chip.generation} ({2 * chip.ici_link_bw / 1e9:.0f} GB/s)"
        if chip
        else "none (no declared slice)"
    )
    mesh_devices = math.prod(a.size for a in mesh) if mesh else 0
    mapped_any = unmappable = False
    moved_sync: dict[str, tuple[float, float]] = {}
    moved_axis: dict[str, tuple[float, float]] = {}
    label_axes: dict[str, tuple[str, ...]] = {}
    for o, c in coll_ops:
        frac = o.self_time_us / device_us * busy_share if device_us else 0.0
        g = by_kind.setdefault(c.kind, CollectiveGroup())
        g.self_time_us += o.self_time_us
        g.fraction += frac
        g.occurrences += o.occurrences
        g.payload_bytes += c.payload_bytes * o.occurrences
        if c.group_size:
            g.group_sizes[c.group_size] = g.group_sizes.get(c.group_size, 0) + o.occurrences
        moved = 0.0
        if c.phase == "sync" and c.group_size and c.group_size > 1 and o.self_time_us > 0:
            # bytes each device moves: (N-1)/N of the array (x2 for all-reduce), DOMAIN.md §4
            factor = 2.0 if c.kind == "all-reduce" else 1.0
            moved = c.payload_bytes * (c.group_size - 1) / c.group_size * factor * o.occurrences
            m, t = moved_sync.get(c.kind, (0.0, 0.0))
            moved_sync[c.kind] = (m + moved, t + o.self_time_us * 1e-6)
        axes: tuple[str, ...] | None = None
        crosses = False
        names = {a.name for a in mesh} if mesh else set()
        if mesh and c.groups:
            flat = [d for grp in c.groups for d in grp]
            if flat and max(flat) < mesh_devices:
                axes = hlo.mesh_axes_of_group(c.groups[0], [(a.name, a.size) for a in mesh])
                crosses = _crosses_slices(c.groups[0], mesh)
            else:
                unmappable = True
        elif mesh and c.mesh_axes and set(c.mesh_axes) <= names:  # XLA's per-op axis names are not the mesh's
            axes = c.mesh_axes
        if axes is not None:
            label = "+".join(axes) if axes else "none"
            a = by_axis.setdefault(label, CollectiveGroup())
            a.self_time_us += o.self_time_us
            a.fraction += frac
            a.occurrences += o.occurrences
            a.payload_bytes += c.payload_bytes * o.occurrences
            a.crosses_slices = a.crosses_slices or crosses
            if c.group_size:
                a.group_sizes[c.group_size] = a.group_sizes.get(c.group_size, 0) + o.occurrences
            label_axes[label] = axes
            if moved:
                m, t = moved_axis.get(label, (0.0, 0.0))
                moved_axis[label] = (m + moved, t + o.self_time_us * 1e-6)
            mapped_any = True
    for kind, (moved, secs) in moved_sync.items():
        if secs > 0:
            by_kind[kind].achieved_bw = moved / secs
            by_kind[kind].bw_utilization = moved / secs / ref_bw if ref_bw else None
    for label, (moved, secs) in moved_axis.items():
        if secs > 0:
            bw = axis_bw(label_axes[label]) if axis_bw else None
            by_axis[label].achieved_bw = moved / secs
            by_axis[label].bw_utilization = moved / secs / bw if bw else None
    if unmappable and not mapped_any:
        warnings.append(
            f"collective replica groups name devices beyond the config's mesh ({mesh_devices} devices): "
            "the profile is not of this mesh, so collectives are not attributed to mesh axes"
        )
    share = sum(g.fraction for g in by_kind.values())
    order = sorted(by_kind.items(), key=lambda kv: kv[1].self_time_us, reverse=True)
    return Collectives(share, dict(order), dict(sorted(by_axis.items(), key=lambda kv: -kv[1].self_time_us)), ref_label)


def _crosses_slices(group: tuple[int, ...], mesh: list[MeshAxis]) -> bool:
    """Whether a replica group spans slices: in a hybrid (multislice) mesh an axis' coordinate is
    dcn_index * ici + ici_index (jax.experimental.mesh_utils.create_hybrid_device_mesh)."""
    if not any(a.dcn > 1 for a in mesh):
        return False
    shape = [a.size for a in mesh]
    seen: set[tuple[int, ...]] = set()
    for d in group:
        coords = []
        rem = d
        for size in reversed(shape):
            coords.append(rem % size)
            rem //= size
        coords.reverse()
        seen.add(tuple(c // a.ici for c, a in zip(coords, mesh, strict=True)))
    return len(seen) > 1


def _verdict(
    ops: list[Op],
    coll_ids: set[int],
    device_us: float,
    k: Kpis,
    coll: Collectives,
    warnings: list[str],
    host_only: bool = False,
) -> Verdict:
    busy = k.busy_fraction if k.busy_fraction is not None else 1.0
    inp = k.input_fraction or 0.0
    host = max(0.0, 1.0 - busy - inp)
    comp = hbm = unattributed = 0.0
    for o in ops:
        if id(o) in coll_ids:
            continue
        f = o.self_time_us / device_us * busy if device_us else 0.0
        if o.implausible or not o.bound_by:
            unattributed += f
        elif o.bound_by.lower() == "compute":
            comp += f
        else:  # HBM, and XProf's other memory levels (VMEM, CMEM) count as memory-bound
            hbm += f
    shares = {
        "compute": comp,
        "hbm": hbm,
        "communication": coll.share,
        "input": inp,
        "host": host,
        "unattributed": unattributed,
    }
    evidence = [
        f"device time: compute-bound ops {comp:.0%}, HBM-bound ops {hbm:.0%}, collectives {coll.share:.0%}, "
        f"waiting for input {inp:.0%}, other idle {host:.0%} of the step"
    ]
    flagged = [o for o in ops if o.implausible]
    if flagged:
        worst = max(flagged, key=lambda o: o.claimed_efficiency or 0.0)
        evidence.append(
            f"{len(flagged)} op(s) claim more FLOP/s than the chip has (e.g. {worst.name[:40]} at "
            f"{worst.claimed_efficiency or 0:.1f}x peak): their counts are not believed and their "
            f"{sum(o.self_time_fraction for o in flagged) * busy:.0%} of the step is left unattributed"
        )
    elif unattributed > 0.005:
        evidence.append(f"{unattributed:.0%} of the step is in ops XProf gives no roofline label")
    if not ops:
        return Verdict("unknown", 0.0, "no per-op data", evidence, shares)

    ranked = sorted(((n, v) for n, v in shares.items() if n != "unattributed"), key=lambda kv: -kv[1])
    if inp >= INPUT_BOUND:
        kind, rule, base = "input", f"waiting for input >= {INPUT_BOUND:.0%} of the step", _over(inp, INPUT_BOUND)
    elif host >= HOST_BOUND:
        kind, rule, base = "host", f"device idle (not input) >= {HOST_BOUND:.0%} of the step", _over(host, HOST_BOUND)
    elif coll.share >= COMM_BOUND:
        kind, rule, base = (
            "communication",
            f"collectives >= {COMM_BOUND:.0%} of the step",
            _over(coll.share, COMM_BOUND),
        )
    else:
        kind = ranked[0][0]
        margin = ranked[0][1] - ranked[1][1]
        rule = "largest share of the step"
        base = 0.5 + 0.5 * min(1.0, margin / 0.25)
    conf = base
    if k.steps is None:
        conf *= 0.8
        warnings.append("no step markers: shares are over the whole profile, step times unknown")
    else:
        if k.steps.n < 3:
            conf *= 0.85
        conf *= 1 - min(0.3, k.steps.cv)
    if k.busy_fraction is None:
        conf *= 0.9
    conf *= 1 - min(0.5, unattributed)
    if host_only:
        conf *= 0.5  # CPU timings (threads waiting in collectives) say little about the accelerator run
        evidence.append("CPU-only profile: times are the host's, not an accelerator's")
    runner = next(n for n, _ in ranked if n != kind)
    evidence.append(f"runner-up: {runner} at {shares[runner]:.0%} of the step")
    top = [o for o in ops if id(o) not in coll_ids][:3]
    if kind in ("compute", "hbm") and top:
        evidence.append(
            "largest ops: "
            + "; ".join(f"{o.name} ({o.category}, {o.bound_by or '?'}, {o.self_time_fraction:.0%})" for o in top)
        )
    if kind == "communication" and coll.by_kind:
        kinds = list(coll.by_kind.items())[:3]
        evidence.append("collectives: " + ", ".join(f"{n} {g.fraction:.0%}" for n, g in kinds))
        if coll.by_axis:
            ax, g = next(iter(coll.by_axis.items()))
            evidence.append(f"most collective time is on mesh axis {ax} ({g.fraction:.0%} of the step)")
    if k.mxu_utilization is not None:
        evidence.append(f"MXU utilization {k.mxu_utilization:.1%} (XProf overview)")
    return Verdict(kind, round(max(0.05, min(0.99, conf)), 2), rule, evidence, shares)


def _over(share: float, threshold: float) -> float:
    return 0.6 + 0.4 * min(1.0, (share - threshold) / 0.2)
