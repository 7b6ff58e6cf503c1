"""Quick fixes: each diagnostic's own fixes (found again by the identity in the diagnostic's `data`), and the
agents' "Apply proposal N" when their report is of the text as it is now. A proposal's action carries its rank
(in `data` and in the "record the applied proposal" command), never recovered from its title."""

from __future__ import annotations

from typing import Any

from lsprotocol import types as lsp

from server.editor import lsp_convert
from server.editor.contract import ServerCommand
from server.editor.server import AsapServer
from server.presentation import agent_findings

OPTIONS = lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix], resolve_provider=True)


def code_action(ls: AsapServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
    doc = ls.workspace.get_text_document(params.text_document.uri)
    an = ls.analyze_doc(doc)  # for the document as it is now: fixes never apply to stale text
    actions: list[lsp.CodeAction] = []
    for diag in params.context.diagnostics:
        if diag.source != lsp_convert.SOURCE:
            continue
        for f in an.diagnostics:
            if not lsp_convert.is_diagnostic_of(f, diag, doc):
                continue
            for fix in f.fixes:
                action = lsp_convert.code_action(fix, doc, diag)
                if action is not None:
                    actions.append(action)
    report = ls.agents_of(doc)
    if report is not None:  # proposals never apply to text they were not made for
        on = [d for d in params.context.diagnostics if d.code == agent_findings.DIAGNOSIS_CODE]
        for fix in agent_findings.proposal_fixes(report, an, doc.source, ls.read):
            action = lsp_convert.code_action(fix, doc, on[0] if on else None)
            if action is None or fix.proposal is None:
                continue
            if report.experiment:  # after the edit, the editor runs it: the applied proposal is logged
                action.command = lsp.Command(
                    title="Record the applied proposal",
                    command=ServerCommand.RECORD_APPLIED,
                    arguments=[report.experiment, fix.proposal, doc.uri],
                )
            if ls.features.resolve_edit:  # the edit is computed on codeAction/resolve
                action.data = {"uri": doc.uri, "version": doc.version, "proposal": fix.proposal}
                action.edit = None
            actions.append(action)
    return actions


def code_action_resolve(ls: AsapServer, action: lsp.CodeAction) -> lsp.CodeAction:
    """The proposal's edit, for the document as it is now (nothing when it moved on since the action was listed)."""
    data: dict[str, Any] = action.data if isinstance(action.data, dict) else {}
    doc = ls.workspace.text_documents.get(str(data.get("uri", "")))
    report = ls.agents_of(doc) if doc is not None else None
    if doc is None or report is None or doc.version != data.get("version"):
        return action
    an = ls.analyze_doc(doc)
    for fix in agent_findings.proposal_fixes(report, an, doc.source, ls.read):
        if fix.proposal == data.get("proposal"):
            resolved = lsp_convert.code_action(fix, doc, action.diagnostics[0] if action.diagnostics else None)
            if resolved is not None:
                action.edit = resolved.edit
    return action
