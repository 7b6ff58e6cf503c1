"""Step time of a compiled, scheduled TPU module: the TensorCore's timeline simulated op by op (issue 27, item 1).

The optimized HLO of a train step (`is_scheduled=true`) lists each computation's instructions in the order the TPU
issues them. This module walks that order from ENTRY, loop bodies times their trip counts, and keeps one clock for
the TensorCore:

* every op that computes advances the clock by its roofline seconds on the declared chip (one JAX device: a tpu7x
  chip's two devices each get half its peak and bandwidth):
  - a dot or convolution (also inside a fusion) its FLOPs at the chip's bf16 peak times its sustained MXU
    efficiency, or its HBM bytes, whichever is longer (server/profiles/hlo_schedule.Costs);
  - a Pallas kernel by what it computes: a grouped matmul (megablox `gmm`/`tgmm`) 2 x rows x its weights' two
    dimensions at the MXU rate; splash attention's forward 2 matmuls over the (causal: half the) score blocks, its
    dq kernel 3, its dkv kernel 4, the fused backward 5, at the attention efficiency the step model uses
    (server/perf/steptime.ATTENTION_EFFICIENCY: splash recomputes and runs its softmax on the vector units);
    another kernel by its bytes (listed in `unpriced_kernels`);
  - any other op its HBM bytes;
* a collective costs its seconds by ASAP's ring formulas on its mesh axes' links (server/perf/collectives.py, as
  hlo_schedule prices it). A synchronous one stops the clock for its time. An asynchronous one (start/done, TPU's
  async collective fusion, a SparseCore offload, a multi-slice program's Megascale transfer) runs from its start
  beside the ops scheduled before its done; at the done the clock waits for what is left of it. Collectives over
  the same axis group share its links: one starts when the previous one on that group ends. SparseCore offloads
  take no TensorCore time;
* a host-offload copy (`copy-start` to or from host memory, `S(5)`) runs over the chip's PCIe link (a tpu7x chip's
  two devices share it) beside the compute until its `copy-done`.

The result: the step's seconds, the TensorCore's busy seconds per op category, and each collective group's
seconds and the part of them the clock waited for (exposed), per mesh-axis group. Pure Python over the HLO text;
no XLA needed to read it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from server.perf.layout import Layout
from server.perf.steptime import ATTENTION_EFFICIENCY
from server.profiles import hlo_schedule as hs
from server.profiles.hlo import Instruction, Shape
from server.profiles.hlo_program import trip_count

# Host memory's space in a TPU layout (`{...:S(5)}`): a copy to or from it is host offload.
_HOST_SPACE = re.compile(r"S\(5\)")
_KERNEL = re.compile(r'custom_call_target="tpu_custom_call"')
CATEGORIES = ("matmul", "grouped matmul", "attention", "other kernel", "memory-bound")


@dataclass
class GroupTime:
    """The collectives of one mesh-axis group (or host offload's copies), per step."""

    seconds: float = 0.0  # their own time, as if nothing overlapped
    exposed_s: float = 0.0  # what the TensorCore's clock waited for
    count: int = 0  # executions per step


@dataclass
class Simulation:
    step_s: float = 0.0
    busy_s: dict[str, float] = field(default_factory=dict)  # TensorCore seconds per CATEGORIES entry
    groups: dict[str, GroupTime] = field(default_factory=dict)  # hlo_schedule's step groups, and "host"
    flops: float = 0.0  # matmul FLOPs executed (dots, convolutions, grouped matmuls, attention kernels)
    unpriced_kernels: list[str] = field(default_factory=list)
    unknown_trip_counts: list[str] = field(default_factory=list)

    @property
    def exposed_s(self) -> float:
        return sum(g.exposed_s for g in self.groups.values())

    def mfu(self, model_flops: float, peak_flops: float) -> float:
        """`model_flops` (one device's count per step) over the simulated step at `peak_flops` (one device's)."""
        return model_flops / (self.step_s * peak_flops) if self.step_s > 0 and peak_flops > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        """The simulation as verify keeps and prints it (seconds; groups by name)."""
        return {
            "step_s": self.step_s,
            "busy_s": dict(self.busy_s),
            "groups": {
                k: {"seconds": g.seconds, "exposed_s": g.exposed_s, "count": g.count} for k, g in self.groups.items()
            },
            "flops": self.flops,
            "unpriced_kernels": list(self.unpriced_kernels),
            "unknown_trip_counts": list(self.unknown_trip_counts),
        }


def _line(a: float, b: float, la: int, lb: int, layers: int) -> float:
    return max(0.0, b + (b - a) / (lb - la) * (layers - lb))


def extrapolate(a: dict[str, Any], b: dict[str, Any], la: int, lb: int, layers: int) -> dict[str, Any]:
    """The full-depth simulation from two reduced depths' (`to_json`), linear per layer as verify extrapolates the
    compiler's memory: each layer adds what one more layer added between the two compiles (the scan's body runs
    once more; what runs once a step, the loss, the optimizer, the embedding, stays)."""
    busy_a, busy_b = dict(a.get("busy_s") or {}), dict(b.get("busy_s") or {})
    groups_a, groups_b = dict(a.get("groups") or {}), dict(b.get("groups") or {})
    groups: dict[str, dict[str, float]] = {}
    for k in sorted(set(groups_a) | set(groups_b)):
        ga, gb = dict(groups_a.get(k) or {}), dict(groups_b.get(k) or {})
        groups[k] = {
            f: _line(float(ga.get(f, 0.0)), float(gb.get(f, 0.0)), la, lb, layers)
            for f in ("seconds", "exposed_s", "count")
        }
    return {
        "step_s": _line(float(a.get("step_s", 0.0)), float(b.get("step_s", 0.0)), la, lb, layers),
        "busy_s": {
            k: _line(float(busy_a.get(k, 0.0)), float(busy_b.get(k, 0.0)), la, lb, layers)
            for k in sorted(set(busy_a) | set(busy_b))
        },
        "groups": groups,
        "flops": _line(float(a.get("flops", 0.0)), float(b.get("flops", 0.0)), la, lb, layers),
        "unpriced_kernels": sorted(set(a.get("unpriced_kernels") or []) | set(b.get("unpriced_kernels") or [])),
        "unknown_trip_counts": sorted(
            set(a.get("unknown_trip_counts") or []) | set(b.get("unknown_trip_counts") or [])
        ),
        "extrapolated_from": [la, lb],
        # the wall seconds both simulations took (the workers time them; bench/verify_time.py reads them)
        "simulate_s": float(a.get("simulate_s", 0.0)) + float(b.get("simulate_s", 0.0)),
    }


@dataclass
class _Run:
    """One execution of a computation: its length and what it spent, to be scaled by the executions."""

    seconds: float = 0.0
    busy: dict[str, float] = field(default_factory=dict)
    groups: dict[str, GroupTime] = field(default_factory=dict)
    flops: float = 0.0

    def add(self, other: _Run, times: int) -> None:
        self.seconds += other.seconds * times
        self.flops += other.flops * times
        for k, v in other.busy.items():
            self.busy[k] = self.busy.get(k, 0.0) + v * times
        for k, g in other.groups.items():
            mine = self.groups.setdefault(k, GroupTime())
            mine.seconds += g.seconds * times
            mine.exposed_s += g.exposed_s * times
            mine.count += g.count * times


def _tuple_arrays(shape: Shape | None) -> list[Shape]:
    """Every array of a (nested) tuple shape."""
    if shape is None:
        return []
    if shape.elements is None:
        return [shape]
    return [a for e in shape.elements for a in _tuple_arrays(e)]


def _shape_of(module: hs.Module, ins: Instruction, i: int) -> Shape | None:
    if i < len(ins.operands) and ins.operands[i] is not None:
        return ins.operands[i]
    if i < len(ins.operand_names) and ins.operand_names[i]:
        return module.shape(ins.operand_names[i])
    return None


def _arrays(module: hs.Module, ins: Instruction) -> list[Shape]:
    out = []
    for i in range(len(ins.operand_names)):
        s = _shape_of(module, ins, i)
        if s is not None and s.elements is None and s.dims:
            out.append(s)
    return out


def kernel_flops(module: hs.Module, ins: Instruction) -> tuple[str, float]:
    """(category, FLOPs) of a Pallas kernel the TPU compiler emits for MaxText: megablox's grouped matmuls and
    splash attention, read from their operand and result shapes; ("other kernel", 0) for one it does not know."""
    name = ins.name.lower()
    res = ins.result
    if res is None:
        return "other kernel", 0.0
    arrays = _arrays(module, ins)
    if name.startswith("gmm") and res.elements is None and len(res.dims) == 2:
        m, n = res.dims
        for a in arrays:  # the weights [groups, k, n], or transposed [groups, n, k] (the backward's)
            if len(a.dims) == 3 and a.dims[2] == n:
                return "grouped matmul", 2.0 * m * a.dims[1] * n
            if len(a.dims) == 3 and a.dims[1] == n:
                return "grouped matmul", 2.0 * m * a.dims[2] * n
    if name.startswith("tgmm") and res.elements is None and len(res.dims) == 3:
        _, k, n = res.dims
        for a in arrays:  # the rows [m, k] (its transpose times the output gradient [m, n])
            if len(a.dims) == 2 and a.dims[1] == k:
                return "grouped matmul", 2.0 * a.dims[0] * k * n
    if "splash" in name or "flash" in name:
        # q is the first [(batch,) heads, seq, head_dim] operand, its last two dimensions in either order
        # (sa_q_layout HEAD_DIM_MINOR or SEQ_MINOR): the longer is the sequence. Self-attention: as many keys as
        # queries; MaxText's decoder masks causally, so about half the score blocks run.
        qs = [a for a in arrays if len(a.dims) in (3, 4) and min(a.dims[-2:]) >= 64]
        if qs:
            q = qs[0]
            seq, head_dim = max(q.dims[-2:]), min(q.dims[-2:])
            heads = math.prod(q.dims[:-2])
            pairs = seq * seq * head_dim
            causal = 0.5
            matmuls = 2
            if "fused_bwd" in name or "bwd_fused" in name:
                matmuls = 5
            elif "dkv" in name:
                matmuls = 4
            elif "dq" in name:
                matmuls = 3
            return "attention", 2.0 * matmuls * heads * pairs * causal
    return "other kernel", 0.0


class _Sim:
    def __init__(self, text: str, lay: Layout) -> None:
        self.module = hs.parse_module(text)
        self.lay = lay
        self.chip = hs.Chip.of(lay.slice.chip)
        self.attention_flops = self.chip.matmul_flops / lay.slice.chip.mxu_efficiency * ATTENTION_EFFICIENCY
        self.pcie = lay.slice.chip.pcie_bw / max(1, lay.slice.chip.devices_per_chip)
        self.costs = hs.Costs(self.module, self.chip)
        self.memo: dict[str, _Run] = {}
        self.unpriced: set[str] = set()
        self.unknown_trips: list[str] = []
        # the same reading of the module's collectives hlo_schedule makes (their axes, groups and seconds)
        self.sched = hs.schedule(text, lay, module=self.module)
        self.priced = {c.name: c for c in self.sched.collectives}

    def op(self, line: str, ins: Instruction) -> tuple[str, float, float]:
        """(category, TensorCore seconds, matmul FLOPs) of one computing op."""
        if ins.opcode == "custom-call" and _KERNEL.search(line):
            cat, flops = kernel_flops(self.module, ins)
            if flops > 0:
                rate = self.attention_flops if cat == "attention" else self.chip.matmul_flops
                nbytes = sum(s.nbytes for s in _arrays(self.module, ins)) + (ins.result.nbytes if ins.result else 0)
                return cat, max(flops / rate, nbytes / self.chip.hbm_bw), flops
            self.unpriced.add(ins.name)
            return "other kernel", self.costs.seconds(line), 0.0
        seconds = self.costs.seconds(line)
        flops = 0.0
        if ins.opcode == "fusion":
            flops = sum(self.costs.flops(c) for c in hs._callees(line) if c in self.module.computations)
        elif ins.opcode in ("dot", "convolution"):
            flops = self.costs.dot_flops(ins)
        return ("matmul" if flops > 0 else "memory-bound"), seconds, flops

    def run(self, name: str, depth: int = 0) -> _Run:
        if name in self.memo:
            return self.memo[name]
        self.memo[name] = _Run()  # a recursion guard
        comp = self.module.computations.get(name)
        out = _Run()
        if comp is None or depth > 32:
            return out
        halves = hs._halves(self.module, comp)
        t = 0.0
        link_free: dict[str, float] = {}  # a group's links are busy until then
        flight: dict[str, tuple[float, str]] = {}  # start name -> (end time, group)

        def group_time(group: str) -> GroupTime:
            return out.groups.setdefault(group, GroupTime())

        for line, half in zip(comp.lines, halves, strict=True):
            ins = self.module.instructions.get(hs._name(line) or "")
            if half is not None and half.phase in ("start", "sync") and half.op is not None:
                c = self.priced.get(half.name)
                if c is None:
                    continue
                g = group_time(c.group)
                g.seconds += c.seconds
                g.count += 1
                begin = max(t, link_free.get(c.group, 0.0))
                end = begin + c.seconds
                link_free[c.group] = end
                if half.phase == "start":
                    flight[half.name] = (end, c.group)
                else:  # synchronous: the clock waits for all of it
                    g.exposed_s += end - t
                    t = end
                continue
            if half is not None and half.phase == "done":
                started = flight.pop(half.partner or "", None)
                if started is not None and started[0] > t:
                    group_time(started[1]).exposed_s += started[0] - t
                    t = started[0]
                continue
            if ins is None:
                continue
            host_bytes: float | None = None
            if ins.opcode == "copy-start" and _HOST_SPACE.search(line):
                host_bytes = ins.result.elements[0].nbytes if ins.result and ins.result.elements else 0.0
            elif ins.opcode == "async-start" and _HOST_SPACE.search(line.split(", metadata=", 1)[0]):
                # MaxText's host offload as libtpu schedules it: an async dynamic-update-slice into a stacked
                # buffer in host memory (the layer's tensor out) or a slice of one (back in); what crosses PCIe is
                # the smallest array of the two ends (the update, or the slice)
                host_bytes = min((a.nbytes for a in _tuple_arrays(ins.result) if a.dims), default=0.0)
            if host_bytes is not None:  # over the chip's PCIe, one transfer at a time, beside the compute
                g = group_time("host")
                d = host_bytes / self.pcie if self.pcie > 0 else 0.0
                g.seconds += d
                g.count += 1
                begin = max(t, link_free.get("host", 0.0))
                link_free["host"] = begin + d
                flight[ins.name] = (begin + d, "host")
                continue
            key = ins.operand_names[0].partition("#")[0] if ins.operand_names else ""
            if ins.opcode in ("copy-done", "async-done") and key in flight:
                started = flight.pop(key)
                if started[0] > t:
                    group_time(started[1]).exposed_s += started[0] - t
                    t = started[0]
                continue
            if ins.opcode == "while":
                body = re.search(r"\bbody=%?([\w.\-]+)", line)
                n = trip_count(line, self.module.computations)
                if n is None:
                    self.unknown_trips.append(ins.name)
                    n = 1
                if body:
                    inner = self.run(body.group(1), depth + 1)
                    out.add(_Run(0.0, inner.busy, inner.groups, inner.flops), n)
                    t += inner.seconds * n
                continue
            if ins.opcode in ("call", "conditional"):
                callees = [c for c in hs._callees(line) if c in self.module.computations]
                runs = [self.run(c, depth + 1) for c in callees]
                if runs and ins.opcode == "conditional":  # the dearest branch
                    runs = [max(runs, key=lambda r: r.seconds)]
                for r in runs:
                    out.add(_Run(0.0, r.busy, r.groups, r.flops), 1)
                    t += r.seconds
                continue
            if ins.opcode in hs.FREE or hs._ASYNC_HALF.search(ins.opcode) or ins.opcode == "async-update":
                continue
            cat, seconds, flops = self.op(line, ins)
            if seconds > 0:
                out.busy[cat] = out.busy.get(cat, 0.0) + seconds
                t += seconds
            out.flops += flops
        for end, group in flight.values():  # a start never completed here: its time is waited for at the end
            if end > t:
                group_time(group).exposed_s += end - t
                t = end
        out.seconds = t
        self.memo[name] = out
        return out


def simulate(text: str, lay: Layout) -> Simulation:
    """The simulated step of the scheduled module `text` on the layout `lay` (its slice's chip and links)."""
    sim = _Sim(text, lay)
    entry = next((c for c in sim.module.computations.values() if c.entry), None)
    if entry is None:
        return Simulation()
    run = sim.run(entry.name)
    busy = {c: run.busy.get(c, 0.0) for c in CATEGORIES}
    return Simulation(
        step_s=run.seconds,
        busy_s=busy,
        groups=run.groups,
        flops=run.flops,
        unpriced_kernels=sorted(sim.unpriced),
        unknown_trip_counts=sim.unknown_trips + sim.sched.unknown_trip_counts,
    )
