"""The agents' result as typed models: the document `asap analyze --json` prints, the analysis cache stores,
the language server keeps per document and every front end reads. Defined once here, mirroring exactly the
JSON that `Result.to_json()` (server/agents/types.py) and the nested `to_json()`s write, so a reader works with
attributes instead of string keys and a change of shape fails validation instead of a reader far away.

The published JSON schema (schema/analyze.schema.json) is generated from `AnalysisReport` by
tools/write_generated.py; tests/test_report_schema.py keeps the two equal and checks real CLI output against it.

Conventions: every model forbids keys it does not list and is strict about types (a string is not a chip
count), so drift is caught where the document is parsed; `Number` keeps an int an int and a float a float, so
dumping a parsed document gives back the same JSON; a few keys are written only when they have a value
(OMIT_IF_NONE), as the producers write them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    SerializerFunctionWrapHandler,
    WithJsonSchema,
    model_serializer,
)
from pydantic.json_schema import SkipJsonSchema

if TYPE_CHECKING:
    from server.services.analysis import Analysis

# A JSON number as the producer wrote it: int stays int, float stays float (a plain `float` field would turn
# 32 into 32.0 and change the printed document).
Number = Annotated[int | float, WithJsonSchema({"type": "number"})]


def _no_default(schema: dict[str, Any]) -> None:
    schema.pop("default", None)


def _absent() -> Any:
    """The default of a key written only when it has a value: optional in the schema, never null."""
    return Field(default=None, json_schema_extra=_no_default)


class _Doc(BaseModel):
    """A part of the document: no unlisted keys, no coerced types, assignments validated, some keys absent
    rather than null."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, strict=True)
    OMIT_IF_NONE: ClassVar[frozenset[str]] = frozenset()  # keys written only when they have a value

    @model_serializer(mode="wrap")
    def _omit_unset_keys(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        for k in self.OMIT_IF_NONE:
            if k in out and out[k] is None:
                del out[k]
        return out

    @classmethod
    def from_json(cls, doc: Any) -> Self:
        """Parse (and check) this part from its JSON (`json.loads` output or a producer's `to_json()`)."""
        return cls.model_validate(doc)

    def to_json(self) -> dict[str, Any]:
        """The JSON document (plain dicts, lists and numbers, key order as declared)."""
        return self.model_dump(mode="json")


# -- the config ------------------------------------------------------------------------------------------
class SliceInfo(_Doc):
    name: str
    chips: int
    devices: int
    num_slices: int
    topology: list[int]


class MeshDegrees(_Doc):
    """Every mesh axis' degree, by axis name (ici and dcn)."""

    ici: dict[str, int]
    dcn: dict[str, int]


class ConfigFinding(_Doc):
    """A static-check or estimate finding on the config (line is 1-based)."""

    code: str
    severity: str  # error | warning | information | hint
    message: str
    key: str | None
    line: int


# -- the estimate (server/perf/estimate.py Estimate.to_json) ----------------------------------------------
class ModelShape(_Doc):
    name: str
    emb: int
    layers: int
    q_heads: int
    kv_heads: int
    mlp: int
    vocab: int
    experts: int


class BytesPerParam(_Doc):
    weights: Number
    gradients: Number
    optimizer: Number


class EstimateMemory(_Doc):
    """HBM per device (bytes, rounded)."""

    components: dict[str, int]
    total_bytes: int
    hbm_bytes: int
    usable_bytes: int
    headroom_bytes: int
    fits: bool
    verdict: str  # fits | tight | does not fit
    # components counted in full that the compiler may not keep (the estimate errs high there), one line each
    uncertain: list[str]


class StepTime(_Doc):
    """Seconds per step and its parts (server/perf/steptime.py)."""

    compute_s: Number
    hbm_s: Number
    comm_s: Number
    exposed_comm_s: Number
    bubble_s: Number
    comm_by_axis: dict[str, Number]
    exposed_comm_by_axis: dict[str, Number]
    step_s: Number


class EstimateCollective(_Doc):
    axis: str
    kind: str
    purpose: str
    count: Number  # per step
    bytes_each: int
    seconds: Number


class AxisLink(_Doc):
    """The links one mesh axis' collectives run over."""

    ici_degree: int
    dcn_degree: int
    ici_bytes_per_s: Number
    physical: str


class MatmulPlanView(_Doc):
    """The peak the weight matmuls run at under the config's quantization (server/perf/quantization.py)."""

    quantization: str
    dtype: str
    passes: list[str]
    grouped_moe: bool
    peak_flops_per_chip: Number
    native: bool
    peak_source: str
    speedup: Number
    mode_source: str | None
    note: str
    bf16_peak_flops_per_chip: Number
    quantized_flops_fraction: Number
    effective_peak_flops_per_chip: Number


class RidgePoints(_Doc):
    """FLOPs per byte where HBM, one ICI axis and DCN stop limiting."""

    hbm: Number
    ici_axis: Number
    dcn: Number


class RooflinePoint(_Doc):
    """One component of the step on the roofline, per device (server/perf/roofline.py)."""

    OMIT_IF_NONE = frozenset({"dtype"})
    name: str
    flops: Number
    hbm_bytes: Number
    operational_intensity: Number | None  # None: no HBM bytes
    attainable_flops_per_s: Number
    peak_flops_per_s: Number
    seconds: Number
    bound: str  # compute | hbm
    dtype: str | SkipJsonSchema[None] = _absent()  # quantized weight matmuls only


class Roofline(_Doc):
    ridge_points: RidgePoints
    points: list[RooflinePoint]


class OverlapTermView(_Doc):
    """One collective term of the step (or host offload's copies one way) and what the overlap model exposes of it
    (server/perf/steptime.py OverlapTerm)."""

    axis: str  # the mesh-axis group (`host` for host offload)
    kind: str  # all-gather, reduce-scatter, all-reduce, all-to-all, collective-permute; device-to-host, host-to-device
    seconds: Number  # as if nothing overlapped
    hidden: Number  # share run asynchronously, 0 to 1
    window: str  # the compute it hides behind: none, matmul, layer, forward, backward
    window_s: Number  # that compute's seconds (shared by every term behind it)
    exposed_s: Number
    source: str  # measured (the overlap table's row and versions) or assumed


class Assumptions(_Doc):
    mxu_efficiency: Number
    attention_efficiency: Number
    hbm_efficiency: Number
    memory_bound_factor: Number
    roofline_overlap: Number
    overlap: list[OverlapTermView]


class EstimateSources(_Doc):
    chip: dict[str, str]  # spec field -> source
    formulas: dict[str, str]


class EstimateView(_Doc):
    """The performance model's estimate for one mesh (`Estimate.to_json()`)."""

    slice: SliceInfo
    mesh: MeshDegrees
    model: ModelShape
    params: Number
    active_params: Number
    tokens_per_step: Number
    flops_per_step: Number
    executed_flops_per_step: Number
    remat_policy: str
    bytes_per_param: BytesPerParam
    memory: EstimateMemory
    time: StepTime
    collectives: list[EstimateCollective]
    links: dict[str, AxisLink]
    tokens_per_s: Number
    tflops_per_chip: Number
    mfu: Number
    mfu_at_matmul_peak: Number
    matmuls: MatmulPlanView
    bottleneck: str
    margin: Number
    attribution_s: dict[str, Number]
    roofline: Roofline
    assumptions: Assumptions
    sources: EstimateSources


# -- the run's XLA flags (server/config/run_flags.py RunFlags.to_json) --------------------------------------
FlagValue = Annotated[bool | int | float | str, WithJsonSchema({"type": ["boolean", "number", "string"]})]


class XlaFlagGroupView(_Doc):
    """One of MaxText's flag groups the flags set: its key flag's value (None: not stated, libtpu's default) and
    every flag of it the string sets."""

    library_constant: str | None
    key: str | None
    key_value: FlagValue | None
    flags: dict[str, FlagValue]


class XlaFlagUnknown(_Doc):
    name: str
    value: FlagValue


class XlaFlagProblem(_Doc):
    """A token not read as written, a flag given twice, or a string cut short; `line` and `column` (1-based) for a
    config comment's."""

    OMIT_IF_NONE = frozenset({"line", "column"})
    message: str
    token: str | None
    line: int | SkipJsonSchema[None] = _absent()
    column: int | SkipJsonSchema[None] = _absent()


class XlaFlagsView(_Doc):
    """The XLA flags the estimates are priced under and where they were read: `source` cli (--xla-flags), comment
    (`# LIBTPU_INIT_ARGS=...` in the config, on `lines`), setting (asap.xlaFlags) or libtpu_defaults (none
    stated); the groups set, the unknown flags (kept), the repeated ones and the problems (at most 20 listed)."""

    source: str
    described: str
    lines: list[int]
    variables: list[str]
    text: str | None
    groups: dict[str, XlaFlagGroupView]
    unknown: list[XlaFlagUnknown]
    repeated: list[str]
    problems: list[XlaFlagProblem]
    problems_total: int


# -- the profile (server/profiles/profile.py Report.to_json) ----------------------------------------------
class StepOutlier(_Doc):
    step: str
    ms: Number


class StepStats(_Doc):
    count: int
    used: int
    mean_ms: Number
    median_ms: Number
    stddev_ms: Number
    raw_mean_ms: Number
    raw_stddev_ms: Number
    outliers: list[StepOutlier]


class ProfileKpis(_Doc):
    device_type: str | None
    generation: str | None
    cores: int | None
    hosts: int | None
    peak_flops_per_core: Number | None
    peak_hbm_bw_per_core: Number | None
    steps: StepStats | None
    duty_cycle: Number | None
    idle_fraction: Number | None
    input_fraction: Number | None
    mxu_utilization: Number | None
    goodput: Number | None
    flop_utilization: Number | None


class ProfileOp(_Doc):
    name: str
    category: str
    occurrences: int
    self_time_us: Number
    self_time_fraction: Number
    flop_utilization: Number | None
    hbm_bw_utilization: Number | None
    operational_intensity: Number | None
    bound_by: str | None
    framework_op: str | None
    layer: str | None
    implausible_flops: bool


class ImplausibleOp(_Doc):
    """An op whose FLOP or byte count is above the chip's peaks (its bound is not believed)."""

    name: str
    category: str
    self_time_fraction: Number
    claimed_efficiency: Number | None
    framework_op: str | None


class CategoryShare(_Doc):
    category: str
    self_time_fraction: Number


class CollectiveGroupView(_Doc):
    self_time_us: Number
    fraction: Number
    occurrences: int
    payload_bytes: Number
    achieved_bw: Number | None
    bw_utilization: Number | None
    group_sizes: dict[str, int]
    crosses_slices: bool


class ProfileCollectives(_Doc):
    share: Number
    by_kind: dict[str, CollectiveGroupView]
    by_axis: dict[str, CollectiveGroupView]
    bw_reference: str


class ProfileVerdict(_Doc):
    bottleneck: str
    confidence: Number
    rule: str
    evidence: list[str]
    shares: dict[str, Number]


class Comparison(_Doc):
    """A profile measured against the estimate for the same mesh (server/services/profile_analysis.py)."""

    expected_step_s: Number
    measured_step_s: Number
    step_gap: Number
    expected_mfu: Number
    measured_mfu: Number
    expected_bottleneck: str
    measured_bottleneck: str
    expected_comm_share: Number
    measured_comm_share: Number
    host_only: bool
    formula: str


class ProfileView(_Doc):
    """What the linked profile says the accelerators did (`Report.to_json()`)."""

    source: str
    kpis: ProfileKpis
    top_ops: list[ProfileOp]
    top_categories: list[CategoryShare]
    collectives: ProfileCollectives
    verdict: ProfileVerdict
    comparison: Comparison | None
    implausible_ops: list[ImplausibleOp]
    warnings: list[str]


# -- the agents ----------------------------------------------------------------------------------------------
class EvidenceView(_Doc):
    text: str
    source: str


class DiagnosisView(_Doc):
    """The Analyzer's diagnosis (`Diagnosis.to_json()`)."""

    bottleneck: str  # compute | hbm | communication | input | host | memory | unknown | invalid
    confidence: Number
    evidence: list[EvidenceView]
    keys: list[str]  # the config keys implicated
    source: str  # profile | estimate | config
    summary: str
    gap: Comparison | None


class ProposalExpected(_Doc):
    step_s: Number
    mfu: Number
    speedup: Number | None  # throughput against the current config; None when the current mesh does not launch


class ProposalMemory(_Doc):
    hbm_bytes: Number
    usable_bytes: Number


class ScheduleView(_Doc):
    """The compiled program's step simulated op by op on the slice (server/compile/schedule_sim.py, issue 27), for
    the full depth (extrapolated per layer from two reduced depths where verify compiled those): the step, the
    TensorCore's busy seconds per op category, and each collective group's (and host offload's) exposed seconds."""

    OMIT_IF_NONE = frozenset({"mfu"})
    step_s: Number
    busy_s: dict[str, Number]
    exposed_s: dict[str, Number]
    mfu: Number | SkipJsonSchema[None] = (
        _absent()
    )  # the estimate's FLOP count over the simulated step (verify.with_schedule_mfu)


class CompilerVerdictView(_Doc):
    """What the TPU compiler said of a proposal's mesh (server/presentation/verification.py, issue 18): `status` is
    the verifier's (ok | does-not-fit | unplaceable | invalid | unavailable | error | cancelled); `fits` None when it
    could not tell; the compiler's per-chip bytes (for an out-of-memory compile, what it asked for) and the limit;
    `schedule` the compiled step simulated (absent when the compile has none)."""

    OMIT_IF_NONE = frozenset({"schedule"})
    status: str
    fits: bool | None
    memory_per_chip_bytes: Number | None
    hbm_limit_bytes: Number | None
    program: str  # reference (ASAP's reference train step) | maxtext (MaxText's own train_compile)
    message: str
    schedule: ScheduleView | None = _absent()


class ProposalView(_Doc):
    """One proposal (`Proposal.to_json()`); `stated_confidence` is the engine's before calibration; `compiler` the TPU
    compiler's verdict once ASAP: Verify has compiled it (absent before)."""

    OMIT_IF_NONE = frozenset({"stated_confidence", "compiler"})
    rank: int
    keep_current: bool
    ici: dict[str, int]  # axes whose degree is not 1
    dcn: dict[str, int]
    other_changes: dict[str, JsonValue]  # per_device_batch_size, remat_policy, gradient_accumulation_steps
    expected: ProposalExpected
    memory: ProposalMemory
    tradeoffs: list[str]
    confidence: Number
    confidence_basis: str
    rationale: str
    references: list[str]
    # meshes the model prices identically (same step time and HBM): the same candidate, written once
    equivalent: list[MeshDegrees] = Field(default_factory=list)
    stated_confidence: Number | SkipJsonSchema[None] = _absent()
    compiler: CompilerVerdictView | SkipJsonSchema[None] = _absent()


class FitOptionView(_Doc):
    """One change that would make a config fit where nothing does, priced on its fastest mesh that launches
    (server/services/nothing_fits.py `FitOption.to_json()`)."""

    kind: str  # per_device_batch_size | remat_policy | host_offload | split_physical_axes | slice
    changes: dict[str, JsonValue]  # YAML keys to set besides the mesh
    slice: str
    chips: int  # per slice
    ici: dict[str, int]  # axes whose degree is not 1
    dcn: dict[str, int]
    step_s: Number
    tokens_per_s: Number  # tokens per second
    tokens_per_step: Number
    mfu: Number
    hbm_bytes: int  # per device
    usable_bytes: int
    verdict: str  # fits | tight
    basis: str
    note: str


class LeastMeshView(_Doc):
    """The mesh of the slice that needs the least HBM per device as configured, and by how much it is over."""

    ici: dict[str, int]
    dcn: dict[str, int]
    hbm_bytes: int
    usable_bytes: int
    over_bytes: int
    state_bytes: int  # weights, their bf16 casts, gradients and optimizer state: no batch or remat changes them


class NothingFitsView(_Doc):
    """No mesh of the slice launches for the config (`NothingFits.to_json()`): the least-memory mesh, the options
    that would fit, each priced, and what was tried and did not."""

    summary: str
    slice: str
    chips: int
    model: str
    per_device_batch_size: Number
    remat_policy: str
    allow_split_physical_axes: bool
    least: LeastMeshView
    options: list[FitOptionView]
    tried: list[str]


class BackendView(_Doc):
    name: str  # offline | claude
    fallback_reason: str | None
    model: str | None


class AnalysisReport(_Doc):
    """The `asap analyze --json` document: the config's slice, mesh and findings, the estimate, the linked
    profile, the diagnosis and the proposals, what would fit when no mesh of the slice does (`nothing_fits`), and
    how they were made. `experiment` is its id in ASAP's experiment log (server/services/experiments.py), present
    once it is logged. After ASAP: Verify, `proposals` are those the TPU compiler did not reject (with their
    verdicts), `withdrawn` those it rejected (does not fit, or fails to compile), `compiler_note` says once why
    the estimate and the compiler differ, and `current_compiler` is the current mesh's verdict."""

    OMIT_IF_NONE = frozenset({"experiment", "withdrawn", "compiler_note", "current_compiler"})
    model_config = ConfigDict(extra="forbid", validate_assignment=True, strict=True, title="ASAP analysis")
    config: str
    slice: SliceInfo | None
    mesh: MeshDegrees | None  # None: no slice, or the mesh does not launch on it
    findings: list[ConfigFinding]
    estimate: EstimateView | None
    xla_flags: XlaFlagsView | None = None  # None: not a MaxText config (or a document from before the flags)
    profile: ProfileView | None
    diagnosis: DiagnosisView | None
    calibration: str | None
    proposals: list[ProposalView]
    # None when some mesh of the slice launches; filled by the Coordinator (server/services/nothing_fits.py)
    nothing_fits: NothingFitsView | None = None
    backend: BackendView
    notes: list[str]
    experiment: str | SkipJsonSchema[None] = _absent()
    withdrawn: list[ProposalView] | SkipJsonSchema[None] = _absent()
    compiler_note: str | SkipJsonSchema[None] = _absent()
    # the current mesh's verdict once ASAP: Verify has compiled it (its simulated schedule: the roofline's point)
    current_compiler: CompilerVerdictView | SkipJsonSchema[None] = _absent()


def record(report: AnalysisReport, an: Analysis, config: Path, text: str, db: Any = None) -> str:
    """Log `report` of `an` in ASAP's experiment log (what it records: experiments.record_analysis); its id."""
    from server.services import experiments

    cmp = report.profile.comparison if report.profile is not None else None
    return experiments.record_analysis(
        an,
        config,
        text,
        diagnosis=None if report.diagnosis is None else report.diagnosis.to_json(),
        proposals=[p.to_json() for p in report.proposals],
        backend=report.backend.name,
        profile=report.profile.source if report.profile is not None else None,
        measured_step_s=cmp.measured_step_s if cmp is not None else None,
        measured_mfu=cmp.measured_mfu if cmp is not None else None,
        db=db,
    )


def json_schema() -> dict[str, Any]:
    """The published JSON schema of the document (JSON Schema 2020-12): schema/analyze.schema.json, written by
    tools/write_generated.py."""
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **AnalysisReport.model_json_schema()}
