"""A run's XLA flags (`LIBTPU_INIT_ARGS`, `XLA_FLAGS`) read into the typed groups that MaxText's flag library names.

A launch script states the compiler's options as one string of absl flags, e.g.
`--xla_tpu_enable_async_collective_fusion=true --xla_tpu_scoped_vmem_limit_kib=98304`. `parse_xla_flags` reads
that string (shell quoting already stripped) the way absl does and sorts every flag into the groups below, so the
cost model can ask "is continuation fusion on for all-gathers?" or "what scoped VMEM limit did the run set?" without
knowing flag names. Nothing here is wired into the estimate, the hover or the CLI yet (issue 26 item 1).

The groups and their flag names are MaxText's: `benchmarks/xla_flags_library.py` of AI-Hypercomputer/maxtext at
commit e591f30cbbf217ed67ef71263ec0538239f9c3b8 (Apache-2.0). A group that mirrors one of its constants records
the constant's name in `library_constant`; where the library composes constants (`CF_FOR_ALL_REDUCE_AND_ALL_GATHER`,
`ENABLE_SPARSECORE_OFFLOADING_FOR_RS_AG_AR`) the composite is listed in `COMPOSITES` as the groups it joins. A
flag the library puts in two constants (`--xla_tpu_enable_async_collective_fusion` is in both continuation-fusion
groups) belongs to both groups here. The library names no layer scheduler, PCIe multiplier, megascale (DCN) or
latency-hiding-scheduler limits; those groups (`library_constant` None) take their names from the tpu-recipes
launches that set them (AI-Hypercomputer/tpu-recipes at c8cfe2f689081d36701a101cd73a70965d80926b:
training/ironwood/*/k8s/k8s_manifest.yaml, microbenchmarks/trillium/collectives/*.sh). A flag in no group is kept,
in order, in `unknown`.

absl's rules, as followed here: `--name=value` or `-name=value`; a bare `--name` sets a boolean true and
`--noname` false; booleans accept true/false/1/0/t/f/yes/no in any case (recipes write `True`); a repeated flag's
last value wins. Bad input (a token that is not a flag, a bad name, a value of the wrong kind) never raises: it is
returned in `problems`, and a known flag whose value does not parse is kept with its text as the value.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields
from typing import Literal

FlagValue = bool | int | float | str
FlagKind = Literal["bool", "int", "float", "str"]

# The source these names are read from (see the module docstring); tests/data/xla_flags/README.md cites the same.
MAXTEXT_LIBRARY_SOURCE = (
    "AI-Hypercomputer/maxtext@e591f30cbbf217ed67ef71263ec0538239f9c3b8:benchmarks/xla_flags_library.py"
)

# The kind of every known flag that is not a boolean. Tri-state scheduler options are text: the library writes
# `ENABLED` where a recipe writes `true` for the same flag (`--xla_tpu_aggressive_opt_barrier_removal`), so the
# value is kept as written rather than forced into a boolean.
_KINDS: dict[str, FlagKind] = {
    "xla_tpu_scoped_vmem_limit_kib": "int",
    "xla_tpu_relayout_group_size_threshold_for_reduce_scatter": "int",
    "xla_tpu_host_transfer_overlap_limit": "int",
    "xla_max_concurrent_host_send_recv": "int",
    "xla_tpu_scheduler_percent_shared_memory_limit": "int",
    "xla_latency_hiding_scheduler_rerun": "int",
    "xla_tpu_iova_dma_chunk_size_bytes": "int",
    "xla_tpu_sdc_check_repeat_count": "int",
    "xla_jf_spmd_threshold_for_windowed_einsum_mib": "int",
    "xla_max_concurrent_async_all_gathers": "int",
    "xla_max_concurrent_async_reduce_scatters": "int",
    "megascale_grpc_premap_memory_bytes": "int",
    "xla_tpu_pcie_bandwidth_multiplier": "float",
    "xla_tpu_sparse_core_all_gather_latency_multiplier": "float",
    "xla_tpu_sparse_core_reduce_scatter_latency_multiplier": "float",
    "xla_tpu_aggressive_opt_barrier_removal": "str",
    "xla_lhs_prioritize_async_depth_over_stall": "str",
    "xla_should_allow_loop_variant_parameter_in_chain": "str",
    "xla_should_add_loop_invariant_op_in_chain": "str",
    "xla_tpu_bf16_emission_mode": "str",
}


@dataclass(frozen=True)
class GroupSpec:
    """Which flags make up a group: exact names, plus name prefixes for open-ended families (megascale's). `key` is
    the flag whose value says whether the group's feature is on (groups share helper flags, so stating a group's
    flag does not mean its feature is on: `--xla_tpu_enable_async_collective_fusion` is in every CF group)."""

    name: str
    library_constant: str | None
    flags: tuple[str, ...]
    prefixes: tuple[str, ...] = ()
    key: str | None = None

    def has(self, flag: str) -> bool:
        return flag in self.flags or any(flag.startswith(p) for p in self.prefixes)


_SC_BASE = (
    "xla_tpu_use_tc_device_shape_on_sc",
    "xla_sc_enable_instruction_fusion",
    "xla_sc_disjoint_spmem",
    "xla_sc_disable_megacore_partitioning",
)

# XLA runs an einsum as a windowed einsum (collective matmul) when its operands pass
# `xla_jf_spmd_threshold_for_windowed_einsum_mib`; MaxText's DISABLE_COLLECTIVE_MATMUL sets 1000000. A threshold above
# any device's HBM (96 GiB on tpu7x) leaves no einsum that qualifies: collective matmul is off from here up.
COLLECTIVE_MATMUL_OFF_MIB = 128 * 1024

# One entry per `XlaFlags` group field, in the field order. The library's flags first, in its order; flags that
# only recipes set are added after them, each commented with where it was seen.
GROUP_SPECS: tuple[GroupSpec, ...] = (
    GroupSpec(
        "scoped_vmem_limit",
        "DENSE_VMEM_LIMIT_FLAG / MOE_VMEM_LIMIT_FLAG / CUSTOM_VMEM_LIMIT_FLAG",
        ("xla_tpu_scoped_vmem_limit_kib",),
        key="xla_tpu_scoped_vmem_limit_kib",
    ),
    GroupSpec(
        "cf_for_all_gather",
        "CF_FOR_ALL_GATHER",
        (
            "xla_tpu_enable_async_collective_fusion",
            "xla_tpu_enable_async_collective_fusion_fuse_all_gather",
            "xla_tpu_enable_async_collective_fusion_multiple_steps",
            "xla_tpu_overlap_compute_collective_tc",
            "xla_enable_async_all_gather",
        ),
        key="xla_tpu_enable_async_collective_fusion_fuse_all_gather",
    ),
    GroupSpec(
        "cf_for_all_reduce",
        "CF_FOR_ALL_REDUCE",
        (
            "xla_tpu_enable_async_collective_fusion",
            "xla_tpu_enable_async_collective_fusion_fuse_all_reduce",
            "xla_tpu_enable_async_collective_fusion_multiple_steps",
            "xla_tpu_overlap_compute_collective_tc",
            "xla_enable_async_all_reduce",
        ),
        key="xla_tpu_enable_async_collective_fusion_fuse_all_reduce",
    ),
    # The library has no CF constant for reduce-scatter; its SparseCore constants turn this fusion flag off.
    GroupSpec(
        "cf_for_reduce_scatter",
        None,
        (
            "xla_tpu_enable_async_collective_fusion",
            "xla_tpu_enable_async_collective_fusion_fuse_reduce_scatter",
            "xla_tpu_enable_async_collective_fusion_multiple_steps",
            "xla_tpu_overlap_compute_collective_tc",
        ),
        key="xla_tpu_enable_async_collective_fusion_fuse_reduce_scatter",
    ),
    GroupSpec("sparsecore_offload_base", "ENABLE_SPARSECORE_OFFLOADING_BASE_FLAGS", _SC_BASE),
    GroupSpec(
        "sparsecore_offload_all_gather",
        "ENABLE_SPARSECORE_OFFLOADING_FOR_ALL_GATHER",
        (
            "xla_tpu_enable_async_collective_fusion_fuse_all_gather",
            "xla_tpu_enable_sparse_core_collective_offload_all_gather",
            "xla_tpu_enable_all_gather_offload_tracing",
            # tpu-recipes' tpu7x launches (deepseek3-671b, gpt-oss-120b, llama3.1-70b):
            "xla_tpu_enable_sparse_core_collective_offload_2d_all_gather",
            "xla_tpu_enable_sparse_core_collective_offload_3d_all_gather",
            "xla_tpu_use_single_sparse_core_for_all_gather_offload",
            "xla_tpu_sparse_core_all_gather_latency_multiplier",
        ),
        key="xla_tpu_enable_sparse_core_collective_offload_all_gather",
    ),
    GroupSpec(
        "sparsecore_offload_reduce_scatter",
        "ENABLE_SPARSECORE_OFFLOADING_FOR_REDUCE_SCATTER",
        (
            "xla_tpu_enable_async_collective_fusion_fuse_reduce_scatter",
            "xla_tpu_enable_sparse_core_collective_offload_reduce_scatter",
            "xla_tpu_enable_reduce_scatter_offload_tracing",
            # tpu-recipes' tpu7x launches:
            "xla_tpu_enable_sparse_core_reduce_scatter_v2",
            "xla_tpu_enable_sparse_core_collective_offload_nd_reduce_scatter",
            "xla_tpu_sparse_core_reduce_scatter_latency_multiplier",
        ),
        key="xla_tpu_enable_sparse_core_collective_offload_reduce_scatter",
    ),
    GroupSpec(
        "sparsecore_offload_all_reduce",
        "ENABLE_SPARSECORE_OFFLOADING_FOR_ALL_REDUCE",
        (
            "xla_tpu_enable_async_collective_fusion_fuse_all_reduce",
            "xla_tpu_enable_sparse_core_collective_offload_all_reduce",
            "xla_tpu_enable_all_reduce_offload_tracing",
        ),
        key="xla_tpu_enable_sparse_core_collective_offload_all_reduce",
    ),
    # tpu-recipes' tpu7x launches: SparseCore offload options that apply to every offloaded collective.
    GroupSpec(
        "sparsecore_offload_tuning",
        None,
        (
            "xla_tpu_enable_concurrent_sparse_core_offloading",
            "xla_tpu_enable_offloading_gather_to_sparsecore",
            "xla_tpu_enable_sparse_core_collective_aggregator",
            "xla_tpu_enable_sparse_core_offload_queuing_in_lhs",
        ),
    ),
    GroupSpec(
        "layout_for_all_reduce_scatter",
        "LAYOUT_FOR_ALL_REDUCE_SCATTER",
        (
            "xla_tpu_use_minor_sharding_for_major_trivial_input",
            "xla_tpu_relayout_group_size_threshold_for_reduce_scatter",
            "xla_tpu_assign_all_reduce_scatter_layout",
        ),
    ),
    GroupSpec(
        "reduce_scatter_fusion",
        "REDUCE_SCATTER_FUSION",
        (
            "xla_tpu_use_minor_sharding_for_major_trivial_input",
            "xla_tpu_relayout_group_size_threshold_for_reduce_scatter",
        ),
    ),
    GroupSpec(
        "data_parallel_overlap",
        "DATA_PARALLEL_OVERLAP",
        ("xla_tpu_enable_data_parallel_all_reduce_opt", "xla_tpu_data_parallel_opt_different_sized_ops"),
        key="xla_tpu_enable_data_parallel_all_reduce_opt",
    ),
    GroupSpec("enhanced_launch_barrier", "ENHANCED_LAUNCH_BARRIER", ("xla_tpu_use_enhanced_launch_barrier",)),
    GroupSpec(
        "host_offload",
        "HOST_OFFLOAD_FLAGS",
        (
            "xla_tpu_enable_all_experimental_scheduler_features",
            "xla_tpu_enable_scheduler_memory_pressure_tracking",
            "xla_tpu_host_transfer_overlap_limit",
            "xla_tpu_aggressive_opt_barrier_removal",
            "xla_lhs_prioritize_async_depth_over_stall",
            "xla_tpu_enable_ag_backward_pipelining",
            "xla_should_allow_loop_variant_parameter_in_chain",
            "xla_should_add_loop_invariant_op_in_chain",
            "xla_max_concurrent_host_send_recv",
            "xla_tpu_scheduler_percent_shared_memory_limit",
            "xla_latency_hiding_scheduler_rerun",
        ),
    ),
    # tpu-recipes' tpu7x launches that offload to host (deepseek3-671b, gpt-oss-120b) set it with the layer scheduler.
    GroupSpec("pcie_bandwidth", None, ("xla_tpu_pcie_bandwidth_multiplier",), key="xla_tpu_pcie_bandwidth_multiplier"),
    GroupSpec("pipelining", "PIPELINING_FLAGS", ("xla_tpu_iova_dma_chunk_size_bytes",)),
    # tpu-recipes' tpu7x launches:
    GroupSpec(
        "layer_scheduler",
        None,
        (
            "xla_tpu_enable_latency_hiding_layer_scheduler",
            "xla_tpu_enable_layer_scheduler_for_dependent_collectives",
            "xla_tpu_enable_multi_compute_overlap_in_layer_scheduler",
        ),
        key="xla_tpu_enable_latency_hiding_layer_scheduler",
    ),
    # The latency-hiding scheduler's limits: two of HOST_OFFLOAD_FLAGS' flags, plus the concurrency caps and the
    # all-gather preference tpu-recipes' gpt-oss-120b and deepseek3-671b launches set.
    GroupSpec(
        "latency_hiding_scheduler",
        None,
        (
            "xla_tpu_scheduler_percent_shared_memory_limit",
            "xla_latency_hiding_scheduler_rerun",
            "xla_max_concurrent_async_all_gathers",
            "xla_max_concurrent_async_reduce_scatters",
            "xla_tpu_prefer_async_allgather_to_allreduce",
        ),
    ),
    # Multi-slice (DCN) options: every `--megascale_*` flag (tpu-recipes' trillium collectives microbenchmarks) and
    # the DCN all-reduce done on the host, set next to them there.
    GroupSpec(
        "megascale",
        None,
        ("xla_tpu_enable_sunk_dcn_allreduce_done_with_host_reduction",),
        prefixes=("megascale_",),
    ),
    GroupSpec(
        "disable_bundle_aware_cost_model",
        "DISABLE_BUNDLE_AWARE_COST_MODEL",
        ("xla_tpu_use_bundle_aware_cost_model_for_fusions",),
    ),
    GroupSpec(
        "sdc_checker",
        "SDC_CHECKER",
        (
            "xla_tpu_enable_sdc_checker",
            "xla_tpu_sdc_check_halt_on_detection",
            "xla_tpu_sdc_replicate_llo",
            "xla_tpu_sdc_check_repeat_count",
        ),
    ),
    # Its key is a size threshold, not a boolean: XlaFlags.enabled() reads it as on or off (COLLECTIVE_MATMUL_OFF_MIB).
    GroupSpec(
        "collective_matmul",
        "DISABLE_COLLECTIVE_MATMUL",
        ("xla_jf_spmd_threshold_for_windowed_einsum_mib",),
        key="xla_jf_spmd_threshold_for_windowed_einsum_mib",
    ),
    # `xla_tpu_enable_megacore_fusion`: tpu-recipes' v5p MaxDiffusion launches, next to the library's flag.
    GroupSpec(
        "megacore_fusion",
        "DISABLE_MEGACORE_FUSION_ALLOW_AGS",
        ("xla_tpu_megacore_fusion_allow_ags", "xla_tpu_enable_megacore_fusion"),
    ),
    GroupSpec("async_collective_permute", "ENABLE_ASYNC_COLLECTIVE_PERMUTE", ("xla_enable_async_collective_permute",)),
    # Numerics the tpu7x launches set (llama3.1-70b, deepseek3-671b, gpt-oss-120b); the library names none.
    GroupSpec("numerics", None, ("xla_tpu_bf16_emission_mode", "xla_tpu_impure_enable_packed_bf16_math_ops")),
)

# The library's composite constants, as the groups they join.
COMPOSITES: dict[str, tuple[str, ...]] = {
    "CF_FOR_ALL_REDUCE_AND_ALL_GATHER": ("cf_for_all_gather", "cf_for_all_reduce"),
    "ENABLE_SPARSECORE_OFFLOADING_FOR_RS_AG_AR": (
        "sparsecore_offload_all_gather",
        "sparsecore_offload_reduce_scatter",
        "sparsecore_offload_all_reduce",
        "sparsecore_offload_base",
    ),
}


@dataclass(frozen=True)
class FlagSetting:
    """One flag as the run sets it: its name without dashes, its value (typed), the text after `=` (None for a
    bare `--flag`), and the index of the token that set it (the last one, when the flag is repeated)."""

    name: str
    value: FlagValue
    text: str | None
    position: int


@dataclass(frozen=True)
class FlagProblem:
    """A token that could not be read as intended: its text, its index, and why."""

    token: str
    position: int
    message: str


@dataclass(frozen=True)
class FlagGroup:
    """One group of flags and the ones of it the run set, in the order they first appear."""

    name: str
    library_constant: str | None
    settings: tuple[FlagSetting, ...] = ()
    key: str | None = None

    @property
    def is_set(self) -> bool:
        """Whether the run states any flag of this group (whatever its value)."""
        return bool(self.settings)

    @property
    def key_value(self) -> FlagValue | None:
        """The value the run gives the group's key flag (e.g. `True` for `..._fuse_all_gather=true`), or None when
        the group has no key flag or the run does not state it: then libtpu's default holds."""
        return None if self.key is None else self.get(self.key)

    @property
    def values(self) -> dict[str, FlagValue]:
        return {s.name: s.value for s in self.settings}

    def get(self, flag: str) -> FlagValue | None:
        """The value the run gives `flag` (without dashes), or None when it does not set it."""
        for s in self.settings:
            if s.name == flag:
                return s.value
        return None


@dataclass(frozen=True)
class XlaFlags:
    """A flags string read into MaxText's groups. Each group field holds the flags of that group the string sets;
    a flag in several groups is in each. `settings` is every flag set (last value wins) in first-appearance order,
    `unknown` those of them in no group, `repeated` the names given more than once, `problems` what was not read."""

    scoped_vmem_limit: FlagGroup
    cf_for_all_gather: FlagGroup
    cf_for_all_reduce: FlagGroup
    cf_for_reduce_scatter: FlagGroup
    sparsecore_offload_base: FlagGroup
    sparsecore_offload_all_gather: FlagGroup
    sparsecore_offload_reduce_scatter: FlagGroup
    sparsecore_offload_all_reduce: FlagGroup
    sparsecore_offload_tuning: FlagGroup
    layout_for_all_reduce_scatter: FlagGroup
    reduce_scatter_fusion: FlagGroup
    data_parallel_overlap: FlagGroup
    enhanced_launch_barrier: FlagGroup
    host_offload: FlagGroup
    pcie_bandwidth: FlagGroup
    pipelining: FlagGroup
    layer_scheduler: FlagGroup
    latency_hiding_scheduler: FlagGroup
    megascale: FlagGroup
    disable_bundle_aware_cost_model: FlagGroup
    sdc_checker: FlagGroup
    collective_matmul: FlagGroup
    megacore_fusion: FlagGroup
    async_collective_permute: FlagGroup
    numerics: FlagGroup
    settings: tuple[FlagSetting, ...] = ()
    unknown: tuple[FlagSetting, ...] = ()
    repeated: tuple[str, ...] = ()
    problems: tuple[FlagProblem, ...] = ()

    def groups(self) -> dict[str, FlagGroup]:
        """Every group by its field name, in field order."""
        return {f.name: getattr(self, f.name) for f in fields(self) if isinstance(getattr(self, f.name), FlagGroup)}

    def enabled(self) -> dict[str, FlagValue]:
        """The groups whose key flag the string states, with its value (False for a feature turned off; collective
        matmul's threshold read as on or off, COLLECTIVE_MATMUL_OFF_MIB)."""
        out = {name: g.key_value for name, g in self.groups().items() if g.key_value is not None}
        threshold = out.get("collective_matmul")
        if isinstance(threshold, (int, float)) and not isinstance(threshold, bool):
            out["collective_matmul"] = threshold < COLLECTIVE_MATMUL_OFF_MIB
        return out

    def set_groups(self) -> tuple[str, ...]:
        """The names of the groups the string sets any flag of."""
        return tuple(name for name, g in self.groups().items() if g.is_set)

    def get(self, flag: str) -> FlagValue | None:
        """The value of any flag (known or not, without dashes), or None when the string does not set it."""
        for s in self.settings:
            if s.name == flag:
                return s.value
        return None

    @property
    def scoped_vmem_limit_kib(self) -> int | None:
        value = self.scoped_vmem_limit.get("xla_tpu_scoped_vmem_limit_kib")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def pcie_bandwidth_multiplier(self) -> float | None:
        value = self.pcie_bandwidth.get("xla_tpu_pcie_bandwidth_multiplier")
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def is_known_flag(flag: str) -> bool:
    """Whether `flag` (without dashes) belongs to any group."""
    return any(spec.has(flag) for spec in GROUP_SPECS)


def flag_kind(flag: str) -> FlagKind | None:
    """The value kind of a known flag (`bool` unless listed otherwise), None for an unknown one."""
    if flag in _KINDS:
        return _KINDS[flag]
    return "bool" if is_known_flag(flag) else None


_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
_TRUE = frozenset({"true", "t", "1", "yes", "y"})
_FALSE = frozenset({"false", "f", "0", "no", "n"})
_INT = re.compile(r"[+-]?\d+\Z")
_FLOAT = re.compile(r"[+-]?(\d+\.?\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?)\Z")


def _as_bool(text: str) -> bool | None:
    low = text.lower()
    return True if low in _TRUE else False if low in _FALSE else None


def _typed(text: str, kind: FlagKind | None) -> tuple[FlagValue, str | None]:
    """The value of `text` for a flag of `kind`, and a problem message when it does not read as that kind (the
    text itself is then the value). An unknown flag's value is guessed: boolean words, whole numbers, decimals,
    else text."""
    if kind == "str":
        return text, None
    if kind == "bool":
        b = _as_bool(text)
        return (text, f"expects true or false, got {_short(text)}") if b is None else (b, None)
    if kind == "int":
        n = _whole(text)
        return (n, None) if n is not None else (text, f"expects a whole number, got {_short(text)}")
    if kind == "float":
        x = _number(text)
        return (x, None) if x is not None else (text, f"expects a number, got {_short(text)}")
    low = text.lower()
    if low in ("true", "false"):
        return low == "true", None
    n = _whole(text)
    if n is not None:
        return n, None
    x = _number(text)
    return (x, None) if x is not None else (text, None)


# Longer numbers are kept as text: int() refuses over 4,300 digits (Python's int_max_str_digits) and no flag takes
# a value near this many.
_MAX_DIGITS = 40


def _whole(text: str) -> int | None:
    return int(text) if len(text) <= _MAX_DIGITS and _INT.match(text) else None


def _number(text: str) -> float | None:
    """A finite decimal (1e999 overflows to infinity, which is no JSON number), else None."""
    if len(text) > _MAX_DIGITS or not _FLOAT.match(text):
        return None
    x = float(text)
    return x if math.isfinite(x) else None


def _short(text: str) -> str:
    """A value as a message quotes it: a huge one cut to its first 40 characters."""
    return repr(text) if len(text) <= 40 else repr(text[:40]) + f"... ({len(text):,} characters)"


def parse_xla_flags(text: str | None) -> XlaFlags:
    """Read a `LIBTPU_INIT_ARGS` or `XLA_FLAGS` string (shell quoting already stripped) into MaxText's flag groups.
    Never raises: what cannot be read is in `problems`. None or an empty string is a run that states no flags."""
    latest: dict[str, FlagSetting] = {}
    counts: dict[str, int] = {}
    problems: list[FlagProblem] = []
    tokens = text.split() if isinstance(text, str) else []
    for position, token in enumerate(tokens):
        if not token.startswith("-") or token in ("-", "--"):
            problems.append(FlagProblem(token, position, "not a flag: flags start with -- (or -)"))
            continue
        body = token[2:] if token.startswith("--") else token[1:]
        name, eq, value_text = body.partition("=")
        if not _NAME.match(name):
            problems.append(FlagProblem(token, position, f"not a flag name: {_short(name)}"))
            continue
        value: FlagValue
        text_value: str | None
        if not eq:
            kind = flag_kind(name)
            if kind is None and name.startswith("no") and flag_kind(name[2:]) == "bool":
                # absl's --noflag: a known boolean set false.
                name, value, text_value = name[2:], False, None
            elif kind in (None, "bool"):
                value, text_value = True, None
            else:
                problems.append(FlagProblem(token, position, f"--{name} needs a value (--{name}=...)"))
                continue
        else:
            text_value = value_text
            value, message = _typed(value_text, flag_kind(name))
            if message is not None:
                problems.append(FlagProblem(token, position, f"--{name} {message}; kept as written"))
        counts[name] = counts.get(name, 0) + 1
        # A repeated flag keeps its first appearance's place in the order (a dict keeps a key's place on
        # reassignment) and takes the last appearance's value, absl's rule.
        latest[name] = FlagSetting(name, value, text_value, position)
    settings = tuple(latest.values())
    groups = {
        spec.name: FlagGroup(spec.name, spec.library_constant, tuple(s for s in settings if spec.has(s.name)), spec.key)
        for spec in GROUP_SPECS
    }
    return XlaFlags(
        **groups,
        settings=settings,
        unknown=tuple(s for s in settings if not is_known_flag(s.name)),
        repeated=tuple(name for name, n in counts.items() if n > 1),
        problems=tuple(problems),
    )
