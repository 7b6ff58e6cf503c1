"""How much of each collective a compiled, scheduled XLA program hides behind compute, read from its optimized
HLO text (`is_scheduled=true`: the order of the instructions in each computation is the order the TPU runs them).

For every collective one step runs (the computations reached from ENTRY, while bodies counted by their trip
counts as server/profiles/hlo_program.py counts them), this module finds:

* whether it is asynchronous, and its two halves: `all-gather-start`/`-done`, `all-reduce-start`/`-done`,
  `collective-permute-start`/`-done`, `async-start`/`-done` wrapping a reduce-scatter, all-to-all or ragged
  all-to-all (a SparseCore offload on tpu7x: `%all-gather.195.cloned.1.call-start = async-start(),
  async_execution_thread="sparsecore"`, its `-update` and `-done` named after the collective), and TPU's async
  collective fusion (`%async-collective-start = fusion(...), kind=kCustom, calls=%fused_computation.695` holding
  the collective, continuation fusions `calls=%async_collective_fusion.775` that compute while it runs, and
  `%async-collective-done = fusion(%fusion.775#1, ...)`; a start is matched to its done through the data flow),
  and a multi-slice program's collectives over the DCN axes: Megascale host transfers (`send`/`recv` with
  `_xla_megascale_transfer_type="ALL_REDUCE"`, one rendezvous each), from the rendezvous' first send or recv to
  its recv-done;
* the instructions scheduled between its start and its done in that computation, and their compute seconds on the
  chip (`cost`): dot and convolution FLOPs (also inside fusions' called computations) at the chip's bf16 peak times
  its sustained MXU efficiency, the HBM bytes a fusion or op moves (its operands and result; a fused operand only
  sliced counts its slices, an in-place dynamic-update-slice its update) at the HBM bandwidth, the larger of the
  two (a roofline); a while loop counts its body times its trip count, a call its callee, a conditional its dearest
  branch; DMAs (copy-start/-done, slice-start/-done), other collectives' halves, tuples and bitcasts cost nothing.
  Per JAX device: a tpu7x chip's two devices each get half its peak and bandwidth;
* its own seconds by the ring formulas ASAP prices collectives with (server/perf/collectives.py `path` and
  `price`) from its payload, the mesh axes its replica groups (or permute pairs) span and the links those axes
  occupy on the slice (server/perf/layout.py);
* its hidden share: the compute between its start and done over its seconds, at most 1; 0 for a synchronous
  collective or a start directly followed by its done. Collectives in flight together share the compute between
  them in proportion to their seconds (they share the chip's links and DMA engines, and ASAP prices a permute at
  both link directions' bandwidth);
* its window (server/perf/overlap.py WINDOWS): "matmul" for a collective-matmul step (a collective-permute of
  XLA's windowed einsum loops, `windowed_dot_general_body_ag`/`_rs`, or a permute with a dot between its halves),
  "layer" for another collective inside a loop (the layer scan prefetching the next layer's weights; a DCN transfer
  in the backward loop's body: "backward"), "forward" or
  "backward" for one issued outside the loops, by the autodiff phase of the compute it hides behind (JAX names the
  backward pass's ops `transpose(jvp(...))` in their metadata), "none" when nothing hides it;
* its mesh-axis group as the step model names them (`step_group`): fsdp, tensor, context, expert, data,
  pipeline, or fsdp+expert.

`aggregate` sums the collectives per (group, kind) into the time-weighted hidden share (weight: seconds x
executions), their count and the window most of the hidden time is behind: one row of server/perf/data/overlap.json
(bench/overlap_table.py writes it). Pure Python; op-text parsing is server/profiles/hlo.py's.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from server.config.axes import AXES
from server.config.slices import ChipSpec
from server.perf.collectives import Collective, path, price
from server.perf.layout import CONTEXT, DATA, EXPERT, FSDP, PIPELINE, TENSOR, Layout
from server.profiles.hlo import (
    KINDS,
    CollectiveOp,
    Instruction,
    Shape,
    collective_mesh_axes,
    parse_collective,
    parse_instruction,
)
from server.profiles.hlo_program import Computation, trip_count

# Opcodes that take no TensorCore time (bookkeeping, or DMAs that run beside the compute).
FREE = frozenset(
    {
        "parameter",
        "constant",
        "get-tuple-element",
        "tuple",
        "bitcast",
        "after-all",
        "add-dependency",
        "partition-id",
        "replica-id",
        "opt-barrier",
        "copy-start",
        "copy-done",
        "send",
        "send-done",
        "recv",
        "recv-done",
        "async-start",
        "async-update",
        "async-done",
        "domain",
    }
)
_ASYNC_HALF = re.compile(r"-(start|done|update)$")
_SLICING = frozenset({"dynamic-slice", "slice", "gather"})
_BACKWARD = re.compile(r'op_name="[^"]*transpose\(')
_OP_NAME = re.compile(r'op_name="[^"]*"')
_MESH_RE = re.compile(r"mesh\[([^\]]*)\]")
_MESH_AXIS_RE = re.compile(r"'([\w.\-]+)'\s*=\s*(\d+)")
_HEADER_RE = re.compile(r"^\s*(ENTRY\s+)?%?([\w.\-]+)\s*(\(.*\))?\s*->.*\{\s*$")
_END_RE = re.compile(r"^\}\s*(?:,\s*execution_thread\s*=.*)?$")
_CALLS_RE = re.compile(r"\b(calls|to_apply|true_computation|false_computation)=%?([\w.\-]+)")
_LIST_RE = re.compile(r"\b(?:branch_computations|calls|called_computations)=\{([^}]*)\}")

# Mesh axis (its name in the jax Mesh) -> the step model's group (server/perf/steptime.py GROUPS).
_MESH_TO_NAME = {a.mesh_axis: a.name for a in AXES}
_GROUP = {
    **dict.fromkeys(FSDP, "fsdp"),
    **dict.fromkeys(TENSOR, "tensor"),
    **dict.fromkeys(CONTEXT, "context"),
    **dict.fromkeys(EXPERT, "expert"),
    **dict.fromkeys(DATA, "data"),
    **dict.fromkeys(PIPELINE, "pipeline"),
}
STEP_GROUPS = ("fsdp", "tensor", "context", "expert", "data", "pipeline", "fsdp+expert")
# The collective kinds of server/perf/overlap.py's rows (TPU's all-reduce-scatter is a reduce-scatter, a ragged
# all-to-all an all-to-all, to the cost model).
ROW_KINDS = ("all-gather", "reduce-scatter", "all-reduce", "all-to-all", "collective-permute")
_ROW_KIND = {"all-reduce-scatter": "reduce-scatter", "ragged-all-to-all": "all-to-all"}
_REDUCING = ("all-reduce", "reduce-scatter")
# A multi-slice program's collectives over the DCN axes: the TPU compiler hands them to the Megascale runtime as host
# transfers, a send of the device's buffer and a recv of the result per transfer (compiled, libtpu 0.0.52, v5e, v5p,
# v6e and tpu7x, 2 slices x fsdp 16: `send(...)`, `_xla_megascale_transfer_type="ALL_REDUCE"`, one rendezvous per
# gradient shard, issued in the layer's backward and received where the optimizer takes the shard).
_MEGASCALE = 'xla_megascale_runtime"'
_MS_RENDEZVOUS = re.compile(r'_xla_host_transfer_rendezvous="([^"]+)"')
_MS_TYPE = re.compile(r'_xla_megascale_transfer_type="([A-Z_]+)"')
_MS_KIND = {
    "ALL_REDUCE": "all-reduce",
    "ALL_GATHER": "all-gather",
    "REDUCE_SCATTER": "reduce-scatter",
    "ALL_TO_ALL": "all-to-all",
}


# ---------------------------------------------------------------------------------------------
# The module's text, one instruction per entry


@dataclass
class Module:
    """A scheduled module: its computations (instructions in schedule order, one whole instruction per line even where
    the text spreads one over several lines), each instruction parsed by name, and the jax Mesh its mesh-form replica
    groups name (empty when it states none)."""

    computations: dict[str, Computation]
    instructions: dict[str, Instruction]
    lines: dict[str, str]  # instruction name -> its text
    mesh: tuple[tuple[str, int], ...]
    num_partitions: int | None = None  # the header's: a multi-slice program is compiled per slice

    def shape(self, name: str) -> Shape | None:
        base, _, index = name.partition("#")
        ins = self.instructions.get(base)
        found = ins.result if ins is not None else None
        if found is not None and index:
            if not (index.isdigit() and found.elements and int(index) < len(found.elements)):
                return None
            found = found.elements[int(index)]
        return found


_ALIASES_OPERAND_0 = re.compile(r"output_to_operand_aliasing=\{\{\}: \(0, \{\}\)\}")


def _balance(text: str, depth: int) -> int:
    """`depth` plus the brackets `text` opens less those it closes, outside quoted strings (JSON with \\" escapes)."""
    if '"' not in text:  # most lines: count the brackets without walking the characters
        return (
            depth
            + text.count("(")
            + text.count("{")
            + text.count("[")
            - text.count(")")
            - text.count("}")
            - text.count("]")
        )
    quoted = False
    escaped = False
    for ch in text:
        if quoted:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                quoted = False
        elif ch == '"':
            quoted = True
        elif ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
    return depth


def parse_module(text: str) -> Module:
    """The computations and instructions of an HLO module's text (an instruction spread over lines, as a Mosaic
    kernel's custom-call with its kernel metadata is, is joined into one)."""
    comps: dict[str, Computation] = {}
    current: Computation | None = None
    pending: list[str] = []
    depth = 0
    for line in text.splitlines():
        if current is None:
            m = _HEADER_RE.match(line)
            if m and not line.lstrip().startswith("HloModule"):
                current = Computation(m.group(2), entry=bool(m.group(1)))
                comps[current.name] = current
            continue
        if pending:
            pending.append(line)
            depth = _balance(line, depth)
            if depth <= 0:
                current.lines.append(" ".join(pending))
                pending, depth = [], 0
            continue
        if _END_RE.match(line):
            current = None
            continue
        if "=" not in line:
            continue
        depth = _balance(line, 0)
        if depth > 0:
            pending = [line]
        else:
            current.lines.append(line)
            depth = 0
    instructions: dict[str, Instruction] = {}
    lines: dict[str, str] = {}
    for comp in comps.values():
        for line in comp.lines:
            ins = parse_instruction(line.split(", metadata=", 1)[0] if "kernel_metadata" in line else line)
            if ins is not None:
                instructions.setdefault(ins.name, ins)
                lines.setdefault(ins.name, line)
    partitions = re.search(r"\bnum_partitions=(\d+)", text[: text.find("\n")] if "\n" in text else text)
    return Module(comps, instructions, lines, _named_mesh(text), int(partitions.group(1)) if partitions else None)


def _named_mesh(text: str) -> tuple[tuple[str, int], ...]:
    """The jax Mesh the module's mesh-form replica groups name with MaxText's axis names (`mesh['diloco'=1,
    'data'=1,'stage'=1,'fsdp'=16,...]`), the one with the most axes; () when none does (a SparseCore or
    collective-matmul computation may name a flat `mesh['axis_0'=16]`, whose device ids are the same)."""
    best: tuple[tuple[str, int], ...] = ()
    seen: set[str] = set()
    for found in _MESH_RE.finditer(text):
        if found.group(1) in seen:
            continue
        seen.add(found.group(1))
        mesh = tuple((n, int(s)) for n, s in _MESH_AXIS_RE.findall(found.group(1)))
        if all(n in _MESH_TO_NAME for n, _ in mesh) and len(mesh) > len(best):
            best = mesh
    return best


def _callees(line: str) -> list[str]:
    head = line.split(", metadata=", 1)[0]
    names = [callee for _, callee in _CALLS_RE.findall(head)]
    for m in _LIST_RE.finditer(head):
        names.extend(n.strip().lstrip("%") for n in m.group(1).split(",") if n.strip())
    return names


# ---------------------------------------------------------------------------------------------
# Compute seconds of an instruction


@dataclass(frozen=True)
class Chip:
    """What one JAX device computes with: matmul FLOP/s (peak x sustained MXU efficiency) and HBM bytes/s."""

    matmul_flops: float
    hbm_bw: float

    @classmethod
    def of(cls, chip: ChipSpec) -> Chip:
        per = max(1, chip.devices_per_chip)
        return cls(chip.peak_bf16_flops * chip.mxu_efficiency / per, chip.hbm_bw / per)


def _nbytes(shape: Shape | None) -> float:
    return shape.nbytes if shape is not None else 0.0


def _attr(ins: Instruction, key: str) -> str | None:
    m = re.search(r"(?<![\w\-])" + re.escape(key) + r"=\{([^}]*)\}", ins.attributes)
    return m.group(1) if m else None


def _window_dims(window: str, key: str) -> tuple[int, ...]:
    """One field of a convolution's `window={size=3x3 stride=... lhs_dilate=1x2}`, per spatial dimension."""
    m = re.search(rf"\b{key}=([\dx]+)", window)
    return tuple(int(t) for t in m.group(1).split("x")) if m else ()


def _ints(text: str | None) -> tuple[int, ...]:
    return tuple(int(t) for t in (text or "").split(",") if t.strip().lstrip("-").isdigit())


class Costs:
    """Compute seconds of instructions and computations of one module on one chip (memoised per computation)."""

    def __init__(self, module: Module, chip: Chip) -> None:
        self.m = module
        self.chip = chip
        self._comp: dict[str, float] = {}
        self._flops: dict[str, float] = {}

    # -- FLOPs ------------------------------------------------------------------------------------------------------
    def dot_flops(self, ins: Instruction) -> float:
        """2 x result elements x contracted elements of a dot; of a convolution, 2 x result elements x the kernel's
        elements per output feature."""
        result = ins.result
        if result is None or result.elements is not None:
            return 0.0
        out = math.prod(result.dims)
        lhs = self._operand(ins, 0)
        rhs = self._operand(ins, 1)
        if ins.opcode == "dot":
            if lhs is None or lhs.elements is not None:
                return 0.0
            contracting = _ints(_attr(ins, "lhs_contracting_dims"))
            k = math.prod(lhs.dims[d] for d in contracting if d < len(lhs.dims))
            return 2.0 * out * k
        if rhs is None or rhs.elements is not None or lhs is None or lhs.elements is not None:
            return 0.0
        # dim_labels=bf0_i0o->b0f: per output element, the kernel's input features times, per spatial dimension, the
        # taps that can overlap the input (XLA writes a dot as a convolution whose padded window is wider than its
        # 1-element input: only one tap of it ever multiplies data)
        labels = re.search(r"dim_labels=(\w+)_(\w+)->", ins.attributes)
        if labels is None or len(labels.group(1)) != len(lhs.dims) or len(labels.group(2)) != len(rhs.dims):
            return 2.0 * out * math.prod(rhs.dims) / max(1, rhs.dims[-1] if rhs.dims else 1)
        lhs_l, rhs_l = labels.group(1), labels.group(2)
        # a dilated input (lhs_dilate d: d-1 holes between its elements) puts at most ceil(size / d) of a window's taps
        # on data: a batched dot written as a convolution dilates its batch dimension past the window (MaxText's MoE
        # combine, `weight_sum BKE,BK -> BE`: window size 65536, lhs_dilate 65536, one tap)
        window = re.search(r"window=\{([^}]*)\}", ins.attributes)
        sizes = _window_dims(window.group(1), "size") if window else ()
        dilates = _window_dims(window.group(1), "lhs_dilate") if window else ()
        taps = rhs.dims[rhs_l.index("i")] if "i" in rhs_l else 1
        for k, label in enumerate(rhs_l):
            if label.isdigit():
                size = lhs.dims[lhs_l.index(label)] if label in lhs_l else rhs.dims[k]
                n = min(rhs.dims[k], size)
                j = int(label)
                if j < len(sizes) and j < len(dilates) and dilates[j] > 1:
                    n = min(n, -(-sizes[j] // dilates[j]))
                taps *= n
        return 2.0 * out * taps

    def _operand(self, ins: Instruction, i: int) -> Shape | None:
        if i < len(ins.operands) and ins.operands[i] is not None:
            return ins.operands[i]
        if i < len(ins.operand_names) and ins.operand_names[i]:
            return self.m.shape(ins.operand_names[i])
        return None

    def flops(self, comp_name: str, depth: int = 0) -> float:
        """Dot and convolution FLOPs of a fused (or called) computation, nested fusions and calls included (a loop's
        body once)."""
        if comp_name in self._flops:
            return self._flops[comp_name]
        total = 0.0
        comp = self.m.computations.get(comp_name)
        if comp is not None and depth < 16:
            for line in comp.lines:
                ins = self._ins(line)
                if ins is None:
                    continue
                if ins.opcode in ("dot", "convolution"):
                    total += self.dot_flops(ins)
                elif ins.opcode in ("fusion", "call"):
                    total += sum(self.flops(c, depth + 1) for c in _callees(line))
                elif ins.opcode == "while":  # once, not per trip: what a loop runs, for telling matmul loops
                    total += sum(self.flops(c, depth + 1) for c in re.findall(r"\bbody=%?([\w.\-]+)", line))
        self._flops[comp_name] = total
        return total

    # -- bytes ------------------------------------------------------------------------------------------------------
    def _ins(self, line: str) -> Instruction | None:
        m = re.match(r"\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=", line)
        return self.m.instructions.get(m.group(1)) if m else None

    def fusion_bytes(self, ins: Instruction, callee: str) -> float:
        """HBM bytes a fusion moves: each operand, except one the fused computation only slices (its slices), updates
        in place or passes through to its output (nothing), and its result, except an in-place update's (the update)
        and a passed-through operand's."""
        comp = self.m.computations.get(callee)
        if comp is None:
            return sum(_nbytes(self._operand(ins, i)) for i in range(len(ins.operand_names))) + _nbytes(ins.result)
        params: dict[str, int] = {}
        users: dict[str, list[tuple[Instruction, int]]] = {}
        views: set[str] = set()  # nested fusions whose output aliases their operand 0: the same buffer, relaid
        root: Instruction | None = None
        for line in comp.lines:
            inner = self._ins(line)
            if inner is None:
                continue
            if inner.opcode == "parameter":
                num = re.search(r"parameter\((\d+)\)", line)
                if num:
                    params[inner.name] = int(num.group(1))
            for k, name in enumerate(inner.operand_names):
                users.setdefault(name, []).append((inner, k))
            if inner.opcode == "fusion" and _ALIASES_OPERAND_0.search(line) and len(inner.operand_names) == 1:
                views.add(inner.name)
            if line.lstrip().startswith("ROOT"):
                root = inner

        def uses_of(name: str, depth: int = 0) -> list[tuple[Instruction, int]]:
            # through an in-place view (libtpu's tiling copy of a scan's stacked buffer, aliased to its operand:
            # `output_to_operand_aliasing={{}: (0, {})}`), the view's users are the buffer's (compiled: MaxText's
            # llama3.1-70b on tpu7x slices the 80-layer stack through one; charged whole, 21 GB a layer)
            out: list[tuple[Instruction, int]] = []
            for u, k in users.get(name, []):
                if u.name in views and k == 0 and depth < 8 and (root is None or u.name != root.name):
                    out += uses_of(u.name, depth + 1)
                else:
                    out.append((u, k))
            return out

        total = 0.0
        for pname, index in params.items():
            uses = uses_of(pname)
            if uses and root is not None and all(u is root and root.opcode == "tuple" for u, _ in uses):
                continue  # passed through to the output (an async collective's buffers through its continuation)
            if uses and all(u.opcode in _SLICING and k == 0 for u, k in uses):
                total += sum(_nbytes(u.result) for u, _ in uses)
            elif uses and all(u.opcode == "dynamic-update-slice" and k == 0 for u, k in uses):
                continue
            elif uses and all(u.opcode == "fusion" for u, _ in uses):
                # read through a nested fusion, which may slice it (a scan's stacked saved activations: the layer's
                # slice, not the stack, MaxText's 80-layer llama2-70b backward)
                full = _nbytes(self._operand(ins, index))
                total += min(full, sum(self._read_through(u, k, 1) for u, k in uses))
            else:
                total += _nbytes(self._operand(ins, index))
        outs = [root] if root is not None and root.opcode != "tuple" else []
        if root is not None and root.opcode == "tuple":
            outs = [self.m.instructions.get(n) for n in root.operand_names]  # type: ignore[misc]
        for out in outs:
            if out is None or out.opcode == "parameter":
                continue
            if out.opcode == "dynamic-update-slice":
                total += 2 * _nbytes(self._operand(out, 1))
            else:
                total += _nbytes(out.result)
        return total

    def _read_through(self, fusion: Instruction, k: int, depth: int) -> float:
        """HBM bytes a nested fusion reads of its operand `k`: the slices it takes of it, through further nested
        fusions, else the whole operand."""
        full = _nbytes(self._operand(fusion, k))
        callee = next((c for c in _callees(self.m.lines.get(fusion.name, "")) if c in self.m.computations), None)
        if callee is None or depth > 8:
            return full
        param: str | None = None
        by_operand: dict[str, list[tuple[Instruction, int]]] = {}
        views: set[str] = set()  # in-place views of their operand (fusion_bytes)
        for line in self.m.computations[callee].lines:
            inner = self._ins(line)
            if inner is None:
                continue
            if inner.opcode == "parameter" and re.search(rf"parameter\({k}\)", line):
                param = inner.name
            for j, name in enumerate(inner.operand_names):
                by_operand.setdefault(name, []).append((inner, j))
            if inner.opcode == "fusion" and _ALIASES_OPERAND_0.search(line) and len(inner.operand_names) == 1:
                views.add(inner.name)
        if param is None:
            return full
        users: list[tuple[Instruction, int]] = []
        todo, seen = [param], set()
        while todo:
            name = todo.pop()
            for u, j in by_operand.get(name, []):
                if u.name in views and j == 0 and u.name not in seen:
                    seen.add(u.name)
                    todo.append(u.name)
                else:
                    users.append((u, j))
        if not users:
            return full
        if all(u.opcode in _SLICING and j == 0 for u, j in users):
            return min(full, sum(_nbytes(u.result) for u, _ in users))
        if all(u.opcode == "fusion" for u, _ in users):
            return min(full, sum(self._read_through(u, j, depth + 1) for u, j in users))
        return full

    # -- seconds ----------------------------------------------------------------------------------------------------
    def seconds(self, line: str, depth: int = 0) -> float:
        """Compute seconds of one instruction of a scheduled computation."""
        ins = self._ins(line)
        if ins is None or depth > 32:
            return 0.0
        op = ins.opcode
        if op in FREE or _ASYNC_HALF.search(op) or op in KINDS or ins.name.startswith("async-collective-"):
            return 0.0
        if op == "while":
            body = re.search(r"\bbody=%?([\w.\-]+)", line)
            cond = re.search(r"\bcondition=%?([\w.\-]+)", line)
            n = trip_count(line, self.m.computations) or 1
            inner = self.computation(body.group(1), depth + 1) if body else 0.0
            inner += self.computation(cond.group(1), depth + 1) if cond else 0.0
            return n * inner
        if op == "call":
            return sum(self.computation(c, depth + 1) for c in _callees(line))
        if op == "conditional":
            return max((self.computation(c, depth + 1) for c in _callees(line)), default=0.0)
        if op == "fusion":
            callees = [c for c in _callees(line) if c in self.m.computations]
            flops = sum(self.flops(c) for c in callees)
            nbytes = self.fusion_bytes(ins, callees[0]) if callees else _nbytes(ins.result)
            return max(flops / self.chip.matmul_flops, nbytes / self.chip.hbm_bw)
        if op in ("dot", "convolution"):
            nbytes = sum(_nbytes(self._operand(ins, i)) for i in range(len(ins.operand_names))) + _nbytes(ins.result)
            return max(self.dot_flops(ins) / self.chip.matmul_flops, nbytes / self.chip.hbm_bw)
        if op == "custom-call" and "AllocateBuffer" in line:
            return 0.0
        if op == "dynamic-update-slice":
            return 2 * _nbytes(self._operand(ins, 1)) / self.chip.hbm_bw
        if op in _SLICING:
            return 2 * _nbytes(ins.result) / self.chip.hbm_bw
        nbytes = sum(_nbytes(self._operand(ins, i)) for i in range(len(ins.operand_names))) + _nbytes(ins.result)
        return nbytes / self.chip.hbm_bw

    def computation(self, name: str, depth: int = 0) -> float:
        """Compute seconds of one execution of a computation: its instructions' in schedule order, summed."""
        if name in self._comp:
            return self._comp[name]
        comp = self.m.computations.get(name)
        self._comp[name] = 0.0  # a recursion guard
        total = sum(self.seconds(line, depth) for line in comp.lines) if comp is not None else 0.0
        self._comp[name] = total
        return total


# ---------------------------------------------------------------------------------------------
# Collectives and their halves


@dataclass
class Scheduled:
    """One collective of the step as the schedule issues it."""

    name: str  # its start (or synchronous) instruction
    kind: str  # one of ROW_KINDS
    computation: str
    count: int  # executions per step
    asynchronous: bool
    sparsecore: bool
    op: CollectiveOp
    axes: tuple[str, ...]  # the jax Mesh axes it spans
    group: str  # the step model's group (step_group)
    seconds: float = 0.0  # one execution, priced by server/perf/collectives.py
    compute_s: float = 0.0  # compute between its halves it gets (shared with collectives in flight with it)
    between: tuple[str, ...] = ()  # the instructions scheduled between its halves
    window: str = "none"
    backward_s: float = 0.0  # of compute_s, the backward pass' (ops JAX names transpose(...) in their metadata)
    in_loop: bool = False
    dcn: bool = False  # a Megascale transfer over the DCN axes

    @property
    def hidden(self) -> float:
        """The share of its seconds the compute between its halves covers (0 for a synchronous collective)."""
        if not self.asynchronous or self.seconds <= 0:
            return 0.0
        return min(1.0, self.compute_s / self.seconds)

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "kind": self.kind,
            "group": self.group,
            "axes": list(self.axes),
            "computation": self.computation,
            "count": self.count,
            "asynchronous": self.asynchronous,
            "sparsecore": self.sparsecore,
            "payload_bytes": round(self.op.payload_bytes),
            "group_size": self.op.group_size,
            "seconds": self.seconds,
            "compute_s": self.compute_s,
            "hidden": round(self.hidden, 4),
            "window": self.window,
            "between": len(self.between),
        }


def step_group(axes: Sequence[str], sizes: dict[str, int] | None = None) -> str:
    """The step model's group of a collective over these jax Mesh axes: one group as the axis names it (fsdp and
    fsdp_transpose are fsdp, ...), fsdp+expert as it is (MoE's weights), one over the data axis and others the data
    group (the cross-slice gradient reduction), else the group of the axis with the most devices; "none" for none."""
    groups: list[str] = []
    for a in axes:
        g = _GROUP.get(_MESH_TO_NAME.get(a, a), a)
        if g not in groups:
            groups.append(g)
    if not groups:
        return "none"
    if len(groups) == 1:
        return groups[0]
    if set(groups) == {"fsdp", "expert"}:
        return "fsdp+expert"
    if "data" in groups:
        return "data"
    sizes = sizes or {}
    biggest = max(axes, key=lambda a: sizes.get(a, 1))
    return _GROUP.get(_MESH_TO_NAME.get(biggest, biggest), biggest)


def _inner_collective(module: Module, line: str, seen: set[str], depth: int = 0) -> CollectiveOp | None:
    """The first collective in the computations `line` calls (depth-first through their calls: a SparseCore
    wrapper's custom-call names the computation with the collective in `called_computations`)."""
    if depth > 4:
        return None
    for callee in _callees(line):
        comp = module.computations.get(callee)
        if comp is None or callee in seen:
            continue
        seen.add(callee)
        for inner_line in comp.lines:
            op = parse_collective(inner_line, operand_shape=module.shape)
            if op is not None and op.phase != "done" and (op.groups is not None or op.pairs is not None):
                return op
            found = _inner_collective(module, inner_line, seen, depth + 1)
            if found is not None:
                return found
    return None


@dataclass(frozen=True)
class _Half:
    name: str
    phase: str  # "start" | "done" | "sync"
    op: CollectiveOp | None  # at a start or sync
    partner: str | None  # a done's start
    sparsecore: bool = False
    dcn: bool = False  # a Megascale transfer: over the DCN axes, whatever its text says


def _halves(module: Module, comp: Computation) -> list[_Half | None]:
    """Per instruction of `comp` (in order) what it is to the collectives: a start, a done (with its start), a
    synchronous collective, or None."""
    out: list[_Half | None] = []
    starts: set[str] = set()
    acf_starts: set[str] = set()
    megascale: dict[str, str] = {}  # a Megascale transfer's rendezvous -> the name of its first send or recv
    for line in comp.lines:
        ins = module.instructions.get(_name(line) or "")
        if ins is None:
            out.append(None)
            continue
        op_code, name = ins.opcode, ins.name
        head = line.split(", metadata=", 1)[0]
        if op_code in ("send", "recv", "send-done", "recv-done") and _MEGASCALE in head:
            out.append(_megascale_half(module, ins, head, megascale))
            continue
        if op_code.endswith("-done") or op_code == "async-done" or name.startswith("async-collective-done"):
            partner = _start_of(module, ins, starts | acf_starts, comp)
            out.append(_Half(name, "done", None, partner) if partner else None)
            continue
        if op_code in ("async-update",):
            out.append(None)
            continue
        if name.startswith("async-collective-start") or op_code == "async-collective-start":
            inner = _inner_collective(module, line, set())
            if inner is not None:
                acf_starts.add(name)
                out.append(_Half(name, "start", inner, None))
                continue
        if op_code == "async-start":
            inner = _inner_collective(module, line, set())
            if inner is not None:
                starts.add(name)
                sc = 'async_execution_thread="sparsecore"' in head
                out.append(_Half(name, "start", inner, None, sc))
            else:
                out.append(None)
            continue
        if op_code.endswith("-start") and op_code[: -len("-start")] in KINDS:
            op = parse_collective(line, operand_shape=module.shape)
            if op is not None:
                starts.add(name)
                out.append(_Half(name, "start", op, None))
                continue
        if op_code in KINDS or (op_code == "fusion" and "calls=%all-reduce-scatter" in head):
            op = parse_collective(line, operand_shape=module.shape)
            if op is not None and op.phase == "sync":
                if op.groups is None and op.pairs is None:
                    inner = _inner_collective(module, line, set())
                    if inner is not None:
                        op = CollectiveOp(
                            op.kind,
                            "sync",
                            op.result_bytes or inner.result_bytes,
                            op.operand_bytes or inner.operand_bytes,
                            inner.groups,
                            inner.group_size,
                            inner.pairs,
                            inner.mesh_axes,
                            op.name,
                            inner.dimensions,
                        )
                out.append(_Half(name, "sync", op, None))
                continue
        out.append(None)
    return out


def _megascale_half(module: Module, ins: Instruction, head: str, opened: dict[str, str]) -> _Half | None:
    """What a Megascale host transfer is to the collectives: the first send or recv of a rendezvous starts the DCN
    collective (the send's buffer, the recv's result, the size each slice contributes), its recv-done completes it
    (the result is there); the other halves are bookkeeping."""
    if ins.opcode in ("send", "recv"):
        m = _MS_RENDEZVOUS.search(head)
        if m is None or m.group(1) in opened:
            return None
        opened[m.group(1)] = ins.name
        kind = _MS_KIND.get((t.group(1) if (t := _MS_TYPE.search(head)) else ""), "all-reduce")
        shape = ins.result.elements[0] if ins.result is not None and ins.result.elements else ins.result
        size = _nbytes(shape)
        op = CollectiveOp(kind, "start", size, size, None, None, None, None, ins.name)
        return _Half(ins.name, "start", op, None, dcn=True)
    if ins.opcode == "recv-done":
        recv = module.instructions.get((ins.operand_names or ("",))[0].partition("#")[0])
        m = _MS_RENDEZVOUS.search(module.lines.get(recv.name, "")) if recv is not None else None
        if m is not None and m.group(1) in opened:
            return _Half(ins.name, "done", None, opened[m.group(1)], dcn=True)
    return None


def _name(line: str) -> str | None:
    m = re.match(r"\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=", line)
    return m.group(1) if m else None


_THROUGH = frozenset({"async-update", "fusion", "while", "tuple", "get-tuple-element", "bitcast", "copy"})


def _start_of(module: Module, done: Instruction, starts: set[str], comp: Computation, limit: int = 8) -> str | None:
    """The start a done completes: its operand, through async-updates, or (an async collective fusion's done) back
    through the continuation fusions whose outputs it takes, and the loops (a collective-matmul loop) and tuples that
    carry the collective's buffers, breadth first."""
    frontier = [n.partition("#")[0] for n in done.operand_names if n]
    seen: set[str] = set()
    for _ in range(limit):
        nxt: list[str] = []
        for name in frontier:
            if name in starts:
                return name
            if name in seen:
                continue
            seen.add(name)
            ins = module.instructions.get(name)
            if ins is not None and (ins.opcode in _THROUGH or _ASYNC_HALF.search(ins.opcode)):
                nxt.extend(n.partition("#")[0] for n in ins.operand_names if n)
        frontier = nxt
    return None


# ---------------------------------------------------------------------------------------------
# The whole step


@dataclass
class Schedule:
    collectives: list[Scheduled] = field(default_factory=list)
    unknown_trip_counts: list[str] = field(default_factory=list)
    mesh: tuple[tuple[str, int], ...] = ()


def _is_matmul_loop(name: str) -> bool:
    return "windowed_dot_general" in name


def _price(op: CollectiveOp, kind: str, axes: tuple[str, ...], lay: Layout) -> float:
    """One execution's seconds by ASAP's ring formulas on the links of `axes` (jax Mesh names)."""
    names = tuple(_MESH_TO_NAME.get(a, a) for a in axes)
    if not names:
        return 0.0
    v = op.payload_bytes
    if kind == "all-to-all":
        v = v * max(1, op.group_size or 1)
    if v <= 0:
        return 0.0
    c = price(Collective("+".join(names), kind, "", 1.0, v), path(lay, names), lay.slice.chip.dcn_bw)
    return c.seconds


def schedule(
    text: str, lay: Layout, mesh: Sequence[tuple[str, int]] | None = None, module: Module | None = None
) -> Schedule:
    """Every collective one step of the scheduled module `text` runs, with its hidden share and window, on the
    layout `lay` (its slice's chip and links). `mesh`: the jax Mesh as (axis, size) pairs in order (device ids are
    positions in it); by default the one the module's mesh-form replica groups name, else the layout's
    (`layout_mesh`). `module`: `text` already parsed (parse_module), to parse it once."""
    module = module if module is not None else parse_module(text)
    # A multi-slice program is compiled per slice (num_partitions: one slice's devices): its replica groups number
    # the slice's devices only. libtpu hands the collectives over the DCN axes to the Megascale runtime as host
    # transfers (_megascale_half: compiled, libtpu 0.0.52, v5e, v5p, v6e and tpu7x at 2 slices x fsdp 16 all-reduce
    # each gradient over the slice, then send the device's shard across the slices); those transfers are the DCN
    # collectives and every other collective stays on its ICI axes. A program with no such transfers (another libtpu)
    # is read as before: a reduction (all-reduce, reduce-scatter) over every device of the slice is taken to go on
    # across the slices (the gradients and the loss are reduced over the data axis too); gathers stay within the
    # slice (the weights are replicated over data).
    total = math.prod(lay.degree(a.name) for a in AXES)
    per_slice = bool(module.num_partitions and lay.slice.num_slices > 1 and module.num_partitions < total)
    layout_dcn = tuple(a.mesh_axis for a in AXES if lay.dcn.get(a.name, 1) > 1)
    # Where the program hands its DCN collectives to the Megascale runtime (_megascale_half), they are those
    # transfers, and its ICI collectives stay on their ICI axes; otherwise the heuristic above.
    megascale = _MEGASCALE in text
    dcn_axes = layout_dcn if per_slice and not megascale else ()
    fallback = tuple((a.mesh_axis, lay.ici.get(a.name, 1)) for a in AXES) if per_slice else layout_mesh(lay)
    mesh_t = tuple(mesh) if mesh else module.mesh or fallback
    sizes = dict(mesh_t)
    costs = Costs(module, Chip.of(lay.slice.chip))
    out = Schedule(mesh=mesh_t)
    entry = next((c for c in module.computations.values() if c.entry), None)
    if entry is None:
        return out

    def visit(comp: Computation, count: int, in_loop: bool, depth: int) -> None:
        if depth > 32:
            return
        halves = _halves(module, comp)
        open_: dict[str, Scheduled] = {}
        for line, half in zip(comp.lines, halves, strict=True):
            if half is not None and half.phase in ("start", "sync") and half.op is not None:
                op = half.op
                kind = _ROW_KIND.get(op.kind, op.kind)
                if kind not in ROW_KINDS:
                    continue
                axes = layout_dcn if half.dcn else collective_mesh_axes(op, mesh_t)
                if dcn_axes and kind in _REDUCING and (op.group_size or 0) >= (module.num_partitions or 0):
                    axes = tuple(a.mesh_axis for a in AXES if a.mesh_axis in axes or a.mesh_axis in dcn_axes)
                s = Scheduled(
                    half.name,
                    kind,
                    comp.name,
                    count,
                    half.phase == "start",
                    half.sparsecore,
                    op,
                    axes,
                    step_group(axes, sizes),
                    _price(op, kind, axes, lay),
                    in_loop=in_loop,
                    dcn=half.dcn,
                )
                out.collectives.append(s)
                if half.phase == "start":
                    open_[half.name] = s
                continue
            if half is not None and half.phase == "done":
                open_.pop(half.partner or "", None)
                continue
            ins = module.instructions.get(_name(line) or "")
            if ins is not None and ins.opcode == "async-update":
                continue  # a SparseCore offload's middle half, not compute
            cost = costs.seconds(line)
            if open_:
                name = _name(line) or ""
                weight = sum(s.seconds for s in open_.values())
                for s in open_.values():
                    s.between += (name,)
                    if cost > 0 and weight > 0:
                        s.compute_s += cost * s.seconds / weight
                        if _BACKWARD.search(line) or _backward_loop(module, line):
                            s.backward_s += cost * s.seconds / weight
            if ins is None:
                continue
            if ins.opcode == "while":
                body = re.search(r"\bbody=%?([\w.\-]+)", line)
                n = trip_count(line, module.computations)
                if n is None:
                    out.unknown_trip_counts.append(ins.name)
                    n = 1
                if body and body.group(1) in module.computations:
                    visit(module.computations[body.group(1)], count * n, True, depth + 1)
            elif ins.opcode in ("call", "conditional"):
                for callee in _callees(line):
                    if callee in module.computations and callee != comp.name:
                        visit(module.computations[callee], count, in_loop, depth + 1)
        for s in open_.values():  # a start never completed in its computation: nothing known to hide it
            s.asynchronous = False

    visit(entry, 1, False, 0)
    for s in out.collectives:
        s.window = _window(s, module, costs)
    return out


def layout_mesh(lay: Layout) -> tuple[tuple[str, int], ...]:
    """The jax Mesh MaxText builds for a layout: every axis in its order, ICI x DCN devices (a module whose replica
    groups are all in iota form, as a multi-slice one's are, names none)."""
    return tuple((a.mesh_axis, lay.degree(a.name)) for a in AXES)


def _backward_loop(module: Module, line: str) -> bool:
    """Whether a while or call's callee is the backward pass (its first named op says transpose(...))."""
    if not re.search(r"\s(while|call)\(", line):
        return False
    for callee in _callees(line) + re.findall(r"\bbody=%?([\w.\-]+)", line):
        comp = module.computations.get(callee)
        if comp is None:
            continue
        for inner in comp.lines:
            if _OP_NAME.search(inner):
                return bool(_BACKWARD.search(inner))
    return False


def _window(s: Scheduled, module: Module, costs: Costs) -> str:
    if s.hidden <= 0:
        return "none"
    if _is_matmul_loop(s.computation):
        return "matmul"
    if s.kind == "collective-permute" and any(_has_dot(module, n, costs) for n in s.between):
        return "matmul"
    backward = s.backward_s > s.compute_s / 2
    if s.in_loop:
        # in the backward loop's body only the backward hides it (a cross-slice gradient shard's transfer); in the
        # forward's or both, the layer's compute
        return "backward" if s.dcn and backward else "layer"
    return "backward" if backward else "forward"


def _has_dot(module: Module, name: str, costs: Costs) -> bool:
    """Whether the instruction is or runs a matmul (a dot or convolution, in a fusion, loop or call it runs)."""
    ins = module.instructions.get(name)
    if ins is None:
        return False
    if ins.opcode in ("dot", "convolution"):
        return True
    if ins.opcode not in ("fusion", "while", "call", "conditional"):
        return False
    line = module.lines.get(name, "")
    callees = _callees(line) + re.findall(r"\bbody=%?([\w.\-]+)", line)
    return any(costs.flops(c) > 0 for c in callees)


# ---------------------------------------------------------------------------------------------
# Rows


@dataclass(frozen=True)
class Row:
    """The collectives of one (group, kind): time-weighted hidden share, how many, and what hides them mostly."""

    group: str
    kind: str
    hidden: float
    behind: str
    collectives: int  # distinct collective instructions
    executions: int  # per step
    seconds: float  # per step, all executions, as ASAP prices them
    asynchronous: int  # instructions issued asynchronously
    sparsecore: int  # of them offloaded to the SparseCores

    def to_json(self) -> dict[str, object]:
        return {
            "axis": self.group,
            "kind": self.kind,
            "hidden": round(self.hidden, 3),
            "behind": self.behind,
            "collectives": self.collectives,
            "executions": self.executions,
            "seconds": self.seconds,
            "asynchronous": self.asynchronous,
            "sparsecore": self.sparsecore,
        }


def aggregate(colls: Iterable[Scheduled]) -> list[Row]:
    """Per (group, kind): the hidden share weighted by seconds x executions, and the window holding the most hidden
    seconds ("none" when nothing is hidden). Collectives of no group, or priced at 0 s, are left out."""
    by: dict[tuple[str, str], list[Scheduled]] = {}
    for c in colls:
        if c.group in STEP_GROUPS and c.seconds > 0:
            by.setdefault((c.group, c.kind), []).append(c)
    rows: list[Row] = []
    for (group, kind), cs in sorted(by.items()):
        weight = sum(c.seconds * c.count for c in cs)
        hidden = sum(c.hidden * c.seconds * c.count for c in cs) / weight if weight > 0 else 0.0
        windows: dict[str, float] = {}
        for c in cs:
            if c.hidden > 0:
                windows[c.window] = windows.get(c.window, 0.0) + c.hidden * c.seconds * c.count
        # a share that rounds to nothing in the table (3 decimals) is behind nothing
        behind = max(windows, key=lambda w: windows[w]) if windows and hidden >= 0.0005 else "none"
        rows.append(
            Row(
                group,
                kind,
                hidden,
                behind,
                len(cs),
                sum(c.count for c in cs),
                weight,
                sum(1 for c in cs if c.asynchronous),
                sum(1 for c in cs if c.sparsecore),
            )
        )
    return rows
