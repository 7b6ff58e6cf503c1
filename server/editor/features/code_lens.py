"""The code lenses above the mesh block: one short line with the verdict, the MFU and the advice ("ASAP:
compute-bound · MFU 25% · 3 proposals (best ×1.48, confidence 69%)"; the estimate's until the agents answer), the
TPU compiler's verdict on the current mesh when fresh (in place of Verify, which a click on it runs again), and the
actions Roofline, Proposals, and Analyze until the agents have answered.

They answer from what is ready and never wait for an analysis: while the analysis of the document as it is now
runs, the lens row stays where the last analysis put it (its line, clamped to the document) with "ASAP: analysing…"
and Analyze, and the client is asked to refresh its lenses (`workspace/codeLens/refresh`) once the analysis is
published. A document over the size limit has no lenses.
"""

from __future__ import annotations

from lsprotocol import types as lsp
from pygls.workspace import TextDocument

from server.common.findings import Severity, Span
from server.editor import lsp_convert
from server.editor.contract import ClientCommand, ServerCommand
from server.editor.server import AsapServer
from server.launch.analysis import RunAnalysis
from server.perf import wording
from server.perf.estimate import Estimate
from server.presentation import agent_findings, verification

ANALYSING = "ASAP: analysing…"


def _lens(rng: lsp.Range, title: str, command: str = "", *args: object, tooltip: str | None = None) -> lsp.CodeLens:
    cmd = lsp.Command(title=title, command=command, arguments=list(args) or None, tooltip=tooltip)
    return lsp.CodeLens(range=rng, command=cmd)


def code_lens(ls: AsapServer, params: lsp.CodeLensParams) -> list[lsp.CodeLens]:
    doc = ls.workspace.get_text_document(params.text_document.uri)
    if ls.too_large(doc) is not None:
        return []
    an = ls.ready_analysis(doc)
    if an is None:
        return [] if ls.analysis_failed(doc) else _analysing(ls, doc)
    if an.runs is not None:  # a launch file: one row per run, on its command's first line
        return [lens for ra in an.runs for lens in _run_lenses(ls, doc, ra, len(an.runs) > 1)]
    anchor = an.config.mesh_anchor() if an.config.is_maxtext else None
    if anchor is None:
        return []
    rng = lsp_convert.client_range(doc, anchor.key_span)

    def lens(title: str, command: str = "", *args: object, tooltip: str | None = None) -> lsp.CodeLens:
        return _lens(rng, title, command, *args, tooltip=tooltip)

    lenses = []
    report = ls.agents_of(doc)
    est = an.estimate
    if report is not None:
        title = agent_findings.lens_title(report, est.mfu if est is not None else None)
        lenses.append(lens(title, tooltip=agent_findings.lens_tooltip(report)))
    elif est is not None:
        lenses.append(lens(estimate_title(est)))
    st = ls.state(doc.uri)
    verified = st.verified.fresh(doc.version) if st.verified is not None else None
    entry = verification.current_entry(verified) if verified is not None else None
    if report is None:  # the agents run on open and save; before they answer, or when they failed, on request
        lenses.append(lens("Analyze", ServerCommand.RUN_AGENTS, doc.uri))
    if est is not None:
        # the compiler's verdict on the current mesh once known (a click verifies again), else the action
        job = st.jobs.get("verify")
        if entry is not None:
            # when the row also counts withdrawn proposals, the verdict's words alone keep it within an editor with
            # the side bar open (its figures are in the tooltip and on the mesh block's diagnostic)
            crowded = report is not None and bool(agent_findings.ruled_out(report))
            verdict = verification.summary(entry.result, figures=not crowded)
            title, why = f"TPU compiler: {verdict}", entry.result.message
            lenses.append(lens(title, ServerCommand.VERIFY, doc.uri, tooltip=f"{why}. Click to verify again."))
        elif job is not None and not job.done():
            # its steps, elapsed time and cancel are in the client's progress
            lenses.append(lens("TPU compiler: compiling…", tooltip="The current mesh first, then the proposals"))
        elif ls.settings.trusted:  # an untrusted workspace compiles nothing (settings.restricted)
            lenses.append(lens("Verify", ServerCommand.VERIFY, doc.uri))
        lenses.append(lens("Roofline", ClientCommand.SHOW_ROOFLINE, doc.uri))
    if report is not None and agent_findings.usable(report):
        # the proposals' quick fixes, offered wherever the cursor is in the file: open them at the mesh block
        lenses.append(lens("Proposals", ClientCommand.SHOW_PROPOSALS, doc.uri, rng.start.line, rng.start.character))
    return lenses


def _run_lenses(ls: AsapServer, doc: TextDocument, ra: RunAnalysis, several: bool) -> list[lsp.CodeLens]:
    """A launch file's run, on the command's first line: the agents' verdict once they answered, else its estimate
    in one line (or what stops it) and Analyze; Proposals when the agents have some."""
    rng = lsp_convert.client_range(doc, Span.point(ra.span.line, ra.span.column))
    est = ra.analysis.estimate
    report = ls.run_agents_of(doc, ra.index)
    sl = ra.analysis.check.slice
    tip = f"Run {ra.index} ({ra.run.kind}: {ra.run.module})" + (f" on {sl.describe()}" if sl else "")
    if report is not None:
        title = agent_findings.lens_title(report, est.mfu if est is not None else None)
        tip = f"{tip}. {agent_findings.lens_tooltip(report) or ''}".strip()
    elif est is not None:
        title = estimate_title(est)
    else:
        errors = sum(f.severity == Severity.ERROR for f in ra.findings)
        title = f"ASAP: run {ra.index}: {errors} error{'s' if errors != 1 else ''}, no estimate" if errors else "ASAP"
    lenses = [_lens(rng, title, tooltip=tip)]
    if report is None and est is not None:
        lenses.append(_lens(rng, "Analyze", ServerCommand.RUN_AGENTS, doc.uri))
    if est is not None:  # the compiler's verdict on the run's mesh once known (a click verifies again), else Verify
        target = f"{doc.uri}#run={ra.index}" if several else doc.uri
        got = ls.state(doc.uri).run_verified.get(ra.index)
        entry = verification.current_entry(got.value) if got is not None and got.version == doc.version else None
        job = ls.state(doc.uri).jobs.get("verify")
        if entry is not None:
            verdict = verification.summary(entry.result, figures=True)
            lenses.append(
                _lens(rng, f"TPU compiler: {verdict}", ServerCommand.VERIFY, target, tooltip=entry.result.message)
            )
        elif job is not None and not job.done():
            lenses.append(_lens(rng, "TPU compiler: compiling…"))
        elif ls.settings.trusted:
            lenses.append(_lens(rng, "Verify", ServerCommand.VERIFY, target))
    if est is not None:  # the run's roofline (`#run=N` names the run when the file has several)
        lenses.append(
            _lens(rng, "Roofline", ClientCommand.SHOW_ROOFLINE, f"{doc.uri}#run={ra.index}" if several else doc.uri)
        )
    if report is not None and agent_findings.usable(report):
        lenses.append(
            _lens(rng, "Proposals", ClientCommand.SHOW_PROPOSALS, doc.uri, rng.start.line, rng.start.character)
        )
    return lenses


def estimate_title(est: Estimate) -> str:
    """The estimate in one short line until the agents answer: 'ASAP: compute-bound · MFU 25% · HBM 20.6 of 31.25 GiB
    (estimate)'."""
    kind = est.time.bottleneck()[0]
    gib = 2**30
    return (
        f"ASAP: {kind}-bound · MFU {est.mfu:.0%} · HBM {est.memory.total / gib:.1f} of "
        f"{wording.gib(est.memory.usable)} GiB (estimate)"
    )


def _analysing(ls: AsapServer, doc: TextDocument) -> list[lsp.CodeLens]:
    """While the analysis runs: the row where the last analysis had it (no row if it had none)."""
    st = ls.state(doc.uri)
    st.lens_waiting = True
    last = st.last.value if st.last is not None else None
    anchor = last.config.mesh_anchor() if last is not None and last.config.is_maxtext else None
    if anchor is None:
        return []
    line = max(0, min(anchor.key_span.line, len(doc.lines) - 1))
    rng = lsp.Range(lsp.Position(line, 0), lsp.Position(line, 0))
    return [_lens(rng, ANALYSING), _lens(rng, "Analyze", ServerCommand.RUN_AGENTS, doc.uri)]
