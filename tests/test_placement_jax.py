"""Layer 3 against JAX itself: for real TPU topologies built by libtpu (no TPU needed),
`placement.place` must give the same verdict as `mesh_utils.create_device_mesh` on the
real devices, for every way of splitting the slice over data x fsdp x tensor.
"""

from __future__ import annotations

import itertools
import math

import pytest

from server.config.axes import AXES
from server.config.placement import place
from server.config.slices import parse_slice

topologies = pytest.importorskip("jax.experimental.topologies")
pytest.importorskip("libtpu")
from jax.experimental import mesh_utils  # noqa: E402

pytestmark = pytest.mark.tpu

# As MaxText's accelerator map asks libtpu for them.
CHIP_CONFIG = {"v4": "megacore_dense", "v5p": "megacore"}
PREFIX = {"v5p": "v5"}


def _devices(name: str):
    sl = parse_slice(name)
    gen = sl.chip.generation
    topo = f"{PREFIX.get(gen, gen)}:{'x'.join(map(str, sl.topology))}"
    kw = {"chip_config_name": CHIP_CONFIG[gen]} if gen in CHIP_CONFIG else {}
    desc = topologies.get_topology_desc(platform="tpu", topology_name=topo, **kw)
    assert len(desc.devices) == sl.devices_per_slice, (name, len(desc.devices))
    return sl, desc.devices


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _shapes(n: int):
    """(data, fsdp, tensor) splits of n, as a full mesh_axes-length shape."""
    idx = {a.name: i for i, a in enumerate(AXES)}
    for data, tensor in itertools.product(_divisors(n), repeat=2):
        if n % (data * tensor):
            continue
        shape = [1] * len(AXES)
        shape[idx["data"]], shape[idx["fsdp"]], shape[idx["tensor"]] = data, n // (data * tensor), tensor
        yield tuple(shape)


def _jax_ok(shape, devices, split: bool) -> bool:
    try:
        mesh_utils.create_device_mesh(list(shape), devices, allow_split_physical_axes=split)
    except NotImplementedError:
        return False
    return True


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
def test_placement_verdict_matches_jax_create_device_mesh(name):
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


@pytest.mark.parametrize("name", ["v5e-256", "v5p-512"])
def test_split_physical_axes_places_everything_jax_places(name):
    sl, devices = _devices(name)
    for shape in _shapes(sl.devices_per_slice):
        assert place(sl, shape, allow_split_physical_axes=True).ok == _jax_ok(shape, devices, split=True), shape
