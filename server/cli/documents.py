"""The `--json` documents of the `asap` commands as pydantic models: the CLI checks every document it prints
against its command's model (`checked`), and `asap mcp` (server/mcp_server/) publishes the same models as its
tools' output schemas, so the schema an agent reads and the JSON the CLI prints cannot drift apart.

The top-level keys are declared (no unlisted key passes); the parts that already have typed models
(server/agents/report.py: the estimate, the XLA flags, the analysis report, server/services/experiments.py's
Outcome) are typed with them, and the rest is typed loosely (`dict[str, Any]` for a finding, a slice, a
launch file's run, a model summary, a profile report's parts): modelling those fully would rewrite their
producers' `to_json`. A key that only one shape of a document has (a YAML config's against a launch file's) is
optional and absent, never null, where that shape does not write it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from server.agents.report import AnalysisReport, EstimateView, XlaFlagsView
from server.services.experiments import Outcome

__all__ = [
    "AnalyzeDocument",
    "CheckDocument",
    "ErrorsDocument",
    "EstimateDocument",
    "KbSearchDocument",
    "ModelsDocument",
    "Outcome",
    "ProfileDocument",
    "VerifyDocument",
    "checked",
]


def _no_default(schema: dict[str, Any]) -> None:
    schema.pop("default", None)


def _absent() -> Any:
    """A key some shapes of the document do not write: optional, and without a `default` in the schema."""
    return Field(default=None, json_schema_extra=_no_default)


class _Document(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorEntry(_Document):
    kind: str = Field(description="read, usage, internal, or the command's own (model, outcome, kb, verify)")
    message: str
    file: str | None = _absent()


class ErrorsDocument(_Document):
    """What a `--json` run prints when there is no report: why (exit status 2 or 3, or the command's own)."""

    errors: list[ErrorEntry]


class FileErrors(_Document):
    """`asap check A.yml B.yml --json`: the entry of a file that cannot be read, or that ASAP failed on."""

    file: str
    errors: list[ErrorEntry]


class CheckDocument(_Document):
    """`asap check FILE --json` for one file: a YAML config's findings (with their locations and fixes), slice,
    mesh and estimate; or a launch file's `file` and `runs` (one entry per MaxText run, with its `index`, `line`,
    findings and estimate). `asap estimate --json` prints this document too when the asked mesh has errors (then
    with `overrides` and `xla_flags`)."""

    file: str | None
    is_maxtext_config: bool | None = _absent()
    slice: dict[str, Any] | None = _absent()
    model: str | None = _absent()
    mesh: dict[str, Any] | None = _absent()
    findings: list[dict[str, Any]] | None = _absent()
    estimate: dict[str, Any] | None = _absent()
    overrides: dict[str, Any] | None = _absent()
    xla_flags: dict[str, Any] | None = _absent()
    runs: list[dict[str, Any]] | None = _absent()


class EstimateDocument(EstimateView):
    """`asap estimate CONFIG --json`: the estimate of the config's mesh (or of `--mesh` over it), the run's XLA
    flags, and with `--top N` the N fastest valid meshes of the slice (`alternatives`)."""

    model_config = ConfigDict(extra="forbid", strict=False)
    OMIT_IF_NONE = frozenset({"alternatives"})

    xla_flags: XlaFlagsView
    alternatives: list[dict[str, Any]] | None = _absent()


class LaunchDocument(_Document):
    """A launch file's `asap check|estimate|analyze --json`: each run's entry (server/cli/launch.py)."""

    file: str
    runs: list[dict[str, Any]]


class AnalyzeDocument(AnalysisReport):
    """`asap analyze CONFIG --json` (schema/analyze.schema.json)."""


class ModelsDocument(_Document):
    """`asap models --json` prints a list; a tool's structured output is an object, so the list is `models`."""

    models: list[dict[str, Any]]


class ProfileDocument(_Document):
    """`asap profile PATH --json`: the profile's source, KPIs, top ops and categories, collectives, bottleneck verdict,
    the comparison with the config when one is given, implausible ops and warnings (parts typed loosely:
    server/profiles/profile.py's Report.to_json)."""

    source: str
    kpis: dict[str, Any]
    top_ops: list[dict[str, Any]]
    top_categories: list[dict[str, Any]]
    collectives: dict[str, Any]
    verdict: dict[str, Any]
    comparison: dict[str, Any] | None
    implausible_ops: list[dict[str, Any]]
    warnings: list[str]


class VerifyDocument(_Document):
    """`asap verify CONFIG --json` for one config: the TPU compiler's verdict on its mesh (server/compile/verify.py's
    result: `status`, `message`, `fits`, `compiled` with the compiler's memory figures, `cached`, ...; parts typed
    loosely), or with `--proposals` each mesh's verdict (`results`), the proposals the compiler withdrew
    (`withdrawn`) and `compiler_note`."""

    status: str | None = _absent()
    message: str | None = _absent()
    slice: str | None = _absent()
    mesh: dict[str, Any] | None = _absent()
    program: str | None = _absent()
    fits: bool | None = _absent()
    compiled: dict[str, Any] | None = _absent()
    estimate: dict[str, Any] | None = _absent()
    disagreements: list[Any] | None = _absent()
    versions: dict[str, Any] | None = _absent()
    cached: bool | None = _absent()
    detail: str | None = _absent()
    needs_bytes: float | None = _absent()
    available_bytes: float | None = _absent()
    results: list[dict[str, Any]] | None = _absent()
    withdrawn: list[dict[str, Any]] | None = _absent()
    compiler_note: str | None = _absent()


class KbSearchDocument(_Document):
    """`asap kb search QUERY --json`: the query and the passages found (source, id, kind, title, heading, text,
    score, ...)."""

    query: str
    results: list[dict[str, Any]]


def checked(model: type[BaseModel], doc: Any) -> Any:
    """`doc` unchanged, after checking it against `model` (a document that no longer matches its schema fails here,
    in the CLI's own tests, before an agent reads a schema that lies)."""
    model.model_validate(doc)
    return doc


def either(name: str, doc: str, *models: type[BaseModel]) -> type[BaseModel]:
    """One object model holding the keys of every shape in `models`, each optional (absent where a shape does not
    write it): a tool's output schema must be one object, while `asap estimate|analyze FILE` prints a YAML config's
    document or a launch file's. The CLI checks each document against its exact shape (`checked`); this model
    is what the schema publishes."""
    fields: dict[str, Any] = {}
    for m in models:
        for key, info in m.model_fields.items():
            if key not in fields:
                fields[key] = (info.annotation | None, _absent())  # type: ignore[operator]
    made: type[BaseModel] = create_model(name, __config__=ConfigDict(extra="forbid"), __doc__=doc, **fields)
    return made


EstimateResult = either(
    "EstimateResult",
    "A YAML config's estimate (EstimateDocument's keys) or a launch file's runs (`file`, `runs`).",
    EstimateDocument,
    LaunchDocument,
)
AnalyzeResult = either(
    "AnalyzeResult",
    "A YAML config's analysis (schema/analyze.schema.json's keys) or a launch file's runs (`file`, `runs`).",
    AnalyzeDocument,
    LaunchDocument,
)
