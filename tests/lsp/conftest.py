"""Shared pieces of the end-to-end LSP tests: a pytest-lsp client that records every
publishDiagnostics in arrival order, the server command, client capabilities like VS
Code's (UTF-16, versioned diagnostics, document changes), and small text helpers (apply
LSP TextEdits to a string, UTF-16 aware).

Every test works on copies of the examples under tmp_path, so edits never touch the repo.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import shutil
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from fuzzing.lsp_session import converter
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SERVER_COMMAND = [sys.executable, "-m", "server"]
TIMEOUT_S = 15.0  # generous: the first analysis pays JAX's import (about a second)

sys.path.insert(0, str(ROOT))  # `server.lsp.DEBOUNCE_S` for the tests that reason about it


# -- client -----------------------------------------------------------------------------------


class AsapClient(LanguageClient):
    """pytest-lsp's client, plus the full publishDiagnostics history.

    pytest-lsp's `wait_for_notification` keeps one future per method: two publishes that
    arrive in one read can resolve it once and the second is lost to a waiting loop. The
    history here loses nothing, so a test can ask "the publish for version N" or "no
    stale version after a newer one".
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.publishes: list[lsp.PublishDiagnosticsParams] = []
        self.published = asyncio.Event()
        self.logged = asyncio.Event()
        self.progressed = asyncio.Event()

    def history(self, uri: str, start: int = 0) -> list[lsp.PublishDiagnosticsParams]:
        return [p for p in self.publishes[start:] if p.uri == uri]


def _record_diagnostics(client: AsapClient, params: lsp.PublishDiagnosticsParams) -> None:
    client.diagnostics[params.uri] = params.diagnostics
    client.publishes.append(params)
    client.published.set()


def _record_log(client: AsapClient, params: lsp.LogMessageParams) -> None:
    client.log_messages.append(params)
    client.logged.set()


def _record_progress(client: AsapClient, params: lsp.ProgressParams) -> None:
    DEFAULT_CLIENT_FEATURES[lsp.PROGRESS](client, params)  # pytest-lsp's record in client.progress_reports
    client.progressed.set()


def make_client() -> AsapClient:
    client = AsapClient(converter_factory=converter)
    register_lsp_features(
        client,
        {
            **DEFAULT_CLIENT_FEATURES,
            lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: _record_diagnostics,
            lsp.WINDOW_LOG_MESSAGE: _record_log,
            lsp.PROGRESS: _record_progress,
        },
    )
    return client


async def wait_for_progress(
    client: AsapClient, match: Callable[[str, list[Any]], bool], timeout: float = TIMEOUT_S
) -> str:
    """Wait (bounded) for a progress token whose reports satisfy `match`; returns the token."""

    async def scan() -> str:
        while True:
            client.progressed.clear()
            for token, reports in list(client.progress_reports.items()):
                if match(str(token), reports):
                    return str(token)
            await client.progressed.wait()

    return await asyncio.wait_for(scan(), timeout)


async def wait_for_log(client: AsapClient, text: str, start: int = 0, timeout: float = TIMEOUT_S) -> str:
    """Wait (bounded) for a window/logMessage containing `text`."""

    async def scan() -> str:
        while True:
            client.logged.clear()
            for m in client.log_messages[start:]:
                if text in m.message:
                    return m.message
            await client.logged.wait()

    try:
        return await asyncio.wait_for(scan(), timeout)
    except TimeoutError:
        got = [m.message for m in client.log_messages[start:]]
        raise AssertionError(f"no window/logMessage with {text!r} within {timeout}s; got {got}") from None


CONFIG = ClientServerConfig(server_command=SERVER_COMMAND, client_factory=make_client, server_env=None)


def capabilities(configuration: bool = True) -> lsp.ClientCapabilities:
    """What VS Code announces, as far as ASAP uses it."""
    return lsp.ClientCapabilities(
        general=lsp.GeneralClientCapabilities(position_encodings=[lsp.PositionEncodingKind.Utf16]),
        text_document=lsp.TextDocumentClientCapabilities(
            synchronization=lsp.TextDocumentSyncClientCapabilities(did_save=True),
            publish_diagnostics=lsp.PublishDiagnosticsClientCapabilities(
                version_support=True, related_information=True, data_support=True
            ),
            hover=lsp.HoverClientCapabilities(content_format=[lsp.MarkupKind.Markdown, lsp.MarkupKind.PlainText]),
            code_action=lsp.CodeActionClientCapabilities(
                code_action_literal_support=lsp.ClientCodeActionLiteralOptions(
                    code_action_kind=lsp.ClientCodeActionKindOptions(value_set=[lsp.CodeActionKind.QuickFix])
                ),
                is_preferred_support=True,
                data_support=True,
            ),
        ),
        window=lsp.WindowClientCapabilities(work_done_progress=True),
        workspace=lsp.WorkspaceClientCapabilities(
            configuration=configuration,
            did_change_configuration=lsp.DidChangeConfigurationClientCapabilities(),
            workspace_edit=lsp.WorkspaceEditClientCapabilities(document_changes=True),
        ),
    )


# The tests watch the information entries (the estimate, the diagnosis, the profile's and the compiler's verdicts)
# arrive as diagnostics; an editor publishes them only with this setting (off by default: a healthy file is quiet).
INFORMATION = {"showInformationDiagnostics": True}


async def initialize(client: AsapClient, options: Any = None, configuration: bool = True) -> lsp.InitializeResult:
    """Initialize with `options`; the information entries are published unless the options' settings say
    otherwise (tests of the default pass {"settings": {"showInformationDiagnostics": False}})."""
    if options is None:
        options = {"settings": dict(INFORMATION)}
    elif isinstance(options, dict) and isinstance(options.get("settings"), dict):
        options = {**options, "settings": {**INFORMATION, **options["settings"]}}
    return await client.initialize_session(
        lsp.InitializeParams(
            capabilities=capabilities(configuration),
            initialization_options=options,
            root_uri=ROOT.as_uri(),
        )
    )


@pytest_lsp.fixture(config=CONFIG, scope="module")
async def shared(lsp_client: AsapClient):
    """One server for a whole module: tests stay isolated by using their own files."""
    await initialize(lsp_client)
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=CONFIG)
async def fresh(lsp_client: AsapClient):
    """A server of its own, initialized without options (tests that change settings)."""
    yield
    if lsp_client.capabilities is not None:
        await lsp_client.shutdown_session()


# -- documents --------------------------------------------------------------------------------


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """The examples, copied: parents resolve next to the child, as in the repo."""
    for f in EXAMPLES.glob("*.yml"):
        shutil.copy(f, tmp_path / f.name)
    return tmp_path


class Doc:
    """The client's copy of an open document: its text and version, as an editor keeps them."""

    def __init__(self, client: AsapClient, path: Path, text: str | None = None, language_id: str = "yaml") -> None:
        self.client, self.path = client, path
        self.uri = path.as_uri()
        self.text = path.read_text(encoding="utf-8") if text is None else text
        self.version = 1
        self.language_id = language_id

    def open(self) -> Doc:
        self.mark = len(self.client.publishes)
        self.client.text_document_did_open(
            lsp.DidOpenTextDocumentParams(
                lsp.TextDocumentItem(uri=self.uri, language_id=self.language_id, version=self.version, text=self.text)
            )
        )
        return self

    def replace_all(self, text: str) -> int:
        """A full-text didChange; returns the new version."""
        self.mark = len(self.client.publishes)
        self.version += 1
        self.text = text
        self.client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                lsp.VersionedTextDocumentIdentifier(uri=self.uri, version=self.version),
                [lsp.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )
        return self.version

    def edit(self, edits: Iterable[lsp.TextEdit]) -> int:
        """Incremental didChange, the way VS Code sends an applied WorkspaceEdit."""
        edits = sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True)
        self.mark = len(self.client.publishes)
        self.version += 1
        self.text = apply_edits(self.text, edits)
        self.client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                lsp.VersionedTextDocumentIdentifier(uri=self.uri, version=self.version),
                [lsp.TextDocumentContentChangePartial(range=e.range, text=e.new_text) for e in edits],
            )
        )
        return self.version

    def save(self) -> None:
        assert ROOT not in self.path.parents, "tests save copies under tmp_path, never the repo's files"
        self.mark = len(self.client.publishes)
        self.path.write_text(self.text, encoding="utf-8")
        self.client.text_document_did_save(lsp.DidSaveTextDocumentParams(lsp.TextDocumentIdentifier(self.uri)))

    def close(self) -> None:
        self.mark = len(self.client.publishes)
        self.client.text_document_did_close(lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(self.uri)))

    async def diagnostics(
        self,
        version: int | str | None = "current",
        where: Callable[[list[lsp.Diagnostic]], bool] | None = None,
        timeout: float = TIMEOUT_S,
    ) -> list[lsp.Diagnostic]:
        """The first publish since the last open/change/save/close for `version` (default:
        the document's current one; None for unversioned) that satisfies `where`."""
        want = self.version if version == "current" else version
        found = await wait_for_publish(
            self.client,
            self.uri,
            lambda p: p.version == want and (where is None or where(list(p.diagnostics))),
            start=self.mark,
            timeout=timeout,
        )
        return list(found.diagnostics)

    async def hover(self, line: int, character: int) -> lsp.Hover | None:
        return await self.client.text_document_hover_async(
            lsp.HoverParams(lsp.TextDocumentIdentifier(self.uri), lsp.Position(line, character))
        )

    async def code_actions(self, diagnostics: list[lsp.Diagnostic]) -> list[lsp.CodeAction]:
        rng = diagnostics[0].range if diagnostics else lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0))
        res = await self.client.text_document_code_action_async(
            lsp.CodeActionParams(
                lsp.TextDocumentIdentifier(self.uri), rng, lsp.CodeActionContext(diagnostics=diagnostics)
            )
        )
        return [a for a in res or [] if isinstance(a, lsp.CodeAction)]


async def wait_for_publish(
    client: AsapClient,
    uri: str,
    match: Callable[[lsp.PublishDiagnosticsParams], bool],
    start: int = 0,
    timeout: float = TIMEOUT_S,
) -> lsp.PublishDiagnosticsParams:
    """Wait (bounded) for a publish for `uri` that matches, looking at history from `start`."""

    async def scan() -> lsp.PublishDiagnosticsParams:
        while True:
            client.published.clear()
            for p in client.history(uri, start):
                if match(p):
                    return p
            await client.published.wait()

    try:
        return await asyncio.wait_for(scan(), timeout)
    except TimeoutError:
        seen = [(p.version, [(d.code, d.range.start.line) for d in p.diagnostics]) for p in client.history(uri, start)]
        raise AssertionError(f"no matching publishDiagnostics for {uri} within {timeout}s; got {seen}") from None


ESTIMATE = "ASAP120"  # the performance model's information line, published with every valid mesh


AGENTS = "ASAP300"  # the background diagnosis: arrives on its own schedule (tests/lsp/test_agents.py)


def codes(diags: Iterable[lsp.Diagnostic]) -> list[str]:
    """Codes of the rule findings (the estimate's information line and the agents' diagnosis aside)."""
    return sorted(str(d.code) for d in diags if d.code not in (ESTIMATE, AGENTS))


def by_code(diags: Iterable[lsp.Diagnostic], code: str) -> lsp.Diagnostic:
    found = [d for d in diags if d.code == code]
    assert len(found) == 1, f"expected one {code}, got {codes(diags)}"
    return found[0]


def has(code: str) -> Callable[[list[lsp.Diagnostic]], bool]:
    return lambda ds: any(d.code == code for d in ds)


def lacks(code: str) -> Callable[[list[lsp.Diagnostic]], bool]:
    return lambda ds: all(d.code != code for d in ds)


# -- text -------------------------------------------------------------------------------------


def utf16_len(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


def offset(text: str, pos: lsp.Position) -> int:
    """The string index of an LSP position (UTF-16 character offsets, as VS Code counts)."""
    lines = text.splitlines(keepends=True)
    if pos.line >= len(lines):
        assert pos.line == len(lines) and pos.character == 0, f"position {pos} past the end"
        return len(text)
    line = lines[pos.line]
    body = line.rstrip("\r\n")
    units = 0
    for i, ch in enumerate(body):
        if units >= pos.character:
            assert units == pos.character, f"position {pos} splits a surrogate pair in {body!r}"
            return sum(map(len, lines[: pos.line])) + i
        units += utf16_len(ch)
    assert pos.character <= units, f"position {pos} past the end of line {body!r}"
    return sum(map(len, lines[: pos.line])) + len(body)


def apply_edits(text: str, edits: Iterable[lsp.TextEdit]) -> str:
    """Apply LSP TextEdits (all against the same original text, non-overlapping)."""
    spans = sorted(
        ((offset(text, e.range.start), offset(text, e.range.end), e.new_text) for e in edits),
        key=lambda s: (s[0], s[1]),
    )
    for (_, end1, _), (start2, _, _) in itertools.pairwise(spans):
        assert end1 <= start2, "overlapping edits"
    for start, end, new in reversed(spans):
        assert start <= end
        text = text[:start] + new + text[end:]
    return text


def position_of(text: str, needle: str, line_hint: int | None = None) -> lsp.Position:
    """The LSP (UTF-16) position of the first `needle` in `text`."""
    idx = (
        text.index(needle)
        if line_hint is None
        else text.index(needle, sum(map(len, text.splitlines(True)[:line_hint])))
    )
    line = text.count("\n", 0, idx)
    line_start = text.rfind("\n", 0, idx) + 1
    return lsp.Position(line, utf16_len(text[line_start:idx]))


def value_range(text: str, key: str) -> lsp.Range:
    """The range of the scalar value of top-level `key: value` (up to a comment)."""
    start = position_of(text, f"\n{key}:")
    line = text.splitlines()[start.line + 1]
    value = line.split(":", 1)[1].split(" #", 1)[0].strip()
    col = utf16_len(line[: line.index(value, len(key) + 1)])
    return lsp.Range(lsp.Position(start.line + 1, col), lsp.Position(start.line + 1, col + utf16_len(value)))


def document_edit(action: lsp.CodeAction) -> lsp.TextDocumentEdit:
    assert action.edit is not None, f"{action.title}: no edit"
    assert action.edit.changes is None, "edits must be versioned (documentChanges), not `changes`"
    changes = action.edit.document_changes or []
    assert len(changes) == 1 and isinstance(changes[0], lsp.TextDocumentEdit), changes
    return changes[0]


def gcs_config(port: int) -> ClientServerConfig:
    """A language server whose gcsfs talks to the GCS-API emulator on 127.0.0.1:`port` (tests/support/gcs_server.py)."""
    return ClientServerConfig(
        server_command=CONFIG.server_command,
        client_factory=CONFIG.client_factory,
        server_env={**os.environ, "STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{port}"},
    )
