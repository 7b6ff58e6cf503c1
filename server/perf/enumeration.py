"""Mesh enumeration: every assignment of the slice's devices to the training parallelism axes
(ICI and DCN) that launches (the validation layers of DOMAIN.md §2) and shards the model evenly,
priced by the cost model and ranked by step time; those that do not fit in HBM are kept apart.

On ICI, without `allow_split_physical_axes`, a degree can only be a product of whole physical axes,
so only those are generated (JAX's placement then confirms each); with it, every divisor is.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from server.config.placement import Placement, jax_physical_shape, place
from server.config.resolve import Config
from server.config.slices import Slice
from server.perf.estimate import Estimate, Inputs, inputs, price, step_flops
from server.perf.layout import BATCH_SHARDING, Layout

# Axes a training mesh uses (inference-only and DiLoCo axes are left out).
ICI_AXES = ("data", "pipeline", "fsdp", "fsdp_transpose", "context", "tensor", "expert")
DCN_AXES = ("data", "pipeline", "fsdp")


@dataclass(frozen=True)
class Candidate:
    layout: Layout
    estimate: Estimate

    @property
    def step_s(self) -> float:
        return self.estimate.time.step_s

    @property
    def fits(self) -> bool:
        return self.estimate.memory.launches

    @property
    def needs_split(self) -> bool:
        """Placed only with `allow_split_physical_axes: true`: JAX cannot place this mesh on whole physical axes
        of the slice (always False in an enumeration without it)."""
        pl = self.layout.placement
        return pl is not None and pl.split


@dataclass
class Enumeration:
    ranked: list[Candidate]  # valid and fitting, fastest first
    too_big: list[Candidate]  # valid but over HBM
    generated: int  # assignments considered
    rejected: dict[str, int]  # why the others were dropped


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _placeable(sl: Slice, split: bool) -> list[int]:
    n = sl.devices_per_slice
    if split:
        return _divisors(n)
    phys = [p for p in jax_physical_shape(sl) if p > 1]
    sizes = {math.prod(c) for k in range(len(phys) + 1) for c in combinations(phys, k)}
    return sorted(x for x in sizes if n % x == 0)


def _factorizations(n: int, k: int, allowed: list[int]) -> Iterator[tuple[int, ...]]:
    """Ordered k-tuples of `allowed` values whose product is n."""
    if k == 1:
        if n in allowed:
            yield (n,)
        return
    for d in allowed:
        if n % d == 0:
            for rest in _factorizations(n // d, k - 1, allowed):
                yield (d, *rest)


_PLACED: dict[tuple[str, tuple[int, ...], tuple[int, ...], bool], Placement] = {}


def _place(sl: Slice, shape: tuple[int, ...], split: bool) -> Placement:
    key = (sl.chip.generation, sl.topology, shape, split)
    hit = _PLACED.get(key)
    if hit is None:
        hit = _PLACED[key] = place(sl, shape, split)
    return hit


def enumerate_meshes(inp: Inputs, sl: Slice, allow_split: bool = False) -> Enumeration:
    from server.config.axes import AXES

    s = inp.shape
    order = [a.name for a in AXES]
    rejected: dict[str, int] = {}
    ranked: list[Candidate] = []
    too_big: list[Candidate] = []
    generated = 0

    def reject(why: str) -> None:
        rejected[why] = rejected.get(why, 0) + 1

    flops = step_flops(inp, sl.devices)
    memo: dict[Any, Any] = {}
    ici_options = list(_factorizations(sl.devices_per_slice, len(ICI_AXES), _placeable(sl, allow_split)))
    dcn_options = list(_factorizations(sl.num_slices, len(DCN_AXES), _divisors(sl.num_slices)))
    for ici_t in ici_options:
        ici = dict(zip(ICI_AXES, ici_t, strict=True))
        if ici["expert"] > 1 and not s.moe:
            reject("expert parallelism without experts")
            continue
        shape = tuple(ici.get(a, 1) for a in order)
        pl = _place(sl, shape, allow_split)
        for dcn_t in dcn_options:
            generated += 1
            dcn = dict(zip(DCN_AXES, dcn_t, strict=True))
            total = {a: ici.get(a, 1) * dcn.get(a, 1) for a in order}
            if not pl.ok:
                reject("cannot be placed on whole physical axes")
                continue
            tp = total["tensor"]
            if s.q_heads % tp or s.kv_heads % tp:
                reject("heads not divisible by tensor parallelism")
                continue
            if s.moe and s.experts % total["expert"]:
                reject("experts not divisible by expert parallelism")
                continue
            if s.layers % total["pipeline"]:
                reject("layers not divisible by pipeline stages")
                continue
            if inp.seq % total["context"]:
                reject("sequence not divisible by context parallelism")
                continue
            shards = math.prod(total[a] for a in BATCH_SHARDING if a in total)
            global_batch = inp.pdbs * sl.devices
            if abs(global_batch - round(global_batch)) > 1e-9 or round(global_batch) % shards:
                reject("global batch not divisible by the batch shards")
                continue
            full_ici = {a: ici.get(a, 1) for a in order}
            full_dcn = {a: dcn.get(a, 1) for a in order}
            lay = Layout(sl, full_ici, full_dcn, pl)
            cand = Candidate(lay, price(inp, lay, flops, memo))
            (ranked if cand.fits else too_big).append(cand)
    ranked.sort(key=lambda c: c.step_s)
    too_big.sort(key=lambda c: c.estimate.memory.total)
    return Enumeration(ranked, too_big, generated, rejected)


@dataclass(frozen=True)
class Alternative:
    """One of the fastest valid meshes of a config's slice, priced against the config's own mesh
    (`asap estimate --top N`)."""

    rank: int  # 1 = fastest
    label: str  # Layout.label(): 'ICI fsdp=16 x tensor=16; DCN data=2'
    ici: dict[str, int]  # axes whose degree is not 1
    dcn: dict[str, int]
    mfu: float
    step_s: float
    bottleneck: str  # compute | hbm | communication
    hbm_bytes: float  # per device
    speedup: float  # the config's step time over this one's
    equivalent: tuple[str, ...] = ()  # labels of the meshes the cost model cannot tell from this one

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "label": self.label,
            "ici": self.ici,
            "dcn": self.dcn,
            "mfu": self.mfu,
            "step_s": self.step_s,
            "bottleneck": self.bottleneck,
            "hbm_bytes": self.hbm_bytes,
            "speedup": self.speedup,
            "equivalent": list(self.equivalent),
        }


def fold_fsdp(mesh: dict[str, int]) -> dict[str, int]:
    """A mesh with fsdp_transpose folded into fsdp (both shard a weight's embed dimension over the same devices),
    the axes that shard only."""
    out = {a: d for a, d in mesh.items() if a != "fsdp_transpose"}
    out["fsdp"] = out.get("fsdp", 1) * mesh.get("fsdp_transpose", 1)
    return {a: d for a, d in out.items() if d != 1}


def one_per_mesh(cands: list[Candidate], current: Layout | None) -> list[tuple[Candidate, list[Candidate]]]:
    """Candidates the cost model cannot tell apart as one row each: the same mesh once fsdp_transpose is folded
    into fsdp, priced at the same step time and memory (splits of one FSDP degree between the two axes, placed
    alike). Each group is kept at its best rank and written in the spelling of the `current` config: fsdp, unless
    it uses fsdp_transpose itself (then the split with the most of it); the others are its equivalents."""
    uses_transpose = current is not None and (
        current.ici.get("fsdp_transpose", 1) > 1 or current.dcn.get("fsdp_transpose", 1) > 1
    )
    groups: dict[tuple[Any, ...], list[Candidate]] = {}
    for c in cands:
        key = (
            tuple(sorted(fold_fsdp(c.layout.ici).items())),
            tuple(sorted(fold_fsdp(c.layout.dcn).items())),
            round(c.step_s, 12),
            round(c.estimate.memory.total),
        )
        groups.setdefault(key, []).append(c)
    out = []
    for members in groups.values():
        pick = (max if uses_transpose else min)(members, key=lambda c: c.layout.ici.get("fsdp_transpose", 1))
        out.append((pick, [c for c in members if c is not pick]))
    return out


def top_alternatives(cfg: Config, est: Estimate, n: int) -> list[Alternative]:
    """The `n` fastest meshes of `est`'s slice that launch and fit (`enumerate_meshes`, honouring the config's
    `allow_split_physical_axes`), fastest first, one row per mesh the cost model can tell apart (`one_per_mesh`),
    with their speedup over `est`. Raises EstimateError when the config's inputs cannot be read."""
    allow_split = bool(cfg.get("allow_split_physical_axes", False))
    en = enumerate_meshes(inputs(cfg), est.layout.slice, allow_split)
    rows = one_per_mesh(en.ranked, est.layout)
    return [
        Alternative(
            rank=i,
            label=c.layout.label(),
            ici={k: v for k, v in c.layout.ici.items() if v != 1},
            dcn={k: v for k, v in c.layout.dcn.items() if v != 1},
            mfu=c.estimate.mfu,
            step_s=c.estimate.time.step_s,
            bottleneck=c.estimate.time.bottleneck()[0],
            hbm_bytes=c.estimate.memory.total,
            speedup=est.time.step_s / c.estimate.time.step_s,
            equivalent=tuple(e.layout.label() for e in same),
        )
        for i, (c, same) in enumerate(rows[: max(0, n)], 1)
    ]
