"""The agents' result (the typed `asap analyze --json` document, server/agents/report.py) as editor findings
and quick fixes: the diagnosis as a finding on each key it implicates (with what would fit when no mesh does), and
each proposal as a fix whose edits are the minimal rewrite of the config (server/config/apply.py), made safe
(server/config/safe_edits.py) and re-validated before it is offered. No editor types here.
"""

from __future__ import annotations

import logging
import re
from dataclasses import replace

from server.agents.report import AnalysisReport, CompilerVerdictView, FitOptionView, NothingFitsView, ProposalView
from server.common.codes import DiagCode
from server.common.findings import Finding, Fix, Severity, Span
from server.config import axes
from server.config.apply import ApplyError, apply_text, proposal_edits
from server.config.resolve import Reader
from server.config.safe_edits import Vetted, vet_fix
from server.launch.analysis import RunAnalysis, reads_back
from server.launch.project import launch_edits
from server.perf import wording
from server.services.analysis import Analysis, analyze

log = logging.getLogger("asap")

DIAGNOSIS_CODE = DiagCode.AGENTS
STALE = "[stale: the config changed since this analysis; save to refresh] "
_SEVERITY = {
    "communication": Severity.WARNING,
    "hbm": Severity.WARNING,
    "memory": Severity.WARNING,
    "input": Severity.WARNING,
    "host": Severity.WARNING,
    "compute": Severity.INFORMATION,
}


def mesh_label(p: ProposalView) -> str:
    """The proposal's mesh as people read it (axes.mesh_label), then its other changes."""
    other = ", ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in p.other_changes.items())
    return axes.mesh_label(p.ici, p.dcn) + (f"; {other}" if other else "")


_AHEAD = re.compile(r" ?\((\d+%) of the step ahead of the next\)")


def plain(text: str) -> str:
    """A producer's sentence in plain words: '(8% of the step ahead of the next)' says what it measures."""
    return _AHEAD.sub(r" (\1 of the step more than the next-largest part)", text)


_VERDICT = re.compile(r"^\w+-bound (by the estimate|in the profile) ?")


def summary_words(summary: str) -> str:
    """The diagnosis' summary after the verdict a message already says ('compute-bound (estimate, confidence 50%):'),
    its first parenthesis opened: 'compute 49% of the step, exposed communication close behind (41% of the step)'."""
    summary = plain(summary)
    m = _VERDICT.match(summary)
    if m is None:
        return summary
    rest = summary[m.end() :]
    if rest.startswith("(") and (close := rest.find(")")) > 0 and "(" not in rest[1:close]:
        rest = rest[1:close] + rest[close + 1 :]
    return rest.lstrip(", ;") or summary


def compiler_rejects(c: CompilerVerdictView | None) -> bool:
    """Whether the TPU compiler's verdict rules the proposal out (it does not fit, cannot be placed, or fails)."""
    return c is not None and (c.fits is False or c.status in ("does-not-fit", "unplaceable", "error"))


def rejection_words(c: CompilerVerdictView) -> str:
    """Why the compiler rules a proposal out, in a few words: 'does not fit (TPU compiler)'."""
    if c.status == "unplaceable":
        return "cannot be placed (TPU compiler)"
    if c.status == "error":
        return "fails to compile (TPU compiler)"
    return "does not fit (TPU compiler)"


def usable(report: AnalysisReport) -> list[ProposalView]:
    """The proposals that change the mesh and that the compiler has not ruled out (not compiled counts as usable)."""
    return [p for p in report.proposals if not p.keep_current and not compiler_rejects(p.compiler)]


def ruled_out(report: AnalysisReport) -> list[ProposalView]:
    """The proposals the compiler ruled out: withdrawn, or marked while the verification still runs."""
    marked = [p for p in report.proposals if not p.keep_current and compiler_rejects(p.compiler)]
    return [*(report.withdrawn or []), *marked]


def proposal_title(p: ProposalView) -> str:
    """'Apply proposal 1: fsdp=16 (expected ×1.48, confidence 69%)'; ', fits (TPU compiler)' once compiled, and
    'Apply proposal 1: fsdp=16: does not fit (TPU compiler)' when the compiler ruled it out."""
    head = f"Apply proposal {p.rank}: {mesh_label(p)}"
    c = p.compiler
    if c is not None and compiler_rejects(c):
        return f"{head}: {rejection_words(c)}"
    sp = p.expected.speedup
    expected = f"expected ×{sp:.2f}" if sp is not None else "the current mesh does not launch"
    verified = ", fits (TPU compiler)" if c is not None and c.fits else ""
    return f"{head} ({expected}, confidence {p.confidence:.0%}{verified})"


def fit_option_text(o: FitOptionView, short: bool = False) -> str:
    """One way to fit where nothing does, as people read it: 'per_device_batch_size: 2 on v5e-16 with fsdp=16:
    step 3,012 ms, 21,756 tokens/s, MFU 55.0%, HBM 16.6 of 15.75 GiB usable (tight)'; `short`: the changes, the mesh and
    the step time only."""
    changes = ", ".join(f"{k}: {str(v).lower() if isinstance(v, bool) else v}" for k, v in o.changes.items())
    where = f" ({o.chips} chips)" if "compile_topology" in o.changes else f" on {o.slice}"
    head = f"{changes}{where} with {axes.mesh_label(o.ici, o.dcn)}"
    if short:
        return f"{head} ({o.step_s * 1e3:,.0f} ms a step)"
    tight = " (tight)" if o.verdict == "tight" else ""
    return (
        f"{head}: step {o.step_s * 1e3:,.0f} ms, {o.tokens_per_s:,.0f} tokens/s, MFU {o.mfu:.1%}, "
        f"HBM {o.hbm_bytes / 2**30:.1f} of {wording.gib(o.usable_bytes)} GiB usable{tight}"
    )


def nothing_fits_text(nf: NothingFitsView) -> str:
    """The headline and the options in one sentence each (the diagnostic where there is no proposal)."""
    if not nf.options:
        return f"{nf.summary}. Nothing ASAP can price fits: {'; '.join(nf.tried)}"
    return f"{nf.summary}. What would fit: {'; '.join(fit_option_text(o, short=True) for o in nf.options)}"


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def proposals_segment(report: AnalysisReport) -> str:
    """The advice in a few words: '3 proposals (best ×1.48, confidence 69%)', 'keep this mesh', '3 proposals fit (TPU
    compiler; best ×1.48, confidence 69%)' once compiled, '3 proposals (best ×1.43, confidence 69%) · 2 withdrawn'
    when the compiler ruled some out (why is in the diagnosis, its hover and the status bar's tooltip: the lens row,
    with the compiler's own verdict beside it, must fit an editor with the side bar open), 'no proposal fits (TPU
    compiler; 3 withdrawn)' when it ruled out all."""
    if any(p.keep_current for p in report.proposals):
        return "keep this mesh (no clearly better one)"
    ok, out = usable(report), ruled_out(report)
    if not ok:
        return f"no proposal fits (TPU compiler; {len(out)} withdrawn)" if out else "no proposal"
    best = ok[0]
    sp = best.expected.speedup
    gain = f"best ×{sp:.2f}" if sp is not None else f"best MFU {best.expected.mfu:.0%}"
    figures = f"{gain}, confidence {best.confidence:.0%}"
    n = _count(len(ok), "proposal")
    if out:
        return f"{n} ({figures}) · {len(out)} withdrawn"
    if all(p.compiler is not None and p.compiler.fits for p in ok):
        return f"{n} {'fits' if len(ok) == 1 else 'fit'} (TPU compiler; {figures})"
    return f"{n} ({figures})"


def lens_title(report: AnalysisReport, mfu: float | None = None) -> str:
    """The agents' verdict in one short line (the code lens above the mesh block): 'ASAP: compute-bound · MFU 25% ·
    3 proposals (best ×1.48, confidence 69%)'; every number labelled."""
    d = report.diagnosis
    if not usable(report) and not ruled_out(report) and report.nothing_fits is not None:
        return f"ASAP: no mesh of {report.nothing_fits.slice} fits (what would: see the diagnostic)"
    if d is None or d.bottleneck in ("invalid", "unknown"):
        head = "ASAP: the mesh does not launch" if d is not None and d.bottleneck == "invalid" else "ASAP"
    else:
        head = f"ASAP: {d.bottleneck}-bound"
    parts = [head]
    if mfu is not None:
        parts.append(f"MFU {mfu:.0%}")
    parts.append(proposals_segment(report))
    return " · ".join(parts)


def lens_tooltip(report: AnalysisReport) -> str | None:
    """What the summary lens' line leaves out about the compiler: each withdrawn proposal with the compiler's words,
    and the estimate's disagreement with the compiler (said once). None when the compiler has said nothing."""
    lines = [f"Withdrawn: {mesh_label(p)}: {p.compiler.message}" for p in ruled_out(report) if p.compiler is not None]
    if report.compiler_note:
        lines.append(report.compiler_note)
    return "\n".join(lines) or None


def diagnosis_findings(result: AnalysisReport, an: Analysis, stale: bool) -> list[Finding]:
    """The diagnosis on every implicated key written in this document (else on the mesh block or line 1)."""
    d = result.diagnosis
    if d is None or d.bottleneck == "invalid":
        return []  # an invalid mesh already has its located errors
    props = usable(result)
    out = ruled_out(result)
    keep = next((p for p in result.proposals if p.keep_current), None)
    if keep is not None:
        advice = "no clearly better mesh: keep the current one"
    elif props:
        p1, sp = props[0], props[0].expected.speedup
        fits = ", fits (TPU compiler)" if p1.compiler is not None and p1.compiler.fits else ""
        advice = f"proposal {p1.rank}: {mesh_label(p1)}" + (f" (expected ×{sp:.2f}{fits})" if sp is not None else "")
    elif out:
        advice = "no proposal the TPU compiler accepts"
    elif result.nothing_fits is not None:
        advice = nothing_fits_text(result.nothing_fits)
    else:
        advice = "no proposal"
    if out:
        names = ", ".join(
            f"[{mesh_label(p)}] {rejection_words(p.compiler).removesuffix(' (TPU compiler)')}"
            for p in out
            if p.compiler is not None
        )
        advice += f". Withdrawn by the TPU compiler: {names}"
    if result.compiler_note:
        advice += f". {result.compiler_note}"
    first = d.evidence[0].text if d.evidence else ""
    msg = (
        f"{STALE if stale else ''}{d.bottleneck}-bound ({d.source}, confidence {d.confidence:.0%}): "
        f"{summary_words(d.summary)}. {plain(first)}. {advice}"
    )
    cfg = an.config
    spans: list[tuple[str | None, Span]] = []
    for key in d.keys:
        e = cfg.entry(key)
        if e is not None:
            spans.append((key, e.key_span))
    if not spans:
        e = cfg.mesh_anchor()
        spans.append((e.key, e.key_span) if e is not None else (None, Span.point(0)))
    sev = _SEVERITY.get(d.bottleneck, Severity.INFORMATION)
    return [
        Finding(DIAGNOSIS_CODE, sev, msg, key, cfg.path, span, data={"rank": 0}) for key, span in dict(spans).items()
    ]


def proposal_offers(result: AnalysisReport, an: Analysis, text: str, reader: Reader | None = None) -> list[Vetted]:
    """Each proposal that changes something as a fix through safe_edits.vet_fix (written in the file's line
    endings, never through an alias, a merge key or a shared anchor, and read back intact), offered only when its
    result re-validates to exactly the proposed mesh. A refused one (`refused`) keeps its reason, for an editor to
    show; one that would not launch as proposed is left out. A proposal the TPU compiler ruled out (withdrawn, or
    marked while the verification runs) is never applied: it comes refused, its title saying why, for an editor to
    show disabled."""
    out: list[Vetted] = [
        Vetted(proposal_title(p), reason=f"withdrawn: {p.compiler.message}", refused=True)
        for p in ruled_out(result)
        if p.compiler is not None
    ]
    for p in result.proposals:
        if p.keep_current or compiler_rejects(p.compiler):
            continue
        try:
            edits = proposal_edits(an.config, p.ici, p.dcn, p.other_changes)
        except ApplyError as e:
            log.info("proposal %d not offered: %s", p.rank, e)
            continue
        if not edits:
            continue
        fix = Fix(proposal_title(p), tuple(edits), preferred=p.rank == 1, proposal=p.rank)
        vetted = vet_fix(text, fix, path=an.path, document=an.config.document)
        if vetted.text is None:
            if vetted.refused:
                out.append(vetted)
            continue
        after = analyze(an.path, vetted.text, reader) if reader else analyze(an.path, vetted.text)
        chk = after.check
        errors = [f for f in after.findings if f.severity == Severity.ERROR]
        ici, dcn = chk.degrees("ici", drop_ones=True), chk.degrees("dcn", drop_ones=True)
        if errors or (ici, dcn) != (p.ici, p.dcn):
            log.info("proposal %d not offered: the edited config would not launch as proposed", p.rank)
            continue  # never offer an edit that would not launch as proposed
        out.append(vetted)
    return out


def run_proposal_offers(
    result: AnalysisReport, ra: RunAnalysis, text: str, reader: Reader | None = None
) -> list[Vetted]:
    """A launch file's run: its proposals vetted on the run's document as a config's are (proposal_offers), each
    then written as edits of the launch file (server/launch/project.py launch_edits: values in their tokens, new keys
    appended to the command); one that cannot be written there is left out. `text`: the launch file's."""
    out: list[Vetted] = []
    for v in proposal_offers(result, ra.analysis, ra.document.text, reader):
        if v.fix is None or v.text is None:
            out.append(v)
            continue
        try:
            edits = launch_edits(ra.document, v.text, ra.analysis.path, ra.positions)
        except ValueError as e:
            log.info("proposal %s not offered for run %d: %s", v.fix.proposal, ra.index, e)
            continue
        if not reads_back(ra.document, ra.index, v.text, edits, ra.analysis.path, ra.positions, ra.language_id):
            log.info(
                "proposal %s not offered for run %d: the launch file would not read back", v.fix.proposal, ra.index
            )
            continue
        fix = replace(v.fix, edits=tuple(edits))
        out.append(Vetted(v.title, fix=fix, text=apply_text(text, list(edits))))
    return out


def proposal_fixes(result: AnalysisReport, an: Analysis, text: str, reader: Reader | None = None) -> list[Fix]:
    """One fix per proposal that changes something, whose edits re-validate to exactly the proposed mesh (none the
    TPU compiler ruled out)."""
    return [v.fix for v in proposal_offers(result, an, text, reader) if v.fix is not None]
