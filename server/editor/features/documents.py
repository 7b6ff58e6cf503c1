"""The document lifecycle: analyse on open and on each change (debounced), run the agents on open and save,
forget everything on close.

Also the server's copy of each open document counts lines as the client does. pygls' TextDocument splits its
text with `str.splitlines`, which also breaks at U+2028, U+2029, U+0085, `\\v`, `\\f` and `\\x1c`-`\\x1e`; LSP
clients break only at `\\n`, `\\r\\n` and `\\r`. With one of those characters in a comment, every incremental edit
below it landed on the wrong line and every diagnostic there was published a line off. `ClientLinesDocument`
splits as the client does (server/config/source.py split_lines), and `use_client_lines` makes the workspace
create documents of that kind.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from lsprotocol import types as lsp
from pygls.workspace import TextDocument, Workspace

from server.config.source import split_lines
from server.editor import background
from server.editor.features import code_actions
from server.editor.server import DEBOUNCE_S, AsapServer
from server.editor.state import DocumentState


class ClientLinesDocument(TextDocument):
    """pygls' TextDocument with lines as LSP clients count them: incremental changes, position conversion
    (UTF-16 and the rest) and ranges all read `lines`. They are split once per text, not on every read: each
    position converted reads them, and splitting a 1 MB document costs milliseconds on the event loop."""

    _split: tuple[str, tuple[str, ...]] | None = None

    @property
    def lines(self) -> Sequence[str]:
        source = self.source
        if self._split is None or self._split[0] is not source:
            self._split = (source, tuple(split_lines(source, keepends=True)))
        return self._split[1]


_INSTALLED = "_asap_client_lines"


def use_client_lines(workspace: Workspace) -> None:
    """Make `workspace` create ClientLinesDocuments from now on, and turn the documents it already holds into
    ones. Idempotent and cheap: did_open calls it, because pygls stores an opened document before the handler
    runs (and before any change to it arrives)."""
    if not getattr(workspace, _INSTALLED, False):
        create = workspace._create_text_document  # pygls' one factory of documents (open, and read from disk)

        def create_client_lines(*args: Any, **kwargs: Any) -> TextDocument:
            doc = create(*args, **kwargs)
            doc.__class__ = ClientLinesDocument
            return doc

        setattr(workspace, "_create_text_document", create_client_lines)  # noqa: B010 - an instance's method
        setattr(workspace, _INSTALLED, True)
    for doc in workspace.text_documents.values():
        if type(doc) is TextDocument:
            doc.__class__ = ClientLinesDocument


def did_open(ls: AsapServer, params: lsp.DidOpenTextDocumentParams) -> None:
    use_client_lines(ls.workspace)
    ls.failed.clear()  # reopening a config retries a profile that failed or was cancelled
    ls.schedule(params.text_document.uri)
    background.start(ls, params.text_document.uri, "agents")


def did_change(ls: AsapServer, params: lsp.DidChangeTextDocumentParams) -> None:
    uri = params.text_document.uri
    doc = ls.workspace.text_documents.get(uri)
    if doc is not None:
        key = edited_mesh_key(doc, params.content_changes, ls.state(uri))
        if key is not None:
            ls.edited[uri] = key
    ls.schedule(uri, DEBOUNCE_S)


_MESH_KEY = re.compile(r"((?:ici|dcn)_\w+_parallelism)[ \t]*:")
_MAX_DIFFED = 20_000  # lines: a whole-text change of a longer document is not compared with the last analysis


def edited_mesh_key(doc: TextDocument, changes: Sequence[Any], st: DocumentState) -> str | None:
    """The ici_/dcn_ parallelism key on a line this didChange touched (the last such change), else None. `doc`
    already holds the new text. An incremental change names its lines by its range; a whole-text replacement is
    compared with the text of the last analysis (the keys whose lines differ)."""
    lines = doc.lines
    for change in reversed(changes):
        if isinstance(change, lsp.TextDocumentContentChangePartial):
            first = change.range.start.line
            last = first + change.text.count("\n") + change.text.count("\r") - change.text.count("\r\n")
            for line in range(first, min(last, len(lines) - 1) + 1):
                if (m := _MESH_KEY.match(lines[line])) is not None:
                    return m.group(1)
        elif st.last is not None and st.last.value.config.document is not None and len(lines) <= _MAX_DIFFED:
            before = {m.group(1): ln for ln in st.last.value.config.document.lines if (m := _MESH_KEY.match(ln))}
            now = [(m.group(1), ln.rstrip("\r\n")) for ln in lines if (m := _MESH_KEY.match(ln))]
            changed = [k for k, ln in now if before.get(k) != ln]
            if changed:
                return changed[-1]
    return None


def did_save(ls: AsapServer, params: lsp.DidSaveTextDocumentParams) -> None:
    ls.schedule(params.text_document.uri, invalidate=True)  # parents on disk may have changed too
    background.start(ls, params.text_document.uri, "agents")


def did_close(ls: AsapServer, params: lsp.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.close(uri)
    code_actions.forget(uri)
    ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
    ls.refresh_dependents(uri)  # children now read this parent from disk
