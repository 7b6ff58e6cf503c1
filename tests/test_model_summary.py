"""Every MaxText model through the user's paths: `asap models`, the hover on model_name, and one model of
each decoder block through check, estimate and analyze (issue 14)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from server.cli.main import main
from server.common.findings import Severity
from server.config import models
from server.perf import model_summary
from server.presentation.explain import hover
from server.services.analysis import analyze

# one model file of each decoder block MaxText ships (the catalog's commit)
ONE_PER_BLOCK = sorted(
    {str(m.keys.get("decoder_block", "llama2")): n for n, m in models.catalog().models.items()}.items()
)


def test_catalog_models_all_priced_active_never_above_total(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc) == len(models.catalog_names()) == 78
    for m in doc:
        assert 0 < m["active_params"] <= m["params"], m["name"]
        assert m["source"].endswith("@" + models.catalog().commit[:9]), m["name"]
        assert sum(g["layers"] for g in m["groups"]) == m["layers"]
    by = {m["name"]: m for m in doc}
    # MaxText's Gemma 2 layer is a local and a global layer: 21 MaxText layers are 42
    assert (by["gemma2-9b"]["maxtext_layers"], by["gemma2-9b"]["layers"]) == (21, 42)
    assert by["deepseek3-671b"]["moe"] and not by["llama3.1-8b"]["moe"]


def test_models_table_and_one_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "qwen3"]) == 0
    out = capsys.readouterr().out
    assert "qwen3-235b-a22b" in out and "llama" not in out and "models; MaxText model files at" in out
    assert main(["models", "deepseek3-671b"]) == 0
    one = capsys.readouterr().out
    assert "3 × mla/dense" in one and "58 × mla/moe256top8+1shared" in one and "**" not in one


def test_models_of_a_config_follow_its_overrides(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "c.yml"
    p.write_text(
        "model_name: custom-net\nbase_emb_dim: 1024\nbase_num_query_heads: 8\nbase_num_kv_heads: 8\n"
        "base_mlp_dim: 4096\nbase_num_decoder_layers: 6\nhead_dim: 128\nvocab_size: 32000\n"
    )
    assert main(["models", "--config", str(p), "--json"]) == 0
    (m,) = json.loads(capsys.readouterr().out)
    d, f, layers, v = 1024, 4096, 6, 32000
    per_layer = 4 * d * d + 3 * d * f + 2 * d  # q, k, v, o; gated MLP; two norm scales
    assert m["params"] == layers * per_layer + 2 * v * d + d  # untied embedding and logits, final norm
    assert m["origin"] == "explicit"


def test_hover_on_model_name_shows_structure_and_source(tmp_path: Path) -> None:
    p = tmp_path / "c.yml"
    text = "compile_topology: v5p-128\nmodel_name: mixtral-8x7b\n"
    p.write_text(text)
    an = analyze(p, text)
    md, _ = hover(an, 1, 13) or ("", None)
    assert "mixtral-8x7b" in md and "46.7B parameters" in md and "12.9B active" in md
    assert "32 × global/moe8top2" in md and "models/mixtral-8x7b.yml@" in md


@pytest.mark.parametrize(("block", "name"), ONE_PER_BLOCK)
def test_every_decoder_block_is_checked_and_estimated(block: str, name: str, tmp_path: Path) -> None:
    p = tmp_path / "c.yml"
    text = f"compile_topology: v5p-512\nmodel_name: {name}\nper_device_batch_size: 1\nmax_target_length: 4096\n"
    p.write_text(text)
    an = analyze(p, text)
    errors = [f for f in an.findings if f.severity == Severity.ERROR]
    assert not errors, errors
    assert an.estimate is not None, (block, name)
    e = an.estimate
    assert e.params.total(e.shape.layers) == pytest.approx(model_summary.of_config(an.config).total)
    assert 0 < e.mfu < 1 and e.time.step_s > 0 and e.memory.total > 0


@pytest.mark.parametrize("name", ["deepseek3-671b", "qwen3-next-80b-a3b", "gemma3-27b"])
def test_analyze_runs_on_the_newer_blocks(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "c.yml"
    p.write_text(f"compile_topology: v5p-1024\nmodel_name: {name}\nper_device_batch_size: 1\n")
    assert main(["analyze", str(p), "--json"]) in (0, 1)
    doc = json.loads(capsys.readouterr().out)
    assert doc["estimate"]["params"] > 0


@pytest.mark.parametrize(("block", "name"), ONE_PER_BLOCK)
def test_the_estimate_counts_flops_as_maxtext_does(block: str, name: str, tmp_path: Path) -> None:
    """MFU's numerator is MaxText's own training TFLOPs of the config (per device, times the devices), and the
    chips execute at least that much (remat recomputes; kernels compute whole blocks)."""
    from server.perf.maxtext_flops import training_tflops_per_device

    text = f"compile_topology: v5p-512\nmodel_name: {name}\nper_device_batch_size: 2\nmax_target_length: 4096\n"
    an = analyze(None, text)
    assert an.estimate is not None
    mt = training_tflops_per_device(an.config.get)
    devices = an.estimate.layout.slice.devices
    assert an.estimate.model_flops_per_step == pytest.approx(mt.total * 1e12 * devices, rel=1e-9)
    if block not in ("deepseek", "deepseek4", "qwen3_next", "qwen3_5"):  # their MFU count credits less than runs
        assert an.estimate.flops.executed >= an.estimate.flops.model


MOE_MODELS = ["mixtral-8x7b", "qwen3-30b-a3b", "deepseek2-16b", "gpt-oss-20b", "llama4-17b-16e"]


@pytest.mark.parametrize("name", MOE_MODELS)
@pytest.mark.parametrize("expert", [2, 4, 8])
def test_expert_parallelism_never_raises_expert_weight_memory(name: str, expert: int) -> None:
    """Trading fsdp for expert parallelism on the same slice never raises the weights a chip holds, and
    splitting experts further never raises the routed-expert bytes a device gathers per layer."""
    from server.config.slices import parse_slice
    from server.perf import layout as layout_mod
    from server.perf.estimate import inputs, price

    inp = inputs(analyze(None, f"model_name: {name}\nper_device_batch_size: 1\n").config)
    sl = parse_slice("v5p-128")
    base = price(inp, layout_mod.Layout(sl, {"fsdp": 64}, {}, None))
    ep = price(inp, layout_mod.Layout(sl, {"fsdp": 64 // expert, "expert": expert}, {}, None))
    assert ep.memory.components["weights"] <= base.memory.components["weights"] * (1 + 1e-9)
    more = price(inp, layout_mod.Layout(sl, {"fsdp": 64 // expert // 2, "expert": expert * 2}, {}, None))
    gathered = [e.time.comm.seconds("fsdp") for e in (ep, more)]
    assert gathered[1] <= gathered[0] * (1 + 1e-9)


def test_more_experts_never_lower_the_total() -> None:
    base = "base_emb_dim: 512\nbase_num_query_heads: 8\nbase_num_kv_heads: 8\nbase_mlp_dim: 1024\n"
    base += "base_num_decoder_layers: 4\nhead_dim: 64\ndecoder_block: mixtral\nnum_experts_per_tok: 2\n"
    base += "base_moe_mlp_dim: 1024\n"
    totals = [
        model_summary.of_config(analyze(None, f"model_name: tiny-moe\n{base}num_experts: {e}\n").config)
        for e in (2, 4, 8, 16)
    ]
    assert [t.total for t in totals] == sorted(t.total for t in totals)
    # top-2 of any number of experts: the active count grows by the router alone (emb x experts a layer)
    assert [t.active - totals[0].active for t in totals] == [4 * 512 * (e - 2) for e in (2, 4, 8, 16)]


def test_int8_speeds_the_projections_not_the_grouped_expert_matmuls() -> None:
    """MaxText's int8 quantizes the weight einsums; the routed experts' grouped matmuls (the dropless path) stay
    bf16 (server/perf/quantization.py), so on v6e their time does not halve while the projections' does."""
    base = "compile_topology: v6e-256\nmodel_name: qwen3-30b-a3b\n"

    def seconds(extra: str) -> dict[str, float]:
        an = analyze(None, base + extra)
        assert an.estimate is not None
        return {p.name: p.seconds for p in an.estimate.time.points}

    bf16, int8 = seconds("per_device_batch_size: 2\n"), seconds("per_device_batch_size: 2\nquantization: int8\n")
    assert int8["qkv"] < 0.6 * bf16["qkv"]
    assert int8["mlpwo"] > 0.9 * bf16["mlpwo"]  # nearly all of it is routed experts
    # the dense path's capacity-padded einsums are quantized (enough tokens that they are compute-bound)
    dense = "sparse_matmul: false\ncapacity_factor: 1.0\nper_device_batch_size: 32\n"
    dense_int8, dense_bf16 = seconds("quantization: int8\n" + dense), seconds(dense)
    assert dense_int8["mlpwo"] < 0.6 * dense_bf16["mlpwo"]


def test_learned_routing_costs_the_busiest_expert_shard_only_with_expert_parallelism() -> None:
    from server.perf.arith import MOE_LOAD_IMBALANCE

    base = "compile_topology: v5p-128\nmodel_name: qwen3-30b-a3b\nper_device_batch_size: 4\n"

    def mlp_seconds(extra: str) -> float:
        an = analyze(None, base + extra)
        assert an.estimate is not None
        return sum(p.seconds for p in an.estimate.time.points if p.name in ("mlpwi", "mlpwo"))

    ep = "ici_fsdp_parallelism: 16\nici_expert_parallelism: 4\n"
    learned, balanced = mlp_seconds(ep), mlp_seconds(ep + "use_random_routing: true\n")
    assert balanced < learned < balanced * MOE_LOAD_IMBALANCE  # the routed experts' share is slower
    assert mlp_seconds("") == pytest.approx(mlp_seconds("use_random_routing: true\n"))  # no EP: no waiting
    # the capacity path pads to its capacity factor instead
    cap = ep + "sparse_matmul: false\ncapacity_factor: 1.25\n"
    assert mlp_seconds(cap) == pytest.approx(mlp_seconds(cap + "use_random_routing: true\n"))


@pytest.mark.parametrize(
    ("name", "why"),
    [("mixtral-8x7b", "no MoE layers"), ("gemma2-9b", "gemma2"), ("qwen3-next-80b-a3b", "MoE"), ("gpt3-6b", "gpt3")],
)
def test_the_reference_program_refuses_blocks_it_does_not_build(name: str, why: str) -> None:
    """ASAP's reference decoder is llama2-style with uniform layers: a verdict from it on another block would
    be about another model, so verify says to use MaxText's own train_compile instead."""
    from server.compile.verify import VerifyError, ref_spec
    from server.config.slices import parse_slice

    cfg = analyze(None, f"compile_topology: v5p-16\nmodel_name: {name}\n").config
    with pytest.raises(VerifyError, match=why) as e:
        ref_spec(cfg, parse_slice("v5p-16"))
    assert "train_compile" in str(e.value)
    ref_spec(analyze(None, "compile_topology: v5p-16\nmodel_name: llama3-8b\n").config, parse_slice("v5p-16"))


def test_quantized_training_pays_for_its_casts() -> None:
    """Every quantized pass casts both operands of each weight matmul (memory-bound work): fp8_full (three
    passes) moves more than aqt_fp8 (forward only), and bf16 casts nothing."""
    base = "compile_topology: tpu7x-128\nmodel_name: llama3.1-8b\nper_device_batch_size: 2\n"

    def casts(extra: str) -> float:
        an = analyze(None, base + extra)
        assert an.estimate is not None
        return sum(p.bytes for p in an.estimate.time.points if p.name == "quantize")

    full, fwd = casts("quantization: fp8_full\n"), casts("quantization: aqt_fp8\n")
    assert casts("") == 0 and 0 < fwd < full
    assert 1.5 < full / fwd < 3.0  # three passes against one, both with the remat recompute's forward casts


def test_dropless_moe_pays_for_sorting_tokens_to_experts_and_back() -> None:
    """Per token and routed layer, the permute writes top_k copies and the unpermute gathers them back and sums
    (3 top_k + 1 emb-wide rows a pass); forward, two backward passes and the full-remat recompute."""
    text = "compile_topology: v5p-16\nmodel_name: mixtral-8x7b\nper_device_batch_size: 2\nmax_target_length: 1024\n"
    an = analyze(None, text)
    assert an.estimate is not None
    (permute,) = [p for p in an.estimate.time.points if p.name == "moe permute"]
    tokens, k, d, layers = 2 * 1024, 2, 4096, 32
    assert permute.bytes == pytest.approx(tokens * (3 * k + 1) * d * 2 * (3 + 1) * layers)
    capacity = analyze(None, text + "sparse_matmul: false\ncapacity_factor: 1.25\n")
    assert capacity.estimate is not None
    assert not [p for p in capacity.estimate.time.points if p.name == "moe permute"]  # einsum dispatch instead
