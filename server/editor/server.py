"""The ASAP language server object: per-document state (server/editor/state.py), the settings, what the client can
do (resolved once at initialize), and the one path from a document's text to its analysis and its published
diagnostics.

The server never blocks on an analysis. Every analysis runs off the event loop through `analysis()` (one at a time
per document, shared by whoever asks for the same version, kept only for the version and generation it is of: the
latest version wins); hover and code lens take what `ready_analysis()` has for the document as it is now (and start
one when none is on its way), code actions await `analysis()`. A document over the size limit (server/config/source.py
`MAX_DOCUMENT_BYTES`, `MAX_DOCUMENT_LINES`) is not analysed at all: it gets one diagnostic (ASAP007).

The long jobs that feed it (the agents, the TPU compiler, profile conversion) are in server/editor/background.py;
the LSP handlers in server/editor/features/.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import gc
import logging
import multiprocessing
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument

from server import __version__
from server.agents import worker
from server.agents.report import AnalysisReport
from server.common import pg_store
from server.common.codes import DiagCode
from server.common.findings import Finding, Related, Severity
from server.config import mesh, models
from server.config.source import too_large
from server.editor import background, lsp_convert
from server.editor.contract import CommandError
from server.editor.protocol import Protocol
from server.editor.settings import Settings
from server.editor.state import DocumentState, Running, Versioned
from server.launch import analysis as launch
from server.launch.project import map_finding
from server.presentation import agent_findings, verification
from server.services import experiments
from server.services.analysis import Analysis, analyze
from server.services.profile_analysis import ProfileResult

log = logging.getLogger("asap")

DEBOUNCE_S = 0.25  # a keystroke's analysis waits this long for the next keystroke

# Diagnostics published for one document: converting and sending each costs about 50 us on the event loop, and a
# person reads none past the first few hundred.
MAX_DIAGNOSTICS = 1000

# Information entries that restate what the hover and the code lens show (the estimate, the agents' diagnosis, the
# linked profile's verdict and notes, the compiler's verdict when it fits or cannot run): published only with
# asap.showInformationDiagnostics. Information findings about the config itself (no slice declared, a model priced
# from its base_* keys) are always published, except "no slice declared" on a file of shared settings (one that
# sets neither a model nor a mesh: a `base_config` parent, which F12 opens), where it is noise.
QUIET = frozenset(
    {
        DiagCode.ESTIMATE,
        DiagCode.AGENTS,
        DiagCode.PROFILE_VERDICT,
        DiagCode.PROFILE_NOTE,
        DiagCode.COMPILER_VERIFIED,
        DiagCode.COMPILER_UNAVAILABLE,
    }
)


def _shared_settings(an: Analysis) -> bool:
    """Whether the document sets neither `model_name` nor any parallelism key itself: shared settings for the
    configs that name it as their `base_config`."""
    doc = an.config.document
    if doc is None:
        return False
    keys = doc.all_entries()
    return "model_name" not in keys and not any(k.startswith(("ici_", "dcn_")) for k in keys)


@dataclass(frozen=True)
class ClientFeatures:
    """What the client supports, read once from its capabilities at initialize."""

    work_done_progress: bool = False
    code_lens_refresh: bool = False
    resolve_edit: bool = False  # codeAction/resolve may fill in `edit`
    configuration: bool = False  # workspace/configuration

    @classmethod
    def of(cls, caps: lsp.ClientCapabilities) -> ClientFeatures:
        ws, window, td = caps.workspace, caps.window, caps.text_document
        ca = td.code_action if td else None
        return cls(
            work_done_progress=bool(window and window.work_done_progress),
            code_lens_refresh=bool(ws and ws.code_lens and ws.code_lens.refresh_support),
            resolve_edit="edit" in (ca.resolve_support.properties if ca and ca.resolve_support else []),
            configuration=bool(ws and ws.configuration),
        )


class AsapServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("asap", __version__, protocol_cls=Protocol)
        self.settings = Settings()
        self.features = ClientFeatures()
        self.docs: dict[str, DocumentState] = {}
        self.conversions: dict[Path, asyncio.Task[None]] = {}  # profile run dir -> conversion in flight
        self.failed: dict[tuple[tuple[str, int, int], ...], str] = {}  # profile files -> why not read
        self.outcome_checked: set[tuple[str, Any]] = set()  # (config path, profile files) looked up once
        self.edited: dict[str, str] = {}  # uri -> the ici_/dcn_ key the user last edited (documents.did_change)
        self.shutting_down = False
        self._agent_pool: ProcessPoolExecutor | None = None
        self._frozen: set[str] = set()  # what the heap was frozen after (freeze_heap)

    @property
    def settings(self) -> Settings:
        return self._settings

    @settings.setter
    def settings(self, value: Settings) -> None:
        """Config loading reads model files from the checkout asap.maxtextPath names (the process's default,
        exported to the agents' worker too: a worker started with another checkout is retired)."""
        old = getattr(self, "_settings", None)
        self._settings = value
        models.set_default_maxtext_path(value.maxtext_path)
        store_changed = value.store != (old.store if old is not None else None)
        if store_changed:
            pg_store.use(value.store)  # asap.store from any client; VS Code's extension also passes it as ASAP_STORE
        pool = getattr(self, "_agent_pool", None)
        if pool is not None and old is not None and (old.maxtext_path != value.maxtext_path or store_changed):
            self._agent_pool = None
            pool.shutdown(wait=False)

    def state(self, uri: str) -> DocumentState:
        return self.docs.setdefault(uri, DocumentState())

    def close(self, uri: str) -> None:
        """Forget a closed document: its results and its jobs."""
        st = self.docs.pop(uri, None)
        self.edited.pop(uri, None)
        if st is not None:
            st.close()

    def agent_pool(self) -> ProcessPoolExecutor:
        """The agents run in a worker process: their CPU-bound pricing must not hold this process' GIL while
        the editor waits for a hover or diagnostics (bench/lsp_latency.py measures it). It runs
        server/agents/worker.py `run_report`; bench/soak.py measures its memory over thousands of versions."""
        if self._agent_pool is None:
            self._agent_pool = ProcessPoolExecutor(
                1, mp_context=multiprocessing.get_context("spawn"), initializer=worker.init
            )
        return self._agent_pool

    def stop_background(self) -> None:
        """Shutdown: cancel analyses, agents, compiles and profile conversions (child processes are killed)."""
        self.shutting_down = True
        for st in self.docs.values():
            st.close()
        for task in self.conversions.values():
            task.cancel()
        if self._agent_pool is not None:
            self._agent_pool.shutdown(wait=False, cancel_futures=True)

    # -- core calls -------------------------------------------------------------------------------
    def read(self, path: Path) -> str:
        """Parents come from the editor's buffer when open there, else from disk (also before `initialize`)."""
        try:
            doc = self.workspace.text_documents.get(path.as_uri())
        except RuntimeError:  # pygls: no workspace before `initialize`
            doc = None
        return doc.source if doc is not None else path.read_text(encoding="utf-8")

    def analyze_text(self, uri: str, source: str, language_id: str | None = None) -> Analysis:
        """Pure: analyze one snapshot of a document's text (safe to run in a worker thread). A launch file (a shell
        script, Makefile, Markdown file, or Kubernetes YAML holding a MaxText run) is analysed run by run
        (server/launch/analysis.py), its findings located in the file."""
        path = Path(p) if (p := to_fs_path(uri)) else None
        if launch.is_launch_file(path, source, language_id):
            la = launch.analyze_launch(
                path, source, language_id, self.settings.default_slice, self.settings.flags, self.read
            )
            return launch.file_analysis(la)
        return analyze(path, source, self.read, self.settings.default_slice, self.settings.flags)

    def too_large(self, doc: TextDocument) -> Finding | None:
        """The one diagnostic of a document over the size limit (None: within it), worked out once a version."""
        st = self.state(doc.uri)
        if st.size is None or st.size.version != doc.version:
            st.size = Versioned(doc.version, oversize(doc.source))
        return st.size.value

    async def analysis(self, doc: TextDocument) -> Analysis | None:
        """The analysis of `doc`'s text as it is at this call, computed off the event loop (None: the document is
        over the size limit). Shared with any caller asking for the same version; a run for another version
        finishes first (one at a time per document). What the analysis raised is raised here (and logged once).
        The result is kept for the document only while it is of the current version and generation."""
        if self.too_large(doc) is not None:
            return None
        uri, version, source = doc.uri, doc.version, doc.source  # pygls edits documents in place: snapshot
        language_id = doc.language_id
        st = self.state(uri)
        while True:
            if (an := st.ready(version)) is not None:
                return an
            run = st.running
            if run is None or run.future.done():
                break
            if (run.version, run.generation) == (version, st.generation):
                return await asyncio.shield(run.future)  # a cancelled caller leaves it to the others
            await asyncio.wait([run.future])
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(None, self.analyze_text, uri, source, language_id)
        st.running = Running(version, st.generation, future)
        future.add_done_callback(functools.partial(self._analysed, st, uri, version, st.generation))
        return await asyncio.shield(future)

    def _analysed(self, st: DocumentState, uri: str, version: int | None, generation: int, future: Any) -> None:
        if not future.cancelled() and (e := future.exception()) is not None:  # a bug in a rule must not stop the server
            log.error("analysis of %s (version %s) failed: %s", uri, version, e, exc_info=e)
        elif not future.cancelled():
            self.freeze_heap("analysis")
        st.analysed(version, generation, future)

    def freeze_heap(self, after: str) -> None:
        """Once `after` first completes (the first analysis, the first agents' report: the imports and warmed-up
        tables they bring), move everything the process holds out of the cyclic garbage collector's reach
        (`gc.freeze`). A full collection traverses every tracked object with the GIL held, from whichever thread
        allocates: 150-190 ms pauses on hovers while a large config was analysed, about 1 ms once frozen. Frozen
        objects are still freed by reference counting; only cycles among them are kept."""
        if after not in self._frozen:
            self._frozen.add(after)
            gc.freeze()

    def ready_analysis(self, doc: TextDocument) -> Analysis | None:
        """Never waits: the analysis of the document as it is now when it is ready, else None, having started one
        if none is on its way (none is retried for a version whose analysis failed: `analysis_failed`). For the
        request handlers that answer from what is ready (hover, code lens)."""
        st = self.state(doc.uri)
        an = st.ready(doc.version)
        if an is None and self.too_large(doc) is None and st.failed != (doc.version, st.generation):
            job = st.jobs.get("refresh")
            if job is None or job.done():
                self.schedule(doc.uri)
        return an

    def analysis_failed(self, doc: TextDocument) -> bool:
        """Whether the analysis of the document as it is now raised (logged): nothing is on its way."""
        st = self.state(doc.uri)
        return st.failed == (doc.version, st.generation)

    def agents_of(self, doc: TextDocument) -> AnalysisReport | None:
        """The agents' report when it is of the document as it is now."""
        st = self.docs.get(doc.uri)
        return st.agents.fresh(doc.version) if st is not None and st.agents is not None else None

    def run_agents_of(self, doc: TextDocument, index: int) -> AnalysisReport | None:
        """The agents' report on run `index` of a launch file, when it is of the document as it is now."""
        st = self.docs.get(doc.uri)
        got = st.run_agents.get(index) if st is not None else None
        return got.fresh(doc.version) if got is not None else None

    def workspace_root(self, uri: str) -> Path | None:
        """The workspace folder holding `uri` (profile links are stored and discovered there)."""
        path = to_fs_path(uri)
        folders = [Path(p) for f in self.workspace.folders.values() if (p := to_fs_path(f.uri))]
        if path:
            for folder in sorted(folders, key=lambda f: len(str(f)), reverse=True):
                if Path(path).resolve().is_relative_to(folder.resolve()):
                    return folder
        root = self.workspace.root_path
        return Path(root) if root else None

    # -- publishing -------------------------------------------------------------------------------
    def shown(self, doc: TextDocument, an: Analysis, agents: bool = True) -> list[Finding]:
        """Every finding ASAP has for this document: static and estimate, profile, the agents' diagnosis (one
        finding, the other keys it implicates as related locations) and the compiler's. The hover explains them
        all; `published` is what goes to the client's Problems."""
        st = self.state(doc.uri)
        findings: list[Finding] = [*self.located(doc, an), *(st.profile.findings if st.profile else [])]
        if an.runs is not None:  # a launch file: each run's compiler verdicts, at the run's tokens
            for ra in an.runs:
                got = st.run_verified.get(ra.index)
                if got is not None and got.version == doc.version:
                    made = verification.findings(got.value, ra.analysis, stale=False)
                    findings += [map_finding(ra.document, f, an.path, ra.positions) for f in made]
            return findings
        if an.config.document is None:  # the text does not parse: the (stale) diagnosis and verdict have no key
            return findings  # to stand on here, and are never moved to line 1; they return with the keys
        if st.agents is not None and agents:
            findings += self.diagnosis(doc, an)
        if st.verified is not None:
            findings += verification.findings(st.verified.value, an, stale=st.verified.version != doc.version)
        here = _InDocument(doc)
        return [f for f in findings if here(f.file)]

    def located(self, doc: TextDocument, an: Analysis) -> list[Finding]:
        """The analysis' findings, a mesh product mismatch on the parallelism key the user last edited in this
        document when it is one of the product's factors (the others as related information): the squiggle goes
        where the change was made, not on ici_fsdp_parallelism. Code actions find their findings in this list."""
        key = self.edited.get(doc.uri)
        if key is None:
            return an.diagnostics
        return [mesh.on_key(f, an.config, key) for f in an.diagnostics]

    def diagnosis(self, doc: TextDocument, an: Analysis) -> list[Finding]:
        """The agents' diagnosis as one finding (none without a report): on the first key it implicates, the
        others as related locations, so Problems lists it once."""
        st = self.state(doc.uri)
        if st.agents is None or an.config.document is None:
            return []
        return merge_diagnosis(
            agent_findings.diagnosis_findings(st.agents.value, an, stale=st.agents.version != doc.version)
        )

    def published(self, doc: TextDocument, an: Analysis) -> list[Finding]:
        """The findings published as diagnostics: errors, warnings and hints always; the estimate's, the
        diagnosis', the profile's and the compiler's information entries only with
        asap.showInformationDiagnostics (a healthy file is quiet; the hover and the code lens say the same)."""
        s = self.settings
        quiet = QUIET | ({DiagCode.NO_SLICE} if _shared_settings(an) else set())
        return [
            f
            for f in self.shown(doc, an)
            if not (f.severity == Severity.INFORMATION and f.code in quiet and not s.show_information_diagnostics)
            and (s.show_estimate or f.code != DiagCode.ESTIMATE)
        ]

    def publish(self, doc: TextDocument, an: Analysis) -> None:
        self._send(doc, self.published(doc, an))

    def _send(self, doc: TextDocument, findings: list[Finding]) -> None:
        if self.shutting_down:  # background work finishing after shutdown has no one to tell
            return
        if len(findings) > MAX_DIAGNOSTICS:  # errors first, then in document order
            log.info("%s: %d diagnostics, the first %d published", doc.uri, len(findings), MAX_DIAGNOSTICS)
            findings = sorted(findings, key=lambda f: (f.severity, f.span.line, f.span.column))[:MAX_DIAGNOSTICS]
        lines = _LinesOnce(doc) if len(findings) > 1 else doc
        diags = [lsp_convert.diagnostic(f, lines) for f in findings]
        self.text_document_publish_diagnostics(
            lsp.PublishDiagnosticsParams(uri=doc.uri, version=doc.version, diagnostics=diags)
        )

    def publish_current(self, uri: str) -> None:
        """Publish again for the document as it is now (a background result arrived); when its refresh has not
        published yet, that refresh publishes (with this result)."""
        doc = self.workspace.text_documents.get(uri)
        if doc is None:
            return
        st = self.state(uri)
        an = st.publishable(doc.version)
        job = st.jobs.get("refresh")
        if an is not None:
            self.publish(doc, an)
        elif job is None or job.done():
            self.schedule(uri)

    def refresh_code_lenses(self) -> None:
        if self.features.code_lens_refresh:
            self.workspace_code_lens_refresh(None)

    def schedule(self, uri: str, delay: float = 0.0, invalidate: bool = False) -> None:
        """(Re)start the analysis of `uri`; `invalidate` when its parents may have changed."""
        st = self.state(uri)
        if invalidate:
            st.invalidate()
        st.restart("refresh", self.refresh(uri, delay))

    def reanalyze_all(self) -> None:
        for uri in list(self.workspace.text_documents):
            self.schedule(uri, invalidate=True)

    async def refresh(self, uri: str, delay: float = 0.0) -> None:
        """Analyze the document off the event loop; publish unless it moved on meanwhile. A document over the size
        limit gets its one diagnostic and nothing else."""
        if delay:
            await asyncio.sleep(delay)  # debounce: a newer change cancels this task
        doc = self.workspace.text_documents.get(uri)
        if doc is None:
            return
        version = doc.version
        big = self.too_large(doc)
        if big is not None:
            self.state(uri).profile = None
            self._send(doc, [big])
            return
        try:
            an = await self.analysis(doc)
        except Exception:  # logged where it failed
            return
        if an is None:
            return
        loop = asyncio.get_running_loop()
        try:
            prof = await loop.run_in_executor(None, background.profile_of, self, uri, an)
        except Exception:
            log.exception("profile analysis of %s failed", uri)
            prof = ProfileResult(None, None, None)
        current = self.workspace.text_documents.get(uri)
        if current is None or current.version != version:
            return
        st = self.state(uri)
        st.profile = prof
        st.refreshed = (version, st.generation) if st.ready(version) is an else None
        self.publish(current, an)
        if st.lens_waiting:  # a code lens was answered while this analysis ran: the client asks again
            st.lens_waiting = False
            self.refresh_code_lenses()
        if st.new_outcome is not None:
            text = experiments.describe(st.new_outcome)
            st.new_outcome = None
            self.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Info, message=f"ASAP: {text}"))
            log.info("%s: %s", Path(to_fs_path(uri) or uri).name, text)
        self.refresh_dependents(uri)
        if prof.files is not None and prof.report is None and not prof.findings:
            background.start_conversion(self, prof.files)

    def refresh_dependents(self, uri: str) -> None:
        """Open configs that inherit from `uri` see its unsaved edits (or its disk text once closed)."""
        path = to_fs_path(uri)
        if not path:
            return
        target = Path(path).resolve()
        for other, st in list(self.docs.items()):
            if other != uri and st.last is not None and target in st.last.value.depends_on:
                self.schedule(other, DEBOUNCE_S, invalidate=True)

    def report_server_error(self, error: Exception, source: Any) -> None:
        # Log instead of pygls' default popup: a user cannot act on a traceback.
        if isinstance(error, CommandError):  # a command refused what it was asked (a user error, not a bug): the
            log.info("%s", error)  # client got the message in its error reply; one line here, no traceback
            return
        log.error("internal error (%s): %s", getattr(source, "__name__", source), error, exc_info=error)


class _LinesOnce(TextDocument):
    """A document's text at this version with its lines split once, for converting many ranges: pygls splits the
    whole text again for every range (2,250 diagnostics of a 60 KB config took 180 ms to convert; with the lines
    split once and at most MAX_DIAGNOSTICS, the whole publish takes 20-35 ms). Its lines are the document's own
    (whatever counts its line breaks)."""

    def __init__(self, doc: TextDocument) -> None:
        super().__init__(doc.uri, doc.source, doc.version, doc.language_id, position_codec=doc.position_codec)
        self._lines = doc.lines

    @property
    def lines(self) -> Sequence[str]:
        return self._lines


class _InDocument:
    """Whether a finding's file is this document (None: it is): by path, resolving links only when the paths
    differ as written (resolving costs system calls per finding, on every publish)."""

    def __init__(self, doc: TextDocument) -> None:
        self.path = Path(doc.path) if doc.path is not None else None
        self._resolved: Path | None = None

    def __call__(self, file: Path | None) -> bool:
        if file is None:
            return True
        if self.path is None:
            return False
        if file == self.path:
            return True
        if self._resolved is None:
            self._resolved = self.path.resolve()
        return file.resolve() == self._resolved


def merge_diagnosis(findings: list[Finding]) -> list[Finding]:
    """The diagnosis' findings (one per implicated key) as one: the first, with the other keys as related
    locations (their message names the key)."""
    if len(findings) <= 1:
        return findings
    first, rest = findings[0], findings[1:]
    related = [*first.related, *(Related(f.file, f.span, f"also implicated: {f.key or 'here'}") for f in rest)]
    return [dataclasses.replace(first, related=related)]


def oversize(source: str) -> Finding | None:
    """The one diagnostic of a text over the size limits (ASAP007, on its first line), else None."""
    return too_large(source, severity=Severity.WARNING)
