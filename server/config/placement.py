"""Layer 3 of mesh validation: can JAX place each logical mesh axis on whole physical
torus axes of the slice?

This runs JAX's own assignment routine (`jax._src.mesh_utils`, the code behind
`mesh_utils.create_device_mesh` that MaxText calls at launch) on an integer grid shaped
like the slice's physical device mesh, so the verdict is JAX's, not a re-implementation.
The device-kind handlers that JAX consults first (ring orders for small v5e/v6e/v5p/tpu7x
slices) accept any mesh shape; they are mirrored here by the conditions under which
they return a mesh.

The measured `cpu` generation (server/config/slices.py) is JAX's simulated CPU devices: threads of
one process, no torus, and `create_device_mesh` on CPU devices reshapes the device list. Every
mesh shape whose product is the device count is placed, trivially.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from functools import lru_cache

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


_IMPORT_LOCK = threading.Lock()


@lru_cache(maxsize=1)
def _mesh_utils():  # type: ignore[no-untyped-def]
    # Imported lazily: importing jax costs about a second, paid once, off the keystroke path.
    # The lock: the LSP warms this up in one thread while the first analysis may need it in
    # another, and two threads importing jax at once see half-initialised modules.
    with _IMPORT_LOCK:
        from jax._src import mesh_utils

        return mesh_utils


def warm_up() -> None:
    """Import JAX now (the LSP calls this in the background at start-up)."""
    _mesh_utils()


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
    mu = _mesh_utils()  # first: imports jax (and numpy) under the lock
    import numpy as np

    grid = np.arange(math.prod(phys)).reshape(phys)
    try:
        _, table = mu._create_device_mesh_for_nd_torus(grid, list(mesh_shape))
        split = False
    except NotImplementedError as e:
        failed, remaining = _failed_axis(phys, mesh_shape)
        if not allow_split_physical_axes:
            return Placement(False, error=str(e), failed_axis=failed, remaining=remaining)
        try:
            _, table = mu._create_device_mesh_for_nd_torus(grid, list(mesh_shape), allow_split_physical_axes=True)
        except (NotImplementedError, ValueError, AssertionError) as e2:
            return Placement(False, error=str(e2), failed_axis=failed, remaining=remaining)
        split = True
    assignment = tuple(
        tuple((p, int(table[p, i])) for p in range(len(phys)) if int(table[p, i]) > 1) for i in range(len(mesh_shape))
    )
    return Placement(True, assignment=assignment, split=split)


def _failed_axis(phys: tuple[int, ...], mesh_shape: tuple[int, ...]) -> tuple[int | None, tuple[int, ...]]:
    """Which logical axis JAX gives up on, and the physical axes left then (for the message).

    Mirrors the greedy order of the torus mapper (most network-intense axis first, most
    physical axes first) only to name the axis; the verdict itself came from JAX.
    """
    from itertools import combinations

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
