"""A mesh as the cost model sees it: the degree of every mesh axis over ICI and DCN on a
slice, and where JAX placed each ICI axis on the physical torus.

Built from a validated config (`from_check`) or from a candidate assignment (`build`), so the
current mesh and every alternative are priced by the same code.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from server.config.axes import AXES, mesh_label
from server.config.mesh import MeshCheck
from server.config.placement import Placement, place
from server.config.slices import Slice

# Groups of mesh axes that act as one for the cost model (same collective pattern).
FSDP = ("fsdp", "fsdp_transpose")
TENSOR = ("tensor", "tensor_sequence", "autoregressive")
CONTEXT = ("context", "context_usp_ulysses")
EXPERT = ("expert",)
DATA = ("data", "diloco")
PIPELINE = ("pipeline",)
WEIGHT_SHARDING = tuple(a.name for a in AXES if a.shards_weights)
BATCH_SHARDING = tuple(a.name for a in AXES if a.shards_batch)
_INDEX = {a.name: i for i, a in enumerate(AXES)}  # a mesh axis' position in mesh_axes (and in the placement)


@dataclass(frozen=True)
class Layout:
    slice: Slice
    ici: dict[str, int]
    dcn: dict[str, int]
    placement: Placement | None

    @cached_property
    def _total(self) -> dict[str, int]:
        """Each axis' degree over ICI and DCN: ici x dcn, a missing one counting 1."""
        total = dict(self.ici)
        for a, d in self.dcn.items():
            total[a] = total.get(a, 1) * d
        return total

    # Plain loops rather than math.prod over a generator: the cost model asks for degrees tens of times per mesh,
    # thousands of meshes per enumeration (the same products, left to right from 1).
    def degree(self, *axes: str) -> int:
        t = self._total
        d = 1
        for a in axes:
            d *= t.get(a, 1)
        return d

    def degrees(self, *groups: tuple[str, ...]) -> tuple[int, ...]:
        """`degree` of each group of axes, in one call."""
        t = self._total
        out = []
        for axes in groups:
            d = 1
            for a in axes:
                d *= t.get(a, 1)
            out.append(d)
        return tuple(out)

    def ici_degree(self, *axes: str) -> int:
        ici = self.ici
        d = 1
        for a in axes:
            d *= ici.get(a, 1)
        return d

    def dcn_degree(self, *axes: str) -> int:
        dcn = self.dcn
        d = 1
        for a in axes:
            d *= dcn.get(a, 1)
        return d

    def physical(self, *axes: str) -> list[tuple[int, int]]:
        """(physical axis, size) pairs the ICI part of these mesh axes occupies."""
        if self.placement is None or not self.placement.ok or not self.placement.assignment:
            return []
        assignment = self.placement.assignment
        out: list[tuple[int, int]] = []
        for a in axes:
            i = _INDEX[a]
            if i < len(assignment):
                out.extend(assignment[i])
        return out

    def links(self, *axes: str) -> tuple[int, int, tuple[tuple[int, int], ...]]:
        """The ICI degree, DCN degree and occupied physical axes (`physical`) of these mesh axes, in one pass: all
        that collectives.path reads of the layout besides its slice."""
        ici, dcn = self.ici, self.dcn
        i = d = 1
        for a in axes:
            i *= ici.get(a, 1)
            d *= dcn.get(a, 1)
        pl = self.placement
        used: tuple[tuple[int, int], ...] = ()
        if pl is not None and pl.ok and pl.assignment:
            assignment = pl.assignment
            for a in axes:
                k = _INDEX[a]
                if k < len(assignment):
                    used += assignment[k]
        return i, d, used

    def label(self) -> str:
        return mesh_label(self.ici, self.dcn, ici_prefix="ICI ")


def from_check(chk: MeshCheck) -> Layout | None:
    """The layout of a checked config, or None when its mesh is not consistent with the slice."""
    if chk.slice is None or not chk.consistent:
        return None
    return Layout(chk.slice, chk.degrees("ici"), chk.degrees("dcn"), chk.placement)


def build(sl: Slice, ici: dict[str, int], dcn: dict[str, int] | None = None, allow_split: bool = False) -> Layout:
    """A candidate layout; placement by JAX's rules (not ok when it cannot be placed)."""
    full_ici = {a.name: int(ici.get(a.name, 1)) for a in AXES}
    full_dcn = {a.name: int((dcn or {}).get(a.name, 1)) for a in AXES}
    shape = tuple(full_ici[a.name] for a in AXES)
    return Layout(sl, full_ici, full_dcn, place(sl, shape, allow_split))
