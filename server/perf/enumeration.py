"""Mesh enumeration: every assignment of the slice's devices to the training parallelism axes
(ICI and DCN) that launches (the validation layers of DOMAIN.md §2) and shards the model evenly,
priced by the cost model and ranked by step time; those that do not fit in HBM are kept apart.

On ICI, without `allow_split_physical_axes`, a degree can only be a product of whole physical axes,
so only those are generated (JAX's placement, server/config/placement.py, then confirms each); with it,
every divisor is, and a candidate says whether it needs the split (`Candidate.needs_split`).
Placements are cached per slice and shape across calls (up to MAX_PLACED shapes); candidates the cost model
cannot tell apart (`_cost_key`) are priced once per call, and the others share one pricing memo
(server/perf/estimate.py `price`: what depends on only part of a mesh is computed once per value of that part).
The garbage collector is paused during a call.
"""

from __future__ import annotations

import gc
import math
from dataclasses import dataclass
from itertools import combinations
from operator import itemgetter
from typing import Any

from server.config.axes import AXES
from server.config.placement import Placement, clear_memo, jax_physical_shape, place
from server.config.resolve import Config
from server.config.slices import Slice
from server.perf.estimate import Estimate, Inputs, inputs, price, step_flops
from server.perf.layout import BATCH_SHARDING, Layout

# Axes a training mesh uses (inference-only and DiLoCo axes are left out).
ICI_AXES = ("data", "pipeline", "fsdp", "fsdp_transpose", "context", "tensor", "expert")
DCN_AXES = ("data", "pipeline", "fsdp")
_ORDER = tuple(a.name for a in AXES)  # mesh_axes order: a layout's degrees and the placement's shape
_POS = {a: i for i, a in enumerate(_ORDER)}
_NO_DCN = dict.fromkeys(_ORDER, 1)
_EXPERT = ICI_AXES.index("expert")
# For each axis in _ORDER, its index in an ICI assignment (ICI_AXES order), or len(ICI_AXES): a 1 appended to it.
_SHAPE_FROM_ICI = tuple(ICI_AXES.index(a) if a in ICI_AXES else len(ICI_AXES) for a in _ORDER)
_BATCH_POS = tuple(_POS[a] for a in BATCH_SHARDING)
# each training axis' position in _ORDER (a mesh shape, a placement's assignment, a candidate's total degrees)
_AT_DATA, _AT_PIPELINE, _AT_FSDP, _AT_FSDP_T, _AT_CONTEXT, _AT_TENSOR, _AT_EXPERT = (_POS[a] for a in ICI_AXES)


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


def _factorizations(
    n: int, k: int, allowed: tuple[int, ...], memo: dict[tuple[int, int], list[tuple[int, ...]]] | None = None
) -> list[tuple[int, ...]]:
    """Ordered k-tuples of `allowed` values whose product is n, in lexicographic order (each (n, k) worked out once:
    `memo`)."""
    memo = {} if memo is None else memo
    hit = memo.get((n, k))
    if hit is None:
        if k == 1:
            hit = [(n,)] if n in allowed else []
        else:
            hit = [(d, *rest) for d in allowed if n % d == 0 for rest in _factorizations(n // d, k - 1, allowed, memo)]
        memo[n, k] = hit
    return hit


_ICI_OPTIONS: dict[tuple[int, tuple[int, ...], bool], list[tuple[tuple[int, ...], tuple[int, ...]]]] = {}


def _ici_options(sl: Slice, split: bool) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """The ICI assignments to generate (ICI_AXES order), each with its mesh shape (_ORDER, 1 on the other axes)."""
    key = (sl.devices_per_slice, jax_physical_shape(sl), split)
    hit = _ICI_OPTIONS.get(key)
    if hit is None:
        options = _factorizations(sl.devices_per_slice, len(ICI_AXES), tuple(_placeable(sl, split)))
        hit = _ICI_OPTIONS[key] = [(t, tuple(map((*t, 1).__getitem__, _SHAPE_FROM_ICI))) for t in options]
    return hit


_PLACED: dict[tuple[str, tuple[int, ...], tuple[int, ...], bool], Placement] = {}
# The caches above and placement.py's memos hold what was computed for every slice analysed since the process
# started: a long-lived editor session that went through many slices kept them all (every slice of the catalog
# enumerated once: 462,000 placed shapes, 1.75 GB resident). Past MAX_PLACED shapes they are emptied before the
# next enumeration, which fills them again for its slice (cold: tpu7x-9216 1.1 s instead of 0.6, v5e-256 56 ms
# instead of 32); the whole catalog then ends at 350 MB, in the same time. A v5e-256 places 1,245 shapes, a
# tpu7x-9216 about 16,000.
MAX_PLACED = 50_000


def _place(sl: Slice, shape: tuple[int, ...], split: bool) -> Placement:
    key = (sl.chip.generation, sl.topology, shape, split)
    hit = _PLACED.get(key)
    if hit is None:
        hit = _PLACED[key] = place(sl, shape, split)
    return hit


def clear_caches() -> None:
    """Forget every placement and list of ICI shapes computed so far (a benchmark's cold first run)."""
    _PLACED.clear()
    _ICI_OPTIONS.clear()
    clear_memo()


def _cost_key(ici_t: tuple[int, ...], dcn_t: tuple[int, ...], pl: Placement) -> tuple[Any, ...]:
    """What the cost model reads of a candidate's layout (server/perf/memory.py, steptime.py, collectives.py): the
    ICI and DCN degree of each axis group (layout.FSDP, TENSOR, ...) and the physical axes each group's ICI part
    occupies, in order. fsdp and fsdp_transpose only ever appear together (layout.FSDP, WEIGHT_SHARDING,
    EMBED_VOCAB, BATCH_SHARDING), so a split of one FSDP degree between them placed on the same physical axes is
    priced alike. tests/test_enumeration_speed_rules.py prices every candidate apart and compares."""
    data, pipeline, fsdp, fsdp_t, context, tensor, expert = ici_t
    a = pl.assignment
    physical: tuple[Any, ...] = ()
    if a:
        physical = (
            a[_AT_DATA],
            a[_AT_PIPELINE],
            a[_AT_FSDP] + a[_AT_FSDP_T],
            a[_AT_CONTEXT],
            a[_AT_TENSOR],
            a[_AT_EXPERT],
        )
    return (data, pipeline, fsdp * fsdp_t, context, tensor, expert, dcn_t, physical)


def enumerate_meshes(inp: Inputs, sl: Slice, allow_split: bool = False) -> Enumeration:
    # Thousands of small objects per call, most of them kept: the cyclic garbage collector would traverse the
    # process' objects several times over while they are made (a fifth of the time), and none of them is garbage yet.
    if len(_PLACED) > MAX_PLACED:
        clear_caches()
    was = gc.isenabled()
    gc.disable()
    try:
        return _enumerate(inp, sl, allow_split)
    finally:
        if was:
            gc.enable()


def _enumerate(inp: Inputs, sl: Slice, allow_split: bool) -> Enumeration:
    s = inp.shape
    rejected: dict[str, int] = {}
    generated = 0

    def reject(why: str, times: int = 1) -> None:
        rejected[why] = rejected.get(why, 0) + times

    flops = step_flops(inp, sl.devices)
    memo: dict[Any, Any] = {}
    # Candidates the cost model cannot tell apart (_cost_key) are priced once: the others get a copy of that
    # estimate with their own layout (its memory and step time objects are shared, not copied). With the estimate:
    # whether it launches, its step time and its HBM per device (the sort keys).
    priced: dict[tuple[Any, ...], tuple[Estimate, bool, float, float]] = {}
    fitting: list[tuple[float, Candidate]] = []
    over: list[tuple[float, Candidate]] = []
    ici_options = _ici_options(sl, allow_split)
    dcn_options = _factorizations(sl.num_slices, len(DCN_AXES), tuple(_divisors(sl.num_slices)))
    # per DCN assignment: the layout's DCN degrees and the total degree (ICI x DCN) factor of each axis, in _ORDER
    # (None: all 1)
    dcn_dicts = []
    dcn_factors: list[tuple[int, ...] | None] = []
    for dcn_t in dcn_options:
        full_dcn = dict(_NO_DCN)
        full_dcn.update(zip(DCN_AXES, dcn_t, strict=True))
        dcn_dicts.append(full_dcn)
        per_axis = tuple(full_dcn[a] for a in _ORDER)
        dcn_factors.append(None if all(f == 1 for f in per_axis) else per_axis)
    global_batch = inp.pdbs * sl.devices
    whole_batch = abs(global_batch - round(global_batch)) <= 1e-9
    batch = round(global_batch)
    moe, q_heads, kv_heads, experts, layers, seq = s.moe, s.q_heads, s.kv_heads, s.experts, s.layers, inp.seq
    for ici_t, shape in ici_options:
        if ici_t[_EXPERT] > 1 and not moe:
            reject("expert parallelism without experts")
            continue
        # placed only once an assignment passes the model's divisibility rules (JAX's placement is the costly
        # check; an assignment that fails both is counted under the model's rule)
        pl: Placement | None = None
        for dcn_t, full_dcn, factors in zip(dcn_options, dcn_dicts, dcn_factors, strict=True):
            generated += 1
            total = shape if factors is None else [d * f for d, f in zip(shape, factors, strict=True)]
            tp = total[_AT_TENSOR]
            if q_heads % tp or kv_heads % tp:
                reject("heads not divisible by tensor parallelism")
                continue
            if moe and experts % total[_AT_EXPERT]:
                reject("experts not divisible by expert parallelism")
                continue
            if layers % total[_AT_PIPELINE]:
                reject("layers not divisible by pipeline stages")
                continue
            if seq % total[_AT_CONTEXT]:
                reject("sequence not divisible by context parallelism")
                continue
            shards = 1
            for i in _BATCH_POS:
                shards *= total[i]
            if not whole_batch or batch % shards:
                reject("global batch not divisible by the batch shards")
                continue
            if pl is None:
                pl = _place(sl, shape, allow_split)
            if not pl.ok:
                reject("cannot be placed on whole physical axes")
                continue
            lay = Layout(sl, dict(zip(_ORDER, shape, strict=True)), dict(full_dcn), pl)
            key = _cost_key(ici_t, dcn_t, pl)
            hit = priced.get(key)
            if hit is None:
                est = price(inp, lay, flops, memo)
                hit = priced[key] = (est, est.memory.launches, est.time.step_s, est.memory.total)
            else:
                est = hit[0].on(lay)
            if hit[1]:
                fitting.append((hit[2], Candidate(lay, est)))
            else:
                over.append((hit[3], Candidate(lay, est)))
    # stable sorts, on the keys alone: ties keep the order generated
    fitting.sort(key=itemgetter(0))
    over.sort(key=itemgetter(0))
    ranked = [c for _, c in fitting]
    too_big = [c for _, c in over]
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
