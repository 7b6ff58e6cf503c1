"""The one adapter between ASAP's core findings and LSP types: ranges in the client's
position encoding (VS Code counts UTF-16), severities, related locations and fix edits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import ServerTextPosition, ServerTextRange

from server.common.findings import Finding, Fix, Span

SOURCE = "asap"


def client_range(doc: TextDocument | None, span: Span) -> lsp.Range:
    """A code-point span as a client range; outside the document (a parent file) as is."""
    rng = ServerTextRange(
        ServerTextPosition(span.line, span.column), ServerTextPosition(span.end_line, span.end_column)
    )
    if doc is None:
        return lsp.Range(lsp.Position(span.line, span.column), lsp.Position(span.end_line, span.end_column))
    return doc.range_to_client_units(rng)


def server_position(doc: TextDocument, pos: lsp.Position) -> tuple[int, int]:
    p = doc.position_from_client_units(pos)
    return p.line, p.character


def diagnostic(finding: Finding, doc: TextDocument) -> lsp.Diagnostic:
    related = [
        lsp.DiagnosticRelatedInformation(
            location=lsp.Location(
                uri=r.file.as_uri() if r.file else doc.uri,
                range=client_range(doc if r.file is None or str(r.file) == doc.path else None, r.span),
            ),
            message=r.message,
        )
        for r in finding.related
    ]
    return lsp.Diagnostic(
        range=client_range(doc, finding.span),
        message=finding.message,
        severity=lsp.DiagnosticSeverity(int(finding.severity)),
        code=finding.code,
        source=SOURCE,
        related_information=related or None,
        data={**finding.data, **identity(finding), "fixes": [f.title for f in finding.fixes]},
    )


def identity(finding: Finding) -> dict[str, Any]:
    """What names a finding across requests (its code, key and span), carried in the diagnostic's `data`: a
    code action request hands the diagnostic back and the server finds the same finding by it."""
    sp = finding.span
    return {"code": str(finding.code), "key": finding.key, "span": [sp.line, sp.column, sp.end_line, sp.end_column]}


def is_diagnostic_of(finding: Finding, diag: lsp.Diagnostic, doc: TextDocument) -> bool:
    """Whether a diagnostic the client sent back is this finding's: by the identity in its `data`, or, from a
    client that drops `data`, by its code and where it starts."""
    data = diag.data if isinstance(diag.data, dict) else None
    if data is not None and "span" in data:
        return {k: data.get(k) for k in ("code", "key", "span")} == identity(finding)
    return finding.code == diag.code and client_range(doc, finding.span).start == diag.range.start


def code_action(fix: Fix, doc: TextDocument, diag: lsp.Diagnostic | None) -> lsp.CodeAction | None:
    """A quick fix as a versioned edit of this document; None if it would touch another file."""
    here = Path(doc.path).resolve() if doc.path else None
    edits = []
    for e in fix.edits:
        if e.file is not None and here is not None and e.file.resolve() != here:
            return None
        edits.append(lsp.TextEdit(range=client_range(doc, e.span), new_text=e.new_text))
    change = lsp.TextDocumentEdit(
        text_document=lsp.OptionalVersionedTextDocumentIdentifier(uri=doc.uri, version=doc.version),
        edits=edits,
    )
    return lsp.CodeAction(
        title=fix.title,
        kind=lsp.CodeActionKind.QuickFix,
        diagnostics=[diag] if diag is not None else None,
        is_preferred=fix.preferred or None,
        edit=lsp.WorkspaceEdit(document_changes=[change]),
    )


def refused_action(title: str, reason: str, diag: lsp.Diagnostic | None) -> lsp.CodeAction:
    """A fix ASAP will not make, shown disabled with why (for a client that supports `disabled`)."""
    return lsp.CodeAction(
        title=title,
        kind=lsp.CodeActionKind.QuickFix,
        diagnostics=[diag] if diag is not None else None,
        disabled=lsp.CodeActionDisabled(reason=f"ASAP does not make this edit: {reason}"),
    )
