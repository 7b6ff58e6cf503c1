"""A config's profile, end to end: resolve the link, read the profile through XProf (cached),
analyze it against the declared slice and mesh, compare with the performance model, and say it
as located findings. Shared by the CLI (`asap profile`) and the language server; no editor types.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from server.common.codes import DiagCode
from server.common.findings import Finding, Severity
from server.common.progress import CancelToken, Progress
from server.config.axes import AXES
from server.config.mesh import MeshCheck
from server.perf import layout
from server.perf.collectives import path
from server.profiles import profile as prof
from server.profiles import profile_convert, profile_link
from server.profiles.profile_convert import ProfileFiles
from server.services.analysis import Analysis

SUMMARY = DiagCode.PROFILE_VERDICT
MISMATCH = DiagCode.PROFILE_OTHER_SLICE
UNREADABLE = DiagCode.PROFILE_NOT_READ
NOTE = DiagCode.PROFILE_NOTE


@dataclass
class ProfileResult:
    link: profile_link.Link | None
    files: ProfileFiles | None
    report: prof.Report | None
    findings: list[Finding] = field(default_factory=list)
    cached: bool = False


def mesh_of(chk: MeshCheck) -> list[prof.MeshAxis] | None:
    """The config's device mesh in MaxText's axis order (sizes = ICI x DCN), None if not consistent."""
    if chk.slice is None or not chk.consistent:
        return None
    ici = chk.degrees("ici")
    dcn = chk.degrees("dcn")
    return [prof.MeshAxis(a.name, ici.get(a.name, 1), dcn.get(a.name, 1)) for a in AXES]


def _axis_bandwidth(chk: MeshCheck) -> Callable[[tuple[str, ...]], float | None] | None:
    """ICI bandwidth per device (both directions) of the physical links a group of mesh axes occupies on the
    declared slice, as the performance model prices it (server/perf/collectives.py path())."""
    lay = layout.from_check(chk)
    if lay is None:
        return None

    def bw(axes: tuple[str, ...]) -> float | None:
        known = [a for a in axes if a in lay.ici]
        if not known or lay.ici_degree(*known) <= 1:
            return None
        return path(lay, tuple(known)).ici_bw or None

    return bw


def program_devices(report: prof.Report, tools: dict[str, Any]) -> int | None:
    """Devices of the profiled SPMD program: replica groups partition all of them, so the largest
    device id in any group plus one."""
    from server.profiles import hlo

    t = prof._table_with(tools.get("hlo_stats"), "hlo_op_name")
    best = None
    for r in t.rows if t else []:
        c = hlo.parse_collective(str(r.get("hlo_op_expression") or ""), str(r.get("category") or ""))
        if c is not None and c.groups:
            m = max((d for g in c.groups for d in g), default=-1) + 1
            best = m if best is None else max(best, m)
    return best


def analyze_tools(tools: dict[str, Any], an: Analysis | None, source: str) -> tuple[prof.Report, list[Finding]]:
    """The report for `tools` read against the config of `an` (its declared slice and mesh)."""
    chk = an.check if an else None
    sl = chk.slice if chk else None
    mesh = mesh_of(chk) if chk else None
    report = prof.analyze(tools, sl.chip if sl else None, mesh, source, _axis_bandwidth(chk) if chk else None)
    findings: list[Finding] = []
    if an is None or sl is None:
        return report, findings
    file, span = an.config.anchor("compile_topology")
    if an.config.declared_slice_span is not None and an.config.entry("compile_topology") is None:
        file, span = an.config.path, an.config.declared_slice_span
    gen = report.kpis.generation
    if report.kpis.device_type and gen != sl.chip.generation:
        msg = (
            f"the linked profile ran on {report.kpis.device_type} ({gen or 'unknown generation'}), but this config "
            f"declares {sl.name} ({sl.chip.device_kind}); ASAP compares the profile with {sl.name}'s peaks"
        )
        report.warnings.append(msg)
        findings.append(Finding(MISMATCH, Severity.WARNING, msg, "compile_topology", file, span))
    n = program_devices(report, tools)
    if n is not None and n != sl.devices:
        msg = (
            f"the linked profile's program ran on {n} devices (its collectives' replica groups), but this config "
            f"declares {sl.describe()} = {sl.devices} devices: the profile is of another slice size"
        )
        report.warnings.append(msg)
        findings.append(Finding(MISMATCH, Severity.WARNING, msg, "compile_topology", file, span))
    if not findings and an.estimate is not None and report.kpis.steps is not None:
        report.comparison = compare(report, an)
    return report, findings


def compare(report: prof.Report, an: Analysis) -> dict[str, Any]:
    """Measured against the performance model's expectation for the same mesh."""
    est = an.estimate
    assert est is not None and report.kpis.steps is not None
    measured_s = report.kpis.steps.median_ms / 1e3
    sl = est.layout.slice
    mfu = est.model_flops_per_step / (measured_s * sl.total_chips * sl.chip.peak_bf16_flops)
    kind, _, _ = est.time.bottleneck()
    return {
        "expected_step_s": est.time.step_s,
        "measured_step_s": measured_s,
        "step_gap": measured_s / est.time.step_s - 1,
        "expected_mfu": est.mfu,
        "measured_mfu": mfu,
        "expected_bottleneck": kind,
        "measured_bottleneck": report.verdict.bottleneck,
        "expected_comm_share": est.time.exposed_comm_s / est.time.step_s,
        "measured_comm_share": report.collectives.share,
        "host_only": report.host_only,
        "formula": "measured_mfu = model FLOPs per step (server/perf/arith.py) / (median step x chips x peak)",
    }


def summary(report: prof.Report) -> str:
    v = report.verdict
    parts = [f"Profile: {v.bottleneck}-bound (confidence {v.confidence:.0%})"]
    if v.bottleneck == "communication" and report.collectives.by_kind:
        kind, g = next(iter(report.collectives.by_kind.items()))
        axis = next(iter(report.collectives.by_axis), None)
        parts.append(
            f"collectives {report.collectives.share:.0%} of step ({kind} {g.fraction:.0%}"
            + (f", mostly on {axis})" if axis else ")")
        )
    else:
        parts.append(f"{v.bottleneck} {v.shares.get(v.bottleneck, 0):.0%} of step")
    st = report.kpis.steps
    if st is not None:
        parts.append(f"median step {st.median_ms:.1f} ms over {len(st.used_ms)} steps")
    c = report.comparison
    if c:
        parts.append(
            f"{abs(c['step_gap']):.0%} {'slower' if c['step_gap'] > 0 else 'faster'} than estimated "
            f"(MFU {c['measured_mfu']:.0%} vs {c['expected_mfu']:.0%})"
        )
    return "; ".join(parts)


def at_link(link: profile_link.Link, code: str, sev: Severity, msg: str) -> Finding:
    """A finding shown where the profile is linked (the comment, base_output_directory, or line 1)."""
    return Finding(code, sev, msg, link.key, link.file, link.span)


def run(
    an: Analysis,
    workspace: Path | None,
    progress: Progress | None = None,
    cancel: CancelToken | None = None,
    cached_only: bool = False,
    search_paths: list[Path] | None = None,
) -> ProfileResult:
    """The profile result for a config. With `cached_only`, a profile that needs converting is left
    for later (result with files set and report None)."""
    link, findings = profile_link.resolve(an.config, workspace, search_paths)
    if link is None:
        return ProfileResult(None, None, None, findings)

    def located(code: str, sev: Severity, msg: str) -> Finding:
        return at_link(link, code, sev, msg)

    try:
        pf = profile_convert.find_profile(link.path)
        if cached_only and not profile_convert.is_cached(pf):
            return ProfileResult(link, pf, None, findings)
        tools, cached = profile_convert.load_tools(pf, progress, cancel)
    except prof.ProfileError as e:
        findings.append(located(UNREADABLE, Severity.WARNING, f"profile not read: {e}"))
        return ProfileResult(link, None, None, findings)
    pf_desc = pf.describe()
    try:
        report, more = analyze_tools(tools, an, pf_desc)
    except prof.ProfileError as e:
        findings.append(located(UNREADABLE, Severity.WARNING, f"profile not read: {e}"))
        return ProfileResult(link, pf, None, findings)
    findings += more
    findings.append(located(SUMMARY, Severity.INFORMATION, summary(report)))
    for w in report.warnings:
        if not any(w in f.message for f in more):
            findings.append(located(NOTE, Severity.INFORMATION, w))
    return ProfileResult(link, pf, report, findings, cached)
