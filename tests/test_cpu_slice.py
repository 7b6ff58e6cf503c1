"""The measured CPU slice: registered at runtime from measured peaks (never a spec), accepted by the mesh
checks and the estimate, gone again when unregistered; the micro-benchmark itself in a child process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from server.config import slices
from server.config.placement import place
from server.config.slices import CpuPeaks, SliceError, parse_slice, register_cpu_slice, unregister_cpu_slice
from server.perf.collectives import path
from server.perf.layout import build
from server.services.analysis import analyze

PEAKS = CpuPeaks(
    devices=8,
    matmul_flops=14e9,
    copy_bw=1.1e9,
    collective_bw=1.7e9,
    hop_latency=3e-5,
    memory_bytes=3 << 30,
    measured_at="2026-01-01T00:00:00+00:00",
    by="tests/test_cpu_slice.py",
)


@pytest.fixture
def cpu() -> Iterator[slices.Slice]:
    yield register_cpu_slice(PEAKS)
    unregister_cpu_slice()


def test_cpu_slice_exists_only_once_measured() -> None:
    with pytest.raises(SliceError, match="measured on this machine"):
        parse_slice("cpu-8")
    sl = register_cpu_slice(PEAKS)
    try:
        assert sl.name == "cpu-8" and sl.devices == 8 and sl.topology == (2, 4)
        assert sl.chip.device_kind == "cpu" and sl.chip.peak_bf16_flops == 14e9 and sl.chip.hop_latency == 3e-5
        # collectives price 2 x the one-way link on a ring: the link is half the measured bidirectional rate
        assert 2 * sl.chip.ici_link_bw == pytest.approx(1.7e9)
        for fld in ("peak_bf16_flops", "hbm_bw", "ici_link_bw", "hop_latency", "hbm_bytes"):
            assert sl.chip.sources[fld] in slices.SOURCES
        assert "2026-01-01T00:00:00+00:00" in slices.SOURCES[sl.chip.sources["peak_bf16_flops"]]
        with pytest.raises(SliceError, match="valid names: cpu-8"):
            parse_slice("cpu-4")
    finally:
        unregister_cpu_slice()
    assert "cpu" not in slices.CHIPS and "cpu" not in slices.TOPOLOGIES
    assert all(chip.hop_latency == 1e-6 for chip in slices.CHIPS.values())  # TPU entries untouched


@pytest.mark.parametrize("shape", [(8, 1, 1), (1, 8, 1), (2, 1, 4), (1, 1, 8)])
def test_every_shape_of_the_devices_is_placed(cpu: slices.Slice, shape: tuple[int, ...]) -> None:
    p = place(cpu, shape)
    assert p.ok and p.handler.startswith("CPU devices")
    assert not place(cpu, (3, 1, 1)).ok


def test_collectives_use_the_measured_rates(cpu: slices.Slice) -> None:
    lay = build(cpu, {"tensor": 8})
    pt = path(lay, ("tensor",))
    assert pt.ici_bw == pytest.approx(1.7e9) and pt.hop_latency == 3e-5 and pt.ring_steps == 4


def test_a_cpu_config_is_checked_and_estimated(cpu: slices.Slice, tmp_path: Path) -> None:
    text = (
        "compile_topology: cpu-8\nbase_emb_dim: 256\nbase_num_query_heads: 8\nbase_num_kv_heads: 8\nhead_dim: 32\n"
        "base_mlp_dim: 1024\nbase_num_decoder_layers: 4\nvocab_size: 4096\nper_device_batch_size: 1\n"
        "max_target_length: 32\nici_fsdp_parallelism: 2\nici_tensor_parallelism: 4\n"
    )
    p = tmp_path / "c.yml"
    p.write_text(text)
    an = analyze(p, text)
    assert not [f for f in an.diagnostics if f.severity.label == "error"]
    est = an.estimate
    assert est is not None and est.layout.ici["fsdp"] == 2 and est.layout.ici["tensor"] == 4
    # compute at the measured peak: executed FLOPs per device over 14 GFLOP/s bounds the matmul time from below
    assert est.time.compute_s >= est.flops.executed / 8 / 14e9 * 0.5
    assert est.time.step_s > est.time.compute_s


def test_micro_benchmark_measures_the_cpu_devices() -> None:
    from server.lab.cpu_slice import measure

    peaks = measure(4, by="tests/test_cpu_slice.py")
    assert peaks.devices == 4 and peaks.by == "tests/test_cpu_slice.py"
    assert 1e8 < peaks.matmul_flops < 1e13  # any CPU: between 0.1 and 10,000 GFLOP/s per device
    assert 1e7 < peaks.copy_bw < 1e12 and 1e6 < peaks.collective_bw < 1e12
    assert 1e-8 < peaks.hop_latency < 1e-1
    assert set(peaks.details) >= {"matmul_s", "copy_s", "all_gather_s", "tiny_all_reduce_s"}
