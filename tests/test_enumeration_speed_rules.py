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
from server.perf.enumeration import DCN_AXES, ICI_AXES, Candidate, enumerate_meshes
from server.perf.estimate import Inputs, inputs, price, step_flops
from server.perf.layout import BATCH_SHARDING, Layout
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
            if not pl.ok:
                reject("cannot be placed on whole physical axes")
                continue
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
        (3003, 2211, 345),
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
