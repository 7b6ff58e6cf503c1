"""Hostile configs through the real language server over stdio (`python -m server`), as an editor sends them.

For each case: didOpen; the diagnostics of that version (every range inside the document as the client has it);
code lens, hovers on a few positions and code actions on each diagnostic, each within REQUEST_S (else a hang);
every offered quick fix applied client-side (resolved first when its edit comes on resolve) and checked
(textmodel.fix_violations: it still parses, keys and comments kept; textmodel.ending_mismatches: each line it
writes ends as the line it replaces or follows does, else a line-ending mismatch), then sent as an incremental
change: the diagnostic it fixes must be gone from that version's diagnostics, and undoing it must bring back the
original's; then a few incremental edits of the kind a user types, after which the server's diagnostics and hovers
of the document must equal those of the same text opened fresh (else the server's copy of the text diverged from
the client's: a sync divergence). Error responses, errors in the server's log and tracebacks on its stderr are
counted against the case that was running.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, Union

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pygls.lsp.client import LanguageClient
from pygls.protocol import default_converter

from . import textmodel as tm
from .mutations import PARENT, ROOT, Case

REQUEST_S = 5.0  # a request not answered in this time is a hang
PUBLISH_S = 60.0  # an analysis of a hostile config (or of a 1 MB one, on a loaded machine) may take long
BACKGROUND_CODES = ("ASAP2", "ASAP3", "ASAP4")  # profile, agents, compiler: on their own schedules
KINDS = (
    "request error",  # an error response to a request
    "internal error",  # an error in the server's log (window/logMessage of type Error)
    "traceback",  # a traceback on the server's stderr
    "fix violation",  # a quick fix that breaks the file, keeps its diagnostic, or is not for this version
    "line-ending mismatch",  # a quick fix whose lines end otherwise than the line they replace or follow
    "sync divergence",  # the server's view of the text is not the client's
    "bad range",  # a diagnostic outside the document
    "hang",  # a request unanswered within REQUEST_S
    "no publish",  # no diagnostics for a version within PUBLISH_S
    "server exit",  # the server process went away
)

T = TypeVar("T")


@dataclass
class Problem:
    kind: str
    case: Case
    detail: str

    def signature(self) -> str:
        """What tells two problems apart: the kind and the detail's first line without numbers."""
        head = (self.detail.strip().splitlines() or [""])[0]
        return f"{self.kind} | {re.sub(r'[0-9]+', '#', head)[:140]}"


@dataclass
class Tally:
    counts: Counter[str] = field(default_factory=Counter)
    problems: list[Problem] = field(default_factory=list)
    latency: dict[str, list[float]] = field(default_factory=dict)
    cases: int = 0
    fixes: int = 0  # quick fixes applied and checked
    proposals: int = 0  # of them, the agents' "Apply proposal N" (edits on codeAction/resolve)
    reports: int = 0  # the agents' reports awaited before asking for code actions
    edits: int = 0  # incremental edits sent
    codes: Counter[str] = field(default_factory=Counter)  # the codes published on open: what the cases reach
    key_hovers: Counter[str] = field(default_factory=Counter)  # hovers answered on the lines of HOVER_KEYS

    def add(self, kind: str, case: Case, detail: str) -> None:
        self.counts[kind] += 1
        self.problems.append(Problem(kind, case, detail))

    def time(self, what: str, seconds: float) -> None:
        self.latency.setdefault(what, []).append(seconds)


def converter() -> Any:
    """pygls' converter, with lsprotocol's `Command | CodeAction` hook corrected (every LSP test client uses it):
    lsprotocol 2025.0.0 reads any object with a "command" key as a Command, so a CodeAction that carries a command
    after its edit (as LSP allows, and VS Code and Neovim read; the proposals' "record the applied proposal") lost its
    edit and data. A Command's "command" is a string; a CodeAction's is not."""
    conv = default_converter()

    def hook(obj: Any, _: type) -> lsp.Command | lsp.CodeAction:
        if isinstance(obj.get("command"), str):
            return conv.structure(obj, lsp.Command)
        return conv.structure(obj, lsp.CodeAction)

    conv.register_structure_hook(Union[lsp.Command, lsp.CodeAction], hook)  # noqa: UP007 - the hook's key
    return conv


class FuzzClient(LanguageClient):
    """A plain pygls client that records what the server sends: every publishDiagnostics in order, the log, the
    messages shown, and the server's stderr; it answers the server's requests as an editor does."""

    def __init__(self) -> None:
        super().__init__("asap-fuzz", "0", converter_factory=converter)
        self.publishes: list[lsp.PublishDiagnosticsParams] = []
        self.published = asyncio.Event()
        self.logs: list[lsp.LogMessageParams] = []
        self.shown: list[lsp.ShowMessageParams] = []
        self.stderr: list[str] = []
        self._drain: asyncio.Task[None] | None = None

        @self.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def _publish(params: lsp.PublishDiagnosticsParams) -> None:
            self.publishes.append(params)
            self.published.set()

        @self.feature(lsp.WINDOW_LOG_MESSAGE)
        def _log(params: lsp.LogMessageParams) -> None:
            self.logs.append(params)

        @self.feature(lsp.WINDOW_SHOW_MESSAGE)
        def _show(params: lsp.ShowMessageParams) -> None:
            self.shown.append(params)

        @self.feature(lsp.WORKSPACE_CONFIGURATION)
        def _configuration(params: lsp.ConfigurationParams) -> list[Any]:
            return [None for _ in params.items]

        @self.feature(lsp.WINDOW_WORK_DONE_PROGRESS_CREATE)
        def _progress_create(params: lsp.WorkDoneProgressCreateParams) -> None:
            return None

        @self.feature(lsp.PROGRESS)
        def _progress(params: lsp.ProgressParams) -> None:
            return None

        @self.feature(lsp.WORKSPACE_CODE_LENS_REFRESH)
        def _lens_refresh(params: None) -> None:
            return None

    async def launch(self, root: Path = ROOT) -> None:
        await self.start_io(sys.executable, "-m", "server", cwd=str(root))
        server = self._server
        if server is not None and server.stderr is not None:
            self._drain = asyncio.create_task(self._read_stderr(server.stderr))
        await self.initialize_async(
            lsp.InitializeParams(
                capabilities=capabilities(),
                root_uri=root.as_uri(),
                process_id=None,
                initialization_options={"settings": {"showInformationDiagnostics": True}},
            )
        )
        self.initialized(lsp.InitializedParams())

    async def _read_stderr(self, stream: asyncio.StreamReader) -> None:
        while line := await stream.readline():
            self.stderr.append(line.decode("utf-8", "replace").rstrip())

    def alive(self) -> bool:
        return self._server is not None and self._server.returncode is None

    async def close(self) -> None:
        if self.alive():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.shutdown_async(None), REQUEST_S)
            with contextlib.suppress(Exception):
                self.exit(None)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.stop(), 10)
        if self._drain is not None:
            self._drain.cancel()


def capabilities() -> lsp.ClientCapabilities:
    """VS Code's, as far as ASAP reads them: UTF-16, versioned diagnostics with data, code action literals with
    their edit on resolve, disabled actions, document changes, configuration, progress, code lens refresh."""
    return lsp.ClientCapabilities(
        general=lsp.GeneralClientCapabilities(position_encodings=[lsp.PositionEncodingKind.Utf16]),
        text_document=lsp.TextDocumentClientCapabilities(
            synchronization=lsp.TextDocumentSyncClientCapabilities(did_save=True),
            publish_diagnostics=lsp.PublishDiagnosticsClientCapabilities(
                version_support=True, related_information=True, data_support=True
            ),
            hover=lsp.HoverClientCapabilities(content_format=[lsp.MarkupKind.Markdown]),
            code_action=lsp.CodeActionClientCapabilities(
                code_action_literal_support=lsp.ClientCodeActionLiteralOptions(
                    code_action_kind=lsp.ClientCodeActionKindOptions(value_set=[lsp.CodeActionKind.QuickFix])
                ),
                is_preferred_support=True,
                disabled_support=True,
                data_support=True,
                resolve_support=lsp.ClientCodeActionResolveOptions(properties=["edit"]),
            ),
            code_lens=lsp.CodeLensClientCapabilities(),
        ),
        window=lsp.WindowClientCapabilities(work_done_progress=True),
        workspace=lsp.WorkspaceClientCapabilities(
            configuration=True,
            did_change_configuration=lsp.DidChangeConfigurationClientCapabilities(),
            workspace_edit=lsp.WorkspaceEditClientCapabilities(document_changes=True),
            code_lens=lsp.CodeLensWorkspaceClientCapabilities(refresh_support=True),
        ),
    )


# -- one document -------------------------------------------------------------------------------------------
class Doc:
    """An open document as the client keeps it."""

    def __init__(self, client: FuzzClient, path: Path, text: str) -> None:
        self.client, self.path, self.uri, self.text, self.version = client, path, path.as_uri(), text, 1
        self.mark = len(client.publishes)
        client.text_document_did_open(
            lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(uri=self.uri, language_id="yaml", version=1, text=text))
        )

    def change(self, changes: list[lsp.TextDocumentContentChangePartial], clamp: bool = False) -> None:
        """Incremental changes in one notification, applied in order (as LSP says); `clamp`: a line past the end
        is the end (as VS Code applies a quick fix's edit)."""
        for c in changes:
            self.text = tm.apply_change(self.text, c, clamp)
        self.version += 1
        self.mark = len(self.client.publishes)
        self.client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                lsp.VersionedTextDocumentIdentifier(uri=self.uri, version=self.version),
                list(changes),
            )
        )

    def close(self) -> None:
        self.client.text_document_did_close(lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(self.uri)))

    async def published(
        self, timeout: float = PUBLISH_S, where: Callable[[lsp.PublishDiagnosticsParams], bool] | None = None
    ) -> lsp.PublishDiagnosticsParams | None:
        """The first publish of the current version since the last change (that satisfies `where`); None within
        `timeout`."""

        async def scan() -> lsp.PublishDiagnosticsParams:
            while True:
                self.client.published.clear()
                for p in self.client.publishes[self.mark :]:
                    if p.uri == self.uri and p.version == self.version and (where is None or where(p)):
                        return p
                await self.client.published.wait()

        try:
            return await asyncio.wait_for(scan(), timeout)
        except TimeoutError:
            return None


def foreground(diags: list[lsp.Diagnostic]) -> list[lsp.Diagnostic]:
    return [d for d in diags if not str(d.code).startswith(BACKGROUND_CODES)]


# A broken mesh product is reported on the parallelism key the user last edited (the others as related
# information): where it lands depends on the edits that led to the text, not on the text alone.
_WHERE_EDITED = ("ASAP101", "ASAP104")


def shape(diags: list[lsp.Diagnostic]) -> list[tuple[Any, ...]]:
    """What two analyses of one text agree on: codes, ranges, severities and messages (the estimate's and the
    rules'; not the background producers'). A mesh product's range is left out (_WHERE_EDITED)."""
    return sorted(
        (
            str(d.code),
            *(
                (-1, -1, -1, -1)
                if str(d.code) in _WHERE_EDITED
                else (
                    d.range.start.line,
                    d.range.start.character,
                    d.range.end.line,
                    d.range.end.character,
                )
            ),
            d.severity,
            d.message,
        )
        for d in foreground(diags)
    )


def hover_text(h: lsp.Hover | None, *names: str) -> str:
    if h is None:
        return "<none>"
    c = h.contents
    text = c.value if isinstance(c, lsp.MarkupContent) else str(c)
    for n in names:
        text = text.replace(n, "<file>")
    return text


# -- the session ----------------------------------------------------------------------------------------------
EDIT_TEXTS = [
    "", "x", "1", "-1", "0", ".nan", "abc", "\n", "\r\n", "\r", "\u2028", "\u2029", "\x85", "\x0b", "\x0c", "# c\n",
    "ici_tensor_parallelism: 2\n", "\U0001f600", "é", ": ", "- ", "  ", "\t", "&a ", "*a", "<<: *a\n", "'", "\x00",
]  # fmt: skip


def random_change(rng: random.Random, text: str) -> lsp.TextDocumentContentChangePartial:
    """An edit a user could make: a few characters removed or replaced somewhere (never inside a \\r\\n)."""
    start = rng.randint(0, len(text))
    if tm.splits_crlf(text, start):
        start -= 1
    end = min(len(text), start + rng.choice([0, 0, 1, 2, 5, 20]))
    if tm.splits_crlf(text, end):
        end += 1
    rng_ = lsp.Range(tm.position(text, start), tm.position(text, end))
    return lsp.TextDocumentContentChangePartial(range=rng_, text=rng.choice(EDIT_TEXTS))


class Session:
    """Cases through one long-lived server; `tally` counts what went wrong."""

    def __init__(
        self, client: FuzzClient, workdir: Path, tally: Tally, rng: random.Random, request_s: float = REQUEST_S
    ) -> None:
        self.client, self.workdir, self.tally, self.rng = client, workdir, tally, rng
        self.request_s = request_s
        self.strict_positions = True  # an edit on a line past the document is a fix violation (else applied at the end)
        self.n = 0
        (workdir / PARENT).write_text((ROOT / "examples" / PARENT).read_text(encoding="utf-8"), encoding="utf-8")

    async def request(self, what: str, case: Case, call: Callable[[], Any]) -> tuple[bool, Any]:
        """One request, timed: (answered, result). An error response or no answer within `request_s` is counted."""
        started = time.perf_counter()
        try:
            result = await asyncio.wait_for(call(), self.request_s)
        except TimeoutError:
            self.tally.add("hang", case, f"{what}: no answer within {self.request_s:.0f} s")
            return False, None
        except JsonRpcException as e:
            self.tally.add("request error", case, f"{what}: {type(e).__name__} {e.code}: {e}\n{e.data or ''}")
            return False, None
        except Exception as e:  # the connection went away
            kind = "server exit" if not self.client.alive() else "request error"
            self.tally.add(kind, case, f"{what}: {type(e).__name__}: {e}")
            return False, None
        self.tally.time(what, time.perf_counter() - started)
        return True, result

    async def publish(self, doc: Doc, case: Case, why: str) -> list[lsp.Diagnostic] | None:
        started = time.perf_counter()
        got = await doc.published()
        if got is None:
            if self.client.alive():
                self.tally.add("no publish", case, f"{why}: no diagnostics for version {doc.version}")
            return None
        self.tally.time("publish", time.perf_counter() - started)
        diags = list(got.diagnostics)
        for d in diags:
            if not tm.in_range(doc.text, d.range):
                r = d.range
                self.tally.add(
                    "bad range",
                    case,
                    f"{why}: {d.code} at {r.start.line}:{r.start.character}-{r.end.line}:{r.end.character} "
                    f"outside the {tm.line_count(doc.text)} lines of the client's text",
                )
        return diags

    async def run(
        self,
        case: Case,
        *,
        fixes: int = 4,
        edits: int = 4,
        hovers: int = 3,
        resync: bool = True,
        agents: float = 0.0,
        rng: random.Random | None = None,
    ) -> list[Problem]:
        """One case: at most `fixes` quick fixes applied, `edits` incremental changes, `hovers` hover positions;
        `resync`: compare with a fresh open after the edits; `agents`: wait up to that many seconds for the
        agents' diagnosis (ASAP300) first, so that its proposals are offered too; `rng`: where the hovers and
        edits go (default: the session's). Returns the problems found."""
        if rng is not None:
            self.rng = rng
        if not self.client.alive():
            self.tally.add("server exit", case, "the server is not running")
            return self.tally.problems[-1:]
        self.n += 1
        self.tally.cases += 1
        before = len(self.tally.problems)
        logs, errs = len(self.client.logs), len(self.client.stderr)
        path = self.workdir / f"fuzz-{self.n}.yml"
        path.write_bytes(case.data)
        doc = Doc(self.client, path, case.text)
        try:
            await self._open_and_ask(doc, case, fixes, hovers, agents)
            if edits and self.client.alive():
                await self._edit(doc, case, edits, hovers if resync else 0, resync)
        finally:
            doc.close()
            await asyncio.sleep(0)
        for m in self.client.logs[logs:]:
            if m.type == lsp.MessageType.Error:
                self.tally.add("internal error", case, m.message)
        for i, line in enumerate(self.client.stderr[errs:]):
            if "Traceback (most recent call last)" in line:
                self.tally.add("traceback", case, "\n".join(self.client.stderr[errs + i : errs + i + 40]))
        return self.tally.problems[before:]

    async def _open_and_ask(self, doc: Doc, case: Case, fixes: int, hovers: int, agents: float) -> None:
        diags = await self.publish(doc, case, "didOpen")
        if diags is None:
            return
        self.tally.codes.update(str(d.code) for d in diags)
        if agents and any(d.code == "ASAP120" for d in diags):  # an estimate: the agents' diagnosis will come
            again = await doc.published(agents, lambda p: any(d.code == "ASAP300" for d in p.diagnostics))
            if again is not None:
                diags = list(again.diagnostics)
                self.tally.reports += 1
        ident = lsp.TextDocumentIdentifier(doc.uri)
        lens = lsp.CodeLensParams(ident)
        await self.request("codeLens", case, lambda: self.client.text_document_code_lens_async(lens))
        for pos in self.positions(doc.text, hovers):
            await self.request(
                "hover", case, lambda p=pos: self.client.text_document_hover_async(lsp.HoverParams(ident, p))
            )
        for key, pos in key_positions(doc.text):
            ok, _ = await self.request(
                "hover", case, lambda p=pos: self.client.text_document_hover_async(lsp.HoverParams(ident, p))
            )
            self.tally.key_hovers[key] += ok
        actions: list[tuple[lsp.CodeAction, lsp.Diagnostic]] = []
        seen: set[str] = set()
        for d in diags[:8]:
            ok, res = await self.request(
                "codeAction",
                case,
                lambda d=d: self.client.text_document_code_action_async(
                    lsp.CodeActionParams(ident, d.range, lsp.CodeActionContext(diagnostics=[d]))
                ),
            )
            for a in res or []:  # the proposals come with every diagnostic's actions: each once
                if isinstance(a, lsp.CodeAction) and a.disabled is None and a.title not in seen:
                    seen.add(a.title)
                    actions.append((a, d))
        resolved: list[tuple[lsp.CodeAction, lsp.Diagnostic]] = []
        for action, diag in actions[:fixes]:  # all resolved for this version, before any is applied
            if action.edit is None and action.data is not None:
                ok, res = await self.request(
                    "codeAction/resolve", case, lambda a=action: self.client.code_action_resolve_async(a)
                )
                if not ok or res is None or res.edit is None:
                    continue  # the document moved on, or the proposal is gone: nothing to apply
                action = res
            if action.edit is not None:
                resolved.append((action, diag))
        original, original_shape = doc.text, shape(diags)
        for action, diag in resolved:
            await self._check_fix(doc, case, action, diag, original, original_shape)
            if not self.client.alive():
                return

    async def _check_fix(
        self,
        doc: Doc,
        case: Case,
        action: lsp.CodeAction,
        diag: lsp.Diagnostic,
        original: str,
        original_shape: list[tuple[Any, ...]],
    ) -> None:
        title = f"fix {action.title!r} for {diag.code}"
        assert action.edit is not None
        changes = [c for c in action.edit.document_changes or [] if isinstance(c, lsp.TextDocumentEdit)]
        if action.edit.changes or len(changes) != 1 or changes[0].text_document.uri != doc.uri:
            self.tally.add("fix violation", case, f"{title}: not one versioned edit of this document: {action.edit}")
            return
        change = changes[0]
        if change.text_document.version != 1:
            self.tally.add("fix violation", case, f"{title}: for version {change.text_document.version}, not 1")
        edits = [e for e in change.edits if isinstance(e, lsp.TextEdit)]
        try:
            fixed, spans = tm.apply_edits(original, edits)
        except ValueError as e:
            try:  # as VS Code applies it: a line past the end is the end
                fixed, spans = tm.apply_edits(original, edits, clamp=True)
            except ValueError:
                self.tally.add("fix violation", case, f"{title}: its edits do not apply: {e}: {edits}")
                return
            if self.strict_positions:
                self.tally.add(
                    "fix violation",
                    case,
                    f"{title}: an edit past the document's end (VS Code clamps it, LSP leaves it to the client): "
                    f"{e}: {edits}",
                )
            clamped = True
        else:
            clamped = False
        self.tally.fixes += 1
        proposal = action.title.startswith("Apply proposal")  # the agents' mesh: not the fix of a diagnostic
        self.tally.proposals += proposal
        for v in tm.fix_violations(original, fixed, spans):
            self.tally.add("fix violation", case, f"{title}: {v}")
        for v in tm.ending_mismatches(original, edits):
            self.tally.add("line-ending mismatch", case, f"{title}: {v}")
        # the edit as an editor sends it (last first, so each range is still of the text it was made for)
        ordered = sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True)
        doc.change(
            [lsp.TextDocumentContentChangePartial(range=e.range, text=e.new_text) for e in ordered], clamp=clamped
        )
        if doc.text != fixed:
            self.tally.add("fix violation", case, f"{title}: its edits applied in order give another text")
        after = await self.publish(doc, case, title)
        if after is not None and not proposal:
            for fixed_diag in action.diagnostics or [diag]:
                same = [d for d in after if d.code == fixed_diag.code and d.message == fixed_diag.message]
                if same:
                    self.tally.add(
                        "fix violation", case, f"{title}: {fixed_diag.code} is still there: {fixed_diag.message}"
                    )
        # undo, as one change of the whole text: the original's diagnostics come back
        whole = lsp.Range(lsp.Position(0, 0), tm.position(doc.text, len(doc.text)))
        doc.change([lsp.TextDocumentContentChangePartial(range=whole, text=original)])
        undone = await self.publish(doc, case, f"undo of {title}")
        if undone is not None and shape(undone) != original_shape:
            self.tally.add("sync divergence", case, f"undo of {title}: {_diff(original_shape, shape(undone))}")

    async def _edit(self, doc: Doc, case: Case, n: int, hovers: int, resync: bool) -> None:
        """`n` incremental changes sent as fast as a user types; then the server's diagnostics and hovers of the
        last version against those of the same text opened fresh."""
        for _ in range(n):
            changes = []
            text = doc.text
            for _ in range(self.rng.choice([1, 1, 2, 3])):
                c = random_change(self.rng, text)
                changes.append(c)
                text = tm.apply_change(text, c)
            doc.change(changes)
            self.tally.edits += 1
        edited = await self.publish(doc, case, f"{n} incremental edits")
        if edited is None or not resync:
            return
        fresh_path = doc.path.with_name(doc.path.stem + "-fresh.yml")
        fresh = Doc(self.client, fresh_path, doc.text)
        try:
            opened = await self.publish(fresh, case, "fresh open of the edited text")
            if opened is None:
                return
            if shape(edited) != shape(opened):
                self.tally.add("sync divergence", case, f"after edits: {_diff(shape(opened), shape(edited))}")
            names = (doc.path.name, fresh_path.name, doc.uri, fresh.uri)
            for pos in self.positions(doc.text, hovers):
                got = []
                for d in (doc, fresh):
                    ok, h = await self.request(
                        "hover",
                        case,
                        lambda d=d, p=pos: self.client.text_document_hover_async(
                            lsp.HoverParams(lsp.TextDocumentIdentifier(d.uri), p)
                        ),
                    )
                    got.append(hover_text(h, *names) if ok else None)
                if self._background_on(pos.line, doc.uri, fresh.uri):
                    continue  # the agents' diagnosis of another version leads the hover there
                if any(
                    str(d.code) in _WHERE_EDITED and d.range.start.line <= pos.line <= d.range.end.line
                    for d in (*edited, *opened)
                ):
                    continue  # a mesh product's error leads the hover on the key it landed on, which the edits decide
                if None not in got and got[0] != got[1] and "analysing" not in f"{got[0]}{got[1]}":
                    self.tally.add(
                        "sync divergence",
                        case,
                        f"hover at {pos.line}:{pos.character} differs from a fresh open's: "
                        f"{str(got[0])[:200]!r} vs {str(got[1])[:200]!r}",
                    )
        finally:
            fresh.close()

    def _background_on(self, line: int, *uris: str) -> bool:
        """Whether a background producer's diagnostic was ever published on `line` of one of `uris`."""
        return any(
            p.uri in uris and d.range.start.line <= line <= d.range.end.line
            for p in self.client.publishes
            for d in p.diagnostics
            if str(d.code).startswith(BACKGROUND_CODES)
        )

    def positions(self, text: str, n: int) -> list[lsp.Position]:
        """`n` positions on lines that have text: at a key's start and somewhere in the line."""
        lines = [i for i, line in enumerate(tm.client_lines(text)) if line.strip()]
        out = []
        for i in self.rng.sample(lines, min(n, len(lines))):
            body = tm.client_lines(text)[i].rstrip("\r\n")
            at = self.rng.choice([0, self.rng.randint(0, len(body))])  # a character's start, never mid-pair
            out.append(lsp.Position(i, tm.utf16_len(body[:at])))
        return out


# Keys hovered in every case that writes them, besides the random positions: their hovers compute with the value
# (global batch, tokens per step, HBM), where a non-finite or subnormal batch size once escaped (issue 25).
HOVER_KEYS = ("per_device_batch_size",)


def key_positions(text: str) -> list[tuple[str, lsp.Position]]:
    """(key, the start of its line) for each line that writes a key of HOVER_KEYS."""
    lines = tm.client_lines(text)
    return [(k, lsp.Position(i, 0)) for i, line in enumerate(lines) for k in HOVER_KEYS if line.startswith(f"{k}:")]


def _diff(want: list[tuple[Any, ...]], got: list[tuple[Any, ...]]) -> str:
    missing = Counter(want) - Counter(got)
    extra = Counter(got) - Counter(want)
    return f"expected but missing {sorted(missing)[:3]}; unexpected {sorted(extra)[:3]}"


async def start(tally: Tally, workdir: Path, seed: int, request_s: float = REQUEST_S) -> Session:
    client = FuzzClient()
    await client.launch()
    return Session(client, workdir, tally, random.Random(seed), request_s)
