"""Collectives in XLA HLO op expressions, and the mesh axes their replica groups span.

XProf's hlo_stats tool reports each HLO op with its text (`hlo_op_expression`), e.g.

    %all-gather.277 = bf16[1,2048,16,128]{1,3,2,0:T(8,128)(2,1)} all-gather(bf16[1,512,16,128]{...} %fusion.522),
        channel_id=91, replica_groups=[1,4]<=[4], dimensions={1}, use_global_device_ids=true

To price a measured collective against the scaling-book formulas (server/perf/collectives.py)
we need its kind, the bytes it moves, how many devices take part, and which mesh axes
those devices span (so the measured time can be set beside the predicted time of, say,
the fsdp all-gathers). This module reads all of that out of the op text:

* shapes: `dtype[d0,d1,...]`, tuples `(a, b, /*index=2*/c)`, layouts and TPU tiling
  suffixes `{1,0:T(8,128)(2,1)}` (ignored), bounded dynamic dims `[<=8]`;
* the collectives: all-gather, reduce-scatter, all-reduce, all-to-all, ragged-all-to-all,
  collective-permute, collective-broadcast, send/recv, their async `-start`/`-done` halves
  (whose tuple shapes carry both the input and the output buffer), `async-start` wrappers,
  TPU's `async-collective-done`, and TPU's all-reduce-scatter fusion (a `fusion` op that
  calls `%all-reduce-scatter...` and states no replica groups: the group size is the
  operand/result size ratio);
* a ragged all-to-all's payload: the smaller of its send (input) and receive (output) buffers, a
  bound on what a device moves on average (see CollectiveOp.payload_bytes), from its own operands,
  or from an async start's result tuple, which types them when the operand list names them only;
* operands printed by name only (optimized modules) typed through a caller's `operand_shape` (an
  instruction name -> its definition's result shape; server/profiles/hlo_program.py gives the module's);
* replica groups in all three syntaxes: explicit `{{0,1},{2,3}}` (`{}` = all devices), iota
  `[G,S]<=[N]` / `[G,S]<=[d0,d1,...]T(perm)` (reshape iota(N) to dims, transpose by perm,
  reshape to [G,S]) and the mesh form `mesh['x'=2,'y'=4] {'y'}` (optionally with
  `device_ids=(...)` and sub-axes `'x':(1)2`), following XLA's replica_group.cc;
* which axes of a jax Mesh a group spans: with `use_global_device_ids=true` (what SPMD
  emits) a device id in a group is the device's position in the Mesh's devices array,
  flattened row-major, so its coordinates are `numpy.unravel_index(id, mesh_shape)`.

Nothing here raises on malformed text: a parse that fails returns None (or the parts it
could read). Pure Python plus numpy; no XLA needed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

# Bytes per element. Sub-byte integer types count fractionally (XLA packs them on TPU).
DTYPE_BYTES: dict[str, float] = {
    "pred": 1,
    "s1": 0.125,
    "u1": 0.125,
    "s2": 0.25,
    "u2": 0.25,
    "s4": 0.5,
    "u4": 0.5,
    "f4e2m1fn": 0.5,
    "s8": 1,
    "u8": 1,
    "f8e3m4": 1,
    "f8e4m3": 1,
    "f8e4m3fn": 1,
    "f8e4m3fnuz": 1,
    "f8e4m3b11fnuz": 1,
    "f8e5m2": 1,
    "f8e5m2fnuz": 1,
    "f8e8m0fnu": 1,
    "bf16": 2,
    "f16": 2,
    "s16": 2,
    "u16": 2,
    "f32": 4,
    "s32": 4,
    "u32": 4,
    "f64": 8,
    "s64": 8,
    "u64": 8,
    "c64": 8,
    "c128": 16,
    "token": 0,
    "opaque": 0,
}

# Collective kinds as HLO opcodes spell them (longest first, so "all-reduce-scatter" wins over
# "all-reduce" and "ragged-all-to-all" over "all-to-all" in prefix matches).
KINDS: tuple[str, ...] = (
    "all-reduce-scatter",
    "collective-broadcast",
    "collective-permute",
    "ragged-all-to-all",
    "reduce-scatter",
    "all-gather",
    "all-reduce",
    "all-to-all",
    "send",
    "recv",
)
# A TPU async collective whose kind the text does not say.
UNKNOWN_ASYNC = "async-collective"

# Refuse to expand replica groups over more devices than any real system has.
MAX_DEVICES = 1 << 20

_ARRAY_RE = re.compile(r"([a-z][a-z0-9]*)\[([^\]\[]*)\]")
_COMMENT_RE = re.compile(r"/\*.*?\*/", re.S)
_HEADER_RE = re.compile(r"\s*(?:ROOT\s+)?%?([^\s=]+)\s*=\s*")
_OPCODE_RE = re.compile(r"\s*([a-z][a-z0-9\-_]*)\s*\(")
_NAME_RE = re.compile(r"\s*%?[\w.\-]+(?:#\d+)?")  # `%while.47#5`: one element of a tuple-shaped operand
_IOTA_RE = re.compile(r"\s*\[([\d,\s]*)\]\s*<=\s*\[([\d,\s]*)\]\s*(?:T\s*\(([\d,\s]*)\))?\s*$")
_MESH_RE = re.compile(
    r"\s*mesh\s*\[([^\]]*)\]\s*(?:,\s*device_ids\s*=\s*\(((?:[^()]|\([^()]*\))*)\))?\s*\{([^}]*)\}\s*$"
)
_MESH_AXIS_RE = re.compile(r"'?([\w.\-]+)'?\s*=\s*(\d+)")
_SUB_AXIS_RE = re.compile(r"'?([\w.\-]+)'?\s*(?::\s*\(\s*(\d+)\s*\)\s*(\d+))?")


# ---------------------------------------------------------------------------------------------
# Shapes


@dataclass(frozen=True)
class Shape:
    """An HLO shape: an array (dtype, dims) or a tuple of shapes (elements)."""

    dtype: str | None = None
    dims: tuple[int, ...] = ()
    elements: tuple[Shape, ...] | None = None

    @property
    def is_tuple(self) -> bool:
        return self.elements is not None

    @property
    def nbytes(self) -> float:
        if self.elements is not None:
            return sum(e.nbytes for e in self.elements)
        return DTYPE_BYTES.get(self.dtype or "", 0.0) * math.prod(self.dims)

    @property
    def is_context(self) -> bool:
        """A token or a u32/s32 scalar: the bookkeeping parts of async and send/recv tuples."""
        return self.elements is None and (self.dtype == "token" or (self.dtype in ("u32", "s32") and not self.dims))


def _dims(text: str) -> tuple[int, ...] | None:
    dims: list[int] = []
    for part in text.split(","):
        part = part.strip().removeprefix("<=").strip()
        if not part:
            continue
        if not part.isdigit():
            return None
        dims.append(int(part))
    return tuple(dims)


def shape_bytes(shape_text: str) -> float:
    """Total bytes of every array shape in `shape_text` (a shape, a tuple, or any text with shapes).

    Layouts, tiling suffixes and `/*index=N*/` comments are ignored; unknown dtypes count 0.
    """
    try:
        text = _COMMENT_RE.sub("", shape_text)
        total = 0.0
        for m in _ARRAY_RE.finditer(text):
            if m.group(1) not in DTYPE_BYTES:
                continue
            dims = _dims(m.group(2))
            if dims is not None:
                total += DTYPE_BYTES[m.group(1)] * math.prod(dims)
        return total
    except Exception:
        return 0.0


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def _parse_shape(text: str, pos: int, depth: int = 0) -> tuple[Shape | None, int]:
    """Parse one shape starting at `pos` (comments already stripped). Returns (shape, end)."""
    pos = _skip_ws(text, pos)
    if pos >= len(text) or depth > 64:
        return None, pos
    if text[pos] == "(":
        elements: list[Shape] = []
        pos = _skip_ws(text, pos + 1)
        if pos < len(text) and text[pos] == ")":
            return Shape(elements=()), pos + 1
        while pos < len(text):
            element, pos = _parse_shape(text, pos, depth + 1)
            if element is None:
                return None, pos
            elements.append(element)
            pos = _skip_ws(text, pos)
            if pos < len(text) and text[pos] == ",":
                pos += 1
                continue
            if pos < len(text) and text[pos] == ")":
                return Shape(elements=tuple(elements)), pos + 1
            return None, pos
        return None, pos
    m = _ARRAY_RE.match(text, pos)
    if m is None:
        return None, pos
    dims = _dims(m.group(2))
    if dims is None:
        return None, pos
    pos = m.end()
    if pos < len(text) and text[pos] == "{":  # layout, possibly with tiling: {1,0:T(8,128)(2,1)S(1)}
        close = text.find("}", pos)
        if close < 0:
            return None, len(text)
        pos = close + 1
    return Shape(dtype=m.group(1), dims=dims), pos


def _matching(text: str, pos: int, open_: str, close: str) -> int:
    """Index just past the bracket matching text[pos] (which is `open_`), or -1."""
    depth = 0
    for i in range(pos, len(text)):
        c = text[i]
        if c == open_:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return i + 1
    return -1


@dataclass(frozen=True)
class Instruction:
    """The parts of one HLO instruction's text this module uses."""

    name: str
    result: Shape | None
    opcode: str
    operands: tuple[Shape | None, ...]  # None where an operand's shape is not printed
    attributes: str  # the text after the operand list
    operand_names: tuple[str, ...] = ()  # `fusion.3`, `while.47#5` (a tuple element); "" where none is printed


def parse_instruction(expression: str) -> Instruction | None:
    """Split `%name = shape opcode(operands), attributes`; None if the text is not of that form."""
    try:
        text = _COMMENT_RE.sub("", expression)
        header = _HEADER_RE.match(text)
        if header is None:
            return None
        result, pos = _parse_shape(text, header.end())
        op = _OPCODE_RE.match(text, pos)
        if op is None:
            return None
        opcode = op.group(1)
        pos = op.end()
        operands: list[Shape | None] = []
        names: list[str] = []
        complete = False
        while pos < len(text):
            pos = _skip_ws(text, pos)
            if pos < len(text) and text[pos] == ")":
                pos += 1
                complete = True
                break
            shape: Shape | None = None
            if pos < len(text) and (text[pos] == "(" or _ARRAY_RE.match(text, pos)):
                shape, pos = _parse_shape(text, pos)
                if shape is None:
                    break
            name = _NAME_RE.match(text, pos)
            if name is not None:
                pos = name.end()
            elif shape is None:
                break
            operands.append(shape)
            names.append(name.group(0).strip().lstrip("%") if name is not None else "")
            pos = _skip_ws(text, pos)
            if pos < len(text) and text[pos] == ",":
                pos += 1
            elif pos < len(text) and text[pos] == ")":
                pos += 1
                complete = True
                break
            else:
                break
        attributes = text[pos:] if complete else ""
        return Instruction(header.group(1), result, opcode, tuple(operands), attributes, tuple(names))
    except Exception:
        return None


# ---------------------------------------------------------------------------------------------
# Replica groups


def _ints(text: str) -> tuple[int, ...] | None:
    values = [p.strip() for p in text.split(",") if p.strip()]
    if not all(v.isdigit() for v in values):
        return None
    return tuple(int(v) for v in values)


def _iota(dims: Sequence[int], perm: Sequence[int] | None) -> np.ndarray | None:
    """iota(prod(dims)) reshaped to dims and transposed by perm (XLA's IotaTileAssignment)."""
    n = math.prod(dims)
    if n > MAX_DEVICES or not dims:
        return None
    array = np.arange(n, dtype=np.int64).reshape(tuple(dims))
    if perm is not None:
        if sorted(perm) != list(range(len(dims))):
            return None
        array = array.transpose(tuple(perm))
    return array


def _explicit_groups(text: str) -> tuple[tuple[int, ...], ...] | None:
    inner = text.strip()
    if not (inner.startswith("{") and inner.endswith("}")):
        return None
    inner = inner[1:-1].strip()
    if not inner:
        return ()
    groups: list[tuple[int, ...]] = []
    for m in re.finditer(r"\{([^{}]*)\}|([^\s,])", inner):
        if m.group(2) is not None:
            return None
        group = _ints(m.group(1))
        if group is None:
            return None
        if group:
            groups.append(group)
    return tuple(groups)


def _iota_groups(text: str) -> tuple[tuple[int, ...], ...] | None:
    m = _IOTA_RE.match(text)
    if m is None:
        return None
    shape, dims = _ints(m.group(1)), _ints(m.group(2))
    perm = _ints(m.group(3)) if m.group(3) is not None else None
    if not shape or not dims or (m.group(3) is not None and perm is None):
        return None
    array = _iota(dims, perm)
    if array is None or math.prod(shape) != array.size:
        return None
    size = shape[-1]
    if size <= 0:
        return None
    return tuple(tuple(int(x) for x in row) for row in array.reshape(-1, size))


@dataclass(frozen=True)
class MeshGroups:
    """A mesh-form replica group list: the mesh, the axes grouped over, and the groups."""

    mesh: tuple[tuple[str, int], ...]
    axes: tuple[str, ...]  # the grouped axes' names (sub-axes by their parent's name), in mesh order
    groups: tuple[tuple[int, ...], ...]


def _mesh_device_ids(text: str, n: int) -> np.ndarray | None:
    text = text.strip()
    if text.startswith("["):  # an iota tile assignment: [dims]T(perm), or [shape]<=[dims]T(perm)
        m = re.match(r"\[([\d,\s]*)\]\s*(?:<=\s*\[([\d,\s]*)\])?\s*(?:T\s*\(([\d,\s]*)\))?\s*$", text)
        if m is None:
            return None
        dims = _ints(m.group(2) if m.group(2) is not None else m.group(1))
        perm = _ints(m.group(3)) if m.group(3) is not None else None
        if not dims:
            return None
        array = _iota(dims, perm)
        return None if array is None else array.ravel()
    ids = _ints(text.replace("[", "").replace("]", ""))
    if ids is None or len(ids) != n:
        return None
    return np.array(ids, dtype=np.int64)


def parse_mesh_groups(text: str) -> MeshGroups | None:
    """Expand `mesh['x'=2,'y'=4] {'y'}` (XLA's MeshAxesReplicaGroupList) into its groups.

    Follows replica_group.cc: each mesh dimension is reshaped so that the referenced (sub-)axes
    become dimensions of their own, the grouped dimensions are transposed to the end (in mesh
    order), and the device array is cut into consecutive groups.
    """
    m = _MESH_RE.match(text)
    if m is None:
        return None
    mesh = tuple((name, int(size)) for name, size in _MESH_AXIS_RE.findall(m.group(1)))
    if not mesh or any(size <= 0 for _, size in mesh):
        return None
    names = [name for name, _ in mesh]
    n = math.prod(size for _, size in mesh)
    if n > MAX_DEVICES:
        return None
    if m.group(2) is not None:
        ids = _mesh_device_ids(m.group(2), n)
        if ids is None or ids.size != n:
            return None
    else:
        ids = np.arange(n, dtype=np.int64)
    refs: dict[int, list[tuple[int, int] | None]] = {}  # mesh dim -> sub-axes (pre_size, size), None = full
    for part in (p.strip() for p in m.group(3).split(",")):
        if not part:
            continue
        ref = _SUB_AXIS_RE.fullmatch(part)
        if ref is None or ref.group(1) not in names:
            return None
        dim = names.index(ref.group(1))
        sub = (int(ref.group(2)), int(ref.group(3))) if ref.group(2) is not None else None
        refs.setdefault(dim, []).append(sub)
    if not refs:
        return None
    sizes: list[int] = []
    grouped: list[int] = []
    for dim, (_, full) in enumerate(mesh):
        subs = refs.get(dim)
        offset = len(sizes)
        if subs is None:
            sizes.append(full)
        elif subs == [None]:
            sizes.append(full)
            grouped.append(offset)
        else:
            parts = [sub for sub in subs if sub is not None]
            if len(parts) != len(subs):
                return None  # a full axis together with one of its sub-axes
            order = sorted(range(len(parts)), key=lambda i: parts[i][0])
            local: list[int] = [0] * len(parts)
            prefix = 1
            for i in order:
                pre, size = parts[i]
                if pre <= 0 or size <= 0 or pre % prefix:
                    return None
                if pre != prefix:
                    sizes.append(pre // prefix)
                    prefix = pre
                local[i] = len(sizes)
                sizes.append(size)
                prefix *= size
            if full % prefix:
                return None
            if prefix != full or len(parts) == 1:
                sizes.append(full // prefix)
            grouped.extend(local)
    group_size = math.prod(sizes[g] for g in grouped)
    if math.prod(sizes) != n or group_size <= 0:
        return None
    perm = [i for i in range(len(sizes)) if i not in grouped] + grouped
    array = ids.reshape(sizes).transpose(perm).reshape(-1, group_size)
    groups = tuple(tuple(int(x) for x in row) for row in array)
    axes = tuple(name for dim, (name, _) in enumerate(mesh) if dim in refs)
    return MeshGroups(mesh, axes, groups)


def expand_replica_groups(text: str) -> tuple[tuple[int, ...], ...] | None:
    """The replica groups `text` states, each a tuple of device ids; None if unreadable.

    Accepts the value of a `replica_groups=` attribute (with or without that prefix) in any
    syntax: explicit `{{0,1},{2,3}}`, iota `[2,2]<=[4]`, transposed iota `[2,2]<=[2,2]T(1,0)`,
    or mesh `mesh['x'=2,'y'=2] {'y'}`. An empty list (`{}`) means one group of all devices,
    whose number the text does not say: it is returned as `()`.
    """
    try:
        text = text.strip().removeprefix("replica_groups=").strip()
        if text.startswith("{"):
            return _explicit_groups(text)
        if text.startswith("["):
            return _iota_groups(text)
        if text.startswith("mesh"):
            mesh = parse_mesh_groups(text)
            return None if mesh is None else mesh.groups
        return None
    except Exception:
        return None


def _attribute_value(attributes: str, key: str) -> str | None:
    """The raw text of `key=value` in an attribute list (balanced braces; iota; mesh form)."""
    m = re.search(r"(?<![\w\-])" + re.escape(key) + r"\s*=\s*", attributes)
    if m is None:
        return None
    pos = m.end()
    rest = attributes[pos:]
    if rest.startswith("{"):
        end = _matching(attributes, pos, "{", "}")
        return attributes[pos:end] if end > 0 else None
    if rest.startswith("["):
        iota = re.match(r"\[[\d,\s]*\]\s*<=\s*\[[\d,\s]*\](?:\s*T\s*\([\d,\s]*\))?", rest)
        return iota.group(0) if iota else None
    if rest.startswith("mesh"):
        mesh = re.match(r"mesh\s*\[[^\]]*\](?:\s*,\s*device_ids\s*=\s*\((?:[^()]|\([^()]*\))*\))?\s*\{[^}]*\}", rest)
        return mesh.group(0) if mesh else None
    if rest.startswith('"'):
        end = rest.find('"', 1)
        return rest[1:end] if end > 0 else None
    plain = re.match(r"[^,\s}]*", rest)
    return plain.group(0) if plain else None


def parse_pairs(text: str) -> tuple[tuple[int, int], ...] | None:
    """`{{0,1},{1,2}}` (source_target_pairs) as ((0, 1), (1, 2)); None if unreadable."""
    groups = _explicit_groups(text)
    if groups is None or any(len(g) != 2 for g in groups):
        return None
    return tuple((g[0], g[1]) for g in groups)


# ---------------------------------------------------------------------------------------------
# Collectives


@dataclass(frozen=True)
class CollectiveOp:
    """One collective HLO op as read from its text."""

    kind: str  # one of KINDS, or UNKNOWN_ASYNC for a TPU async collective of unstated kind
    phase: str  # "sync" | "start" | "done"
    result_bytes: float  # the collective's output buffer(s) (for -start ops: the output half of the tuple)
    operand_bytes: float  # its input buffer(s) (for -done ops: the input half of the operand tuple)
    groups: tuple[tuple[int, ...], ...] | None  # expanded replica groups; () = all devices; None = not stated
    group_size: int | None  # devices per group: from the groups, or inferred from the size ratio
    pairs: tuple[tuple[int, int], ...] | None  # collective-permute / send / recv source-target pairs
    mesh_axes: tuple[str, ...] | None  # the axes the mesh form of replica_groups names, in mesh order
    name: str = ""
    dimensions: tuple[int, ...] | None = None  # the gathered / scattered / exchanged dimensions

    @property
    def payload_bytes(self) -> float:
        """The array size the scaling-book cost formulas take (server/perf/collectives.py).

        all-gather: the gathered result; reduce-scatter and all-reduce-scatter: the unscattered
        operand; all-reduce, all-to-all, permute, broadcast, send: the operand; recv (whose
        operand is a token): the received buffer.

        ragged-all-to-all: the smaller of its input (send) buffer and its output (receive) buffer.
        What it moves is data-dependent (send_sizes / recv_sizes), but every device has the same
        two buffers, sends at most its input and receives at most its output, and the group sends
        what it receives, so a device moves at most min(input, output) on average. That bound is
        what MaxText's dropless MoE moves: its dispatch sends every row of the [tokens x top_k, emb]
        input into a receive buffer sized for the worst case (moe.py get_ragged_buffer_size), and
        its combine sends back out of that worst-case buffer exactly the rows that fill the
        [tokens x top_k, emb] output. It is also what ASAP's cost model charges for both
        (server/perf/steptime.py, "token dispatch and combine": tokens x top_k x emb a device).
        The input alone would charge the combine the worst-case buffer (x min(expert, experts /
        top_k)). One device can move more than the mean when routing is uneven; the static text
        cannot say by how much. Both buffers stay available as operand_bytes and result_bytes.
        """
        if self.kind == "all-gather":
            return self.result_bytes
        if self.kind == "ragged-all-to-all":
            known = [b for b in (self.operand_bytes, self.result_bytes) if b > 0]
            return min(known) if known else 0.0
        if self.kind == "recv":
            return self.result_bytes
        if self.kind == UNKNOWN_ASYNC:
            return max(self.result_bytes, self.operand_bytes)
        if not self.operand_bytes and self.result_bytes:
            # HLO printed without operand types (jaxlib's text of a profile's program): infer the operand
            # from the result, which has the operand's shape except for the scattered dimension.
            if self.kind in ("reduce-scatter", "all-reduce-scatter") and self.group_size:
                return self.result_bytes * self.group_size
            if self.kind in ("all-reduce", "all-to-all", "collective-permute", "collective-broadcast"):
                return self.result_bytes
        return self.operand_bytes


def _kind_from_name(text: str) -> str | None:
    """A collective kind the text starts with (`all-gather-start.1`, `all-reduce-scatter.2.clone`)."""
    text = text.strip().lstrip("%").lower().replace("_", "-")
    for kind in KINDS:
        if text.startswith(kind) and (len(text) == len(kind) or not text[len(kind)].isalpha()):
            return kind
    return None


def _split_kind_phase(word: str) -> tuple[str, str] | None:
    """`all-gather-start` -> ("all-gather", "start"); `send` -> ("send", "start")."""
    word = word.strip().lower()
    phase = "sync"
    for suffix, name in (("-start", "start"), ("-done", "done"), ("-update", "start")):
        if word.endswith(suffix):
            word, phase = word[: -len(suffix)], name
            break
    if word not in KINDS:
        return None
    if word in ("send", "recv") and phase == "sync":
        phase = "start"
    return word, phase


def _hint_kind(instruction: Instruction | None, expression: str) -> str | None:
    """The kind of an async wrapper / fusion, from `calls=`, async_collective_name, or its name."""
    if instruction is not None:
        for key in ("calls", "async_collective_name"):
            value = _attribute_value(instruction.attributes, key)
            if value:
                kind = _kind_from_name(value)
                if kind is not None:
                    return kind
        return _kind_from_name(instruction.name)
    m = re.search(r"calls=%?([\w.\-]+)", expression)
    return _kind_from_name(m.group(1)) if m else None


def _opcode(expression: str) -> tuple[Instruction | None, str]:
    instruction = parse_instruction(expression)
    if instruction is not None:
        return instruction, instruction.opcode
    m = re.search(r"=\s*.*?\s([a-z][a-z0-9\-]*)\(", _COMMENT_RE.sub("", expression))
    return None, m.group(1) if m else ""


def _classify(category: str, instruction: Instruction | None, opcode: str, expression: str) -> tuple[str, str] | None:
    by_opcode = _split_kind_phase(opcode)
    if opcode in ("async-start", "async-update", "async-done", "async-collective-start", "async-collective-done"):
        phase = "done" if opcode.endswith("done") else "start"
        hinted = _hint_kind(instruction, expression)
        if hinted is not None:
            by_opcode = (hinted, phase)
        elif opcode.startswith("async-collective"):
            by_opcode = (UNKNOWN_ASYNC, phase)
    elif opcode == "fusion":  # TPU's all-reduce-scatter fusion: kind=kCustom, calls=%all-reduce-scatter.N
        value = _attribute_value(instruction.attributes, "calls") if instruction is not None else None
        calls = _kind_from_name(value) if value else None
        if calls is not None:
            by_opcode = (calls, "sync")

    cat = " ".join(category.strip().lower().split())
    if cat:
        if cat.endswith(" fusion"):
            cat = cat[: -len(" fusion")]
        if cat == "async-collective-done" or cat == "async-collective-start":
            phase = "done" if cat.endswith("done") else "start"
            if by_opcode is not None:
                return by_opcode[0], phase
            hinted = _hint_kind(instruction, expression)
            return (hinted or UNKNOWN_ASYNC), phase
        by_category = _split_kind_phase(cat)
        if by_category is not None:
            kind, phase = by_category
            if by_opcode is not None and by_opcode[1] != "sync":
                phase = by_opcode[1]  # the category names the kind; the opcode says which half
            if by_opcode is not None and by_opcode[0] == kind:
                return by_opcode
            return kind, phase
    return by_opcode


def collective_kind(category: str, expression: str) -> tuple[str, str] | None:
    """(kind, phase) of a collective op, or None if it is not one.

    XProf's category decides first ("all-gather", "all-reduce-scatter fusion",
    "async-collective-done", ...); otherwise the opcode in the expression (`all-gather-start`,
    `fusion(...) calls=%all-reduce-scatter.1`, `async-start(...) calls=%reduce-scatter`...).
    Fusions that merely consume a collective's result (a "megacore fusion" taking
    `%async-collective-done.8`) are not collectives.
    """
    try:
        instruction, opcode = _opcode(expression)
        return _classify(category, instruction, opcode, expression)
    except Exception:
        return None


def _async_halves(shape: Shape | None) -> tuple[float, float] | None:
    """(input bytes, output bytes) of an async start op's tuple: ((in), (out)), (in, out, u32[], u32[])."""
    if shape is None or shape.elements is None:
        return None
    elements = list(shape.elements)
    while elements and elements[-1].is_context:
        elements.pop()
    if len(elements) < 2:
        return None
    if len(elements) == 2:
        return elements[0].nbytes, elements[1].nbytes
    half = len(elements) // 2
    if len(elements) % 2 == 0:
        return sum(e.nbytes for e in elements[:half]), sum(e.nbytes for e in elements[half:])
    return elements[0].nbytes, sum(e.nbytes for e in elements[1:])


def _data_bytes(shapes: Sequence[Shape | None]) -> float:
    """Bytes of the data buffers among `shapes`, leaving out tokens and u32 contexts (send/recv)."""
    total = 0.0
    for shape in shapes:
        if shape is None or shape.is_context:
            continue
        if shape.elements is not None:
            total += _data_bytes(shape.elements)
        else:
            total += shape.nbytes
    return total


def _ratio(numerator: float, denominator: float) -> int | None:
    if denominator <= 0 or numerator <= 0:
        return None
    r = numerator / denominator
    k = round(r)
    return k if k >= 1 and abs(r - k) < 1e-6 * max(1.0, r) else None


def _ragged_args(shape: Shape | None) -> tuple[Shape, ...] | None:
    """The operand shapes an async start's tuple holds first: ((input, output, offsets...), output, u32[], ...)."""
    if shape is None or not shape.elements:
        return None
    first = shape.elements[0]
    return first.elements if first.elements else None


def _ragged_buffers(phase: str, instruction: Instruction) -> tuple[float, float]:
    """(output bytes, input bytes) of a ragged all-to-all.

    Operands: input, output, input_offsets, send_sizes, output_offsets, recv_sizes; the result is
    the output buffer. An async start (`async-start(...), calls=%async_computation` wrapping it, as
    TPU prints it) states the operands' types as the first element of its result tuple, whatever
    its operand list prints; a done's operand is that tuple.
    """
    result, operands = instruction.result, instruction.operands
    if phase in ("start", "done"):
        held = result if phase == "start" else (operands[0] if len(operands) == 1 else None)
        args = _ragged_args(held)
        if held is not None and held.elements and args:
            rest = [e for e in held.elements[1:] if not e.is_context]
            output = rest[0].nbytes if rest else (args[1].nbytes if len(args) > 1 else 0.0)
            if phase == "done" and result is not None and not result.is_tuple:
                output = result.nbytes
            return output, args[0].nbytes
    first = operands[0] if operands else None
    input_ = first.nbytes if first is not None and not first.is_tuple else 0.0
    if result is not None and not result.is_tuple:
        output = result.nbytes
    elif len(operands) > 1 and operands[1] is not None:
        output = operands[1].nbytes
    else:
        data = [e for e in (result.elements or ()) if not e.is_context] if result is not None else []
        output = data[0].nbytes if data else 0.0
    return output, input_


def _sizes(kind: str, phase: str, instruction: Instruction) -> tuple[float, float]:
    """(result bytes, operand bytes) of the collective itself, unwrapping async tuples."""
    result = instruction.result
    operands = instruction.operands
    result_bytes = result.nbytes if result is not None else 0.0
    operand_bytes = sum(s.nbytes for s in operands if s is not None)
    if kind in ("send", "recv"):
        return _data_bytes([result]), _data_bytes(operands)
    if kind == "ragged-all-to-all":
        output, input_ = _ragged_buffers(phase, instruction)
        return output, input_
    if kind == "all-reduce":
        return result_bytes, operand_bytes  # -start/-done keep the operand's shape
    if phase == "start":
        halves = _async_halves(result)
        if halves is not None:
            return halves[1], operand_bytes
    elif phase == "done" and len(operands) == 1:
        halves = _async_halves(operands[0])
        if halves is not None:
            return result_bytes, halves[0]
    return result_bytes, operand_bytes


def result_shape(line: str) -> Shape | None:
    """The result shape of the instruction on `line` (`%x = bf16[8]{0} op(...)`); None if unreadable."""
    try:
        text = _COMMENT_RE.sub("", line)
        header = _HEADER_RE.match(text)
        return _parse_shape(text, header.end())[0] if header is not None else None
    except Exception:
        return None


def _resolved(instruction: Instruction, operand_shape: Callable[[str], Shape | None]) -> Instruction:
    """The instruction with each operand whose type is not printed typed as its definition's result
    (`%while.47#5`: element 5 of it)."""
    if all(s is not None for s in instruction.operands):
        return instruction
    operands = list(instruction.operands)
    for i, (shape, name) in enumerate(zip(instruction.operands, instruction.operand_names, strict=False)):
        if shape is not None or not name:
            continue
        base, _, index = name.partition("#")
        found = operand_shape(base)
        if found is not None and index:
            found = (
                found.elements[int(index)]
                if index.isdigit() and found.elements and int(index) < len(found.elements)
                else None
            )
        operands[i] = found
    return replace(instruction, operands=tuple(operands))


def parse_collective(
    expression: str, category: str = "", operand_shape: Callable[[str], Shape | None] | None = None
) -> CollectiveOp | None:
    """The collective `expression` (an hlo_op_expression) describes; None if it is not one.

    When the category says collective but the text cannot be read, the op comes back with
    zero bytes and no groups rather than not at all. `operand_shape` (an instruction name -> its
    result shape, e.g. from the whole module's text) types operands the text prints by name only,
    as an optimized module does (`ragged-all-to-all(%copy-done.43, ...)`); without it such an
    operand counts 0 bytes and the sizes come from the result where they can.
    """
    try:
        instruction, opcode = _opcode(expression)
        classified = _classify(category, instruction, opcode, expression)
        if classified is None:
            return None
        kind, phase = classified
        if instruction is None:
            return CollectiveOp(kind, phase, 0.0, 0.0, None, None, None, None)
        if operand_shape is not None:
            instruction = _resolved(instruction, operand_shape)
        result_bytes, operand_bytes = _sizes(kind, phase, instruction)
        attributes = instruction.attributes

        groups: tuple[tuple[int, ...], ...] | None = None
        mesh_axes: tuple[str, ...] | None = None
        groups_text = _attribute_value(attributes, "replica_groups")
        if groups_text is not None:
            if groups_text.startswith("mesh"):
                mesh = parse_mesh_groups(groups_text)
                if mesh is not None:
                    groups, mesh_axes = mesh.groups, mesh.axes
            else:
                groups = expand_replica_groups(groups_text)

        pairs: tuple[tuple[int, int], ...] | None = None
        pairs_text = _attribute_value(attributes, "source_target_pairs")
        if pairs_text is None:
            pairs_text = _attribute_value(attributes, "_xla_send_recv_source_target_pairs")
        if pairs_text is not None:
            pairs = parse_pairs(pairs_text)

        dims_text = _attribute_value(attributes, "dimensions")
        dimensions = _ints(dims_text.strip("{}")) if dims_text else None

        group_size: int | None = None
        if groups:
            group_size = max(len(g) for g in groups)
        elif kind == "all-gather":
            group_size = _ratio(result_bytes, operand_bytes)
        elif kind in ("reduce-scatter", "all-reduce-scatter"):
            group_size = _ratio(operand_bytes, result_bytes)

        return CollectiveOp(
            kind=kind,
            phase=phase,
            result_bytes=result_bytes,
            operand_bytes=operand_bytes,
            groups=groups,
            group_size=group_size,
            pairs=pairs,
            mesh_axes=mesh_axes,
            name=instruction.name,
            dimensions=dimensions,
        )
    except Exception:
        return None


# ---------------------------------------------------------------------------------------------
# Mesh axes


def mesh_axes_of_group(group: Sequence[int], mesh: Sequence[tuple[str, int]]) -> tuple[str, ...]:
    """The axes of `mesh` along which the devices of `group` differ, in mesh order.

    `mesh` is the jax Mesh as ordered (axis name, size) pairs, e.g. MaxText's
    [("data", 2), ("fsdp", 4), ("tensor", 2)]. A device id (a logical id under
    use_global_device_ids=true) is the device's position in the Mesh's devices array
    flattened row-major. Groups that are not a full sub-mesh (a strided subset) still give
    the axes that vary; ids outside the mesh are ignored.
    """
    try:
        sizes = tuple(int(size) for _, size in mesh)
        if not sizes or any(s <= 0 for s in sizes):
            return ()
        n = math.prod(sizes)
        ids = [int(i) for i in group if 0 <= int(i) < n]
        if not ids:
            return ()
        coords = np.array(np.unravel_index(np.array(ids, dtype=np.int64), sizes))
        return tuple(name for (name, _), row in zip(mesh, coords, strict=True) if len(set(row.tolist())) > 1)
    except Exception:
        return ()


def collective_mesh_axes(op: CollectiveOp, mesh: Sequence[tuple[str, int]]) -> tuple[str, ...]:
    """The mesh axes a collective spans: over all its groups (or permute pairs), in mesh order.

    `groups == ()` (all devices) spans every axis of size > 1. With neither groups nor pairs,
    the axes the mesh form named, if any, else ().
    """
    varying: set[str] = set()
    if op.groups == ():
        varying = {name for name, size in mesh if size > 1}
    elif op.groups:
        for group in op.groups:
            varying.update(mesh_axes_of_group(group, mesh))
    elif op.pairs:
        for pair in op.pairs:
            varying.update(mesh_axes_of_group(pair, mesh))
    elif op.mesh_axes:
        varying = set(op.mesh_axes)
    return tuple(name for name, _ in mesh if name in varying)


def axes_label(axes: Sequence[str]) -> str:
    """The axes joined with '+': "fsdp", "fsdp+tensor"; "" for no axis."""
    return "+".join(axes)
