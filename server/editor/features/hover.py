"""The hover: the agents' diagnosis first on a key it implicates, then the explanation of what is under the cursor
(a diagnostic, a key, a profile link; server/presentation/explain.py writes all of it).

It answers from what is ready and never waits for an analysis: when the analysis of the document as it is now is
still running (or waiting for the debounce), a line with content gets the short `ANALYSING` hover, and hovering
again once the diagnostics are published shows the full one. A document over the size limit has only its ASAP007
diagnostic to explain.
"""

from __future__ import annotations

from lsprotocol import types as lsp
from pygls.workspace import TextDocument

from server.common.findings import Finding, Severity, Span
from server.editor import lsp_convert
from server.editor.server import AsapServer
from server.launch import analysis as launch
from server.presentation import explain
from server.services.analysis import Analysis

ANALYSING = "ASAP: analysing… (hover again in a moment)"


def hover(ls: AsapServer, params: lsp.HoverParams) -> lsp.Hover | None:
    doc = ls.workspace.get_text_document(params.text_document.uri)
    line, col = lsp_convert.server_position(doc, params.position)
    big = ls.too_large(doc)
    if big is not None:
        return _hover(doc, explain.diagnostic_md([big], line, col))
    an = ls.ready_analysis(doc)
    if an is None:
        return None if ls.analysis_failed(doc) else _analysing(doc, line)
    if an.runs is not None:  # a launch file: the run's token under the cursor
        found = launch_hover(an, line, col, ls.shown(doc, an, agents=False))
        hit = launch.run_at(an.runs, line, col)
        report = ls.run_agents_of(doc, hit[0].index) if hit is not None else None
        if found is not None and report is not None:  # the agents' diagnosis and proposals of that run
            found = (f"{explain.agent_md(report, stale=False, verified=None)}\n\n---\n\n{found[0]}", found[1])
        return _hover(doc, found)
    st = ls.state(doc.uri)
    shown = ls.shown(doc, an, agents=False)  # the diagnosis has its own section (explain.agent_md)
    found = (explain.profile_hover(st.profile, line, col) if st.profile else None) or explain.hover(
        an, line, col, shown
    )
    if st.agents is not None:  # on a key the diagnosis implicates: the diagnosis, and the errors there
        stale = st.agents.version != doc.version
        for span in _diagnosis_spans(ls, doc, an):
            if span.line == line and span.column <= col <= span.end_column:
                verified = st.verified.fresh(doc.version) if st.verified is not None else None
                md = explain.agent_md(st.agents.value, stale=stale, verified=verified)
                urgent = explain.diagnostic_md([f for f in shown if f.severity < Severity.INFORMATION], line, col)
                own = explain.key_md(an, line, col, short=True)
                parts = [md, urgent[0] if urgent else None, own]
                found = ("\n\n---\n\n".join(p for p in parts if p), span)
                break
    return _hover(doc, found)


def launch_hover(an: Analysis, line: int, col: int, shown: list[Finding]) -> tuple[str, Span] | None:
    """A launch file's hover: the diagnostics there, then which run the token belongs to and the explanation of its
    key as the run's config resolves it (the run's estimate when the token is the command's own)."""
    urgent = explain.diagnostic_md(shown, line, col)
    recipe = launch.recipe_at(an.runs or [], line, col)
    if recipe is not None:  # `--model_name=RECIPE`: the recipe, where MaxText defines it
        ra, sp = recipe
        parts = [p for p in (urgent[0] if urgent else None, launch.recipe_md(ra)) if p]
        if ra.analysis.estimate is not None:
            parts.append(ra.analysis.estimate.summary())
        return "\n\n".join(parts), sp
    hit = launch.run_at(an.runs or [], line, col)
    if hit is None:
        return urgent
    ra, vline, vcol, span = hit
    run = ra.run
    sl = ra.analysis.check.slice
    head = f"**ASAP · run {ra.index}** ({run.kind}: `{run.module}`" + (f", {sl.describe()}" if sl else "") + ")"
    parts = [p for p in (urgent[0] if urgent else None, head) if p]
    own = explain.key_md(ra.analysis, vline, vcol, short=urgent is not None)
    if own:
        parts.append(own)
    if ra.analysis.estimate is not None:
        parts.append(ra.analysis.estimate.summary())
    parts.append(ra.analysis.config.run_flags.hover_line())
    return "\n\n".join(parts), span


def _diagnosis_spans(ls: AsapServer, doc: TextDocument, an: Analysis) -> list[Span]:
    """Where the diagnosis is: the key it is published on and the others it implicates (related locations)."""
    return [s for f in ls.diagnosis(doc, an) for s in (f.span, *(r.span for r in f.related if r.file == f.file))]


def _hover(doc: TextDocument, found: tuple[str, Span] | None) -> lsp.Hover | None:
    if found is None:
        return None
    md, span = found
    return lsp.Hover(
        contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=md),
        range=lsp_convert.client_range(doc, span),
    )


def _analysing(doc: TextDocument, line: int) -> lsp.Hover | None:
    """The short answer while the analysis runs, on a line with content (not on a blank or comment line)."""
    lines = doc.lines
    text = lines[line].strip() if 0 <= line < len(lines) else ""
    if not text or text.startswith("#"):
        return None
    return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=ANALYSING))
