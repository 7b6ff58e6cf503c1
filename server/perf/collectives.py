"""Collectives of one training step, per mesh axis, priced on the physical links they use.

Costs after the scaling book (DOMAIN.md §4): on one ring axis with wraparound, all-gather and
reduce-scatter of a V-byte (gathered) array take V(X-1)/X over the bidirectional bandwidth of
the axis (2 x one-way link bandwidth); all-reduce twice that; all-to-all a quarter of an
all-gather. An axis without wraparound (shorter than a full ring, or split) runs at half the
bandwidth. A logical axis spread over k physical axes uses all k at once. Each ring step costs
at least the chip's `hop_latency` (1 us on TPUs; measured for the CPU slice). Cross-slice (DCN)
parts move their share at the chip's DCN bandwidth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from server.config.placement import jax_physical_shape
from server.config.slices import CPU
from server.perf.layout import Layout

# Cross-slice traffic grows with the number of slices: MaxText's published multislice runs lose MFU
# roughly in proportion to log2(slices) (v5e-256 16B/64B from 1 to 32 slices, v4-128 22B from 1 to
# 8), which a bandwidth-optimal ring's (d-1)/d cannot reproduce: priced as log2(d) rounds.
DCN_ROUNDS = True

KIND_FACTOR = {
    "all-gather": 1.0,
    "reduce-scatter": 1.0,
    "all-reduce": 2.0,
    "all-to-all": 0.25,
    "collective-permute": 1.0,
}


@dataclass(frozen=True)
class Path:
    """The links a mesh-axis group's collectives run over."""

    ici_degree: int
    dcn_degree: int
    ici_bw: float  # bytes/s per chip, both directions, over all physical axes used
    ring_steps: int  # latency-bound steps of one collective on ICI
    physical: str  # e.g. "x(16, ring) + y(16, ring)"
    hop_latency: float = 1e-6  # seconds per ring step (the chip's)


def path(lay: Layout, axes: tuple[str, ...]) -> Path:
    sl = lay.slice
    chip = sl.chip
    ici, dcn = lay.ici_degree(*axes), lay.dcn_degree(*axes)
    phys = jax_physical_shape(sl)
    used = lay.physical(*axes)
    if ici > 1 and not used:
        # A device-kind handler placed the devices (small slices): one ring over the slice's chips.
        # JAX orders them as a ring of direct links (tray ring order): both directions busy.
        # The CPU slice's devices are threads of one process: its "link" is the measured all-gather rate.
        where = "CPU devices (shared memory)" if chip.generation == CPU else "ring order over the slice"
        return Path(ici, dcn, 2 * chip.ici_link_bw, max(1, ici // 2), where, chip.hop_latency)
    bw = 0.0
    steps = 0
    names = []
    for p, size in used:
        if p >= len(sl.topology):  # the cores of a chip (tpu7x): on-chip, treat as one fast link pair
            bw += 4 * chip.ici_link_bw
            names.append(f"core({size})")
            continue
        whole = size == phys[p]
        wrap = whole and sl.wrap[p]
        # A ring with wraparound sends both ways around; an open line only has half the links busy.
        bw += chip.ici_link_bw * 2 * (1.0 if wrap else 0.5)
        steps = max(steps, size // 2 if wrap else size - 1)
        names.append(f"{'xyz'[p]}({size}{', ring' if wrap else ', open'})")
    return Path(ici, dcn, bw, steps, " + ".join(names) or "none", chip.hop_latency)


@dataclass
class Collective:
    """One kind of collective on one axis group, counted over a whole step (per device)."""

    axis: str
    kind: str
    purpose: str
    count: float  # collectives per step
    bytes: float  # V of each: the full (gathered) array on one device
    seconds: float = 0.0
    ici_seconds: float = 0.0
    dcn_seconds: float = 0.0

    def to_json(self) -> dict[str, object]:
        return {
            "axis": self.axis,
            "kind": self.kind,
            "purpose": self.purpose,
            "count": self.count,
            "bytes_each": round(self.bytes),
            "seconds": self.seconds,
        }


def price(c: Collective, pt: Path, dcn_bw: float) -> Collective:
    """Seconds for all `count` collectives of `c` on `pt` (hierarchical: DCN part, then ICI part)."""
    f = KIND_FACTOR[c.kind]
    ici_s = dcn_s = 0.0
    if pt.ici_degree > 1 and pt.ici_bw > 0:
        # A permute sends its whole buffer to one neighbour; the others move (X-1)/X of the array.
        share = 1.0 if c.kind == "collective-permute" else (pt.ici_degree - 1) / pt.ici_degree
        moved = c.bytes * share * f
        ici_s = max(moved / pt.ici_bw, pt.ring_steps * pt.hop_latency * f)
    if pt.dcn_degree > 1:
        # Across slices each device exchanges its 1/ici share with the other slices. Cross-slice
        # collectives go over the data-center network as rounds of pairwise exchanges, one per doubling
        # of the slice count (DCN_ROUNDS); a bandwidth-optimal ring would move (d-1)/d instead.
        d = pt.dcn_degree
        rounds = math.log2(d) if DCN_ROUNDS else (d - 1) / d
        moved = c.bytes / max(1, pt.ici_degree) * rounds * f
        dcn_s = moved / dcn_bw
    c.ici_seconds, c.dcn_seconds = ici_s * c.count, dcn_s * c.count
    c.seconds = c.ici_seconds + c.dcn_seconds
    return c


@dataclass
class CommPlan:
    """Every collective of a step, grouped by mesh-axis group."""

    collectives: list[Collective] = field(default_factory=list)
    paths: dict[str, Path] = field(default_factory=dict)

    def seconds(self, axis: str | None = None, purpose: str | None = None) -> float:
        return sum(
            c.seconds
            for c in self.collectives
            if (axis is None or c.axis == axis) and (purpose is None or c.purpose == purpose)
        )

    def by_axis(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for c in self.collectives:
            out[c.axis] = out.get(c.axis, 0.0) + c.seconds
        return out
