"""The code lenses above the mesh block: the estimate's summary, the agents' and the TPU compiler's verdicts when
fresh, and the actions Analyze, Verify, Show roofline and Proposals."""

from __future__ import annotations

from lsprotocol import types as lsp

from server.editor import lsp_convert
from server.editor.contract import ClientCommand, ServerCommand
from server.editor.server import AsapServer
from server.presentation import agent_findings, verification


def code_lens(ls: AsapServer, params: lsp.CodeLensParams) -> list[lsp.CodeLens]:
    doc = ls.workspace.get_text_document(params.text_document.uri)
    an = ls.analyze_doc(doc)
    anchor = an.config.mesh_anchor() if an.config.is_maxtext else None
    if anchor is None:
        return []
    rng = lsp_convert.client_range(doc, anchor.key_span)

    def lens(title: str, command: str = "", *args: object) -> lsp.CodeLens:
        return lsp.CodeLens(range=rng, command=lsp.Command(title=title, command=command, arguments=list(args) or None))

    lenses = []
    if an.estimate is not None:
        lenses.append(lens(an.estimate.summary()))
    report = ls.agents_of(doc)
    if report is not None:
        lenses.append(lens(agent_findings.lens_title(report)))
    st = ls.state(doc.uri)
    verified = st.verified.fresh(doc.version) if st.verified is not None else None
    entry = verification.current_entry(verified) if verified is not None else None
    if entry is not None:
        lenses.append(lens(f"TPU compiler: {verification.summary(entry.result)}"))
    lenses.append(lens("Analyze", ServerCommand.RUN_AGENTS, doc.uri))
    if an.estimate is not None:
        lenses.append(lens("Verify", ServerCommand.VERIFY, doc.uri))
        lenses.append(lens("Show roofline", ClientCommand.SHOW_ROOFLINE, doc.uri))
    if report is not None and any(not p.keep_current for p in report.proposals):
        # the proposals' quick fixes, offered wherever the cursor is in the file: open them at the mesh block
        lenses.append(lens("Proposals", ClientCommand.SHOW_PROPOSALS, doc.uri, rng.start.line, rng.start.character))
    return lenses
