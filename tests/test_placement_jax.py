"""Layer 3 against JAX itself: `placement.place` is a plain-Python port of JAX's torus mapping, so it must give
JAX's verdict and JAX's assignment on every mesh shape a mesh enumeration asks about.

Two checks: against `mesh_utils._create_device_mesh_for_nd_torus` (the routine the port follows; needs only jax)
on every ICI shape of the enumeration's axes for many slices, with and without splitting physical axes; and
against `mesh_utils.create_device_mesh` on the real devices of TPU topologies built by libtpu (no TPU needed;
marked `tpu`, skipped without the compile extra).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

import numpy as np
import pytest

from server.config.axes import AXES
from server.config.placement import _splitting_axes, _whole_axes, jax_physical_shape, place
from server.config.slices import parse_slice
from server.perf.enumeration import ICI_AXES

mesh_utils = pytest.importorskip("jax._src.mesh_utils")

# As MaxText's accelerator map asks libtpu for them.
CHIP_CONFIG = {"v4": "megacore_dense", "v5p": "megacore"}
PREFIX = {"v5p": "v5"}


def _devices(name: str):  # type: ignore[no-untyped-def]
    topologies = pytest.importorskip("jax.experimental.topologies")
    pytest.importorskip("libtpu")
    sl = parse_slice(name)
    gen = sl.chip.generation
    topo = f"{PREFIX.get(gen, gen)}:{'x'.join(map(str, sl.topology))}"
    kw = {"chip_config_name": CHIP_CONFIG[gen]} if gen in CHIP_CONFIG else {}
    desc = topologies.get_topology_desc(platform="tpu", topology_name=topo, **kw)
    assert len(desc.devices) == sl.devices_per_slice, (name, len(desc.devices))
    return sl, desc.devices


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _shapes(n: int) -> Iterator[tuple[int, ...]]:
    """(data, fsdp, tensor) splits of n, as a full mesh_axes-length shape."""
    idx = {a.name: i for i, a in enumerate(AXES)}
    for data, tensor in itertools.product(_divisors(n), repeat=2):
        if n % (data * tensor):
            continue
        shape = [1] * len(AXES)
        shape[idx["data"]], shape[idx["fsdp"]], shape[idx["tensor"]] = data, n // (data * tensor), tensor
        yield tuple(shape)


def _ici_shapes(n: int) -> Iterator[tuple[int, ...]]:
    """Every assignment of n devices to the enumeration's ICI axes (server/perf/enumeration.py), as a full
    mesh_axes-length shape: every ICI shape an enumeration with allow_split places."""
    idx = [next(i for i, a in enumerate(AXES) if a.name == name) for name in ICI_AXES]

    def split(m: int, k: int) -> Iterator[tuple[int, ...]]:
        if k == 1:
            yield (m,)
            return
        for d in _divisors(m):
            for rest in split(m // d, k - 1):
                yield (d, *rest)

    for degrees in split(n, len(idx)):
        shape = [1] * len(AXES)
        for i, d in zip(idx, degrees, strict=True):
            shape[i] = d
        yield tuple(shape)


def _jax_torus(phys: tuple[int, ...], shape: tuple[int, ...], split: bool) -> list[tuple[int, ...]] | None:
    """JAX's assignment matrix by logical axis (column), or None where it raises."""
    grid = np.arange(math.prod(phys)).reshape(phys)
    try:
        _, table = mesh_utils._create_device_mesh_for_nd_torus(grid, list(shape), allow_split_physical_axes=split)
    except Exception:  # NotImplementedError without splitting; any failure of the splitting routine
        return None
    return [tuple(int(table[p, i]) for p in range(len(phys))) for i in range(len(shape))]


def _ours(phys: tuple[int, ...], shape: tuple[int, ...], split: bool) -> list[tuple[int, ...]] | None:
    columns, _ = _whole_axes(phys, shape)
    if columns is None and split:
        columns = _splitting_axes(phys, shape)
    return columns


# 2D tori (a size-1 z axis), 3D tori, odd axis sizes (12, 20: JAX's prime factorisation drops factors there),
# and tpu7x's two cores per chip (a fourth physical axis).
TORUS_SLICES = ["v5e-256", "v5e-128", "v6e-64", "v5p-512", "v5p-384", "v5p-640", "v4-128", "tpu7x-128", "tpu7x-64"]


@pytest.mark.parametrize("name", TORUS_SLICES)
def test_port_matches_jax_torus_mapping_on_every_ici_shape(name: str) -> None:
    sl = parse_slice(name)
    phys = jax_physical_shape(sl)
    shapes = list(_ici_shapes(sl.devices_per_slice))
    assert len(shapes) > 100
    mismatches = []
    verdicts = {False: [0, 0], True: [0, 0]}
    for shape in shapes:
        for split in (False, True):
            ours, theirs = _ours(phys, shape, split), _jax_torus(phys, shape, split)
            verdicts[split][theirs is None] += 1
            if ours != theirs:
                mismatches.append((shape, split, ours, theirs))
    assert not mismatches, mismatches[:3]
    assert verdicts[False][1], "some shapes must need a split physical axis, or this checks nothing"
    assert verdicts[True][0] > verdicts[False][0]


@pytest.mark.parametrize("name", ["v5e-256", "v5p-384"])
def test_port_gives_jax_error_message(name: str) -> None:
    sl = parse_slice(name)
    phys = jax_physical_shape(sl)
    grid = np.arange(math.prod(phys)).reshape(phys)
    checked = 0
    for shape in _shapes(sl.devices_per_slice):
        columns, error = _whole_axes(phys, shape)
        if columns is not None:
            continue
        with pytest.raises(NotImplementedError) as e:
            mesh_utils._create_device_mesh_for_nd_torus(grid, list(shape))
        assert error == str(e.value)
        assert place(sl, shape).error == error
        checked += 1
    assert checked


def _jax_ok(shape, devices, split: bool) -> bool:  # type: ignore[no-untyped-def]
    try:
        mesh_utils.create_device_mesh(list(shape), devices, allow_split_physical_axes=split)
    except NotImplementedError:
        return False
    return True


@pytest.mark.tpu
@pytest.mark.parametrize(
    "name",
    [
        "v5e-256",
        "v5e-128",
        "v5e-16",
        "v5e-8",
        "v6e-16",
        "v6e-64",
        "v5p-128",
        "v5p-512",
        "v4-128",
        "tpu7x-8",
        "tpu7x-32",
        "tpu7x-128",
    ],
)
def test_placement_verdict_matches_jax_create_device_mesh(name: str) -> None:
    sl, devices = _devices(name)
    shapes = list(_shapes(sl.devices_per_slice))
    assert shapes
    mismatches = []
    rejected = 0
    for shape in shapes:
        ours = place(sl, shape).ok
        theirs = _jax_ok(shape, devices, split=False)
        rejected += not theirs
        if ours != theirs:
            mismatches.append((shape, ours, theirs))
    assert not mismatches, mismatches[:5]
    if math.prod(sl.topology) >= 64:
        assert rejected, "a big slice must reject some splits, or this test checks nothing"


@pytest.mark.tpu
@pytest.mark.parametrize("name", ["v5e-256", "v5p-512", "v6e-64", "tpu7x-128"])
def test_every_enumerated_ici_shape_places_as_jax_create_device_mesh(name: str) -> None:
    """Every ICI shape of the enumeration, with and without allow_split_physical_axes: the same verdict as
    create_device_mesh on the slice's real devices, and a split only where JAX cannot do without."""
    sl, devices = _devices(name)
    mismatches = []
    for shape in _ici_shapes(sl.devices_per_slice):
        whole = place(sl, shape)
        split = place(sl, shape, allow_split_physical_axes=True)
        if whole.ok != _jax_ok(shape, devices, split=False) or split.ok != _jax_ok(shape, devices, split=True):
            mismatches.append((shape, whole.ok, split.ok))
        assert split.split == (split.ok and not whole.ok), shape
    assert not mismatches, mismatches[:5]
