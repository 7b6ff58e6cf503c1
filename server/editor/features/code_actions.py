"""Quick fixes: each diagnostic's own fixes (found again by the identity in the diagnostic's `data`), and the
agents' "Apply proposal N" when their report is of the text as it is now. A proposal's action carries its rank
(in `data` and in the "record the applied proposal" command), never recovered from its title.

Every fix goes through server/config/safe_edits.py before it is offered: written in the file's line endings, read
back and re-checked. One that would break the file or not clear its diagnostic is not offered; one refused because
its value lives behind an alias, a merge key or a shared anchor is shown disabled with its reason (to a client that
supports `disabled`). The analysis and the vetting (the static checks again, and for a proposal its analysis) run
off the event loop; their results are kept per analysis (one per document version) and fix. A document that
changes meanwhile gets no actions: fixes never apply to text they were not made for."""

from __future__ import annotations

import asyncio
import functools
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lsprotocol import types as lsp
from pygls.workspace import TextDocument

from server.agents.report import AnalysisReport
from server.common.findings import Finding, Fix
from server.config.apply import apply_text
from server.config.resolve import Reader
from server.config.safe_edits import Vetted, static_checks, vet_fix
from server.editor import lsp_convert
from server.editor.contract import ServerCommand
from server.editor.server import AsapServer
from server.launch import analysis as launch
from server.presentation import agent_findings
from server.services.analysis import Analysis

OPTIONS = lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix], resolve_provider=True)

_KEPT_DOCUMENTS = 32

_RuleKey = tuple[Fix, str, str | None]  # the fix and the (code, key) of the finding it is for


@dataclass
class _Vetting:
    """The vetted fixes of one analysis of one document (an analysis is of one version of the text)."""

    an: Analysis
    text: str
    rules: dict[_RuleKey, Vetted] = field(default_factory=dict)
    proposals: tuple[AnalysisReport, list[Vetted]] | None = None


_VETTING: OrderedDict[str, _Vetting] = OrderedDict()


def _vetting(uri: str, an: Analysis, text: str) -> _Vetting:
    v = _VETTING.get(uri)
    if v is None or v.an is not an or v.text != text:
        v = _VETTING[uri] = _Vetting(an, text)
        while len(_VETTING) > _KEPT_DOCUMENTS:
            _VETTING.popitem(last=False)
    _VETTING.move_to_end(uri)
    return v


def forget(uri: str) -> None:
    """Drop a closed document's vetted fixes, and the analysis and text they hold (else kept until
    _KEPT_DOCUMENTS other documents had asked for code actions)."""
    _VETTING.pop(uri, None)


def _rule_key(finding: Finding, fix: Fix) -> _RuleKey:
    return fix, str(finding.code), finding.key


class _Stale(Exception):
    """The document changed before its queued vetting started: the work is of a text nobody will see."""


def _vet(
    current: Callable[[], bool],
    an: Analysis,
    text: str,
    rules: list[tuple[Finding, Fix]],
    report: AnalysisReport | None,
    reader: Reader,
    default_slice: str | None,
) -> tuple[dict[_RuleKey, Vetted], list[Vetted] | None]:
    """Pure (runs in a worker thread): the rule fixes vetted against the static checks, and the report's
    proposals vetted and re-validated (None without a report). Raises _Stale, before any work, when `current()`
    says the document moved on while this waited for a worker (a few keystrokes in a large document each asked
    for code actions: their vettings would otherwise all run, contending for the GIL with the event loop)."""
    if not current():
        raise _Stale
    if an.runs is not None:  # a launch file: its fixes were vetted on their run's document, and written as edits of
        # the file (server/launch/analysis.py); offered as they are
        return {
            _rule_key(f, fix): Vetted(fix.title, fix=fix, text=apply_text(text, list(fix.edits))) for f, fix in rules
        }, None
    recheck = static_checks(an.path, reader, default_slice)
    done = {
        _rule_key(f, fix): vet_fix(
            text, fix, path=an.path, clears=_rule_key(f, fix)[1:], recheck=recheck, document=an.config.document
        )
        for f, fix in rules
    }
    proposals = agent_findings.proposal_offers(report, an, text, reader) if report is not None else None
    return done, proposals


async def _vetted(
    ls: AsapServer, doc: TextDocument, an: Analysis, text: str, rules: list[tuple[Finding, Fix]], proposals: bool
) -> tuple[dict[_RuleKey, Vetted], list[Vetted]]:
    """The vetted rule fixes asked for, and the proposals when asked and the agents' report is of this text."""
    vetting = _vetting(doc.uri, an, text)
    todo = [(f, fix) for f, fix in rules if _rule_key(f, fix) not in vetting.rules]
    report = ls.agents_of(doc) if proposals else None
    stale = report is not None and (vetting.proposals is None or vetting.proposals[0] is not report)
    if todo or stale:
        version = doc.version
        work = functools.partial(
            _vet,
            lambda: doc.version == version,
            an,
            text,
            todo,
            report if stale else None,
            ls.read,
            ls.settings.default_slice,
        )
        try:
            done, offers = await asyncio.get_running_loop().run_in_executor(None, work)
        except _Stale:
            return {}, []
        vetting.rules.update(done)
        if report is not None and offers is not None:
            vetting.proposals = (report, offers)
    rule_results = {k: vetting.rules[k] for k in (_rule_key(f, fix) for f, fix in rules)}
    kept = vetting.proposals
    return rule_results, kept[1] if report is not None and kept is not None and kept[0] is report else []


def _shows_disabled(ls: AsapServer) -> bool:
    td = ls.client_capabilities.text_document
    return bool(td and td.code_action and td.code_action.disabled_support)


def _action(ls: AsapServer, vetted: Vetted, doc: TextDocument, diag: lsp.Diagnostic | None) -> lsp.CodeAction | None:
    if vetted.fix is not None:
        return lsp_convert.code_action(vetted.fix, doc, diag)
    if vetted.refused and vetted.reason and _shows_disabled(ls):
        return lsp_convert.refused_action(vetted.title, vetted.reason, diag)
    return None


async def _analysis(ls: AsapServer, doc: TextDocument) -> tuple[Analysis, str] | None:
    """The analysis of the document as it is now and its text, computed off the event loop; None over the size
    limit or when the document changed meanwhile."""
    version, text = doc.version, doc.source  # pygls edits documents in place: snapshot
    an = await ls.analysis(doc)
    return (an, text) if an is not None and doc.version == version else None


async def code_action(ls: AsapServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
    doc = ls.workspace.get_text_document(params.text_document.uri)
    got = await _analysis(ls, doc)
    if got is None:
        return []
    an, text = got
    version = doc.version
    asked: list[tuple[lsp.Diagnostic, Finding]] = [
        (diag, f)
        for diag in params.context.diagnostics
        if diag.source == lsp_convert.SOURCE and intersects(diag.range, params.range)
        for f in ls.located(doc, an)
        if lsp_convert.is_diagnostic_of(f, diag, doc)
    ]
    if an.runs is not None:
        return await _launch_actions(ls, doc, an, text, asked, params.range)
    on_diagnosis = _on_diagnosis(ls, doc, an, params.range)
    rules, proposals = await _vetted(ls, doc, an, text, [(f, fix) for _, f in asked for fix in f.fixes], on_diagnosis)
    if doc.version != version:
        return []  # changed while the fixes were checked: their edits are of the text before
    actions: list[lsp.CodeAction] = []
    for diag, f in asked:
        for fix in f.fixes:
            action = _action(ls, rules[_rule_key(f, fix)], doc, diag)
            if action is not None:
                actions.append(action)
    report = ls.agents_of(doc) if on_diagnosis else None
    if report is not None:  # proposals never apply to text they were not made for
        on = [d for d in params.context.diagnostics if d.code == agent_findings.DIAGNOSIS_CODE]
        for vetted in proposals:
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


async def _launch_actions(
    ls: AsapServer,
    doc: TextDocument,
    an: Analysis,
    text: str,
    asked: list[tuple[lsp.Diagnostic, Finding]],
    rng: lsp.Range,
) -> list[lsp.CodeAction]:
    """A launch file's actions: the rule fixes of the diagnostics asked about (vetted on their run, written as edits
    of the file), and "Apply proposal N" of the agents' report on the run whose command is at the request (a
    token of it, or its first line, where the code lens' Proposals opens them)."""
    version = doc.version
    rules, _ = await _vetted(ls, doc, an, text, [(f, fix) for _, f in asked for fix in f.fixes], False)
    actions = [
        a for diag, f in asked for fix in f.fixes if (a := _action(ls, rules[_rule_key(f, fix)], doc, diag)) is not None
    ]
    line, col = lsp_convert.server_position(doc, rng.start)
    hit = launch.run_at(an.runs or [], line, col)
    ra = hit[0] if hit is not None else next((r for r in an.runs or [] if r.span.line == line), None)
    report = ls.run_agents_of(doc, ra.index) if ra is not None else None
    if ra is None or report is None:
        return actions
    offers = await asyncio.get_running_loop().run_in_executor(
        None, agent_findings.run_proposal_offers, report, ra, text, ls.read
    )
    if doc.version != version:
        return []
    for vetted in offers:
        action = _action(ls, vetted, doc, None)
        if action is None:
            continue
        proposal = vetted.fix.proposal if vetted.fix is not None else None
        if proposal is not None and report.experiment:
            action.command = lsp.Command(
                title="Record the applied proposal",
                command=ServerCommand.RECORD_APPLIED,
                arguments=[report.experiment, proposal, doc.uri],
            )
        actions.append(action)
    return actions


def intersects(a: lsp.Range, b: lsp.Range) -> bool:
    """Whether two ranges share a position (ends included: a cursor just after a key is on it)."""
    return (a.start.line, a.start.character) <= (b.end.line, b.end.character) and (b.start.line, b.start.character) <= (
        a.end.line,
        a.end.character,
    )


def _on_diagnosis(ls: AsapServer, doc: TextDocument, an: Analysis, rng: lsp.Range) -> bool:
    """Whether a code action request at `rng` is on what the agents' proposals fix: a key their diagnosis
    implicates (shown or not: its information entry may be kept out of Problems), or the mesh block's first key
    (where the code lens' "Proposals" opens the quick fixes). Elsewhere (another key, a comment) no proposal is
    offered, so the lightbulb is not on every line."""
    if ls.agents_of(doc) is None:
        return False
    spans = [
        s for f in ls.diagnosis(doc, an) for s in (f.span, *(r.span for r in f.related if r.file in (None, f.file)))
    ]
    anchor = an.config.mesh_anchor() if an.config.is_maxtext else None
    if anchor is not None:
        spans.append(anchor.key_span)
    return any(intersects(lsp_convert.client_range(doc, s), rng) for s in spans)


async def code_action_resolve(ls: AsapServer, action: lsp.CodeAction) -> lsp.CodeAction:
    """The proposal's edit, for the document as it is now (nothing when it moved on since the action was listed)."""
    data: dict[str, Any] = action.data if isinstance(action.data, dict) else {}
    doc = ls.workspace.text_documents.get(str(data.get("uri", "")))
    if doc is None or ls.agents_of(doc) is None or doc.version != data.get("version"):
        return action
    got = await _analysis(ls, doc)
    if got is None:
        return action
    an, text = got
    _, proposals = await _vetted(ls, doc, an, text, [], True)
    if doc.version != data.get("version"):
        return action
    for vetted in proposals:
        if vetted.fix is not None and vetted.fix.proposal == data.get("proposal"):
            resolved = lsp_convert.code_action(vetted.fix, doc, action.diagnostics[0] if action.diagnostics else None)
            if resolved is not None:
                action.edit = resolved.edit
    return action
