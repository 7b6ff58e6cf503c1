"""Quantized training: the int8/fp8/int4 peaks of each TPU generation (with sources), MaxText's quantization modes
and the peak each runs its matmuls at, and MFU in MaxText's definition beside the utilisation of that peak,
which no config may take above 1."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from server.common.findings import Severity
from server.config.slices import CHIPS, LOW_PRECISION_DTYPES, SOURCES, parse_slice
from server.perf import arith
from server.perf.enumeration import enumerate_meshes
from server.perf.estimate import Estimate, estimate, inputs
from server.perf.quantization import MODES, PASSES, matmul_plan, mode
from server.services.analysis import analyze

TPUS = ["v4", "v5e", "v5p", "v6e", "tpu7x"]
QUANTIZED = ["int8", "fp8", "fp8_full", "aqt_fp8", "int4"]


def est_of(text: str) -> Estimate:
    an = analyze(None, text)
    assert not [f for f in an.findings if f.severity == Severity.ERROR], [f.message for f in an.findings]
    return estimate(an.config, an.check)


@pytest.mark.parametrize("gen", TPUS)
def test_every_generation_lists_its_low_precision_peaks_with_sources(gen):
    chip = CHIPS[gen]
    for dtype in LOW_PRECISION_DTYPES:
        peak = chip.matmul_peaks[dtype]  # listed, even where it is only the bf16 rate
        assert peak.source in SOURCES and chip.sources[f"{dtype}_peak"] == peak.source, (gen, dtype)
        assert peak.flops >= chip.peak_bf16_flops
        if not peak.native:  # no native rate: runs at the bf16 peak, and says so
            assert peak.flops == chip.peak_bf16_flops


@pytest.mark.parametrize(
    ("gen", "dtype", "flops", "native"),
    [
        ("v4", "int8", 275e12, True),  # 'bf16 or int8': no faster than bf16
        ("v5e", "int8", 394e12, True),
        ("v5p", "int8", 918e12, True),
        ("v6e", "int8", 1836e12, True),
        ("tpu7x", "int8", 2307e12, False),  # nothing published: the bf16 peak
        ("v4", "fp8", 275e12, False),
        ("v5e", "fp8", 197e12, False),
        ("v5p", "fp8", 459e12, False),  # Google's TPU7x page: v5p FP8 459 = its bf16
        ("v6e", "fp8", 918e12, False),
        ("tpu7x", "fp8", 4614e12, True),
    ],
)
def test_published_peaks(gen, dtype, flops, native):
    peak = CHIPS[gen].matmul_peak(dtype)
    assert (peak.flops, peak.native) == (flops, native)


def test_bf16_and_unlisted_dtypes_run_at_the_bf16_peak():
    chip = CHIPS["v6e"]
    assert chip.matmul_peak("bf16").flops == chip.matmul_peak("fp4").flops == chip.peak_bf16_flops
    assert chip.matmul_peak("bf16").native and not chip.matmul_peak("fp4").native


@pytest.mark.parametrize(
    ("quant", "speedups"),
    [
        ("", {"v4": 1, "v5e": 1, "v5p": 1, "v6e": 1, "tpu7x": 1}),
        ("int8", {"v4": 1, "v5e": 2, "v5p": 2, "v6e": 2, "tpu7x": 1}),
        ("fp8", {"v4": 1, "v5e": 1, "v5p": 1, "v6e": 1, "tpu7x": 2}),
        ("fp8_full", {"v4": 1, "v5e": 1, "v5p": 1, "v6e": 1, "tpu7x": 2}),
        ("aqt_fp8_full", {"v4": 1, "v5e": 1, "v5p": 1, "v6e": 1, "tpu7x": 2}),
        # forward only: 1/3 of the FLOPs at 2x, so 1 / (1/6 + 2/3)
        ("aqt_fp8", {"v4": 1, "v5e": 1, "v5p": 1, "v6e": 1, "tpu7x": 1.2}),
        ("int4", {"v4": 1, "v5e": 4, "v5p": 4, "v6e": 4, "tpu7x": 1}),
        # weight-only, per-layer (not read), and GPU recipes: bf16 matmuls on every TPU
        ("int8w", {"v4": 1, "v5e": 1, "v5p": 1, "v6e": 1, "tpu7x": 1}),
        ("intmp", {"v4": 1, "v5e": 1, "v5p": 1, "v6e": 1, "tpu7x": 1}),
        ("nanoo_fp8", {"v4": 1, "v5e": 1, "v5p": 1, "v6e": 1, "tpu7x": 1}),
        ("te_fp8_delayedscaling", {"v4": 1, "v5e": 1, "v5p": 1, "v6e": 1, "tpu7x": 1}),
        ("fp4", {"v4": 1, "v5e": 1, "v5p": 1, "v6e": 1, "tpu7x": 1}),
        ("not-a-mode", {"v4": 1, "v5e": 1, "v5p": 1, "v6e": 1, "tpu7x": 1}),
    ],
)
def test_each_mode_runs_its_matmuls_at_the_peak_of_its_dtype(quant, speedups):
    for gen, want in speedups.items():
        assert arith.matmul_speedup(quant, CHIPS[gen]) == pytest.approx(want), gen
        assert arith.matmul_speedup(quant, CHIPS[gen]) == matmul_plan(quant, CHIPS[gen]).speedup


def test_modes_cite_maxtext_and_weight_only_modes_quantize_no_matmul():
    for m in MODES.values():
        assert "L" in m.source and set(m.passes) <= set(PASSES), m.name
    for name in ("int8w", "int4w", "intmp", "nanoo_fp8", "fp8_nanoo", "te_mxfp8"):
        m = mode(name)
        assert m is not None and m.dtype == "bf16" and not m.passes, name
    assert mode("") is None and mode("int9") is None
    assert MODES["fp8_full"].grouped_moe and not MODES["int8"].grouped_moe  # moe.py L1554


def _assert_within_peak(e: Estimate) -> None:
    at = e.mfu_at_matmul_peak
    chip = e.layout.slice.chip
    assert 0 < at <= 1.0 + 1e-9, (e.layout.label(), e.quantization, at)
    assert chip.peak_bf16_flops <= e.effective_peak_flops <= e.matmul_peak_flops * (1 + 1e-12)
    if e.matmuls.quantized:
        assert at < e.mfu
    else:
        assert at == pytest.approx(e.mfu)


TINY = """\
base_emb_dim: 512
base_num_query_heads: 8
base_num_kv_heads: 8
head_dim: 64
base_mlp_dim: 2048
base_num_decoder_layers: 2
vocab_size: 1000
max_target_length: 128
"""
# Large matmuls, short sequence, a big batch: as compute-bound as a config gets, so as near the peak.
WIDE = """\
base_emb_dim: 16384
base_num_query_heads: 128
base_num_kv_heads: 128
head_dim: 128
base_mlp_dim: 65536
base_num_decoder_layers: 4
vocab_size: 32000
max_target_length: 1024
remat_policy: minimal
"""


@pytest.mark.parametrize("slice_name", ["v4-16", "v5e-16", "v5p-16", "v6e-16", "tpu7x-16"])
@pytest.mark.parametrize("model", ["tiny", "llama2-7b", "wide"])
@pytest.mark.parametrize("quant", ["", *QUANTIZED])
def test_no_mesh_runs_above_the_peak_its_work_runs_at(slice_name, model, quant):
    body = {"tiny": TINY, "wide": WIDE, "llama2-7b": "model_name: llama2-7b\nmax_target_length: 2048\n"}[model]
    text = body + "per_device_batch_size: 8\n" + (f"quantization: {quant}\n" if quant else "")
    inp = inputs(analyze(None, text).config)
    en = enumerate_meshes(inp, parse_slice(slice_name))
    cands = en.ranked + en.too_big
    assert cands
    for c in cands:  # every valid mesh of the slice, fitting or not
        _assert_within_peak(c.estimate)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    gen=st.sampled_from(["v5e-16", "v5p-32", "v6e-16", "tpu7x-16", "v4-32"]),
    quant=st.sampled_from(["", *QUANTIZED, "int8w"]),
    emb=st.sampled_from([256, 1024, 4096, 8192]),
    ratio=st.sampled_from([1, 4, 8]),
    layers=st.integers(1, 8),
    pdbs=st.sampled_from([1, 2, 8, 32]),
    seq=st.sampled_from([128, 1024, 4096]),
    remat=st.sampled_from(["full", "minimal", "save_qkv_proj"]),
    tensor=st.sampled_from([1, 2, 4]),
)
def test_utilisation_of_the_peak_stays_within_1(gen, quant, emb, ratio, layers, pdbs, seq, remat, tensor):
    text = (
        f"compile_topology: {gen}\nbase_emb_dim: {emb}\nbase_num_query_heads: 8\nbase_num_kv_heads: 8\n"
        f"head_dim: {emb // 8}\nbase_mlp_dim: {emb * ratio}\nbase_num_decoder_layers: {layers}\nvocab_size: 32000\n"
        f"per_device_batch_size: {pdbs}\nmax_target_length: {seq}\nremat_policy: {remat}\n"
        f"ici_fsdp_parallelism: -1\nici_tensor_parallelism: {tensor}\n" + (f"quantization: {quant}\n" if quant else "")
    )
    an = analyze(None, text)
    if an.estimate is not None:
        _assert_within_peak(an.estimate)


def test_int8_mfu_in_maxtexts_definition_passes_bf16s_and_even_1_while_the_peak_it_runs_at_is_not_passed():
    text = WIDE + "compile_topology: v5p-16\nper_device_batch_size: 16\nici_fsdp_parallelism: -1\n"
    bf16, int8, int4 = (est_of(text + q) for q in ("", "quantization: int8\n", "quantization: int4\n"))
    assert 1.0 < int8.mfu < int4.mfu and int8.mfu > bf16.mfu  # against the bf16 peak, as MaxText counts it
    for e in (bf16, int8, int4):
        assert e.mfu_at_matmul_peak <= 1.0
    assert int8.mfu_at_matmul_peak < int8.mfu and int4.mfu_at_matmul_peak < int4.mfu
    assert bf16.mfu_at_matmul_peak == bf16.mfu
    # the same model FLOPs: MaxText's count does not depend on the dtype
    assert int8.model_flops_per_step == bf16.model_flops_per_step


def test_summary_and_json_say_which_peak_the_matmuls_run_at():
    base = "model_name: llama2-7b\ncompile_topology: v6e-16\nper_device_batch_size: 4\nmax_target_length: 2048\n"
    q = est_of(base + "quantization: int8\n")
    assert f"{q.mfu:.0%} MFU (bf16 peak; {q.mfu_at_matmul_peak:.0%} of the peak with int8 matmuls)" in q.summary()
    j = q.to_json()
    m = j["matmuls"]
    assert (m["quantization"], m["dtype"], m["passes"], m["peak_flops_per_chip"]) == (
        "int8",
        "int8",
        list(PASSES),
        1836e12,
    )
    assert m["bf16_peak_flops_per_chip"] == 918e12 and m["native"] and m["peak_source"] == "gcp-v6e"
    assert 0 < m["quantized_flops_fraction"] < 1 and 918e12 < m["effective_peak_flops_per_chip"] < 1836e12
    assert "quantizations.py" in m["mode_source"]
    assert j["mfu"] == q.mfu and j["mfu_at_matmul_peak"] == q.mfu_at_matmul_peak
    pts = {p["name"]: p for p in j["roofline"]["points"]}
    assert pts["qkv"]["dtype"] == "int8" and pts["qkv"]["peak_flops_per_s"] == pytest.approx(1836e12)
    assert "dtype" not in pts["attention"] and pts["attention"]["peak_flops_per_s"] == 918e12  # never quantized

    fp8 = est_of(base + "quantization: fp8\n")  # no fp8 in v6e's MXU
    assert "(fp8 runs at the bf16 peak on v6e)" in fp8.summary() and fp8.mfu_at_matmul_peak == fp8.mfu
    plain = est_of(base)
    assert "MFU," in plain.summary() and plain.to_json()["matmuls"]["dtype"] == "bf16"


def test_topology_hover_says_which_peak_the_mfu_is_against():
    from server.presentation import explain

    text = "compile_topology: v6e-16\nmodel_name: llama2-7b\nper_device_batch_size: 4\nquantization: int8\n"
    md, _ = explain.hover(analyze(None, text), 0, 3)
    assert "MFU (MaxText's, against the bf16 peak;" in md and "int8 matmuls at 1,836 TOP/s per chip" in md
    md, _ = explain.hover(analyze(None, text.replace("int8", "fp8")), 0, 3)
    assert "(fp8 matmuls at the bf16 peak: no faster fp8 rate on this chip)" in md
