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

from server.common.findings import Span
from server.editor import lsp_convert
from server.editor.server import AsapServer
from server.presentation import agent_findings, explain

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
    st = ls.state(doc.uri)
    # each diagnostic under the cursor explained (the agents' diagnosis has its own section below)
    shown = ls.shown(doc, an, agents=False)
    found = (explain.profile_hover(st.profile, line, col) if st.profile else None) or explain.hover(
        an, line, col, shown
    )
    if st.agents is not None:  # on a key the diagnosis implicates: the diagnosis first, then the key's own hover
        stale = st.agents.version != doc.version
        for f in agent_findings.diagnosis_findings(st.agents.value, an, stale=stale):
            if f.span.line == line and f.span.column <= col <= f.span.end_column:
                verified = st.verified.fresh(doc.version) if st.verified is not None else None
                md = explain.agent_md(st.agents.value, stale=stale, verified=verified)
                found = (md + ("\n\n---\n\n" + found[0] if found else ""), f.span)
                break
    return _hover(doc, found)


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
