"""The per-document state's bookkeeping of analyses, in process: the latest version wins, an invalidated generation's
result is dropped, a failure is remembered for its version, and the size limit's one finding; and what the server
lets go of: a closed document's state, a handled notification's future."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as lsp

from server.config.source import MAX_DOCUMENT_BYTES, MAX_DOCUMENT_LINES
from server.editor.features import code_actions, documents
from server.editor.server import AsapServer, oversize
from server.editor.state import DocumentState
from server.services.analysis import analyze


def done(loop: asyncio.AbstractEventLoop, value: Any = None, error: Exception | None = None) -> asyncio.Future[Any]:
    fut = loop.create_future()
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(value)
    return fut


@pytest.fixture
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def test_state_latest_version_wins(loop: asyncio.AbstractEventLoop):
    st = DocumentState()
    st.analysed(3, 0, done(loop, "v3"))
    st.analysed(2, 0, done(loop, "v2"))  # an older version finishing later is not kept
    assert st.ready(3) == "v3" and st.ready(2) is None
    assert st.last is not None and st.last.version == 3
    st.analysed(4, 0, done(loop, "v4"))
    assert st.ready(3) is None and st.ready(4) == "v4"


def test_state_invalidated_generation_is_dropped(loop: asyncio.AbstractEventLoop):
    st = DocumentState()
    st.analysed(1, 0, done(loop, "old parents"))
    st.invalidate()  # a parent changed: version 1 must be analysed again
    assert st.ready(1) is None
    st.analysed(1, 0, done(loop, "old parents, late"))  # started before the invalidation
    assert st.ready(1) is None
    st.analysed(1, 1, done(loop, "new parents"))
    assert st.ready(1) == "new parents"


def test_state_failure_remembered_for_its_version(loop: asyncio.AbstractEventLoop):
    st = DocumentState()
    st.analysed(1, 0, done(loop, error=ValueError("a bug in a rule")))
    assert st.failed == (1, 0) and st.ready(1) is None
    st.invalidate()
    assert st.failed is None


def test_state_publishable_only_after_its_refresh(loop: asyncio.AbstractEventLoop):
    st = DocumentState()
    st.analysed(1, 0, done(loop, "v1"))
    assert st.publishable(1) is None  # the refresh has not published it with the profile yet
    st.refreshed = (1, 0)
    assert st.publishable(1) == "v1"
    st.invalidate()
    assert st.publishable(1) is None


def test_oversize_limits():
    assert oversize("a: 1\n" * 100) is None
    by_lines = oversize("a: 1\n" * MAX_DOCUMENT_LINES)
    assert by_lines is not None and "10,001 lines" in by_lines.message
    assert oversize("a: 1\r" * MAX_DOCUMENT_LINES) is not None  # CR line ends count too
    by_bytes = oversize("x: [" + "1, " * (MAX_DOCUMENT_BYTES // 3) + "]\n")
    assert by_bytes is not None and "KiB" in by_bytes.message and by_bytes.span.end_column == 200
    # a multi-byte text under the limit in characters but over it in UTF-8
    wide = "k: '" + "é" * (MAX_DOCUMENT_BYTES // 2) + "'\n"
    assert len(wide) < MAX_DOCUMENT_BYTES and oversize(wide) is not None


def test_did_close_drops_the_documents_state_and_its_vetted_fixes(tmp_path: Path):
    """Issue 25: what the server keeps for a document (its analyses and jobs, the fixes vetted for its code
    actions, with the analysis and text they hold) goes on didClose, not when other documents push it out."""
    ls = AsapServer()
    cfg = tmp_path / "c.yml"
    cfg.write_text("model_name: llama2-7b\ncompile_topology: v5e-16\nici_fsdp_parallelism: 3\n")
    uri, text = cfg.as_uri(), cfg.read_text()
    ls.state(uri)
    code_actions._vetting(uri, analyze(cfg, text), text)
    other = (tmp_path / "other.yml").as_uri()
    code_actions._vetting(other, analyze(None, text), text)
    documents.did_close(ls, lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(uri)))
    assert uri not in ls.docs and uri not in code_actions._VETTING
    assert other in code_actions._VETTING  # another document's are its own
    code_actions.forget(other)


def test_handled_notifications_leave_no_futures_behind():
    """Issue 25: pygls kept the future of every notification its generator handlers ran (didOpen, didChange,
    didSave, didClose, $/setTrace) in its table of requests in flight, never removed: 2.2 futures a saved edit."""
    ls = AsapServer()
    for _ in range(50):
        ls.protocol._handle_notification(lsp.SET_TRACE, lsp.SetTraceParams(value=lsp.TraceValue.Off))
    assert len(ls.protocol._request_futures) <= 1  # the last one's goes with the next message
