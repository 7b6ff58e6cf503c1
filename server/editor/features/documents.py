"""The document lifecycle: analyse on open and on each change (debounced), run the agents on open and save,
forget everything on close."""

from __future__ import annotations

from lsprotocol import types as lsp

from server.editor import background
from server.editor.server import DEBOUNCE_S, AsapServer


def did_open(ls: AsapServer, params: lsp.DidOpenTextDocumentParams) -> None:
    ls.failed.clear()  # reopening a config retries a profile that failed or was cancelled
    ls.schedule(params.text_document.uri)
    background.start(ls, params.text_document.uri, "agents")


def did_change(ls: AsapServer, params: lsp.DidChangeTextDocumentParams) -> None:
    ls.schedule(params.text_document.uri, DEBOUNCE_S)


def did_save(ls: AsapServer, params: lsp.DidSaveTextDocumentParams) -> None:
    ls.schedule(params.text_document.uri, invalidate=True)  # parents on disk may have changed too
    background.start(ls, params.text_document.uri, "agents")


def did_close(ls: AsapServer, params: lsp.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.close(uri)
    ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
    ls.refresh_dependents(uri)  # children now read this parent from disk
