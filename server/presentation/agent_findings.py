"""The agents' result (the typed `asap analyze --json` document, server/agents/report.py) as editor findings
and quick fixes: the diagnosis as a finding on each key it implicates (with what would fit when no mesh does), and
each proposal as a fix whose edits are the minimal rewrite of the config (server/config/apply.py), made safe
(server/config/safe_edits.py) and re-validated before it is offered. No editor types here.
"""

from __future__ import annotations

import logging

from server.agents.report import AnalysisReport, FitOptionView, NothingFitsView, ProposalView
from server.common.codes import DiagCode
from server.common.findings import Finding, Fix, Severity, Span
from server.config import axes
from server.config.apply import ApplyError, proposal_edits
from server.config.resolve import Reader
from server.config.safe_edits import Vetted, vet_fix
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


def proposal_title(p: ProposalView) -> str:
    sp = p.expected.speedup
    expected = f"expected x{sp:.2f}" if sp is not None else "the current mesh does not launch"
    return f"Apply proposal {p.rank}: {mesh_label(p)} ({expected}, confidence {p.confidence:.0%})"


def fit_option_text(o: FitOptionView, short: bool = False) -> str:
    """One way to fit where nothing does, as people read it: 'per_device_batch_size: 2 on v5e-16 with fsdp=16:
    step 3,012 ms, 21,756 tokens/s, MFU 55.0%, HBM 16.6 of 15.8 GiB (tight)'; `short`: the changes, the mesh and
    the step time only."""
    changes = ", ".join(f"{k}: {str(v).lower() if isinstance(v, bool) else v}" for k, v in o.changes.items())
    where = f" ({o.chips} chips)" if "compile_topology" in o.changes else f" on {o.slice}"
    head = f"{changes}{where} with {axes.mesh_label(o.ici, o.dcn)}"
    if short:
        return f"{head} ({o.step_s * 1e3:,.0f} ms a step)"
    tight = " (tight)" if o.verdict == "tight" else ""
    return (
        f"{head}: step {o.step_s * 1e3:,.0f} ms, {o.tokens_per_s:,.0f} tokens/s, MFU {o.mfu:.1%}, "
        f"HBM {o.hbm_bytes / 2**30:.1f} of {o.usable_bytes / 2**30:.1f} GiB{tight}"
    )


def nothing_fits_text(nf: NothingFitsView) -> str:
    """The headline and the options in one sentence each (the diagnostic where there is no proposal)."""
    if not nf.options:
        return f"{nf.summary}. Nothing ASAP can price fits: {'; '.join(nf.tried)}"
    return f"{nf.summary}. What would fit: {'; '.join(fit_option_text(o, short=True) for o in nf.options)}"


def lens_title(report: AnalysisReport) -> str:
    """The agents' verdict in one line (the code lens above the mesh block)."""
    if any(p.keep_current for p in report.proposals):
        return "ASAP: keep this mesh (no clearly better one)"
    props = [p for p in report.proposals if not p.keep_current]
    if props and props[0].expected.speedup is not None:
        return f"ASAP: proposal 1 {mesh_label(props[0])} x{props[0].expected.speedup:.2f} (quick fix)"
    if not props and report.nothing_fits is not None:
        return f"ASAP: no mesh of {report.nothing_fits.slice} fits (what would: see the diagnostic)"
    return "ASAP: proposals available (quick fix)"


def diagnosis_findings(result: AnalysisReport, an: Analysis, stale: bool) -> list[Finding]:
    """The diagnosis on every implicated key written in this document (else on the mesh block or line 1)."""
    d = result.diagnosis
    if d is None or d.bottleneck == "invalid":
        return []  # an invalid mesh already has its located errors
    props = [p for p in result.proposals if not p.keep_current]
    keep = next((p for p in result.proposals if p.keep_current), None)
    if keep is not None:
        advice = "no clearly better mesh: keep the current one"
    elif props:
        sp = props[0].expected.speedup
        advice = f"proposal 1: {mesh_label(props[0])}" + (f" (expected x{sp:.2f})" if sp is not None else "")
    elif result.nothing_fits is not None:
        advice = nothing_fits_text(result.nothing_fits)
    else:
        advice = "no proposal"
    first = d.evidence[0].text if d.evidence else ""
    msg = (
        f"{STALE if stale else ''}{d.bottleneck}-bound ({d.source}, confidence {d.confidence:.0%}): "
        f"{d.summary}. {first}. {advice}"
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
    show; one that would not launch as proposed is left out."""
    out: list[Vetted] = []
    for p in result.proposals:
        if p.keep_current:
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


def proposal_fixes(result: AnalysisReport, an: Analysis, text: str, reader: Reader | None = None) -> list[Fix]:
    """One fix per proposal that changes something, whose edits re-validate to exactly the proposed mesh."""
    return [v.fix for v in proposal_offers(result, an, text, reader) if v.fix is not None]
