"""Quick fixes: each diagnostic's own fixes (found again by the identity in the diagnostic's `data`), and the
agents' "Apply proposal N" when their report is of the text as it is now. A proposal's action carries its rank
(in `data` and in the "record the applied proposal" command), never recovered from its title.

Every fix goes through server/config/safe_edits.py before it is offered: written in the file's line endings, read
back and re-checked. One that would break the file or not clear its diagnostic is not offered; one refused because
its value lives behind an alias, a merge key or a shared anchor is shown disabled with its reason (to a client that
supports `disabled`). Vetting re-runs the static checks, so its results are kept per analysis (one per document
version) and fix."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from lsprotocol import types as lsp
from pygls.workspace import TextDocument

from server.agents.report import AnalysisReport
from server.common.findings import Finding, Fix
from server.config.safe_edits import Vetted, static_checks, vet_fix
from server.editor import lsp_convert
from server.editor.contract import ServerCommand
from server.editor.server import AsapServer
from server.presentation import agent_findings
from server.services.analysis import Analysis

OPTIONS = lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix], resolve_provider=True)

_KEPT_DOCUMENTS = 32


class _Vetting:
    """The vetted fixes of one analysis of one document (an analysis is of one version of the text)."""

    def __init__(self, an: Analysis, text: str) -> None:
        self.an, self.text = an, text
        self.rules: dict[tuple[Fix, str, str | None], Vetted] = {}
        self.proposals: tuple[AnalysisReport, list[Vetted]] | None = None


_VETTING: OrderedDict[str, _Vetting] = OrderedDict()


def _vetting(doc: TextDocument, an: Analysis) -> _Vetting:
    v = _VETTING.get(doc.uri)
    if v is None or v.an is not an or v.text != doc.source:
        v = _VETTING[doc.uri] = _Vetting(an, doc.source)
        while len(_VETTING) > _KEPT_DOCUMENTS:
            _VETTING.popitem(last=False)
    _VETTING.move_to_end(doc.uri)
    return v


def _rule_fix(ls: AsapServer, doc: TextDocument, an: Analysis, finding: Finding, fix: Fix) -> Vetted:
    cache = _vetting(doc, an).rules
    key = (fix, str(finding.code), finding.key)
    if key not in cache:
        recheck = static_checks(an.path, ls.read, ls.settings.default_slice)
        cache[key] = vet_fix(
            doc.source,
            fix,
            path=an.path,
            clears=(str(finding.code), finding.key),
            recheck=recheck,
            document=an.config.document,
        )
    return cache[key]


def _proposals(ls: AsapServer, doc: TextDocument, an: Analysis, report: AnalysisReport) -> list[Vetted]:
    vetting = _vetting(doc, an)
    if vetting.proposals is None or vetting.proposals[0] is not report:
        vetting.proposals = (report, agent_findings.proposal_offers(report, an, doc.source, ls.read))
    return vetting.proposals[1]


def _shows_disabled(ls: AsapServer) -> bool:
    td = ls.client_capabilities.text_document
    return bool(td and td.code_action and td.code_action.disabled_support)


def _action(ls: AsapServer, vetted: Vetted, doc: TextDocument, diag: lsp.Diagnostic | None) -> lsp.CodeAction | None:
    if vetted.fix is not None:
        return lsp_convert.code_action(vetted.fix, doc, diag)
    if vetted.refused and vetted.reason and _shows_disabled(ls):
        return lsp_convert.refused_action(vetted.title, vetted.reason, diag)
    return None


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
                action = _action(ls, _rule_fix(ls, doc, an, f, fix), doc, diag)
                if action is not None:
                    actions.append(action)
    report = ls.agents_of(doc)
    if report is not None:  # proposals never apply to text they were not made for
        on = [d for d in params.context.diagnostics if d.code == agent_findings.DIAGNOSIS_CODE]
        for vetted in _proposals(ls, doc, an, report):
            proposal = vetted.fix.proposal if vetted.fix is not None else None
            action = _action(ls, vetted, doc, on[0] if on else None)
            if action is None or proposal is None:
                if action is not None:
                    actions.append(action)  # refused, shown disabled with its reason
                continue
            if report.experiment:  # after the edit, the editor runs it: the applied proposal is logged
                action.command = lsp.Command(
                    title="Record the applied proposal",
                    command=ServerCommand.RECORD_APPLIED,
                    arguments=[report.experiment, proposal, doc.uri],
                )
            if ls.features.resolve_edit:  # the edit is computed on codeAction/resolve
                action.data = {"uri": doc.uri, "version": doc.version, "proposal": proposal}
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
    for vetted in _proposals(ls, doc, an, report):
        if vetted.fix is not None and vetted.fix.proposal == data.get("proposal"):
            resolved = lsp_convert.code_action(vetted.fix, doc, action.diagnostics[0] if action.diagnostics else None)
            if resolved is not None:
                action.edit = resolved.edit
    return action
