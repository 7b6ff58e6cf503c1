"""The mesh enumeration's shortcuts (server/perf/enumeration.py) change its speed, never its answer: JAX's
placement ported to plain Python (server/config/placement.py; checked against JAX in test_placement_jax.py) and
candidates the cost model cannot tell apart priced once. Checked against a straightforward implementation that
places and prices every candidate on its own, and against counts recorded before the shortcuts existed."""

from __future__ import annotations

import math
import subprocess
import sys
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest

from server.config.axes import AXES
from server.config.placement import jax_physical_shape, place
from server.config.slices import Slice, parse_slice
from server.perf import enumeration
from server.perf.enumeration import DCN_AXES, ICI_AXES, Candidate, enumerate_meshes
from server.perf.estimate import Inputs, inputs, price, step_flops
from server.perf.layout import BATCH_SHARDING, Layout, build
from server.services.analysis import analyze

ROOT = Path(__file__).resolve().parent.parent


def _inputs(model: str, pdbs: int, seq: int) -> Inputs:
    text = f"model_name: {model}\nper_device_batch_size: {pdbs}\nmax_target_length: {seq}\n"
    return inputs(analyze(None, text).config)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _tuples(n: int, k: int, allowed: list[int]) -> list[tuple[int, ...]]:
    if k == 1:
        return [(n,)] if n in allowed else []
    return [(d, *rest) for d in allowed if n % d == 0 for rest in _tuples(n // d, k - 1, allowed)]


def _reference(inp: Inputs, sl: Slice, allow_split: bool) -> dict[str, Any]:
    """The enumeration as first written: every assignment placed and priced on its own, no cache."""
    s = inp.shape
    order = [a.name for a in AXES]
    n = sl.devices_per_slice
    rejected: dict[str, int] = {}
    ranked: list[Candidate] = []
    too_big: list[Candidate] = []
    generated = 0

    def reject(why: str) -> None:
        rejected[why] = rejected.get(why, 0) + 1

    flops = step_flops(inp, sl.devices)
    for ici_t in _tuples(n, len(ICI_AXES), _divisors(n)):
        ici = dict(zip(ICI_AXES, ici_t, strict=True))
        if not allow_split and not all(d in _whole_products(sl) for d in ici_t):
            continue  # the enumeration only generates products of whole physical axes then
        if ici["expert"] > 1 and not s.moe:
            reject("expert parallelism without experts")
            continue
        pl = place(sl, _shape(ici, order), allow_split)
        for dcn_t in _tuples(sl.num_slices, len(DCN_AXES), _divisors(sl.num_slices)):
            generated += 1
            dcn = dict(zip(DCN_AXES, dcn_t, strict=True))
            total = {a: ici.get(a, 1) * dcn.get(a, 1) for a in order}
            if s.q_heads % total["tensor"] or s.kv_heads % total["tensor"]:
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
            shards = math.prod(total[a] for a in BATCH_SHARDING)
            global_batch = inp.pdbs * sl.devices
            if abs(global_batch - round(global_batch)) > 1e-9 or round(global_batch) % shards:
                reject("global batch not divisible by the batch shards")
                continue
            if not pl.ok:  # the model's rules first, then JAX's placement
                reject("cannot be placed on whole physical axes")
                continue
            lay = Layout(sl, {a: ici.get(a, 1) for a in order}, {a: dcn.get(a, 1) for a in order}, pl)
            cand = Candidate(lay, price(inp, lay, flops))
            (ranked if cand.fits else too_big).append(cand)
    ranked.sort(key=lambda c: c.step_s)
    too_big.sort(key=lambda c: c.estimate.memory.total)
    return {"ranked": ranked, "too_big": too_big, "generated": generated, "rejected": rejected}


def _shape(ici: dict[str, int], order: list[str]) -> tuple[int, ...]:
    return tuple(ici.get(a, 1) for a in order)


def _whole_products(sl: Slice) -> set[int]:
    phys = [p for p in jax_physical_shape(sl) if p > 1]
    return {math.prod(c) for k in range(len(phys) + 1) for c in combinations(phys, k)}


def _rows(cands: list[Candidate]) -> list[Any]:
    return [(c.layout.label(), c.needs_split, c.fits, c.estimate.to_json()) for c in cands]


@pytest.mark.parametrize(
    ("model", "pdbs", "seq", "slice_name", "slices", "split"),
    [
        ("llama2-7b", 4, 4096, "v5e-256", 1, True),  # 2D torus, splits
        ("mixtral-8x7b", 2, 4096, "v5p-128", 2, True),  # MoE (expert axis), 3D torus, two slices
        ("llama3.1-70b", 4, 8192, "v5p-512", 1, False),  # whole axes only: some shapes cannot be placed
        ("llama2-7b", 3, 2048, "tpu7x-128", 1, False),  # two cores a chip: a fourth physical axis
    ],
)
def test_enumeration_equals_pricing_every_candidate_apart(
    model: str, pdbs: int, seq: int, slice_name: str, slices: int, split: bool
) -> None:
    inp = _inputs(model, pdbs, seq)
    sl = parse_slice(slice_name, slices)
    got = enumerate_meshes(inp, sl, split)
    want = _reference(inp, sl, split)
    assert got.generated == want["generated"]
    assert got.rejected == want["rejected"]
    assert len(got.ranked) == len(want["ranked"]) and len(got.too_big) == len(want["too_big"])
    assert _rows(got.ranked) == _rows(want["ranked"])
    assert _rows(got.too_big) == _rows(want["too_big"])


# Recorded with the enumeration before placement was ported and duplicates priced once (commit 7e83bab):
# considered, ranked, over HBM, why the others were dropped, the fastest mesh and its step time.
RECORDED = [
    (
        ("llama2-7b", 4, 4096, "v5e-256", 1, True),
        (1287, 1059, 186),
        {
            "expert parallelism without experts": 1716,
            "heads not divisible by tensor parallelism": 21,
            "layers not divisible by pipeline stages": 21,
        },
        ("ICI fsdp_transpose=256", 6.806556866652859),
    ),
    (
        ("llama3.1-405b", 1, 8192, "v6e-256", 2, True),
        (3861, 0, 1865),
        {
            "expert parallelism without experts": 1716,
            "heads not divisible by tensor parallelism": 378,
            "layers not divisible by pipeline stages": 1618,
        },
        None,
    ),
    (
        ("mixtral-8x7b", 4, 4096, "v6e-256", 1, True),
        (3003, 2087, 469),  # 2211 and 345 before issue 26's MoE working set (server/perf/memory.py)
        {
            "experts not divisible by expert parallelism": 209,
            "heads not divisible by tensor parallelism": 210,
            "layers not divisible by pipeline stages": 28,
        },
        ("ICI fsdp_transpose=256", 4.288889713677718),
    ),
    (
        ("llama3.1-70b", 4, 8192, "v5p-512", 1, False),
        (141, 92, 12),
        {
            "expert parallelism without experts": 90,
            "heads not divisible by tensor parallelism": 11,
            "cannot be placed on whole physical axes": 15,
            "layers not divisible by pipeline stages": 11,
        },
        ("ICI fsdp_transpose=256", 55.866019775589045),
    ),
    (
        ("llama2-7b", 3, 2048, "tpu7x-128", 1, False),
        (792, 323, 1),
        {
            "expert parallelism without experts": 924,
            "heads not divisible by tensor parallelism": 6,
            "cannot be placed on whole physical axes": 456,
            "layers not divisible by pipeline stages": 6,
        },
        ("ICI fsdp_transpose=128", 0.4932488559816511),
    ),
]


@pytest.mark.parametrize(("case", "counts", "rejected", "best"), RECORDED)
def test_enumeration_counts_as_recorded_before_the_shortcuts(
    case: tuple[Any, ...], counts: tuple[int, int, int], rejected: dict[str, int], best: tuple[str, float] | None
) -> None:
    model, pdbs, seq, slice_name, slices, split = case
    e = enumerate_meshes(_inputs(model, pdbs, seq), parse_slice(slice_name, slices), split)
    assert (e.generated, len(e.ranked), len(e.too_big)) == counts
    assert e.rejected == rejected
    if best is None:
        assert not e.ranked
    else:
        assert (e.ranked[0].layout.label(), e.ranked[0].step_s) == best


def test_enumeration_does_not_import_jax() -> None:
    """Importing JAX costs about a second and its objects slow every later garbage collection: the enumeration
    (placement included) runs without it."""
    code = (
        "import sys\n"
        "from server.config.slices import parse_slice\n"
        "from server.perf.enumeration import enumerate_meshes\n"
        "from server.perf.estimate import inputs\n"
        "from server.services.analysis import analyze\n"
        "cfg = analyze(None, 'model_name: llama2-7b\\nper_device_batch_size: 4\\n').config\n"
        "e = enumerate_meshes(inputs(cfg), parse_slice('v5p-512'), True)\n"
        "assert e.ranked and any(c.needs_split for c in e.ranked)\n"
        "print(sorted(m for m in sys.modules if m == 'jax' or m.startswith('jax.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


# -- the pricing memo (server/perf/estimate.py price, steptime.py step_time): an enumeration prices every mesh of a
# slice with one memo, which keeps what depends on part of a mesh (memory per the degrees it reads, each axis group's
# path per its links, collectives per path numbers and degrees, the work per tensor/expert/weight-sharding degrees).
# A memo entry must never serve a mesh that differs in anything its key leaves out.

_GROUPS = (("fsdp", "fsdp_transpose"), ("tensor",), ("context",), ("expert",), ("data",), ("pipeline",))


def _json(est: Any) -> str:
    import json

    return json.dumps(est.to_json(), sort_keys=True)


def _alone(inp: Inputs, lays: list[Layout]) -> list[str]:
    flops = step_flops(inp, lays[0].slice.devices)
    return [_json(price(inp, lay, flops)) for lay in lays]


def _shared(inp: Inputs, lays: list[Layout]) -> list[str]:
    flops = step_flops(inp, lays[0].slice.devices)
    memo: dict[Any, Any] = {}
    return [_json(price(inp, lay, flops, memo)) for lay in lays]


def _candidates(model: str, pdbs: int, seq: int, slice_name: str, slices: int) -> tuple[Inputs, list[Layout]]:
    inp = _inputs(model, pdbs, seq)
    e = enumerate_meshes(inp, parse_slice(slice_name, slices), True)
    return inp, [c.layout for c in e.ranked + e.too_big]


def _first_pair(lays: list[Layout], same: Any, differ: Any) -> tuple[Layout, Layout]:
    seen: dict[Any, Layout] = {}
    for lay in lays:
        k = same(lay)
        if k in seen and differ(seen[k]) != differ(lay):
            return seen[k], lay
        seen.setdefault(k, lay)
    raise AssertionError("no such pair")


def _degrees(lay: Layout) -> tuple[int, ...]:
    return lay.degrees(*_GROUPS)


def _links(lay: Layout) -> tuple[Any, ...]:
    return tuple(lay.links(*g) for g in _GROUPS)


@pytest.mark.parametrize(
    ("case", "same", "differ"),
    [
        # the same degrees on other physical axes: a group's path (and its name in the plan's links) per its links
        (("mixtral-8x7b", 4, 4096, "v6e-64", 1), _degrees, _links),
        (("llama2-7b", 4, 4096, "v5p-64", 1), _degrees, _links),
        # the same fsdp group (degrees and physical axes) with another tensor degree: the collectives over fsdp per
        # the degrees they read besides the path
        (("llama2-7b", 4, 4096, "v5e-32", 2), lambda lay: lay.links("fsdp", "fsdp_transpose"), _degrees),
        (("mixtral-8x7b", 4, 4096, "v6e-64", 1), lambda lay: lay.links("fsdp", "fsdp_transpose"), _degrees),
        # the same group degrees split otherwise between ICI and DCN
        (("llama2-7b", 4, 4096, "v5e-32", 2), _degrees, lambda lay: tuple(lay.dcn.values())),
        # the same tensor and expert degrees with another weight-sharding degree: the scanned state's traffic
        (("mixtral-8x7b", 4, 4096, "v6e-64", 1), lambda lay: lay.degrees(("tensor",), ("expert",)), _degrees),
    ],
)
def test_price_memo_never_serves_another_mesh(case: tuple[Any, ...], same: Any, differ: Any) -> None:
    inp, lays = _candidates(*case)
    a, b = _first_pair(lays, same, differ)
    alone = _alone(inp, [a, b])
    assert alone[0] != alone[1]  # the pair is priced apart
    assert _shared(inp, [a, b]) == alone
    assert _shared(inp, [b, a]) == alone[::-1]


@pytest.mark.parametrize(
    ("model", "pdbs", "seq", "slice_name", "slices", "extra"),
    [
        ("mixtral-8x7b", 4, 4096, "v6e-64", 1, ""),  # dropless MoE: fsdp+expert, expert and fsdp groups
        ("mixtral-8x7b", 2, 4096, "v5p-64", 2, "sparse_matmul: false\ncapacity_factor: 1.25\n"),  # over the expert axis
        ("llama2-7b", 4, 4096, "v5e-32", 2, "remat_policy: minimal_offloaded\ngradient_accumulation_steps: 2\n"),
    ],
)
def test_price_memo_in_any_order_equals_pricing_alone(
    model: str, pdbs: int, seq: int, slice_name: str, slices: int, extra: str
) -> None:
    """Every candidate of an enumeration priced with one memo, in reverse order and every other one first, as each is
    priced alone (memo=None): whichever mesh fills an entry first, the others get what is theirs."""
    text = f"model_name: {model}\nper_device_batch_size: {pdbs}\nmax_target_length: {seq}\n{extra}"
    inp = inputs(analyze(None, text).config)
    e = enumerate_meshes(inp, parse_slice(slice_name, slices), True)
    lays = [c.layout for c in e.ranked + e.too_big]
    alone = _alone(inp, lays)
    rev = lays[::-1]
    assert _shared(inp, rev) == alone[::-1]
    mixed = lays[1::2] + lays[::2]
    assert _shared(inp, mixed) == [alone[i] for i in [*range(1, len(lays), 2), *range(0, len(lays), 2)]]


def test_a_duplicate_estimate_is_its_twin_with_its_own_layout() -> None:
    """Estimate.on (the enumeration's copy for a mesh it cannot tell from one priced) is dataclasses.replace."""
    import dataclasses

    inp, lays = _candidates("llama2-7b", 4, 4096, "v5e-32", 1)
    est = price(inp, lays[0])
    assert est.on(lays[1]) == dataclasses.replace(est, layout=lays[1])


def test_price_memo_keeps_memory_apart_by_the_data_degree() -> None:
    """Two meshes alike in every degree memory reads but `data` (context_autoregressive, which no training degree
    counts, takes data's place): the logits' gradient outlives the loss only without data parallelism, so their
    memory differs and the memo keeps them apart (no enumeration has such a pair: there the data degree follows from
    the weight-sharding one)."""
    inp = _inputs("llama2-7b", 4, 4096)
    sl = parse_slice("v5e-16")
    a = build(sl, {"fsdp": 8, "data": 2})
    b = build(sl, {"fsdp": 8, "context_autoregressive": 2})
    alone = [price(inp, a).memory, price(inp, b).memory]
    assert alone[0].total != alone[1].total
    flops = step_flops(inp, sl.devices)
    memo: dict[Any, Any] = {}
    assert [price(inp, lay, flops, memo).memory for lay in (a, b)] == alone


def test_placement_caches_stay_within_their_bound_across_many_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 25: the placements cached across calls were kept for every slice analysed since the process started (the
    whole catalog: 1.75 GB in a long-lived editor session). Past MAX_PLACED shapes the caches are emptied before the
    next enumeration; an enumeration after that gives what it gave with them warm."""
    monkeypatch.setattr(enumeration, "MAX_PLACED", 2000)
    inp = _inputs("llama2-7b", 1, 2048)
    slices = ["v5e-256", "v5p-128", "v4-256", "v6e-256", "tpu7x-128", "v5e-128", "v5p-256"]
    warm = {}
    for name in slices:
        before = len(enumeration._PLACED)
        e = enumerate_meshes(inp, parse_slice(name), True)
        warm[name] = [(c.layout.label(), c.step_s) for c in e.ranked]
        added = len(enumeration._PLACED) - (before if before <= enumeration.MAX_PLACED else 0)
        assert len(enumeration._PLACED) <= enumeration.MAX_PLACED + added  # at most one slice past the bound
        assert 0 < added < enumeration.MAX_PLACED
    enumeration.clear_caches()
    for name in slices:
        cold = enumerate_meshes(inp, parse_slice(name), True)
        assert [(c.layout.label(), c.step_s) for c in cold.ranked] == warm[name]
