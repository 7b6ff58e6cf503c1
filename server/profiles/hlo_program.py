"""Every collective one execution of a compiled XLA program runs, read from its optimized HLO text
(`compiled.as_text()`), with how many times it runs per step.

`cost_analysis()` counts each while-loop body once (the layer scan, the compiler's collective-matmul
loops), so collectives come from a walk of the call graph from the ENTRY computation instead:

* a `while` multiplies its body (and condition) by its trip count: XLA's `known_trip_count` in the
  backend config when present, else the integer constant the condition compares the induction
  variable with (`compare(i, constant(N)), direction=LT` -> N; LE -> N + 1), else 1 (and flagged);
* `calls=`, `to_apply=`, `branch_computations=`/`true_computation=`/`false_computation=` descend
  with the caller's count (each branch of a conditional counted as if taken: an upper bound);
* a collective is counted at its `-start` (or synchronous) op only; `-done` halves are skipped, and a
  collective's own called computation (a reduce-scatter fusion's `%all-reduce-scatter` body, an
  async wrapper's `calls=%reduce-scatter`) is not entered, so each is counted once; what the wrapper's
  text leaves out (the replica groups of `%ragged-all-to-all-start = ... async-start(...),
  calls=%async_computation.16`) is read from the collective inside;
* a collective offloaded to the SparseCores (tpu7x, libtpu 0.0.52: `%all-gather.195.cloned.1.call-start = ((), (),
  (s32 scratch...)) async-start(), async_execution_thread="sparsecore", calls=%async_computation.47`) states
  neither its buffers nor its groups: they are read from the collective its wrapped custom-call's
  `called_computations={...}` holds; its `-update` (`async-update(%...call-start, %input)`, named after the
  collective too) and `-done` are not counted again, and a wrapper named after no collective is entered like a
  call, custom-call included, so the collective inside counts once;
* operands printed by name only (`ragged-all-to-all(%copy-done.43, ...)`, as optimized modules print
  them) are typed by their defining instruction's result shape (`%while.47#5`: its element 5);
* computations of another execution thread (`}, execution_thread="sparsecore"` closes them) are
  computations like any other.

Op text parsing (kinds, payload bytes, replica groups in all three syntaxes) is server/profiles/hlo.py's.
Pure Python; no XLA needed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from server.profiles.hlo import (
    CollectiveOp,
    Shape,
    axes_label,
    collective_mesh_axes,
    parse_collective,
    parse_instruction,
    result_shape,
)

_COMPUTATION_RE = re.compile(r"^\s*(ENTRY\s+)?%?([\w.\-]+)\s*(\(.*\))?\s*->.*\{\s*$")
_CALLS_RE = re.compile(r"\b(calls|to_apply|body|condition|true_computation|false_computation)=%?([\w.\-]+)")
_BRANCHES_RE = re.compile(r"branch_computations=\{([^}]*)\}")
_CALLS_LIST_RE = re.compile(r"\bcalls=\{([^}]*)\}")
_CALLED_LIST_RE = re.compile(r"\bcalled_computations=\{([^}]*)\}")  # a custom-call's (SparseCore offload)
_CONSTANT_RE = re.compile(r"%?([\w.\-]+)\s*=\s*[su](?:8|16|32|64)\[\][^=]*?\bconstant\((-?\d+)\)")
_COMPARE_RE = re.compile(r"\bcompare\(([^)]*)\).*?direction=(LT|LE|GT|GE|NE)")
_KNOWN_TRIP_RE = re.compile(r'"known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"?(\d+)')
_NAME_RE = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=")
_ASYNC_LATER_RE = re.compile(r"\sasync-(?:update|done)\(")
_END_RE = re.compile(r"^\}\s*(?:,\s*execution_thread\s*=.*)?$")


@dataclass
class Computation:
    name: str
    lines: list[str] = field(default_factory=list)
    entry: bool = False


def computations(text: str) -> dict[str, Computation]:
    """The computations of an HLO module's text, by name (instruction lines only)."""
    out: dict[str, Computation] = {}
    current: Computation | None = None
    for line in text.splitlines():
        if current is None:
            m = _COMPUTATION_RE.match(line)
            if m and not line.lstrip().startswith("HloModule"):
                current = Computation(m.group(2), entry=bool(m.group(1)))
                out[current.name] = current
            continue
        if _END_RE.match(line):  # `}`, or `}, execution_thread="sparsecore"` after a non-main thread's computation
            current = None
            continue
        if "=" in line:
            current.lines.append(line)
    return out


def trip_count(while_line: str, comps: dict[str, Computation]) -> int | None:
    """Iterations of the `while` instruction on `while_line`; None when the text does not say."""
    known = _KNOWN_TRIP_RE.search(while_line)
    if known:
        return int(known.group(1))
    cond = re.search(r"\bcondition=%?([\w.\-]+)", while_line)
    if cond is None or cond.group(1) not in comps:
        return None
    lines = comps[cond.group(1)].lines
    constants = {m.group(1): int(m.group(2)) for line in lines for m in [_CONSTANT_RE.search(line)] if m}
    for line in lines:
        m = _COMPARE_RE.search(line)
        if m is None:
            continue
        operands = [o.strip().split()[-1].lstrip("%") for o in m.group(1).split(",") if o.strip()]
        values = [constants.get(o) for o in operands]
        direction = m.group(2)
        # Induction variable first (i < N): JAX's scans and XLA's loops count up from 0, by 1, or by the unroll
        # factor of a widened loop (XLA's `wide.` bodies run two original iterations and add 2).
        if len(values) == 2 and values[1] is not None and values[0] is None:
            n = values[1]
            step = _induction_step(while_line, comps, operands[0], lines)
            count = n + 1 if direction == "LE" else n
            return max(0, -(-count // step)) if direction in ("LT", "LE", "NE") else None
        if len(values) == 2 and values[0] is not None and values[1] is None:  # N > i
            n = values[0]
            step = _induction_step(while_line, comps, operands[1], lines)
            count = n + 1 if direction == "GE" else n
            return max(0, -(-count // step)) if direction in ("GT", "GE", "NE") else None
    # A fused condition: the constant may be inside the called computation.
    for line in lines:
        for _, callee in _CALLS_RE.findall(line):
            if callee in comps:
                inner = [
                    int(m.group(2))
                    for sub in comps[callee].lines
                    for m in [_CONSTANT_RE.search(sub)]
                    if m and int(m.group(2)) > 1
                ]
                if len(inner) == 1:
                    return inner[0]
    if len(constants) == 1:
        return max(0, next(iter(constants.values())))
    return None


_TUPLE_INDEX_RE = re.compile(r"#(\d+)$")
_GTE_INDEX_RE = re.compile(r"get-tuple-element\([^)]*\),\s*index=(\d+)")


def _induction_step(while_line: str, comps: dict[str, Computation], var: str, cond_lines: list[str]) -> int:
    """How much the loop body adds to the induction variable the condition compares (`var`, a tuple element of the
    condition's parameter: `%p#4`, or a get-tuple-element of it): the constant of the body's `add(<that element>,
    constant)` that the body's ROOT tuple returns at that index; 1 when the text does not say."""
    index: int | None = None
    m = _TUPLE_INDEX_RE.search(var)
    if m:
        index = int(m.group(1))
    else:
        for line in cond_lines:
            if re.match(rf"\s*%?{re.escape(var)}\s*=", line):
                g = _GTE_INDEX_RE.search(line)
                index = int(g.group(1)) if g else None
    body = re.search(r"\bbody=%?([\w.\-]+)", while_line)
    if index is None or body is None or body.group(1) not in comps:
        return 1
    lines = comps[body.group(1)].lines

    def defining(name: str) -> str:
        # the line that defines `name` (a prefix test first: a body has thousands of long lines, a regex on each
        # of them took seconds on a 100B-class module)
        for line in lines:
            head = line.lstrip().removeprefix("ROOT ").lstrip().lstrip("%")
            if head.startswith(name) and (n := _NAME_RE.match(line)) and n.group(1) == name:
                return line
        return ""

    root = next((line for line in lines if line.lstrip().startswith("ROOT")), "")
    tup = re.search(r"\btuple\((.*)\)", root)
    if tup is None:
        return 1
    elems = [e.strip().lstrip("%") for e in tup.group(1).split(",")]
    elems = [re.sub(r"^/\*index=\d+\*/", "", e).strip().lstrip("%") for e in elems]
    if index >= len(elems):
        return 1
    add = defining(elems[index])
    a = re.search(r"\badd\(([^)]*)\)", add)
    if a is None:
        return 1
    steps = []
    for o in a.group(1).split(","):
        n = _CONSTANT_RE.search(defining(o.strip().lstrip("%")))
        if n:
            steps.append(int(n.group(2)))
    return steps[0] if len(steps) == 1 and steps[0] > 0 else 1


@dataclass(frozen=True)
class ExecutedCollective:
    """One collective instruction and how often one step runs it."""

    op: CollectiveOp
    count: int  # executions per step (product of the enclosing loops' trip counts)
    computation: str
    loop_trip_counts: tuple[int, ...]  # of the enclosing while loops, outermost first

    @property
    def kind(self) -> str:
        # TPU fuses reduce-scatter as an all-reduce-scatter: the same collective for the cost model.
        return "reduce-scatter" if self.op.kind == "all-reduce-scatter" else self.op.kind

    @property
    def payload_bytes(self) -> float:
        return self.op.payload_bytes


@dataclass
class Walk:
    collectives: list[ExecutedCollective] = field(default_factory=list)
    unknown_trip_counts: list[str] = field(default_factory=list)  # while instructions counted once


def _callees(line: str) -> list[str]:
    names = [callee for _, callee in _CALLS_RE.findall(line)]
    for rx in (_BRANCHES_RE, _CALLS_LIST_RE, _CALLED_LIST_RE):
        for m in rx.finditer(line):
            names.extend(n.strip().lstrip("%") for n in m.group(1).split(",") if n.strip())
    return names


class _Shapes:
    """Result shapes of a module's instructions by name (names are unique in an HLO module), read when asked:
    an optimized module prints operands by name only (`ragged-all-to-all(%copy-done.43, ...)`)."""

    def __init__(self, comps: dict[str, Computation]) -> None:
        self._lines: dict[str, str] = {}
        for comp in comps.values():
            for line in comp.lines:
                m = _NAME_RE.match(line)
                if m:
                    self._lines.setdefault(m.group(1), line)
        self._shapes: dict[str, Shape | None] = {}

    def __call__(self, name: str) -> Shape | None:
        if name not in self._shapes:
            line = self._lines.get(name)
            self._shapes[name] = result_shape(line) if line is not None else None
        return self._shapes[name]


def _inner_collective(
    line: str, comps: dict[str, Computation], shapes: _Shapes | None, seen: set[str], depth: int = 0
) -> CollectiveOp | None:
    """The first collective stating its replica groups (or permute pairs) in the computations `line` calls,
    looked for depth-first through the calls of their other instructions (a SparseCore wrapper's custom-call)."""
    if depth > 4:
        return None
    for callee in _callees(line):
        comp = comps.get(callee)
        if comp is None or callee in seen:
            continue
        seen.add(callee)
        for inner_line in comp.lines:
            inner = parse_collective(inner_line, operand_shape=shapes) if _may_be_collective(inner_line) else None
            if inner is not None and (inner.groups is not None or inner.pairs is not None):
                return inner
            found = _inner_collective(inner_line, comps, shapes, seen, depth + 1)
            if found is not None:
                return found
    return None


def _with_callee_details(
    op: CollectiveOp, line: str, comps: dict[str, Computation], shapes: _Shapes | None = None
) -> CollectiveOp:
    """Fill what a wrapper's own text leaves out from the collective inside its called computation.

    TPU's reduce-scatter fusion prints `fusion(%fusion.485), kind=kCustom, calls=%all-reduce-scatter.2`:
    no operand shape and no replica groups. Its computation holds the all-reduce that states both (the
    unscattered input and the groups), followed by the dynamic-slice of this device's shard. An async
    start (`%ragged-all-to-all-start = ((...), ...) async-start(...), calls=%async_computation.16`) states
    the operand and result types but not the replica groups: its wrapped computation's collective does.

    A collective offloaded to the SparseCores (tpu7x, libtpu 0.0.52) states neither:
    `%all-gather.195.cloned.1.call-start = ((), (), (s32[8192], ...)) async-start(),
    async_execution_thread="sparsecore", calls=%async_computation.47` (its tuple holds only the offload's
    scratch; the data comes in through the `async-update` that follows). The wrapped computation is a
    custom-call with `called_computations={%called_computation.121}`, which holds the collective itself
    (`all-gather(%tuple.553#0), replica_groups=mesh['axis_0'=512] {'axis_0'}`): kind,
    sizes and groups all come from it.
    """
    if op.groups is not None or op.pairs is not None:
        return op
    inner = _inner_collective(line, comps, shapes, set())
    if inner is None:
        return op
    instruction = parse_instruction(line)
    if instruction is not None and instruction.opcode == "async-start" and not instruction.operands:
        return replace(
            op,
            kind=inner.kind,
            operand_bytes=inner.operand_bytes,
            result_bytes=inner.result_bytes,
            groups=inner.groups,
            group_size=inner.group_size,
            pairs=inner.pairs,
            mesh_axes=inner.mesh_axes,
            dimensions=inner.dimensions,
        )
    operand = op.operand_bytes or inner.operand_bytes or inner.result_bytes
    if op.kind in ("all-gather", "ragged-all-to-all"):  # their results are not their inputs' sizes
        operand = op.operand_bytes or inner.operand_bytes
    return replace(
        op,
        operand_bytes=operand,
        result_bytes=op.result_bytes or inner.result_bytes,
        groups=inner.groups,
        group_size=inner.group_size,
        pairs=inner.pairs,
        mesh_axes=inner.mesh_axes,
    )


def walk(text: str) -> Walk:
    """Every collective the program's ENTRY computation runs, counted through loops and calls."""
    comps = computations(text)
    entry = next((c for c in comps.values() if c.entry), None)
    out = Walk()
    if entry is None:
        return out
    shapes = _Shapes(comps)

    def visit(comp: Computation, count: int, trips: tuple[int, ...], depth: int) -> None:
        if depth > 64:
            return
        for line in comp.lines:
            if _ASYNC_LATER_RE.search(line.split(", metadata=", 1)[0]):
                # an async-update / -done: its start counted the collective (a SparseCore offload's update,
                # `%all-gather.195.cloned.1.call-update = ... async-update(%...call-start, %copy.458)`, names it
                # too) or entered the wrapped computation already
                continue
            op = parse_collective(line, operand_shape=shapes) if _may_be_collective(line) else None
            if op is not None:
                if op.phase != "done":
                    op = _with_callee_details(op, line, comps, shapes)
                    out.collectives.append(ExecutedCollective(op, count, comp.name, trips))
                continue  # never enter a collective's own computation
            if re.search(r"\swhile\(", line):
                n = trip_count(line, comps)
                if n is None:
                    name = _NAME_RE.match(line)
                    out.unknown_trip_counts.append(name.group(1) if name else line[:80])
                    n = 1
                body = re.search(r"\bbody=%?([\w.\-]+)", line)
                if body and body.group(1) in comps:
                    visit(comps[body.group(1)], count * n, (*trips, n), depth + 1)
                continue
            for callee in _callees(line):
                if callee in comps and callee != comp.name:
                    visit(comps[callee], count, trips, depth + 1)

    visit(entry, 1, (), 0)
    return out


_COLLECTIVE_WORDS = (
    "all-gather",
    "all-reduce",
    "reduce-scatter",
    "all-to-all",
    "collective-permute",
    "collective-broadcast",
    "async-collective",
    " send(",
    " recv(",
    "send-done",
    "recv-done",
)


def _may_be_collective(line: str) -> bool:
    """A cheap filter before the full parse: the opcode or a called computation names a collective."""
    head = line.split(", metadata=", 1)[0]
    return any(w in head for w in _COLLECTIVE_WORDS)


@dataclass(frozen=True)
class CollectiveSummary:
    """Collectives of one kind over one set of mesh axes with one payload size, per step."""

    kind: str
    axes: tuple[str, ...]
    payload_bytes: float  # each (see CollectiveOp.payload_bytes)
    group_size: int | None
    count: int

    @property
    def total_bytes(self) -> float:
        return self.payload_bytes * self.count

    @property
    def v_bytes(self) -> float:
        """One execution's V in the convention of ASAP's cost formulas (server/perf/collectives.py), which
        price an all-to-all of V bytes as a quarter of an all-gather of V: the array over the whole group,
        so an all-to-all's (or a ragged all-to-all's) payload, one device's share, times the group size;
        the payload for every other kind. ASAP's "token dispatch and combine" over the expert axis
        (server/perf/steptime.py) is tokens x top_k x emb a device in this convention times the expert
        degree."""
        if self.kind in ("all-to-all", "ragged-all-to-all"):
            return self.payload_bytes * max(1, self.group_size or 1)
        return self.payload_bytes

    def to_json(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "axis": axes_label(self.axes) or "none",
            "axes": list(self.axes),
            "payload_bytes": round(self.payload_bytes),
            "group_size": self.group_size,
            "count": self.count,
            "total_bytes": round(self.total_bytes),
            "v_bytes": round(self.v_bytes),
        }


def summarize(w: Walk, mesh: Sequence[tuple[str, int]]) -> list[CollectiveSummary]:
    """The walk's collectives grouped by (kind, mesh axes, payload, group size), largest traffic first.
    `mesh`: the jax Mesh as (axis name, size) pairs, in order (device ids are positions in it)."""
    groups: dict[tuple[str, tuple[str, ...], float, int | None], int] = {}
    for c in w.collectives:
        axes = collective_mesh_axes(c.op, mesh)
        key = (c.kind, axes, c.payload_bytes, c.op.group_size)
        groups[key] = groups.get(key, 0) + c.count
    out = [CollectiveSummary(k, a, b, g, n) for (k, a, b, g), n in groups.items()]
    out.sort(key=lambda s: -s.total_bytes)
    return out
