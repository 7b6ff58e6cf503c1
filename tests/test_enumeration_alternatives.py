"""`asap estimate --top N`'s alternatives (server/perf/enumeration.py top_alternatives): the N fastest valid meshes
of the slice, ranked and priced against the config's own mesh."""

from __future__ import annotations

from pathlib import Path

import pytest

from server.config.axes import mesh_label
from server.config.mesh import check
from server.config.resolve import Config, load, with_overrides
from server.perf.enumeration import enumerate_meshes, top_alternatives
from server.perf.estimate import Estimate, Inputs, estimate, inputs

ROOT = Path(__file__).resolve().parent.parent


def _estimate(name: str, **mesh: int) -> tuple[Config, Estimate]:
    path = ROOT / "examples" / name
    cfg = load(path, path.read_text())
    if mesh:
        cfg = with_overrides(cfg, mesh)
    return cfg, estimate(cfg, check(cfg))


def test_top_alternatives_are_ranked_priced_and_sorted() -> None:
    cfg, est = _estimate("llama2-7b-v5e-256.yml", ici_fsdp_parallelism=16, ici_tensor_parallelism=16)
    rows = top_alternatives(cfg, est, 5)
    assert [r.rank for r in rows] == [1, 2, 3, 4, 5]
    steps = [r.step_s for r in rows]
    assert steps == sorted(steps)
    for r in rows:
        assert r.speedup == pytest.approx(est.time.step_s / r.step_s)
        assert all(v != 1 for v in [*r.ici.values(), *r.dcn.values()])  # only the axes that shard
        assert r.label == mesh_label(r.ici, r.dcn, ici_prefix="ICI ")
        assert r.bottleneck in ("compute", "hbm", "communication") and 0 < r.mfu < 1 and r.hbm_bytes > 0
    assert rows[0].speedup > 1  # 16-way tensor parallelism is not the fastest mesh of the slice
    # the mesh enumeration's candidates in its order, one row per mesh the cost model can tell apart
    ranked = enumerate_meshes(inputs(cfg), est.layout.slice).ranked
    labels = [c.layout.label() for c in ranked]
    assert [labels.index(r.label) for r in rows] == sorted(labels.index(r.label) for r in rows)
    assert {r.label for r in rows}.isdisjoint({e for r in rows for e in r.equivalent})


def test_fsdp_and_fsdp_transpose_splits_are_one_row_in_the_configs_spelling() -> None:
    """fsdp=256, fsdp_transpose=256 and fsdp=16 x fsdp_transpose=16 are priced the same: one row, written as the
    config writes FSDP, with the others listed as equivalent (issue 16: 'one row per mesh')."""
    cfg, est = _estimate("llama2-7b-v5e-256.yml")  # fsdp over the slice, no fsdp_transpose
    rows = top_alternatives(cfg, est, 8)
    first = rows[0]
    assert first.ici == {"fsdp": 256}
    assert set(first.equivalent) == {"ICI fsdp_transpose=256", "ICI fsdp=16 x fsdp_transpose=16"}
    for r in rows:  # no row repeats another's mesh with FSDP split differently
        folded = {a: d for a, d in r.ici.items() if a != "fsdp_transpose"}
        assert "fsdp_transpose" not in r.ici, r.label  # the config does not use fsdp_transpose
        assert folded == r.ici
    meshes = [tuple(sorted(r.ici.items())) for r in rows]
    assert len(meshes) == len(set(meshes))
    # a config that uses fsdp_transpose gets its spelling
    tcfg, test = _estimate("llama2-7b-v5e-256.yml", ici_fsdp_parallelism=1, ici_fsdp_transpose_parallelism=256)
    assert top_alternatives(tcfg, test, 1)[0].ici == {"fsdp_transpose": 256}


def test_top_alternatives_json_rows_and_limits() -> None:
    cfg, est = _estimate("llama3-8b-v6e-16.yml")
    rows = top_alternatives(cfg, est, 2)
    assert list(rows[0].to_json()) == [
        "rank",
        "label",
        "ici",
        "dcn",
        "mfu",
        "step_s",
        "bottleneck",
        "hbm_bytes",
        "speedup",
        "equivalent",
    ]
    assert top_alternatives(cfg, est, 0) == []
    everything = top_alternatives(cfg, est, 10_000)
    ranked = enumerate_meshes(inputs(cfg), est.layout.slice).ranked
    assert len(everything) + sum(len(r.equivalent) for r in everything) == len(ranked)  # every candidate, once


def _model_inputs(model: str, pdbs: int, seq: int) -> Inputs:
    from server.services.analysis import analyze

    text = f"model_name: {model}\nper_device_batch_size: {pdbs}\nmax_target_length: {seq}\n"
    return inputs(analyze(None, text).config)


def test_split_only_meshes_are_marked_needs_split() -> None:
    """With allow_split the enumeration holds both the meshes placed on whole physical axes and those JAX places
    only by splitting one (needs_split); without it, only the former."""
    from server.config.slices import parse_slice

    inp = _model_inputs("llama2-7b", 4, 4096)
    sl = parse_slice("v6e-256")  # 16x16
    split = enumerate_meshes(inp, sl, allow_split=True)
    by_label = {c.layout.label(): c for c in [*split.ranked, *split.too_big]}
    assert by_label["ICI fsdp=64 x tensor=4"].needs_split
    assert not by_label["ICI fsdp=16 x tensor=16"].needs_split
    assert not by_label["ICI fsdp=256"].needs_split
    whole = enumerate_meshes(inp, sl)
    whole_labels = {c.layout.label() for c in [*whole.ranked, *whole.too_big]}
    assert not any(c.needs_split for c in [*whole.ranked, *whole.too_big])
    assert "ICI fsdp=64 x tensor=4" not in whole_labels
    assert whole_labels == {label for label, c in by_label.items() if not c.needs_split}
