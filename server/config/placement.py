"""Layer 3 of mesh validation: can JAX place each logical mesh axis on whole physical
torus axes of the slice?

The verdict and the assignment are JAX's: `_whole_axes` and `_splitting_axes` are a line-by-line port of
jax 0.10.2's `mesh_utils._create_device_mesh_for_nd_torus` and `_create_device_mesh_for_nd_torus_splitting_axes`
(the code behind `mesh_utils.create_device_mesh` that MaxText calls at launch), on integer sizes instead of a
device array, quirks included (its prime factorisation drops a factor of numbers like 14). Plain Python, so a
mesh enumeration places thousands of shapes in milliseconds without importing JAX; tests/test_placement_jax.py
checks it against JAX's own routine on every ICI shape of many slices and against `create_device_mesh` on
libtpu's real topologies. The device-kind handlers that JAX consults first (ring orders for small
v5e/v6e/v5p/tpu7x slices) accept any mesh shape; they are mirrored here by the conditions under which they
return a mesh.

The measured `cpu` generation (server/config/slices.py) is JAX's simulated CPU devices: threads of
one process, no torus, and `create_device_mesh` on CPU devices reshapes the device list. Every
mesh shape whose product is the device count is placed, trivially.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import combinations, product
from typing import Any

from server.config.slices import CPU, Slice


@dataclass(frozen=True)
class Placement:
    ok: bool
    # per logical axis index: the physical axes (index, size) it occupies; empty for size-1 axes
    assignment: tuple[tuple[tuple[int, int], ...], ...] = ()
    split: bool = False  # physical axes were split (allow_split_physical_axes)
    handler: str = ""  # a device-kind handler placed the devices (ring order), not the torus mapper
    error: str = ""
    failed_axis: int | None = None  # logical axis index JAX could not place
    remaining: tuple[int, ...] = field(default=())  # physical axes left when it failed


def _handler_accepts(sl: Slice, mesh_shape: tuple[int, ...]) -> str:
    """The device-kind handlers of jax 0.10.2 mesh_utils that return a mesh for any shape
    (`device_kind_handler_dict`): they run before, and instead of, the torus mapper."""
    n = sl.devices_per_slice
    gen = sl.chip.generation
    if gen in ("v5e", "v6e"):  # _v5e_create_device_mesh ('TPU v5 lite', 'TPU v6 lite')
        if n == 4 and sl.topology == (2, 2):
            return "2x2 ring order"
        if n == 8:
            return "8-chip tray ring order"
        if sl.topology == (4, 4) and max(mesh_shape) == n:
            return "4x4 ring order (one axis spans the slice)"
    if gen == "tpu7x" and n % 8 == 0 and n <= 32 and sl.topology[0] <= 2 and sl.topology[1] <= 2:
        return "tpu7x tray ring order"  # _7x_create_device_mesh
    return ""


def jax_physical_shape(sl: Slice) -> tuple[int, ...]:
    """The physical mesh as `mesh_utils._get_physical_tpu_mesh` builds it: (x, y, z[, cores])."""
    topo = sl.topology if len(sl.topology) == 3 else (*sl.topology, 1)
    return (*topo, sl.chip.devices_per_chip) if sl.chip.devices_per_chip > 1 else topo


def place(sl: Slice, mesh_shape: tuple[int, ...], allow_split_physical_axes: bool = False) -> Placement:
    """Place the ICI mesh (ordered least to most network-intense) on one slice, as JAX would."""
    if math.prod(mesh_shape) != sl.devices_per_slice or min(mesh_shape, default=1) < 1:
        return Placement(False, error="mesh shape does not match the slice")
    if sl.chip.generation == CPU:
        return Placement(True, handler="CPU devices: no physical links, any shape")
    handler = _handler_accepts(sl, mesh_shape)
    if handler:
        return Placement(True, handler=handler)
    phys = jax_physical_shape(sl)
    columns, error = _whole_axes(phys, mesh_shape)
    split = False
    if columns is None:
        if allow_split_physical_axes:
            columns = _splitting_axes(phys, mesh_shape)
            split = True
        if columns is None:
            failed, remaining = _failed_axis(phys, mesh_shape)
            return Placement(False, error=error, failed_axis=failed, remaining=remaining)
    return Placement(True, assignment=tuple(map(_occupied, columns)), split=split)


@lru_cache(maxsize=4096)
def _occupied(column: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    """A logical axis' column of the assignment matrix as Placement keeps it: (physical axis, size) where above 1."""
    return tuple((p, z) for p, z in enumerate(column) if z > 1)


# A logical axis of size 1 changes nothing in either routine but one thing: without splitting, the first one placed
# (the most network-intense) uses up the physical axes of size 1, the only ones that multiply to 1. So a placement
# depends on the physical shape and the sequence of the other sizes, that first 1 included: memoised on those, and
# so is each step (one logical axis placed, given what the ones before it left). An enumeration of a slice places
# thousands of shapes with a few hundred distinct sequences.
_Columns = tuple[tuple[int, ...], ...]  # per logical axis placed, the size it takes of each physical axis
_WHOLE: dict[tuple[tuple[int, ...], tuple[int, ...]], tuple[_Columns | None, tuple[int, ...], int]] = {}
_SPLIT: dict[tuple[tuple[int, ...], tuple[int, ...]], _Columns | None] = {}
_WHOLE_STEP: dict[tuple[tuple[int, ...], int], tuple[int, ...] | None] = {}
_SPLIT_STEP: dict[tuple[tuple[int, ...], tuple[int, ...], int], tuple[int, ...] | None] = {}
# Read with one lookup (a miss is _UNSEEN, since None is a value they keep): enumeration.py empties them when they
# grow past its bound, possibly while another thread's enumeration is between a test and a read.
_UNSEEN: Any = object()


def clear_memo() -> None:
    """Forget the memoised placements (a benchmark's cold first run)."""
    for memo in (_WHOLE, _SPLIT, _WHOLE_STEP, _SPLIT_STEP):
        memo.clear()
    _occupied.cache_clear()


def _whole_axes(phys: tuple[int, ...], mesh_shape: tuple[int, ...]) -> tuple[list[tuple[int, ...]] | None, str]:
    """`_create_device_mesh_for_nd_torus` without splitting: per logical axis, the size it takes of each physical
    axis (JAX's assignment matrix, by column), or None and JAX's NotImplementedError message."""
    order: list[int] = []  # logical axes in the order JAX places them, as _WHOLE keys them
    first_one = 1 in phys
    for index in reversed(range(len(mesh_shape))):
        if mesh_shape[index] > 1:
            order.append(index)
        elif first_one:
            order.append(index)
            first_one = False
    sizes = tuple(mesh_shape[i] for i in order)
    key = (phys, sizes)
    hit = _WHOLE.get(key)
    if hit is None:
        hit = _WHOLE[key] = _whole_sequence(phys, sizes)
    placed, left, failed = hit
    if placed is None:
        index = order[failed]
        return None, (
            f"Failed to find assignment for logical_axis_index {index} of size {mesh_shape[index]} with remaining "
            f"assignable mesh {list(left)}. The size of each axis in your logical mesh must be equal to the product "
            "of some subset of the physical mesh axis sizes. E.g. logical mesh (4, 16) is compatible with "
            "physical mesh 4x4x4 since 4=4 and 16=4x4. If you want to split physical axes, set  "
            "allow_split_physical_axes to True."
        )
    columns = [(1,) * len(phys)] * len(mesh_shape)
    for index, column in zip(order, placed, strict=True):
        columns[index] = column
    return columns, ""


def _whole_sequence(phys: tuple[int, ...], sizes: tuple[int, ...]) -> tuple[_Columns | None, tuple[int, ...], int]:
    """The torus mapper on logical axes of these sizes, in the order placed: their columns, or None, the physical
    axes left (zeroed where used) and the position in `sizes` of the axis it cannot place."""
    assignable = tuple(phys)
    columns: list[tuple[int, ...]] = []
    # Each onto the first subset of the physical axes left, most axes first, whose sizes multiply to its size; the
    # subset is used up (zeroed).
    for k, size in enumerate(sizes):
        key = (assignable, size)
        chosen = _WHOLE_STEP.get(key, _UNSEEN)
        if chosen is _UNSEEN:
            chosen = _WHOLE_STEP[key] = _whole_axes_step(assignable, size)
        if chosen is None:
            if size == 1:  # nothing of size 1 left: JAX moves on
                columns.append((1,) * len(phys))
                continue
            return None, assignable, k
        columns.append(tuple(phys[p] if p in chosen else 1 for p in range(len(phys))))
        assignable = tuple(0 if p in chosen else v for p, v in enumerate(assignable))
    return tuple(columns), assignable, -1


def _whole_axes_step(assignable: tuple[int, ...], size: int) -> tuple[int, ...] | None:
    for k in range(len(assignable), 0, -1):
        for chosen in combinations(range(len(assignable)), k):
            if math.prod(assignable[p] for p in chosen) == size:
                return chosen
    return None


def _splitting_axes(phys: tuple[int, ...], mesh_shape: tuple[int, ...]) -> list[tuple[int, ...]] | None:
    """`_create_device_mesh_for_nd_torus_splitting_axes`: per logical axis, the size it takes of each physical axis
    (JAX's assignment matrix, by column), or None where JAX fails (no feasible assignment for an axis, or one whose
    sizes do not multiply to the device count, which its reshape rejects). A size-1 axis takes nothing."""
    order = [i for i in reversed(range(len(mesh_shape))) if mesh_shape[i] > 1]
    key = (phys, tuple(mesh_shape[i] for i in order))
    placed = _SPLIT.get(key, _UNSEEN)
    if placed is _UNSEEN:
        placed = _SPLIT[key] = _splitting_sequence(*key)
    if placed is None:
        return None
    columns = [(1,) * len(phys)] * len(mesh_shape)
    for index, column in zip(order, placed, strict=True):
        columns[index] = column
    return columns


def _splitting_sequence(phys: tuple[int, ...], sizes: tuple[int, ...]) -> _Columns | None:
    used = (1,) * len(phys)  # product of the sizes assigned so far, per physical axis
    columns = []
    for size in sizes:
        key = (phys, used, size)
        best = _SPLIT_STEP.get(key, _UNSEEN)
        if best is _UNSEEN:
            best = _SPLIT_STEP[key] = _splitting_axes_step(phys, used, size)
        if best is None:
            return None
        columns.append(best)
        used = tuple(u * z for u, z in zip(used, best, strict=True))
    if math.prod(used) != math.prod(phys):
        return None
    return tuple(columns)


def _prime_factors(x: int) -> list[int]:
    """jax mesh_utils._get_prime_factors, as written: for a number with a prime factor above sqrt(x) + 1 left
    after the small ones it returns only what is left (14 -> [7])."""
    factors = []
    for p in range(2, math.isqrt(x) + 2):
        while x % p == 0:
            factors.append(p)
            x //= p
        if x == 1:
            return factors
    return [x]


def _splitting_axes_step(phys: tuple[int, ...], used: tuple[int, ...], size: int) -> tuple[int, ...] | None:
    """The best feasible assignment of one logical axis (`_enumerate_feasible_logical_axis_assignments`, ranked by
    `_prefer_first_logical_axis_assignment`), or None when there is none."""
    wanted = Counter(_prime_factors(size))
    available = [x // u for x, u in zip(phys, used, strict=True)]
    by_factor: dict[int, list[int]] = {f: [] for f in wanted}
    for p, a in enumerate(available):
        for f in _prime_factors(a):
            if f in wanted:
                by_factor[f].append(p)
    options = [(f, set(combinations(by_factor[f], m))) for f, m in wanted.items()]
    best: tuple[int, ...] | None = None
    best_rank: tuple[int, int, int, tuple[int, ...]] | None = None
    for picks in product(*(o for _, o in options)):
        z = [1] * len(phys)
        for (f, _), axes in zip(options, picks, strict=True):
            for p in axes:
                z[p] *= f
        cand = tuple(z)
        # JAX keeps the preferred one of each pair; its preference is a lexicographic order on these.
        rank = (
            math.prod(s for s, x in zip(cand, phys, strict=True) if s == x),  # occupies whole axes of more devices
            sum(1 for s, x in zip(cand, phys, strict=True) if s == x and s > 1),  # more whole axes
            math.prod(s for s, u in zip(cand, used, strict=True) if u > 1),  # as JAX writes it
            cand,  # reverse lexicographic order
        )
        if best_rank is None or rank > best_rank:
            best, best_rank = cand, rank
    return best


def _failed_axis(phys: tuple[int, ...], mesh_shape: tuple[int, ...]) -> tuple[int | None, tuple[int, ...]]:
    """Which logical axis JAX gives up on, and the physical axes left then (for the message).

    Mirrors the greedy order of the torus mapper (most network-intense axis first, most
    physical axes first) only to name the axis; the verdict itself came from JAX.
    """
    left = list(phys)
    for i in reversed(range(len(mesh_shape))):
        size = mesh_shape[i]
        for k in range(len(left), 0, -1):
            hit = next((c for c in combinations(range(len(left)), k) if math.prod(left[j] for j in c) == size), None)
            if hit is not None:
                for j in hit:
                    left[j] = 0
                break
        else:
            if size > 1:
                return i, tuple(left)
    return None, tuple(left)
