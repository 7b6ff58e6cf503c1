"""ASAP's language server (pygls 2.x): the entry point, and only wiring. `python -m server` runs `main`.

The server object and its per-document state are in server/editor/server.py, the long jobs in
server/editor/background.py, each LSP feature's handler in server/editor/features/, and the commands' ids and
error codes in server/editor/contract.py. Nothing here computes or decides anything.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

from lsprotocol import types as lsp

from server.common.stdio import reserve_stdio
from server.editor.features import (
    code_actions,
    code_lens,
    commands,
    completion,
    documents,
    hover,
    lifecycle,
    navigation,
)
from server.editor.server import DEBOUNCE_S, AsapServer
from server.editor.settings import Settings
from server.editor.stdio import serve

__all__ = ["DEBOUNCE_S", "AsapServer", "Settings", "main", "reserve_stdio", "server"]

server = AsapServer()

FEATURES: list[tuple[str, Callable[..., Any], Any]] = [
    (lsp.INITIALIZE, lifecycle.initialize, None),
    (lsp.INITIALIZED, lifecycle.initialized, None),
    (lsp.SHUTDOWN, lifecycle.shutdown, None),
    (lsp.WORKSPACE_DID_CHANGE_CONFIGURATION, lifecycle.did_change_configuration, None),
    (lsp.TEXT_DOCUMENT_DID_OPEN, documents.did_open, None),
    (lsp.TEXT_DOCUMENT_DID_CHANGE, documents.did_change, None),
    (lsp.TEXT_DOCUMENT_DID_SAVE, documents.did_save, None),
    (lsp.TEXT_DOCUMENT_DID_CLOSE, documents.did_close, None),
    (lsp.TEXT_DOCUMENT_HOVER, hover.hover, None),
    (lsp.TEXT_DOCUMENT_CODE_ACTION, code_actions.code_action, code_actions.OPTIONS),
    (lsp.CODE_ACTION_RESOLVE, code_actions.code_action_resolve, None),
    (lsp.TEXT_DOCUMENT_CODE_LENS, code_lens.code_lens, None),
    (lsp.TEXT_DOCUMENT_COMPLETION, completion.completion, completion.OPTIONS),
    (lsp.TEXT_DOCUMENT_DEFINITION, navigation.definition, None),
    (lsp.TEXT_DOCUMENT_DOCUMENT_LINK, navigation.document_link, navigation.LINK_OPTIONS),
]
for method, handler, options in FEATURES:
    server.feature(method, options)(handler)
for command, handler in commands.COMMANDS.items():
    server.command(command.value)(handler)


def main() -> None:
    logging.getLogger("pygls").setLevel(logging.WARNING)
    # Analyses run in worker threads; a short GIL switch interval lets the event loop answer a hover or a
    # code action while one runs (the default 5 ms slices add up to tens of ms of waiting).
    sys.setswitchinterval(0.0005)
    serve(server, *reserve_stdio())
