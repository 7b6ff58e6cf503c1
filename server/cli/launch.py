"""`asap check|estimate|analyze FILE` on a launch file (a shell script, Makefile, Kubernetes manifest, XPK command
or Markdown code block holding MaxText runs, server/launch/): one result per run, each with where the run is.

Text: a heading per run (`launch.sh:111: run 1 of 2 (xpk: MaxText.train MaxText/configs/base.yml on tpu7x-256)`)
then what the same command prints for a YAML config. JSON: `{"file", "runs": [...]}`, each run's entry holding
`index`, `line` (1-based), `kind` (train, benchmark_runner, xpk), `slice`, `mesh`, `model`, `xla_flags`,
`findings` and `estimate` as for a YAML config (analyze adds `report`, the `asap analyze --json` document).
A file with no run is "nothing to check", exit 0. `--run N` picks run N (1-based, file order).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from server.agents.report import AnalysisReport
from server.cli import render
from server.common.findings import Severity, Span
from server.config.mesh import check
from server.config.resolve import with_overrides
from server.config.run_flags import CLI_HOW, FlagSource
from server.launch.analysis import LaunchAnalysis, RunAnalysis, analyze_launch, is_launch_file
from server.launch.project import Positions, map_finding, map_span
from server.perf.estimate import EstimateError, estimate

__all__ = ["RunAnalysis", "analyze_launch", "is_launch_file", "launch_analysis", "run_heading"]


def launch_analysis(path: Path, text: str, args: argparse.Namespace, flags: FlagSource | None) -> LaunchAnalysis | str:
    """The runs of the file (`--run N` keeps run N), or why `--run` cannot be honoured."""
    la = analyze_launch(path, text, default_slice=getattr(args, "slice", None), flags=flags)
    n = getattr(args, "run", None)
    if n is not None:
        if not 1 <= n <= len(la.runs):
            return f"--run {n}: {path} has {len(la.runs)} run{'s' if len(la.runs) != 1 else ''}"
        la.runs = [la.runs[n - 1]]
    return la


def run_heading(path: Path, ra: RunAnalysis, total: int) -> str:
    run = ra.run
    what = run.module if run.config is None else f"{run.module} {run.config.text}"
    if run.recipe is not None:
        what += f" --model_name={run.recipe.value}"
    sl = ra.analysis.check.slice
    on = f" on {sl.name}" + (f" x{sl.num_slices}" if sl is not None and sl.num_slices > 1 else "") if sl else ""
    return f"{path}:{ra.line + 1}: run {ra.index} of {total} ({run.kind}: {what}{on})"


def errors_in(la: LaunchAnalysis) -> bool:
    return any(f.severity == Severity.ERROR for r in la.runs for f in r.findings)


def check_text(la: LaunchAnalysis, total: int) -> str:
    path = la.path
    if not la.runs:
        return f"{path}: no MaxText run in this launch file; nothing to check"
    out: list[str] = []
    for ra in la.runs:
        out.append(run_heading(Path(str(path)), ra, total))
        for f in ra.findings:
            out.append("  " + render.finding_line(f, path))
            out.extend(f"      fix: {fx.title}" for fx in f.fixes)
        chk = ra.analysis.check
        if chk.slice is not None:
            line = f"  slice {chk.slice.describe()} from {_slice_source(ra)}"
            if chk.resolved:
                line += "; " + render.mesh_label(chk.degrees("ici"), chk.degrees("dcn"), ici_prefix="ICI ")
            out.append(line)
        out.append(f"  {ra.analysis.config.run_flags.hover_line(CLI_HOW)}")
        errors = sum(f.severity == Severity.ERROR for f in ra.findings)
        warnings = sum(f.severity == Severity.WARNING for f in ra.findings)
        out.append(f"  {errors} error(s), {warnings} warning(s)")
    return "\n".join(out)


def _slice_source(ra: RunAnalysis) -> str:
    src = ra.analysis.check.slice_source
    if src == "comment" and ra.run.device is not None:
        return ra.run.device.label
    return src


def run_json(ra: RunAnalysis) -> dict[str, Any]:
    doc = ra.to_json()
    if doc.get("slice"):
        doc["slice"]["source"] = _slice_source(ra)
    return doc


def check_json(la: LaunchAnalysis) -> dict[str, Any]:
    return {"file": str(la.path), "runs": [run_json(r) for r in la.runs]}


def estimate_runs(
    la: LaunchAnalysis, overrides: dict[str, Any], as_json: bool, total: int, default_slice: str | None
) -> tuple[int, Any]:
    """Each run's estimate (with --mesh over it): the JSON document or the text, and the exit status (1 when a
    run has errors or does not fit, as `asap estimate` on a config)."""
    status = 0
    docs: list[dict[str, Any]] = []
    texts: list[str] = []
    path = Path(str(la.path))
    positions = Positions(la.text)
    for ra in la.runs:
        cfg = with_overrides(ra.analysis.config, overrides) if overrides else ra.analysis.config
        chk = check(cfg, default_slice)
        findings = [map_finding(ra.document, f, la.path, positions) for f in [*cfg.findings, *chk.findings]]
        errors = [f for f in findings if f.severity == Severity.ERROR]
        est = None
        if not errors:
            try:
                est = estimate(cfg, chk)
            except EstimateError as e:
                errors = [map_finding(ra.document, _no_estimate(cfg, e), la.path, positions)]
        entry = run_json(ra)
        entry["overrides_asked"] = overrides
        texts.append(run_heading(path, ra, total))
        if est is None:
            status = 1
            entry["findings"] = [
                f.to_json() for f in sorted([*findings, *(e for e in errors if e not in findings)], key=_where)
            ]
            entry["estimate"] = None
            texts.extend("  " + render.finding_line(f, la.path) for f in errors)
        else:
            entry["estimate"] = est.to_json()
            status = max(status, 0 if est.memory.launches else 1)
            texts.append(render.estimate(path, est))
            texts.append(f"  {cfg.run_flags.hover_line(CLI_HOW)}")
        docs.append(entry)
    if as_json:
        return status, {"file": str(la.path), "runs": docs}
    return status, "\n".join(texts) if texts else f"{la.path}: no MaxText run in this launch file; nothing to check"


def located_report(doc: AnalysisReport, ra: RunAnalysis) -> AnalysisReport:
    """The agents' report on a run's document, its findings at their lines in the launch file."""
    mapped = [
        f.model_copy(update={"line": map_span(ra.document, Span.point(f.line - 1), ra.positions).line + 1})
        for f in doc.findings
    ]
    return doc.model_copy(update={"findings": mapped})


def analyze_runs(
    la: LaunchAnalysis, report_of: Callable[[RunAnalysis], AnalysisReport], as_json: bool
) -> tuple[int, dict[str, Any] | None]:
    """`asap analyze` on each run: its heading and the agents' report (printed as it comes), or with `as_json` the
    document `{"file", "runs": [{..., "report"}]}`; the exit status is 1 when a run has errors."""
    path = Path(str(la.path))
    runs: list[dict[str, Any]] = []
    status = 0
    if not la.runs and not as_json:
        print(f"{la.path}: no MaxText run in this launch file; nothing to check")
    for ra in la.runs:
        doc = report_of(ra)
        if any(f.severity == "error" for f in doc.findings):
            status = 1
        if as_json:
            runs.append({**run_json(ra), "report": doc.to_json()})
        else:
            print(run_heading(path, ra, len(la.runs)))
            render.analysis(doc)
    return status, ({"file": str(la.path), "runs": runs} if as_json else None)


def _where(f: Any) -> tuple[int, int, str]:
    return (f.span.line, f.span.column, f.code)


def _no_estimate(cfg: Any, e: EstimateError) -> Any:
    from server.cli.commands import _no_estimate as no_estimate

    return no_estimate(cfg, e)
