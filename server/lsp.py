"""ASAP's language server (pygls 2.x): one short handler per LSP method. Handlers take
the document, snapshot the settings, call the core (server.services.analysis, server.presentation.explain),
convert with server.editor.lsp_convert and publish. No YAML, rules or estimates here.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import re
import sys
import threading
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, ClassVar

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument

from server import __version__
from server.agents.report import AnalysisReport
from server.common.findings import Finding, Severity
from server.common.progress import Cancelled, CancelToken
from server.config import models, placement
from server.editor import lsp_convert
from server.presentation import agent_findings, explain, verification
from server.profiles import profile_convert, profile_link
from server.profiles.profile import ProfileError
from server.profiles.profile_convert import ProfileFiles
from server.services import experiments, profile_analysis
from server.services.analysis import Analysis, analyze
from server.services.profile_analysis import ProfileResult

log = logging.getLogger("asap")

DEBOUNCE_S = 0.25
ESTIMATE_CODE = "ASAP120"  # the estimate's information line, hidden by `asap.showEstimate: false`
LINK_PROFILE_COMMAND = "asap.server.linkProfile"  # (config uri, profile path or null to unlink)
ANALYZE_COMMAND = "asap.server.analyze"  # (config uri) -> the `asap analyze --json` document
RUN_AGENTS_COMMAND = "asap.server.runAgents"  # (config uri): re-run the background analysis now
ROOFLINE_COMMAND = "asap.server.roofline"  # (config uri, "light"|"dark") -> {title, spec (Vega-Lite), fresh}
SHOW_ROOFLINE = "asap.showRoofline"  # the client's command: opens the roofline view (config uri)
VERIFY_COMMAND = "asap.server.verify"  # (config uri): compile the current mesh and the proposals for the slice
RECORD_APPLIED_COMMAND = "asap.server.recordApplied"  # (experiment id, rank, config uri): a quick fix was applied
RECORD_OUTCOME_COMMAND = "asap.server.recordOutcome"  # (config uri, profile path or null) -> the outcome
SHOW_PROPOSALS = "asap.showProposals"  # the client's command: the proposals' quick fixes (config uri, line)


@dataclass(frozen=True)
class Settings:
    default_slice: str | None = None
    show_estimate: bool = True
    kb_path: str | None = None  # asap.kbPath: the knowledge index file
    llm: str = "off"  # asap.llm: "off" or "auto"
    profile_search_paths: tuple[str, ...] = ()  # asap.profileSearchPaths: where <run_name>/ profiles may be
    verify: str = "manual"  # asap.verify: "manual" (ASAP: Verify) or "auto" (after each background analysis)
    maxtext_python: str | None = None  # asap.maxtextPython: compile MaxText's own train step with it
    maxtext_path: str | None = None  # asap.maxtextPath: a MaxText checkout whose models/ model_name is read from

    @classmethod
    def from_client(cls, raw: Any) -> Settings:
        if not isinstance(raw, dict):
            return cls()
        ds = raw.get("defaultSlice")
        show = raw.get("showEstimate", True)
        kb = raw.get("kbPath")
        llm = raw.get("llm", "off")
        paths = raw.get("profileSearchPaths", [])
        verify = raw.get("verify", "manual")
        mt = raw.get("maxtextPython")
        mp = raw.get("maxtextPath")
        return cls(
            default_slice=ds.strip() if isinstance(ds, str) and ds.strip() else None,
            show_estimate=show if isinstance(show, bool) else True,
            kb_path=kb.strip() if isinstance(kb, str) and kb.strip() else None,
            llm=llm if llm in ("off", "auto") else "off",
            profile_search_paths=tuple(str(p) for p in paths if isinstance(p, str) and p.strip())
            if isinstance(paths, list)
            else (),
            verify=verify if verify in ("manual", "auto") else "manual",
            maxtext_python=str(Path(mt.strip()).expanduser()) if isinstance(mt, str) and mt.strip() else None,
            maxtext_path=str(Path(mp.strip()).expanduser()) if isinstance(mp, str) and mp.strip() else None,
        )


class AsapServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("asap", __version__)
        self.settings = Settings()
        self.analyses: dict[str, tuple[int | None, Analysis]] = {}  # uri -> (version, analysis)
        self.pending: dict[str, asyncio.Task[None]] = {}
        self.profiles: dict[str, ProfileResult] = {}  # uri -> its linked profile's result
        self.conversions: dict[Path, asyncio.Task[None]] = {}  # profile run dir -> conversion in flight
        self.failed: dict[tuple[tuple[str, int, int], ...], str] = {}  # profile files -> why not read
        self.agent: dict[str, tuple[int | None, AnalysisReport]] = {}  # uri -> (version analysed, result)
        self.agent_tasks: dict[str, asyncio.Task[None]] = {}
        self.verified: dict[str, tuple[int | None, list[dict[str, Any]]]] = {}  # uri -> (version, results)
        self.verify_tasks: dict[str, asyncio.Task[None]] = {}
        self.outcome_checked: set[tuple[str, Any]] = set()  # (config path, profile files) looked up once
        self.new_outcomes: dict[str, dict[str, Any]] = {}  # uri -> an outcome recorded by itself, to announce
        self.shutting_down = False
        self._agent_pool: ProcessPoolExecutor | None = None

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
        pool = getattr(self, "_agent_pool", None)
        if pool is not None and old is not None and old.maxtext_path != value.maxtext_path:
            self._agent_pool = None
            pool.shutdown(wait=False)

    # -- core calls -------------------------------------------------------------------------------
    def read(self, path: Path) -> str:
        """Parents come from the editor's buffer when open there, else from disk (also before `initialize`)."""
        try:
            doc = self.workspace.text_documents.get(path.as_uri())
        except RuntimeError:  # pygls: no workspace before `initialize`
            doc = None
        return doc.source if doc is not None else path.read_text(encoding="utf-8")

    def _analyze(self, uri: str, source: str) -> Analysis:
        """Pure: analyze one snapshot of a document's text (safe to run in a worker thread)."""
        path = Path(p) if (p := to_fs_path(uri)) else None
        return analyze(path, source, self.read, self.settings.default_slice)

    def analyze_doc(self, doc: TextDocument) -> Analysis:
        """The analysis of the document as it is now (on the event loop: hover, code action)."""
        cached = self.analyses.get(doc.uri)
        if cached is not None and cached[0] == doc.version:
            return cached[1]
        an = self._analyze(doc.uri, doc.source)
        self.analyses[doc.uri] = (doc.version, an)
        return an

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

    def _profile(self, uri: str, an: Analysis) -> ProfileResult:
        """The linked profile from the cache only (safe in a worker thread); conversion is started apart."""
        if not an.config.is_maxtext:
            return ProfileResult(None, None, None)
        search = [Path(p) for p in self.settings.profile_search_paths]
        res = profile_analysis.run(an, self.workspace_root(uri), cached_only=True, search_paths=search)
        if res.files is not None and res.report is None and res.link is not None:
            why = self.failed.get(profile_convert.files_key(res.files))
            if why is not None:
                res.findings.append(
                    profile_analysis.at_link(res.link, profile_analysis.UNREADABLE, Severity.WARNING, why)
                )
        self._maybe_outcome(uri, an, res)
        return res

    def _maybe_outcome(self, uri: str, an: Analysis, res: ProfileResult) -> None:
        """A profile of a config whose mesh is an applied proposal, captured after it was applied: record the
        outcome (once per profile). Runs in the worker thread with the profile lookup."""
        path = to_fs_path(uri)
        if not path or res.report is None or res.files is None:
            return
        key = (path, profile_convert.files_key(res.files))
        if key in self.outcome_checked:
            return
        self.outcome_checked.add(key)
        try:
            measured = experiments.measured_from(res.report, res.files, res.findings)
            if experiments.pending(an, Path(path), measured):
                measured.memory_bytes = experiments.compiled_memory(an, self.settings.maxtext_python)
                self.new_outcomes[uri] = experiments.record_outcome(an, Path(path), measured)
        except experiments.OutcomeError as e:
            log.info("no outcome recorded for %s: %s", path, e)
        except Exception:
            log.exception("recording the outcome of %s failed", path)

    def shown(self, doc: TextDocument, an: Analysis, agents: bool = True) -> list[Finding]:
        """The findings the editor shows for this document: static and estimate, profile, and the agents'."""
        prof = self.profiles.get(doc.uri)
        findings: list[Finding] = [*an.diagnostics, *(prof.findings if prof else [])]
        agent = self.agent.get(doc.uri)
        if agent is not None and agents:
            findings += agent_findings.diagnosis_findings(agent[1], an, stale=agent[0] != doc.version)
        ver = self.verified.get(doc.uri)
        if ver is not None:
            findings += verification.findings(ver[1], an, stale=ver[0] != doc.version)
        return [
            f
            for f in findings
            if (f.file is None or _same(f.file, doc)) and (self.settings.show_estimate or f.code != ESTIMATE_CODE)
        ]

    def publish(self, doc: TextDocument, an: Analysis) -> None:
        if self.shutting_down:  # background work finishing after shutdown has no one to tell
            return
        diags = [lsp_convert.diagnostic(f, doc) for f in self.shown(doc, an)]
        self.text_document_publish_diagnostics(
            lsp.PublishDiagnosticsParams(uri=doc.uri, version=doc.version, diagnostics=diags)
        )

    async def refresh(self, uri: str, delay: float = 0.0) -> None:
        """Analyze a snapshot off the event loop; publish and cache it unless the document moved on."""
        if delay:
            await asyncio.sleep(delay)  # debounce: a newer change cancels this task
        doc = self.workspace.text_documents.get(uri)
        if doc is None:
            return
        version, source = doc.version, doc.source  # pygls edits the document in place: snapshot it here
        cached = self.analyses.get(uri)
        if cached is not None and cached[0] == version:
            an = cached[1]
        else:
            try:
                an = await asyncio.get_running_loop().run_in_executor(None, self._analyze, uri, source)
            except Exception:  # a bug in a rule must not take the server down
                log.exception("analysis of %s failed", uri)
                return
        try:
            prof = await asyncio.get_running_loop().run_in_executor(None, self._profile, uri, an)
        except Exception:
            log.exception("profile analysis of %s failed", uri)
            prof = ProfileResult(None, None, None)
        current = self.workspace.text_documents.get(uri)
        if current is None or current.version != version:
            return
        self.analyses[uri] = (version, an)
        self.profiles[uri] = prof
        self.publish(current, an)
        outcome = self.new_outcomes.pop(uri, None)
        if outcome is not None:
            text = experiments.describe(outcome)
            self.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Info, message=f"ASAP: {text}"))
            log.info("%s: %s", Path(to_fs_path(uri) or uri).name, text)
        self.refresh_dependents(uri)
        if prof.files is not None and prof.report is None and not prof.findings:
            self.start_conversion(prof.files)

    def agent_pool(self) -> ProcessPoolExecutor:
        """The agents run in a worker process: their CPU-bound pricing must not hold this process' GIL while
        the editor waits for a hover or diagnostics (bench/lsp_latency.py measures it)."""
        if self._agent_pool is None:
            self._agent_pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
        return self._agent_pool

    def start_agents(self, uri: str) -> None:
        """Diagnosis and proposals in the background (on open and save, never on a keystroke)."""
        old = self.agent_tasks.pop(uri, None)
        if old is not None:
            old.cancel()
        self.agent_tasks[uri] = asyncio.ensure_future(self.run_agents(uri))

    async def run_agents(self, uri: str) -> None:
        from server.agents.coordinator import run_report
        from server.agents.types import Experiment

        doc = self.workspace.text_documents.get(uri)
        path = to_fs_path(uri)
        if doc is None or not path:
            return
        version, text = doc.version, doc.source
        settings = self.settings
        exp = Experiment(
            Path(path),
            text,
            settings.default_slice,
            None,
            self.workspace_root(uri),
            tuple(Path(p) for p in settings.profile_search_paths),
        )
        kb_path = Path(settings.kb_path).expanduser() if settings.kb_path else None
        loop = asyncio.get_running_loop()
        token: str | None = None
        try:
            cached = self.analyses.get(uri)  # refresh() usually has this version's analysis already
            an = cached[1] if cached is not None and cached[0] == version else None
            if an is None:
                an = await loop.run_in_executor(None, self._analyze, uri, text)
            if not an.config.is_maxtext or an.check.slice is None:
                return
            token = await self._begin_progress("ASAP: diagnosing and pricing meshes", Path(path).name)
            job = loop.run_in_executor(self.agent_pool(), run_report, exp, settings.llm, None, None, kb_path)
            if token is not None:  # a cancel from the progress bar drops this run (the worker finishes alone)
                fut = self.work_done_progress.tokens.get(token)
                task = self.agent_tasks.get(uri)
                if fut is not None and task is not None:
                    fut.add_done_callback(lambda f: task.cancel() if f.cancelled() else None)
            result, _ = await job
        except asyncio.CancelledError:
            log.info("analysis of %s cancelled", path)
            raise
        except Exception:
            log.exception("agents failed on %s", uri)
            return
        finally:
            if token is not None:
                self.work_done_progress.end(token, lsp.WorkDoneProgressEnd())
                self.work_done_progress.tokens.pop(token, None)
        current = self.workspace.text_documents.get(uri)
        if current is None:
            return
        self.agent[uri] = (version, result)
        cached = self.analyses.get(uri)
        if cached is not None and cached[0] == current.version:  # else the pending refresh publishes it
            self.publish(current, cached[1])
        if self.settings.verify == "auto" and current.version == version:
            self.start_verify(uri)

    def start_verify(self, uri: str) -> None:
        """The TPU compiler's verdict on the current mesh and the fresh proposals, in the background."""
        old = self.verify_tasks.pop(uri, None)
        if old is not None:
            old.cancel()
        self.verify_tasks[uri] = asyncio.ensure_future(self.run_verify(uri))

    async def run_verify(self, uri: str) -> None:
        doc = self.workspace.text_documents.get(uri)
        path = to_fs_path(uri)
        if doc is None or not path:
            return
        version = doc.version
        an = self.analyze_doc(doc)
        if not an.config.is_maxtext or an.check.slice is None:
            return
        agent = self.agent.get(uri)
        todo = verification.targets(agent[1] if agent is not None and agent[0] == version else None)
        loop = asyncio.get_running_loop()
        cancel = CancelToken()
        token = await self._begin_progress("ASAP: TPU compiler", Path(path).name)

        def progress(message: str, frac: float | None) -> None:
            if token is not None:
                pct = None if frac is None else round(100 * frac)
                report = lsp.WorkDoneProgressReport(message=message, percentage=pct)
                loop.call_soon_threadsafe(self.work_done_progress.report, token, report)

        if token is not None:  # the progress bar's cancel kills the compile
            fut = self.work_done_progress.tokens.get(token)
            if fut is not None:
                fut.add_done_callback(lambda f: cancel.cancel() if f.cancelled() else None)
        settings = self.settings
        try:
            results = await loop.run_in_executor(
                None,
                lambda: verification.verify_all(
                    an.config,
                    todo,
                    settings.default_slice,
                    progress=progress,
                    cancel=cancel,
                    maxtext_python=settings.maxtext_python,
                ),
            )
        except asyncio.CancelledError:
            cancel.cancel()
            log.info("verification of %s cancelled", path)
            raise
        except Exception:
            log.exception("verification failed on %s", uri)
            return
        finally:
            if token is not None:
                self.work_done_progress.end(token, lsp.WorkDoneProgressEnd())
                self.work_done_progress.tokens.pop(token, None)
        if cancel.cancelled:
            log.info("verification of %s cancelled", path)
            return
        for e in results:
            log.info("TPU compiler, %s of %s: %s", e["label"], Path(path).name, e["result"]["message"])
        self.verified[uri] = (version, results)
        current = self.workspace.text_documents.get(uri)
        if current is not None:
            self.publish(current, self.analyze_doc(current))
        self._refresh_code_lenses()

    def _refresh_code_lenses(self) -> None:
        ws = self.client_capabilities.workspace
        if ws is not None and ws.code_lens is not None and ws.code_lens.refresh_support:
            self.workspace_code_lens_refresh(None)

    async def _begin_progress(self, title: str, message: str) -> str | None:
        """A cancellable work-done progress, when the client shows them."""
        window = self.client_capabilities.window
        if self.shutting_down or window is None or not window.work_done_progress:
            return None
        token = f"asap-{title.split(':')[-1].strip().split()[0]}-{id(message)}-{asyncio.get_running_loop().time()}"
        try:
            # shielded: a task cancelled while the client answers must not cancel pygls' own future (pygls then
            # fails to set the answer on it and logs an InvalidStateError)
            await asyncio.shield(self.work_done_progress.create_async(token))
        except Exception:
            return None
        self.work_done_progress.begin(token, lsp.WorkDoneProgressBegin(title=title, message=message, cancellable=True))
        return token

    def start_conversion(self, pf: ProfileFiles) -> None:
        if pf.run_dir not in self.conversions:
            self.conversions[pf.run_dir] = asyncio.ensure_future(self.convert(pf))

    async def convert(self, pf: ProfileFiles) -> None:
        """Convert a linked profile through XProf in the background, with cancellable progress, then
        re-analyse the documents linked to it."""
        loop = asyncio.get_running_loop()
        cancel = CancelToken()
        name = f"asap-profile-{id(pf)}-{loop.time()}"
        window = self.client_capabilities.window
        token: str | None = name if window is not None and window.work_done_progress else None
        if token is not None:
            try:
                await asyncio.shield(self.work_done_progress.create_async(name))
            except Exception:  # the client refused: convert without a progress bar
                token = None
        if token is not None:
            self.work_done_progress.begin(
                token,
                lsp.WorkDoneProgressBegin(title="ASAP: reading profile", message=pf.describe(), cancellable=True),
            )
            fut = self.work_done_progress.tokens.get(token)
            if fut is not None:
                fut.add_done_callback(lambda f: cancel.cancel() if f.cancelled() else None)

        def progress(message: str, frac: float | None) -> None:
            if token is not None:
                pct = None if frac is None else int(frac * 100)
                value = lsp.WorkDoneProgressReport(message=message, percentage=pct)
                loop.call_soon_threadsafe(self.work_done_progress.report, token, value)

        outcome = "done"
        try:
            log.info("reading profile %s", pf.describe())
            await loop.run_in_executor(None, lambda: profile_convert.load_tools(pf, progress, cancel))
        except asyncio.CancelledError:  # the server is shutting down: kill the XProf child too
            cancel.cancel()
            raise
        except Cancelled:
            outcome = "cancelled"
            self.failed[profile_convert.files_key(pf)] = (
                "reading the profile was cancelled; reopen the config or run 'ASAP: Link profile...' to retry"
            )
        except ProfileError as e:
            outcome = "failed"
            self.failed[profile_convert.files_key(pf)] = f"profile not read: {e}"
            log.warning("profile %s not read: %s", pf.run_dir, e)
        except Exception as e:  # a bug must not take the server down
            outcome = "failed"
            self.failed[profile_convert.files_key(pf)] = f"profile not read: internal error ({e})"
            log.exception("conversion of %s failed", pf.run_dir)
        finally:
            self.conversions.pop(pf.run_dir, None)
            if token is not None:
                self.work_done_progress.end(token, lsp.WorkDoneProgressEnd(message=outcome))
                self.work_done_progress.tokens.pop(token, None)  # pygls keeps every token's future otherwise
        if outcome == "done" and not profile_convert.is_cached(pf):
            # Never loop converting a profile the cache cannot hold: say so instead.
            self.failed[profile_convert.files_key(pf)] = "the profile was converted but could not be kept in memory"
        for uri, res in list(self.profiles.items()):
            if res.files is not None and res.files.run_dir == pf.run_dir:
                self.schedule(uri, invalidate=True)

    def refresh_dependents(self, uri: str) -> None:
        """Open configs that inherit from `uri` see its unsaved edits (or its disk text once closed)."""
        path = to_fs_path(uri)
        if not path:
            return
        target = Path(path).resolve()
        for other, (_, oan) in list(self.analyses.items()):
            if other != uri and target in oan.depends_on:
                self.schedule(other, DEBOUNCE_S, invalidate=True)

    def schedule(self, uri: str, delay: float = 0.0, invalidate: bool = False) -> None:
        """(Re)start the analysis of `uri`; `invalidate` when its parents may have changed."""
        if invalidate:
            self.analyses.pop(uri, None)
        old = self.pending.pop(uri, None)
        if old is not None:
            old.cancel()
        self.pending[uri] = asyncio.ensure_future(self.refresh(uri, delay))

    def report_server_error(self, error: Exception, source: Any) -> None:
        # Log instead of pygls' default popup: a user cannot act on a traceback.
        log.error("internal error (%s): %s", getattr(source, "__name__", source), error, exc_info=error)


def _same(file: Path, doc: TextDocument) -> bool:
    return doc.path is not None and file.resolve() == Path(doc.path).resolve()


server = AsapServer()


class _ClientLogHandler(logging.Handler):
    """Forward Python logging to the client's output channel (window/logMessage)."""

    LEVELS: ClassVar[dict[int, lsp.MessageType]] = {
        logging.ERROR: lsp.MessageType.Error,
        logging.WARNING: lsp.MessageType.Warning,
        logging.INFO: lsp.MessageType.Info,
    }

    def __init__(self, ls: AsapServer, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(logging.DEBUG)
        self.ls, self.loop = ls, loop

    def emit(self, record: logging.LogRecord) -> None:
        if self.ls.shutting_down:  # the client stopped reading
            return
        kind = next((t for lvl, t in self.LEVELS.items() if record.levelno >= lvl), lsp.MessageType.Log)
        params = lsp.LogMessageParams(type=kind, message=self.format(record))
        try:
            if threading.current_thread() is threading.main_thread():
                self.ls.window_log_message(params)
            else:
                self.loop.call_soon_threadsafe(self.ls.window_log_message, params)
        except Exception:  # logging must never raise
            pass


async def _pull_settings(ls: AsapServer) -> None:
    try:
        res = await ls.workspace_configuration_async(
            lsp.ConfigurationParams(items=[lsp.ConfigurationItem(section="asap")])
        )
    except Exception as e:  # clients without workspace/configuration keep the initialization options
        log.info("workspace/configuration not available (%s); keeping initialization settings", e)
        return
    if res and isinstance(res[0], dict):  # a client without an `asap` section answers [null]
        ls.settings = Settings.from_client(res[0])
    log.info("settings: %s", ls.settings)


@server.feature(lsp.SHUTDOWN)
def shutdown(ls: AsapServer, params: None) -> None:
    """Stop background work: analyses, agents, compiles and profile conversions (child processes are killed)."""
    ls.shutting_down = True
    for task in [*ls.pending.values(), *ls.agent_tasks.values(), *ls.verify_tasks.values(), *ls.conversions.values()]:
        task.cancel()
    if ls._agent_pool is not None:
        ls._agent_pool.shutdown(wait=False, cancel_futures=True)


@server.feature(lsp.INITIALIZE)
def initialize(ls: AsapServer, params: lsp.InitializeParams) -> None:
    opts = params.initialization_options
    if isinstance(opts, dict):
        ls.settings = Settings.from_client(opts.get("settings", opts))


@server.feature(lsp.INITIALIZED)
async def initialized(ls: AsapServer, params: lsp.InitializedParams) -> None:
    handler = _ClientLogHandler(ls, asyncio.get_running_loop())
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.info("ASAP language server %s started", __version__)
    # JAX's placement code takes about a second to import, and the knowledge notes' titles (cited by the
    # diagnostics' hovers) need pydantic: pay both now, off the loop.
    warm = asyncio.get_running_loop().run_in_executor(None, _warm_up)
    warm.add_done_callback(_log_warm_up)
    caps = ls.client_capabilities.workspace
    if caps is not None and caps.configuration:
        before = ls.settings
        await _pull_settings(ls)
        if ls.settings != before:  # documents opened meanwhile were analysed with the old settings
            _reanalyze_all(ls)


def _warm_up() -> None:
    placement.warm_up()
    explain.warm_up()


def _log_warm_up(fut: asyncio.Future[None]) -> None:
    if not fut.cancelled() and fut.exception() is not None:
        log.error("JAX import failed; layer-3 mesh checks are unavailable: %s", fut.exception())


@server.feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)
async def did_change_configuration(ls: AsapServer, params: lsp.DidChangeConfigurationParams) -> None:
    settings = params.settings.get("asap") if isinstance(params.settings, dict) else None
    if settings is not None:
        ls.settings = Settings.from_client(settings)
    else:
        await _pull_settings(ls)
    _reanalyze_all(ls)


def _reanalyze_all(ls: AsapServer) -> None:
    ls.analyses.clear()
    for uri in list(ls.workspace.text_documents):
        ls.schedule(uri)


@server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: AsapServer, params: lsp.DidOpenTextDocumentParams) -> None:
    ls.failed.clear()  # reopening a config retries a profile that failed or was cancelled
    ls.schedule(params.text_document.uri)
    ls.start_agents(params.text_document.uri)


@server.command(ANALYZE_COMMAND)
async def analyze_command(ls: AsapServer, uri: str) -> dict[str, Any]:
    """Diagnosis and proposals for an open config (the Coordinator), off the event loop, with progress."""
    from server.agents.coordinator import run_report
    from server.agents.types import Experiment

    path = to_fs_path(uri)
    doc = ls.workspace.text_documents.get(uri)
    if not path or doc is None:
        raise ValueError("analysis needs a saved config open in the editor")
    loop = asyncio.get_running_loop()
    token = f"asap-analyze-{loop.time()}"
    window = ls.client_capabilities.window
    progress = bool(window and window.work_done_progress)
    if progress:
        await ls.work_done_progress.create_async(token)
        ls.work_done_progress.begin(token, lsp.WorkDoneProgressBegin(title="ASAP: analyzing", message=Path(path).name))

    def report(message: str) -> None:
        if progress:
            loop.call_soon_threadsafe(ls.work_done_progress.report, token, lsp.WorkDoneProgressReport(message=message))

    settings = ls.settings
    exp = Experiment(
        Path(path),
        doc.source,
        settings.default_slice,
        None,
        ls.workspace_root(uri),
        tuple(Path(p) for p in settings.profile_search_paths),
    )
    kb_path = Path(settings.kb_path).expanduser() if settings.kb_path else None
    try:
        result, cached = await loop.run_in_executor(
            None, lambda: run_report(exp, settings.llm, report, kb_path=kb_path)
        )
    finally:
        if progress:
            ls.work_done_progress.end(token, lsp.WorkDoneProgressEnd())
            ls.work_done_progress.tokens.pop(token, None)
    log.info("analysis of %s (%s)", path, "cached" if cached else result.backend.name)
    return result.to_json()


@server.command(RECORD_APPLIED_COMMAND)
async def record_applied_command(ls: AsapServer, experiment_id: str, rank: int, uri: str) -> dict[str, Any]:
    """The editor applied "Apply proposal N" of this analysis: log it, so the next profile is its outcome."""
    path = to_fs_path(uri)
    if not path:
        raise ValueError("recording a proposal needs a config file")
    loop = asyncio.get_running_loop()
    row = await loop.run_in_executor(None, lambda: experiments.record_applied(experiment_id, int(rank), Path(path)))
    log.info("proposal %s of experiment %s applied to %s", rank, experiment_id, Path(path).name)
    return row


@server.command(RECORD_OUTCOME_COMMAND)
async def record_outcome_command(ls: AsapServer, uri: str, profile: str | None = None) -> dict[str, Any]:
    """The outcome of the applied proposal from a profile (given, else the config's linked profile)."""
    path = to_fs_path(uri)
    doc = ls.workspace.text_documents.get(uri)
    if not path or doc is None:
        raise ValueError("recording an outcome needs the config open in the editor")
    an = ls.analyze_doc(doc)
    target = Path(profile).expanduser() if profile else None
    if target is None:
        prof = ls.profiles.get(uri)
        if prof is None or prof.files is None:
            raise ValueError("no profile is linked to this config: link the run's profile, or pass its path")
        target = prof.files.run_dir

    def record() -> dict[str, Any]:
        try:
            return experiments.record_outcome(an, Path(path), experiments.measure(an, target))
        except (experiments.OutcomeError, ProfileError) as e:
            raise ValueError(str(e)) from e

    out = await asyncio.get_running_loop().run_in_executor(None, record)
    log.info("%s: %s", Path(path).name, experiments.describe(out))
    return out


@server.command(VERIFY_COMMAND)
def verify_command(ls: AsapServer, uri: str) -> None:
    """Compile the current mesh and the agents' proposals for the slice (the code lens' "Verify")."""
    ls.start_verify(uri)


@server.command(RUN_AGENTS_COMMAND)
def run_agents_command(ls: AsapServer, uri: str) -> None:
    """Re-run the agents on the open document now (the code lens' "Analyze")."""
    ls.start_agents(uri)


@server.command(ROOFLINE_COMMAND)
def roofline_command(ls: AsapServer, uri: str, theme: str = "light") -> dict[str, Any]:
    """The roofline chart of an open config as Vega-Lite: the estimate for the text as it is now, the linked
    profile's top ops, and the agents' proposals when their analysis is of this version."""
    from server.agents.report import EstimateView, ProfileView
    from server.presentation import roofline_chart

    doc = ls.workspace.text_documents.get(uri)
    if doc is None:
        raise ValueError("the roofline needs the config open in the editor")
    an = ls.analyze_doc(doc)
    if an.estimate is None:
        raise ValueError("no estimate for this config: declare its slice and fix the mesh errors first")
    agent = ls.agent.get(uri)
    fresh = agent is not None and agent[0] == doc.version
    prof = ls.profiles.get(uri)
    chart = roofline_chart.chart(
        EstimateView.from_json(an.estimate.to_json()),
        an,
        theme,
        slice_name=an.estimate.layout.slice.name,
        profile=ProfileView.from_json(prof.report.to_json()) if prof is not None and prof.report is not None else None,
        proposals=agent[1].proposals if fresh and agent is not None else [],
    )
    name = Path(to_fs_path(uri) or uri).name
    return {"title": f"ASAP roofline: {name}", "spec": chart, "fresh": fresh}


@server.feature(lsp.TEXT_DOCUMENT_CODE_LENS)
def code_lens(ls: AsapServer, params: lsp.CodeLensParams) -> list[lsp.CodeLens]:
    """Above the mesh block: the estimate's one-line summary, the agents' verdict and the TPU compiler's when
    fresh, and the actions "Analyze", "Verify", "Show roofline" and "Proposals" (the last two are the client's
    commands)."""
    doc = ls.workspace.get_text_document(params.text_document.uri)
    an = ls.analyze_doc(doc)
    if not an.config.is_maxtext or an.config.document is None:
        return []
    mesh = [e for k, e in an.config.document.entries.items() if k.endswith("_parallelism")]
    anchor = min((e.key_span for e in mesh), key=lambda sp: sp.line) if mesh else None
    if anchor is None:
        return []
    rng = lsp_convert.client_range(doc, anchor)
    lenses = []
    if an.estimate is not None:
        lenses.append(lsp.CodeLens(range=rng, command=lsp.Command(title=an.estimate.summary(), command="")))
    agent = ls.agent.get(doc.uri)
    if agent is not None and agent[0] == doc.version:
        props = [p for p in agent[1].proposals if not p.keep_current]
        if any(p.keep_current for p in agent[1].proposals):
            title = "ASAP: keep this mesh (no clearly better one)"
        elif props and props[0].expected.speedup is not None:
            label, speedup = agent_findings.mesh_label(props[0]), props[0].expected.speedup
            title = f"ASAP: proposal 1 {label} x{speedup:.2f} (quick fix)"
        else:
            title = "ASAP: proposals available (quick fix)"
        lenses.append(lsp.CodeLens(range=rng, command=lsp.Command(title=title, command="")))
    ver = ls.verified.get(doc.uri)
    entry = verification.current_entry(ver[1]) if ver is not None and ver[0] == doc.version else None
    if entry is not None:
        title = f"TPU compiler: {verification.summary(entry['result'])}"
        lenses.append(lsp.CodeLens(range=rng, command=lsp.Command(title=title, command="")))
    lenses.append(
        lsp.CodeLens(range=rng, command=lsp.Command(title="Analyze", command=RUN_AGENTS_COMMAND, arguments=[doc.uri]))
    )
    if an.estimate is not None:
        for title, command in (("Verify", VERIFY_COMMAND), ("Show roofline", SHOW_ROOFLINE)):
            lenses.append(
                lsp.CodeLens(range=rng, command=lsp.Command(title=title, command=command, arguments=[doc.uri]))
            )
    if agent is not None and agent[0] == doc.version and any(not p.keep_current for p in agent[1].proposals):
        # the proposals' quick fixes, offered wherever the cursor is in the file: open them at the mesh block
        args = [doc.uri, rng.start.line, rng.start.character]
        lenses.append(
            lsp.CodeLens(range=rng, command=lsp.Command(title="Proposals", command=SHOW_PROPOSALS, arguments=args))
        )
    return lenses


@server.command(LINK_PROFILE_COMMAND)
def link_profile(ls: AsapServer, uri: str, profile: str | None = None) -> dict[str, Any]:
    """Store (or remove, with no path) the profile link of a config in <workspace>/.asap/links.json."""
    path = to_fs_path(uri)
    ws = ls.workspace_root(uri)
    if not path or ws is None:
        raise ValueError("linking a profile needs a saved config inside a workspace folder")
    target = Path(profile).expanduser() if profile else None
    if target is not None:
        if not target.is_absolute():
            target = ws / target
        try:
            profile_convert.find_profile(target)
        except ProfileError as e:
            raise ValueError(str(e)) from e
    written = profile_link.write_link(ws, Path(path), target)
    ls.failed.clear()
    ls.schedule(uri, invalidate=True)
    log.info("profile link of %s -> %s (%s)", path, target, written)
    return {"links_file": str(written), "profile": str(target) if target else None}


@server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: AsapServer, params: lsp.DidChangeTextDocumentParams) -> None:
    ls.schedule(params.text_document.uri, DEBOUNCE_S)


@server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: AsapServer, params: lsp.DidSaveTextDocumentParams) -> None:
    ls.schedule(params.text_document.uri, invalidate=True)  # parents on disk may have changed too
    ls.start_agents(params.text_document.uri)


@server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: AsapServer, params: lsp.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    task = ls.pending.pop(uri, None)
    if task is not None:
        task.cancel()
    ls.analyses.pop(uri, None)
    ls.profiles.pop(uri, None)
    ls.agent.pop(uri, None)
    agent_task = ls.agent_tasks.pop(uri, None)
    if agent_task is not None:
        agent_task.cancel()
    ls.verified.pop(uri, None)
    verify_task = ls.verify_tasks.pop(uri, None)
    if verify_task is not None:
        verify_task.cancel()
    ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
    ls.refresh_dependents(uri)  # children now read this parent from disk


@server.feature(lsp.TEXT_DOCUMENT_HOVER)
def hover(ls: AsapServer, params: lsp.HoverParams) -> lsp.Hover | None:
    doc = ls.workspace.get_text_document(params.text_document.uri)
    line, col = lsp_convert.server_position(doc, params.position)
    prof = ls.profiles.get(doc.uri)
    an = ls.analyze_doc(doc)
    # each diagnostic under the cursor explained (the agents' diagnosis has its own section below)
    shown = ls.shown(doc, an, agents=False)
    found = (explain.profile_hover(prof, line, col) if prof else None) or explain.hover(an, line, col, shown)
    agent = ls.agent.get(doc.uri)
    if agent is not None:  # on a key the diagnosis implicates: the diagnosis first, then the key's own hover
        for f in agent_findings.diagnosis_findings(agent[1], an, stale=agent[0] != doc.version):
            if f.span.line == line and f.span.column <= col <= f.span.end_column:
                ver = ls.verified.get(doc.uri)
                fresh = ver[1] if ver is not None and ver[0] == doc.version else None
                md = explain.agent_md(agent[1], stale=agent[0] != doc.version, verified=fresh)
                found = (md + ("\n\n---\n\n" + found[0] if found else ""), f.span)
                break
    if found is None:
        return None
    md, span = found
    return lsp.Hover(
        contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=md),
        range=lsp_convert.client_range(doc, span),
    )


@server.feature(
    lsp.TEXT_DOCUMENT_CODE_ACTION,
    lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix], resolve_provider=True),
)
def code_action(ls: AsapServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
    doc = ls.workspace.get_text_document(params.text_document.uri)
    an = ls.analyze_doc(doc)  # for the document as it is now: fixes never apply to stale text
    actions: list[lsp.CodeAction] = []
    for diag in params.context.diagnostics:
        if diag.source != lsp_convert.SOURCE:
            continue
        for f in an.diagnostics:
            if f.code != diag.code or lsp_convert.client_range(doc, f.span).start != diag.range.start:
                continue
            for fix in f.fixes:
                action = lsp_convert.code_action(fix, doc, diag)
                if action is not None:
                    actions.append(action)
    agent = ls.agent.get(doc.uri)
    if agent is not None and agent[0] == doc.version:  # proposals never apply to text they were not made for
        on = [d for d in params.context.diagnostics if d.code == agent_findings.DIAGNOSIS_CODE]
        resolve = _can_resolve_edits(ls)
        for fix in agent_findings.proposal_fixes(agent[1], an, doc.source, ls.read):
            action = lsp_convert.code_action(fix, doc, on[0] if on else None)
            if action is None:
                continue
            rank = re.match(r"Apply proposal (\d+):", fix.title)
            if agent[1].experiment and rank:  # after the edit, the editor runs it: the applied proposal
                action.command = lsp.Command(
                    title="Record the applied proposal",
                    command=RECORD_APPLIED_COMMAND,
                    arguments=[agent[1].experiment, int(rank.group(1)), doc.uri],
                )
            if resolve:  # the edit is computed on codeAction/resolve
                action.data = {"uri": doc.uri, "version": doc.version, "title": fix.title}
                action.edit = None
            actions.append(action)
    return actions


def _can_resolve_edits(ls: AsapServer) -> bool:
    td = ls.client_capabilities.text_document
    ca = td.code_action if td else None
    props = ca.resolve_support.properties if ca and ca.resolve_support else []
    return "edit" in props


@server.feature(lsp.CODE_ACTION_RESOLVE)
def code_action_resolve(ls: AsapServer, action: lsp.CodeAction) -> lsp.CodeAction:
    """The proposal's edit, for the document as it is now (nothing when it moved on since the action was listed)."""
    data = action.data if isinstance(action.data, dict) else {}
    doc = ls.workspace.text_documents.get(str(data.get("uri", "")))
    agent = ls.agent.get(doc.uri) if doc is not None else None
    if doc is None or agent is None or doc.version != data.get("version") or agent[0] != doc.version:
        return action
    an = ls.analyze_doc(doc)
    for fix in agent_findings.proposal_fixes(agent[1], an, doc.source, ls.read):
        if fix.title == data.get("title"):
            resolved = lsp_convert.code_action(fix, doc, action.diagnostics[0] if action.diagnostics else None)
            if resolved is not None:
                action.edit = resolved.edit
    return action


def reserve_stdio() -> tuple[BinaryIO, BinaryIO]:
    """The protocol's own copies of stdin and stdout; file descriptor 1 then points at stderr and 0 at
    /dev/null. Over stdio one stray byte on stdout (a library's print, a C extension's message, the agents'
    worker process, which inherits the descriptors) corrupts the client's message stream, and with it every
    later message; a child reading stdin would steal the client's requests."""
    proto_in = os.fdopen(os.dup(0), "rb")
    proto_out = os.fdopen(os.dup(1), "wb")
    sys.stdout.flush()
    os.dup2(2, 1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdout = sys.stderr
    return proto_in, proto_out


def main() -> None:
    logging.getLogger("pygls").setLevel(logging.WARNING)
    # Analyses run in worker threads; a short GIL switch interval lets the event loop answer a hover or a
    # code action while one runs (the default 5 ms slices add up to tens of ms of waiting).
    sys.setswitchinterval(0.0005)
    server.start_io(*reserve_stdio())
