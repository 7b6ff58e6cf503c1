"""The XLA flag parser (server/config/xla_flags.py) on published launch strings: the groups each yields (checked by
hand against the strings in tests/data/xla_flags/), unknown flags kept, absl's last-wins and boolean rules, bad
input returned as problems, and every flag MaxText's flag library names recognised."""

from __future__ import annotations

from pathlib import Path

import pytest

from server.config.xla_flags import (
    COMPOSITES,
    GROUP_SPECS,
    XlaFlags,
    flag_kind,
    is_known_flag,
    parse_xla_flags,
)

DATA = Path(__file__).parent / "data" / "xla_flags"


def _launch(name: str) -> XlaFlags:
    return parse_xla_flags((DATA / f"{name}.txt").read_text())


def _library_flags() -> list[str]:
    lines = (DATA / "maxtext_library_flags.txt").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def test_xla_flags_maxtext_128b_is_cf_all_gather_and_data_parallel_overlap() -> None:
    flags = _launch("maxtext_v5e_128b")
    assert flags.problems == () and flags.unknown == () and flags.repeated == ()
    assert len(flags.settings) == 7
    assert flags.cf_for_all_gather.values == {
        "xla_tpu_enable_async_collective_fusion": True,
        "xla_tpu_enable_async_collective_fusion_fuse_all_gather": True,
        "xla_tpu_enable_async_collective_fusion_multiple_steps": True,
        "xla_tpu_overlap_compute_collective_tc": True,
        "xla_enable_async_all_gather": True,
    }
    assert flags.data_parallel_overlap.values == {
        "xla_tpu_enable_data_parallel_all_reduce_opt": True,
        "xla_tpu_data_parallel_opt_different_sized_ops": True,
    }
    # The all-reduce fusion shares three helper flags with the all-gather one, but its own flag is not stated.
    assert flags.cf_for_all_reduce.is_set and flags.cf_for_all_reduce.key_value is None
    assert flags.enabled() == {"cf_for_all_gather": True, "data_parallel_overlap": True}
    assert flags.scoped_vmem_limit_kib is None and flags.pcie_bandwidth_multiplier is None
    assert not flags.host_offload.is_set and not flags.layer_scheduler.is_set


def test_xla_flags_tpu7x_deepseek_sparsecore_layer_scheduler_pcie() -> None:
    flags = _launch("tpu7x_deepseek3-671b")
    assert flags.problems == () and flags.repeated == ()
    assert len(flags.settings) == 29
    assert flags.enabled() == {
        "scoped_vmem_limit": 65536,
        "cf_for_all_gather": False,
        "sparsecore_offload_all_gather": True,
        "sparsecore_offload_reduce_scatter": True,
        "sparsecore_offload_all_reduce": True,
        "pcie_bandwidth": 0.03,
        "layer_scheduler": True,
    }
    assert flags.scoped_vmem_limit_kib == 65536
    assert flags.pcie_bandwidth_multiplier == pytest.approx(0.03)
    assert flags.layer_scheduler.values == {
        "xla_tpu_enable_latency_hiding_layer_scheduler": True,
        "xla_tpu_enable_layer_scheduler_for_dependent_collectives": True,
        "xla_tpu_enable_multi_compute_overlap_in_layer_scheduler": False,
    }
    assert flags.sparsecore_offload_base.values == {
        "xla_tpu_use_tc_device_shape_on_sc": True,  # written `True`
        "xla_sc_disable_megacore_partitioning": True,
    }
    assert flags.sparsecore_offload_all_gather.values == {
        "xla_tpu_enable_sparse_core_collective_offload_all_gather": True,
        "xla_tpu_enable_sparse_core_collective_offload_2d_all_gather": True,
        "xla_tpu_enable_all_gather_offload_tracing": True,
        "xla_tpu_enable_async_collective_fusion_fuse_all_gather": False,
        "xla_tpu_enable_sparse_core_collective_offload_3d_all_gather": True,
        "xla_tpu_use_single_sparse_core_for_all_gather_offload": True,
        "xla_tpu_sparse_core_all_gather_latency_multiplier": 1.0,
    }
    assert flags.sparsecore_offload_reduce_scatter.get("xla_tpu_sparse_core_reduce_scatter_latency_multiplier") == 3.0
    assert flags.latency_hiding_scheduler.values == {
        "xla_tpu_prefer_async_allgather_to_allreduce": True,
        "xla_tpu_scheduler_percent_shared_memory_limit": 150,
    }
    # A tri-state option keeps its text: the library writes ENABLED where this launch writes true.
    assert flags.host_offload.values == {
        "xla_tpu_aggressive_opt_barrier_removal": "true",
        "xla_tpu_scheduler_percent_shared_memory_limit": 150,
    }
    assert flags.numerics.values == {"xla_tpu_bf16_emission_mode": "NATIVE_EMISSION"}
    assert [(s.name, s.value, s.text) for s in flags.unknown] == [
        ("xla_tpu_enable_3d_reduce_scatter_decomposer", False, "false")
    ]


def test_xla_flags_tpu7x_gpt_oss_concurrency_caps_and_overlap() -> None:
    flags = _launch("tpu7x_gpt-oss-120b")
    assert flags.problems == () and flags.unknown == ()
    assert len(flags.settings) == 29
    assert flags.latency_hiding_scheduler.values == {
        "xla_tpu_prefer_async_allgather_to_allreduce": True,
        "xla_max_concurrent_async_all_gathers": 2,
        "xla_max_concurrent_async_reduce_scatters": 2,
        "xla_tpu_scheduler_percent_shared_memory_limit": 150,
    }
    assert flags.layer_scheduler.get("xla_tpu_enable_multi_compute_overlap_in_layer_scheduler") is True
    assert flags.numerics.values == {"xla_tpu_impure_enable_packed_bf16_math_ops": True}
    assert flags.pcie_bandwidth_multiplier == pytest.approx(0.03)


def test_xla_flags_tpu7x_llama_only_vmem_and_sparsecore_all_reduce() -> None:
    flags = _launch("tpu7x_llama3.1-70b")
    assert flags.problems == () and flags.unknown == ()
    assert flags.enabled() == {"scoped_vmem_limit": 61440, "sparsecore_offload_all_reduce": True}
    assert flags.set_groups() == (
        "scoped_vmem_limit",
        "sparsecore_offload_all_gather",
        "sparsecore_offload_all_reduce",
        "numerics",
    )
    assert not flags.cf_for_all_gather.is_set and not flags.data_parallel_overlap.is_set


def test_xla_flags_v5p_mixtral_megacore_and_async_permute() -> None:
    flags = _launch("v5p_mixtral_8x7b")
    assert flags.problems == () and flags.unknown == ()
    assert len(flags.settings) == 11
    assert flags.enabled() == {"scoped_vmem_limit": 81920, "cf_for_all_gather": True, "data_parallel_overlap": True}
    assert flags.megacore_fusion.values == {"xla_tpu_megacore_fusion_allow_ags": False}
    assert flags.async_collective_permute.values == {"xla_enable_async_collective_permute": True}
    assert flags.host_offload.values == {"xla_tpu_enable_ag_backward_pipelining": True}


def test_xla_flags_v6e_megascale_dcn() -> None:
    flags = _launch("v6e_collectives_2x256")
    assert flags.problems == () and flags.unknown == ()
    assert flags.set_groups() == ("megascale",)
    assert flags.megascale.values == {
        "megascale_grpc_premap_memory_bytes": 17179869184,
        "xla_tpu_enable_sunk_dcn_allreduce_done_with_host_reduction": True,
    }


def test_xla_flags_every_library_flag_recognised() -> None:
    names = _library_flags()
    assert len(names) == 45
    assert [n for n in names if not is_known_flag(n)] == []
    # The library's composed strings, parsed whole, leave nothing unknown.
    flags = parse_xla_flags(" ".join(f"--{n}" if flag_kind(n) == "bool" else f"--{n}=1" for n in names))
    assert flags.unknown == () and flags.problems == ()
    group_names = {spec.name for spec in GROUP_SPECS}
    assert all(set(parts) <= group_names for parts in COMPOSITES.values())
    assert set(XlaFlags.__dataclass_fields__) >= group_names


def test_xla_flags_library_composite_last_wins() -> None:
    # CF_FOR_ALL_GATHER followed by ENABLE_SPARSECORE_OFFLOADING_FOR_ALL_GATHER, as a benchmark composes them: the
    # second turns the all-gather fusion off, and absl keeps the last value.
    text = (
        " --xla_tpu_enable_async_collective_fusion=true --xla_tpu_enable_async_collective_fusion_fuse_all_gather=true"
        " --xla_tpu_enable_async_collective_fusion_fuse_all_gather=false"
        " --xla_tpu_enable_sparse_core_collective_offload_all_gather=true"
    )
    flags = parse_xla_flags(text)
    assert flags.repeated == ("xla_tpu_enable_async_collective_fusion_fuse_all_gather",)
    assert flags.cf_for_all_gather.key_value is False
    assert flags.sparsecore_offload_all_gather.key_value is True
    setting = flags.settings[1]
    assert (setting.name, setting.value, setting.position) == (
        "xla_tpu_enable_async_collective_fusion_fuse_all_gather",
        False,
        2,
    )


def test_xla_flags_repeated_number_last_wins_first_place_kept() -> None:
    flags = parse_xla_flags("--xla_tpu_scoped_vmem_limit_kib=1024 --zeta --xla_tpu_scoped_vmem_limit_kib=98304")
    assert flags.scoped_vmem_limit_kib == 98304
    assert [s.name for s in flags.settings] == ["xla_tpu_scoped_vmem_limit_kib", "zeta"]
    assert flags.repeated == ("xla_tpu_scoped_vmem_limit_kib",)


def test_xla_flags_unknown_kept_in_order_with_guessed_values() -> None:
    flags = parse_xla_flags(
        "--zeta=1 --xla_tpu_scoped_vmem_limit_kib=2 --alpha=x --beta --xla_dump_to=/tmp/hlo -gamma=0.5 --delta=false"
    )
    assert [(s.name, s.value) for s in flags.unknown] == [
        ("zeta", 1),
        ("alpha", "x"),
        ("beta", True),
        ("xla_dump_to", "/tmp/hlo"),
        ("gamma", 0.5),
        ("delta", False),
    ]
    assert flags.problems == ()
    assert flags.get("xla_dump_to") == "/tmp/hlo" and flags.get("absent") is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("--xla_tpu_enable_data_parallel_all_reduce_opt", True),
        ("--noxla_tpu_enable_data_parallel_all_reduce_opt", False),
        ("--xla_tpu_enable_data_parallel_all_reduce_opt=1", True),
        ("--xla_tpu_enable_data_parallel_all_reduce_opt=0", False),
        ("--xla_tpu_enable_data_parallel_all_reduce_opt=True", True),
        ("--xla_tpu_enable_data_parallel_all_reduce_opt=FALSE", False),
        ("-xla_tpu_enable_data_parallel_all_reduce_opt=yes", True),
    ],
)
def test_xla_flags_absl_booleans(text: str, expected: bool) -> None:
    flags = parse_xla_flags(text)
    assert flags.problems == ()
    assert flags.data_parallel_overlap.key_value is expected


@pytest.mark.parametrize(
    ("text", "problems", "kept"),
    [
        (None, 0, {}),
        ("", 0, {}),
        (" \t\n ", 0, {}),
        ("foo", 1, {}),
        ("-- -", 2, {}),
        ("--=1", 1, {}),
        ("--9lives=1 --a.b=2 --x\x00y=3", 3, {}),
        ("'--xla_tpu_scoped_vmem_limit_kib=1'", 1, {}),
        ("LIBTPU_INIT_ARGS='--xla_tpu_scoped_vmem_limit_kib=1'", 1, {}),
        ("--xla_tpu_scoped_vmem_limit_kib", 1, {}),
        ("--xla_tpu_scoped_vmem_limit_kib=lots", 1, {"xla_tpu_scoped_vmem_limit_kib": "lots"}),
        ("--xla_tpu_scoped_vmem_limit_kib=1.5", 1, {"xla_tpu_scoped_vmem_limit_kib": "1.5"}),
        ("--xla_tpu_enable_async_collective_fusion=maybe", 1, {"xla_tpu_enable_async_collective_fusion": "maybe"}),
        ("--xla_tpu_pcie_bandwidth_multiplier=fast", 1, {"xla_tpu_pcie_bandwidth_multiplier": "fast"}),
        ("--xla_tpu_pcie_bandwidth_multiplier=", 1, {"xla_tpu_pcie_bandwidth_multiplier": ""}),
        (
            "--xla_tpu_enable_async_collective_fusion=true junk --ok",
            1,
            {"xla_tpu_enable_async_collective_fusion": True},
        ),
    ],
)
def test_xla_flags_junk_is_problems_not_exceptions(text: str | None, problems: int, kept: dict[str, object]) -> None:
    flags = parse_xla_flags(text)
    assert len(flags.problems) == problems
    assert all(p.message for p in flags.problems)
    assert {s.name: s.value for s in flags.settings if s.name in kept} == kept


def test_xla_flags_bad_value_keeps_the_text_and_typed_accessor_declines() -> None:
    flags = parse_xla_flags("--xla_tpu_scoped_vmem_limit_kib=lots --xla_tpu_pcie_bandwidth_multiplier=fast")
    assert flags.scoped_vmem_limit.is_set and flags.scoped_vmem_limit_kib is None
    assert flags.pcie_bandwidth_multiplier is None
    assert [p.position for p in flags.problems] == [0, 1]
    assert "whole number" in flags.problems[0].message


def test_xla_flags_long_input_reads_every_flag() -> None:
    text = " ".join(f"--flag_{i}={i}" for i in range(20000))
    flags = parse_xla_flags(text)
    assert len(flags.unknown) == 20000 and flags.unknown[-1].value == 19999


def test_xla_flags_collective_matmul_threshold_reads_as_on_or_off() -> None:
    # MaxText's DISABLE_COLLECTIVE_MATMUL raises the windowed-einsum threshold past any operand: off; a small one
    # keeps it on; unstated, libtpu's default holds (not in enabled()); a threshold that does not parse says nothing.
    off = parse_xla_flags("--xla_jf_spmd_threshold_for_windowed_einsum_mib=1000000")
    assert off.enabled() == {"collective_matmul": False}
    assert off.collective_matmul.key_value == 1000000  # the group keeps the value as written
    assert parse_xla_flags("--xla_jf_spmd_threshold_for_windowed_einsum_mib=0").enabled() == {"collective_matmul": True}
    assert "collective_matmul" not in parse_xla_flags("--xla_tpu_enable_data_parallel_all_reduce_opt=true").enabled()
    assert parse_xla_flags("--xla_jf_spmd_threshold_for_windowed_einsum_mib=big").enabled() == {
        "collective_matmul": "big"
    }
