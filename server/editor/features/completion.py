"""textDocument/completion in a MaxText config: keys at a key's position, slice names, model names, remat policies
and booleans at a value's (server/presentation/completion.py decides what). Answered from tables on the event loop,
in well under a millisecond for a typical config (no analysis, no YAML parse); a document over the size limit gets
nothing."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types as lsp
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument

from server.common.findings import Span
from server.config import models
from server.editor import lsp_convert
from server.editor.server import AsapServer
from server.presentation.completion import Item, complete

# ':' after a key, ' ' after `key:`, '=' after `# asap: slice`
OPTIONS = lsp.CompletionOptions(trigger_characters=[":", " ", "="])

# VS Code's command that opens the suggestions again: after a key is inserted, its values
SUGGEST = lsp.Command(title="Suggest values", command="editor.action.triggerSuggest")


def position(doc: TextDocument, pos: lsp.Position) -> tuple[int, int]:
    """A client position in code points. pygls maps a position on the empty line after a final line break to the
    end of the line before it; that line is empty, so its column is 0."""
    if pos.line >= len(doc.lines):
        return pos.line, 0
    return lsp_convert.server_position(doc, pos)


def client_range(doc: TextDocument, span: Span) -> lsp.Range:
    if span.line >= len(doc.lines):  # the empty last line
        return lsp.Range(lsp.Position(span.line, 0), lsp.Position(span.line, 0))
    return lsp_convert.client_range(doc, span)


def markdown_docs(ls: AsapServer) -> bool:
    """Whether the client renders Markdown in a completion item's documentation (else it gets the plain text)."""
    td = ls.client_capabilities.text_document
    item = td.completion.completion_item if td and td.completion else None
    return bool(item and item.documentation_format and lsp.MarkupKind.Markdown in item.documentation_format)


def _doc(it: Item, markdown: bool) -> lsp.MarkupContent | str | None:
    if not it.doc:
        return None
    if markdown:
        return lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=it.doc)
    return it.doc.replace("**", "").replace("`", "")


def _item(doc: TextDocument, it: Item, markdown: bool) -> lsp.CompletionItem:
    return lsp.CompletionItem(
        label=it.label,
        kind=lsp.CompletionItemKind.Property if it.kind == "key" else lsp.CompletionItemKind.Value,
        detail=it.detail,
        documentation=_doc(it, markdown),
        sort_text=it.sort,
        filter_text=it.filter,
        text_edit=lsp.TextEdit(range=client_range(doc, it.span), new_text=it.new_text),
        command=SUGGEST if it.suggest_after else None,
    )


LAUNCH_LANGUAGES = frozenset({"shellscript", "makefile", "markdown"})


def completion(ls: AsapServer, params: lsp.CompletionParams) -> lsp.CompletionList | None:
    doc = ls.workspace.get_text_document(params.text_document.uri)
    if ls.too_large(doc) is not None:
        return None
    if doc.language_id in LAUNCH_LANGUAGES:  # a launch file's keys are `key=value` words, not YAML keys
        return None
    line, column = position(doc, params.position)
    fs = to_fs_path(doc.uri)
    items = complete(doc.source, line, column, Path(fs) if fs else None, models.default_maxtext_path())
    if not items:
        return None
    markdown = markdown_docs(ls)
    return lsp.CompletionList(is_incomplete=False, items=[_item(doc, it, markdown) for it in items])
