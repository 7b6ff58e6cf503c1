"""The hover: the agents' diagnosis first on a key it implicates, then the explanation of what is under the cursor
(a diagnostic, a key, a profile link; server/presentation/explain.py writes all of it)."""

from __future__ import annotations

from lsprotocol import types as lsp

from server.editor import lsp_convert
from server.editor.server import AsapServer
from server.presentation import agent_findings, explain


def hover(ls: AsapServer, params: lsp.HoverParams) -> lsp.Hover | None:
    doc = ls.workspace.get_text_document(params.text_document.uri)
    line, col = lsp_convert.server_position(doc, params.position)
    an = ls.analyze_doc(doc)
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
    if found is None:
        return None
    md, span = found
    return lsp.Hover(
        contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=md),
        range=lsp_convert.client_range(doc, span),
    )
