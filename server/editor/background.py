"""The language server's long jobs, each off the event loop with a cancellable progress bar: the agents (in a worker
process), the TPU compiler's verification (here, or with `asap.verifyCluster` as tasks on a Ray cluster driven from
a child process), and reading a linked profile through XProf; plus the profile lookup of a refresh and the outcome
it may record. Each job stores its result in the document's state and publishes again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import threading
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from lsprotocol import types as lsp
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument

from server.agents import worker
from server.agents.report import AnalysisReport
from server.agents.types import Experiment
from server.common.findings import Severity
from server.common.progress import Cancelled, CancelToken, Progress
from server.compile import ray_sweep
from server.editor.progress import client_progress
from server.editor.settings import Settings
from server.editor.state import Versioned
from server.presentation import ray_verification, verification
from server.profiles import profile_convert
from server.profiles.profile import ProfileError
from server.profiles.profile_convert import ProfileFiles
from server.services import experiments, profile_analysis
from server.services.analysis import Analysis
from server.services.profile_analysis import ProfileResult

if TYPE_CHECKING:  # the server calls these jobs; they only take it as an argument
    from server.editor.server import AsapServer

log = logging.getLogger("asap")


def experiment(ls: AsapServer, uri: str, text: str) -> Experiment:
    """What the agents analyse: this text of the config, with the settings as they are now."""
    s = ls.settings
    return Experiment(
        Path(to_fs_path(uri) or uri),
        text,
        s.default_slice,
        None,
        ls.workspace_root(uri),
        tuple(Path(p) for p in s.profile_search_paths),
        s.flags,
    )


def kb_path(ls: AsapServer) -> Path | None:
    return Path(ls.settings.kb_path).expanduser() if ls.settings.kb_path else None


def _open_file(ls: AsapServer, uri: str) -> tuple[TextDocument, Path] | None:
    """The open document of a file (not an untitled buffer), with its path."""
    doc = ls.workspace.text_documents.get(uri)
    path = to_fs_path(uri)
    return (doc, Path(path)) if doc is not None and path else None


def start(ls: AsapServer, uri: str, job: Literal["agents", "verify"], run: int | None = None) -> None:
    """(Re)start a document's job in the background: "agents", the diagnosis and proposals (on open, save and
    Analyze; never on a keystroke), or "verify", the TPU compiler's verdict on the current mesh and the fresh
    proposals (of a launch file's run `run`). An untrusted workspace compiles nothing (settings.restricted)."""
    if job == "verify" and not ls.settings.trusted:
        log.info("verify: not in an untrusted workspace")
        return
    ls.state(uri).restart(job, run_agents(ls, uri) if job == "agents" else run_verify(ls, uri, run))


# -- the agents ---------------------------------------------------------------------------------------------
async def run_agents(ls: AsapServer, uri: str) -> None:
    opened = _open_file(ls, uri)
    if opened is None:
        return
    doc, path = opened
    version, text = doc.version, doc.source
    exp, kb, llm = experiment(ls, uri, text), kb_path(ls), ls.settings.llm
    loop = asyncio.get_running_loop()
    st = ls.state(uri)
    try:
        an = await ls.analysis(doc)  # off the event loop; refresh() usually has it already
        if an is not None and an.runs is not None:
            await _run_agents_of_runs(ls, uri, doc, version, an)
            return
        if an is None or not an.config.is_maxtext or an.check.slice is None:  # None: over the size limit
            return
        task = st.jobs.get("agents")
        # a cancel from the progress bar drops this run (the worker finishes alone)
        cancel = task.cancel if task is not None else None
        async with client_progress(ls, "ASAP: diagnosing and pricing meshes", Path(path).name, on_cancel=cancel):
            report, _ = await loop.run_in_executor(ls.agent_pool(), worker.run_report, exp, llm, None, None, kb)
            report = await loop.run_in_executor(None, cached_verdicts, ls, an, report, text)
    except asyncio.CancelledError:
        log.info("analysis of %s cancelled", path)
        raise
    except Exception:
        log.exception("agents failed on %s", uri)
        return
    current = ls.workspace.text_documents.get(uri)
    if current is None:
        return
    ls.freeze_heap("agents")
    st = ls.state(uri)
    st.agents = Versioned(version, report)
    props = [p for p in report.proposals if not p.keep_current]
    withdrawn = f", {len(report.withdrawn)} withdrawn by the TPU compiler" if report.withdrawn else ""
    log.info("agents, %s (version %s): %d proposal(s)%s", path.name, version, len(props), withdrawn)
    if (an := st.publishable(current.version)) is not None:  # else the pending refresh publishes
        ls.publish(current, an)
    ls.refresh_code_lenses()  # a lens drawn before the agents answered still shows the estimate and Analyze
    if ls.settings.verify == "auto" and current.version == version:
        start(ls, uri, "verify")


# The runs of one launch file the agents analyse on open and save (each is a full analysis, one after another in the
# agents' worker); the others on request (their code lens' Analyze).
MAX_RUNS_ANALYSED = 4


async def _run_agents_of_runs(ls: AsapServer, uri: str, doc: Any, version: int | None, an: Analysis) -> None:
    """The agents on each run of a launch file that has a slice and no error (the first MAX_RUNS_ANALYSED), each
    on its run's document (server/launch/project.py): its report kept by the run's index, published as it comes."""
    from server.common.findings import Severity

    loop = asyncio.get_running_loop()
    st = ls.state(uri)
    kb, llm = kb_path(ls), ls.settings.llm
    todo = [
        ra
        for ra in an.runs or []
        if ra.analysis.check.slice is not None and not any(f.severity == Severity.ERROR for f in ra.findings)
    ][:MAX_RUNS_ANALYSED]
    name = Path(an.path or "launch").name
    for ra in todo:
        exp = experiment(ls, uri, ra.document.text)
        async with client_progress(ls, "ASAP: diagnosing and pricing meshes", f"{name}, run {ra.index}"):
            report, _ = await loop.run_in_executor(ls.agent_pool(), worker.run_report, exp, llm, None, None, kb)
            report = await loop.run_in_executor(None, cached_verdicts, ls, ra.analysis, report, ra.document.text)
        current = ls.workspace.text_documents.get(uri)
        if current is None:
            return
        st.run_agents[ra.index] = Versioned(version, report)
        props = [p for p in report.proposals if not p.keep_current]
        log.info("agents, %s run %d (version %s): %d proposal(s)", name, ra.index, version, len(props))
        ls.refresh_code_lenses()


async def _verify_run(ls: AsapServer, uri: str, doc: Any, version: int | None, an: Analysis, index: int | None) -> None:
    """A launch file's run verified as a config is (verification.verify_advice on its document, which compiles the
    command as it runs: verify.maxtext_source): the current mesh, then its agents' proposals; the verdicts kept by
    the run's index, published as they come. Locally (a Ray sweep compiles saved configs)."""
    runs = [r for r in an.runs or [] if r.analysis.check.slice is not None and index in (None, r.index)]
    if not runs:
        return
    ra = runs[0]
    st = ls.state(uri)
    report = ls.run_agents_of(doc, ra.index)
    settings = ls.settings
    loop = asyncio.get_running_loop()
    cancel = CancelToken()
    name = Path(an.path or "launch").name

    def publish(entries: list[verification.VerifiedTarget]) -> None:
        current = ls.workspace.text_documents.get(uri)
        if current is None or current.version != version or cancel.cancelled:
            return
        st.run_verified[ra.index] = Versioned(version, entries)
        ls.publish_current(uri)
        ls.refresh_code_lenses()

    def on_verdict(entries: list[verification.VerifiedTarget], marked: Any, newest: Any = None) -> None:
        loop.call_soon_threadsafe(publish, entries)

    ls.refresh_code_lenses()
    try:
        async with client_progress(ls, "ASAP: TPU compiler", f"{name}, run {ra.index}", cancel=cancel) as progress:
            advice = await loop.run_in_executor(
                None,
                lambda: verification.verify_advice(
                    ra.analysis,
                    report,
                    settings.default_slice,
                    progress=progress.report,
                    cancel=cancel,
                    maxtext_python=settings.maxtext_python,
                    on_verdict=on_verdict,
                    text=ra.document.text,
                ),
            )
            progress.end_message = "cancelled" if advice.cancelled else "done"
    except asyncio.CancelledError:
        cancel.cancel()
        raise
    except Exception:
        log.exception("verification failed on %s run %d", uri, ra.index)
        ls.refresh_code_lenses()
        return
    if advice.cancelled or cancel.cancelled:
        ls.refresh_code_lenses()
        return
    publish(advice.entries)
    if advice.report is not None and report is not None:
        st.run_agents[ra.index] = Versioned(version, advice.report)
    for e in advice.entries[:1]:
        log.info("TPU compiler, %s of %s run %d: %s", e.label, name, ra.index, e.result.message)


def cached_verdicts(ls: AsapServer, an: Analysis, report: AnalysisReport, text: str) -> AnalysisReport:
    """The report with the TPU compiler's verdicts ASAP's cache keeps for its meshes (a proposal the compiler
    rejected is withdrawn and its cached replacements take its place); compiles nothing. Worker thread."""
    if not any(not p.keep_current for p in report.proposals):
        return report
    s = ls.settings
    try:
        advice = verification.verify_advice(
            an, report, s.default_slice, maxtext_python=s.maxtext_python, cached_only=True, text=text
        )
    except Exception:  # the cache is a convenience: the agents' report stands without it
        log.exception("reading the compiler's cached verdicts failed")
        return report
    revised = advice.report
    if revised is None or not any(p.compiler is not None for p in [*revised.proposals, *(revised.withdrawn or [])]):
        return report
    log.info("%s: the TPU compiler's cached verdicts applied to the proposals", Path(an.path or "config").name)
    return revised


# -- the TPU compiler ---------------------------------------------------------------------------------------
async def run_verify(ls: AsapServer, uri: str, run: int | None = None) -> None:
    """The current mesh compiled first, its verdict published as soon as it is known; then the proposals, those the
    compiler rejects replaced by the engine's next candidates (verification.verify_advice). Progress is cancellable:
    a cancel kills the compile child and leaves the advice as it was (the verdicts of the compiles that completed
    stay shown). With `asap.verifyCluster` the compiles run on that Ray cluster (_verify_on_ray), each verdict shown
    as its task returns, as a local verify shows it; a cluster that cannot be used is an error message to the
    user."""
    opened = _open_file(ls, uri)
    if opened is None:
        return
    doc, path = opened
    version, text = doc.version, doc.source
    try:
        an = await ls.analysis(doc)
    except Exception:  # logged where it failed
        return
    if an is not None and an.runs is not None:
        await _verify_run(ls, uri, doc, version, an, run)
        return
    if an is None or not an.config.is_maxtext or an.check.slice is None:
        return
    report = ls.agents_of(doc)
    shown = report  # the agents' report as the editor shows it now (marked with the verdicts so far)
    loop = asyncio.get_running_loop()
    cancel = CancelToken()  # the progress bar's cancel kills the compile
    settings = ls.settings
    ls.refresh_code_lenses()  # "TPU compiler: compiling…" in place of Verify

    def publish(
        entries: list[verification.VerifiedTarget],
        marked: AnalysisReport | None,
        newest: list[verification.VerifiedTarget] | None = None,
    ) -> None:
        """A compile finished (on the event loop): show the verdicts so far, if the document is still this version
        and the agents' report the one being verified; log the new verdicts (`newest`, else the last entry)."""
        nonlocal shown
        current = ls.workspace.text_documents.get(uri)
        if current is None or current.version != version or cancel.cancelled:
            return
        st = ls.state(uri)
        st.verified = Versioned(version, entries)
        if marked is not None and st.agents is not None and st.agents.value is shown:
            st.agents = Versioned(version, marked)
            shown = marked
        ls.publish_current(uri)
        ls.refresh_code_lenses()
        for e in newest or entries[-1:]:
            log.info("TPU compiler, %s of %s: %s", e.label, path.name, e.result.message)

    def on_verdict(
        entries: list[verification.VerifiedTarget],
        marked: AnalysisReport | None,
        newest: list[verification.VerifiedTarget] | None = None,
    ) -> None:
        loop.call_soon_threadsafe(publish, entries, marked, newest)

    cluster = settings.verify_cluster
    sweep: ray_sweep.SweepReport | None = None
    try:
        async with client_progress(ls, "ASAP: TPU compiler", Path(path).name, cancel=cancel) as progress:
            if cluster:
                progress.end_message = "failed"  # until the cluster answered
                advice, sweep = await loop.run_in_executor(
                    None, _verify_on_ray, cluster, an, report, settings, progress.report, cancel, text, path, on_verdict
                )
            else:
                advice = await loop.run_in_executor(
                    None,
                    lambda: verification.verify_advice(
                        an,
                        report,
                        settings.default_slice,
                        progress=progress.report,
                        cancel=cancel,
                        maxtext_python=settings.maxtext_python,
                        on_verdict=on_verdict,
                        text=text,
                    ),
                )
            progress.end_message = "cancelled" if advice.cancelled else "done"
    except asyncio.CancelledError:
        cancel.cancel()
        log.info("verification of %s cancelled", path.name)
        raise
    except ray_sweep.RayUnavailable as refused:  # the cluster is not there (or the file not saved): say so, once
        ls.window_show_message(
            lsp.ShowMessageParams(type=lsp.MessageType.Error, message=f"ASAP: Verify on the Ray cluster: {refused}")
        )
        log.warning("verification of %s not run: %s", path.name, refused)  # after the message: the same order
        ls.refresh_code_lenses()
        return
    except Exception:
        log.exception("verification failed on %s", uri)
        ls.refresh_code_lenses()
        return
    if advice.cancelled or cancel.cancelled:
        log.info("verification of %s cancelled: the advice is unchanged", path.name)
        ls.refresh_code_lenses()  # Verify again, unless the current mesh's verdict came before the cancel
        return
    for e in advice.withdrawn:
        log.info("TPU compiler withdrew %s of %s: %s", e.label, path.name, e.result.message)
    st = ls.state(uri)
    current = ls.workspace.text_documents.get(uri)
    if current is None or current.version != version:
        log.info("verification of %s dropped: the config changed meanwhile", path.name)
        return
    st.verified = Versioned(version, advice.entries)
    if advice.report is not None and st.agents is not None and st.agents.value is shown:
        st.agents = Versioned(version, advice.report)
        if advice.report.compiler_note:
            log.info("%s: %s", path.name, advice.report.compiler_note)
    ls.publish_current(uri)
    ls.refresh_code_lenses()
    if sweep is not None:  # (each verdict was logged as its task returned, as a local verify logs it)
        for label, why in sweep.mismatched.items():
            log.warning("TPU compiler, %s of %s: %s", label, path.name, why)
        log.info(
            "verification of %s done on the Ray cluster at %s: %d compiled there, %d from the cache, %d failed "
            "in %.1f s; %d proposal(s) withdrawn",
            path.name,
            cluster,
            sweep.compiled,
            sweep.cached,
            len(sweep.failed),
            sweep.wall_s,
            len(advice.withdrawn),
        )
        return
    log.info(
        "verification of %s done: %d compile(s), %d proposal(s) withdrawn",
        path.name,
        advice.compiles,
        len(advice.withdrawn),
    )


def _verify_on_ray(
    cluster: str,
    an: Analysis,
    report: AnalysisReport | None,
    settings: Settings,
    progress: Progress,
    cancel: CancelToken,
    text: str,
    path: Path,
    on_verdict: Callable[
        [list[verification.VerifiedTarget], AnalysisReport | None, list[verification.VerifiedTarget]], None
    ],
) -> tuple[verification.Advice, ray_sweep.SweepReport]:
    """Verify's compiles as tasks on the Ray cluster at `cluster` (asap.verifyCluster), then the advice read from
    the cache they filled, under the keys a local compile uses: what a local verify shows. The cluster compiles the
    saved file: an unsaved document is refused (RayUnavailable, shown to the user). Worker thread.

    Meanwhile, as each task returns, `on_verdict` hears what a local verify's on_verdict would say once those
    compiles ended (ray_verification.verdicts_so_far, read from the cache here: the verdicts so far and the report
    with them marked) and which of them are new; the next candidates of a withdrawn proposal, as locally, only in
    the advice at the end.

    The Ray driver runs in a child process (_ray_driver): Ray ends its driver's process when the cluster's head
    node is gone for 60 s (measured: "Failed to connect to GCS within 60 seconds ... The program will terminate"),
    which must not be the language server."""
    host, sep, port = cluster.rpartition(":")
    if cluster != "auto" and not (sep and host and port.isdigit()):
        raise ray_sweep.RayUnavailable(
            f"asap.verifyCluster is '{cluster}': expected HOST:PORT (the head node's GCS port, 6379 by default)"
        )
    try:
        saved = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ray_sweep.RayUnavailable(f"{path.name} cannot be read ({e.strerror or e}): save it first") from None
    if saved != text:
        raise ray_sweep.RayUnavailable(f"the cluster compiles the saved file: save {path.name} first")
    why_failed: dict[str, str] = {}  # ray_verification.mesh_key -> why its task failed
    told: dict[str, str] = {}  # mesh_key -> the verdict's message already published

    def arrived(results: list[tuple[str, dict[str, Any], str | None]]) -> None:
        """Targets whose tasks returned (label, overrides, why it failed or None): the verdicts so far, from the
        cache, published when one is new."""
        for _, overrides, why in results:
            if why is not None:
                why_failed[ray_verification.mesh_key(overrides)] = why
        try:
            entries, marked = ray_verification.verdicts_so_far(an, report, settings.default_slice, failed=why_failed,
                                                               maxtext_python=settings.maxtext_python)  # fmt: skip
        except Exception:  # the verdicts so far are a courtesy: the advice at the sweep's end still comes
            log.exception("the TPU compiler's verdicts so far could not be read from the cache")
            return
        newest = [e for e in entries if told.get(ray_verification.mesh_key(e.overrides)) != e.result.message]
        if newest:
            told.update((ray_verification.mesh_key(e.overrides), e.result.message) for e in newest)
            on_verdict(entries, marked, newest)

    progress(f"connecting to the Ray cluster at {cluster}", None)
    swept, sweep = _in_driver_process(cluster, path, text, report, settings, progress, cancel, arrived)
    if swept.cancelled or cancel.cancelled:
        return swept, sweep
    # the advice from the cache in this process, as a local verify reads it (and logs a revision once, here); the
    # cluster's reason stays on a target whose task failed (not compiled: no verdict in the cache)
    advice = verification.verify_advice(
        an, report, settings.default_slice, maxtext_python=settings.maxtext_python, cached_only=True, text=text
    )

    def keep_reason(e: verification.VerifiedTarget) -> verification.VerifiedTarget:
        return ray_verification.with_reason(e, why_failed.get(ray_verification.mesh_key(e.overrides)))

    advice.entries = [keep_reason(e) for e in advice.entries]
    advice.withdrawn = [keep_reason(e) for e in advice.withdrawn]
    return advice, sweep


def _in_driver_process(
    cluster: str,
    path: Path,
    text: str,
    report: AnalysisReport | None,
    settings: Settings,
    progress: Progress,
    cancel: CancelToken,
    arrived: Callable[[list[tuple[str, dict[str, Any], str | None]]], None],
) -> tuple[verification.Advice, ray_sweep.SweepReport]:
    """ray_verification.verify_advice_on_ray in a child process: its progress relayed, each target whose verdict is
    known told to `arrived` (those that came together, at once), a cancel passed on, its answer returned; a child
    that ends without one (Ray ended it) is a RayUnavailable naming the cluster."""
    ctx = multiprocessing.get_context("spawn")
    here, there = ctx.Pipe(duplex=True)
    args = (there, cluster, str(path), text, report, settings.default_slice, settings.maxtext_python,
            settings.maxtext_path)  # fmt: skip
    proc = ctx.Process(target=_ray_driver, args=args, name="asap-ray-driver", daemon=True)
    proc.start()
    there.close()
    told = False
    results: list[tuple[str, dict[str, Any], str | None]] = []  # arrived, not told yet
    try:
        while True:
            if cancel.cancelled and not told:
                told = True
                with contextlib.suppress(OSError):
                    here.send(("cancel",))
            if results and not cancel.cancelled and not here.poll(0):  # the results that came together, at once
                arrived(results)
                results = []
            if not here.poll(0.2):
                continue
            try:
                msg = here.recv()
            except (EOFError, OSError):
                break
            if msg[0] == "progress":
                progress(msg[1], msg[2])
            elif msg[0] == "result":
                results.append((msg[1], msg[2], msg[3]))
            elif msg[0] == "done":
                if results and not cancel.cancelled:  # the last ones came with the answer: shown before it
                    arrived(results)
                return msg[1], msg[2]
            elif msg[0] == "unavailable":
                raise ray_sweep.RayUnavailable(msg[1])
            else:
                raise RuntimeError(f"the verification on the Ray cluster failed: {msg[1]}")
        proc.join(5)
        raise ray_sweep.RayUnavailable(
            f"the Ray driver stopped (exit {proc.exitcode}) before the verification ended: "
            f"is the cluster at {cluster} still up?"
        )
    finally:
        here.close()
        proc.join(10)
        if proc.is_alive():  # it did not stop on its own: it is ours to end
            proc.kill()
            proc.join()


def _ray_driver(
    conn: Connection,
    cluster: str,
    path: str,
    text: str,
    report: AnalysisReport | None,
    default_slice: str | None,
    maxtext_python: str | None,
    maxtext_path: str | None,
) -> None:
    """The child process: analyse the saved config as the editor does and run its compiles on the cluster; send
    ("progress", message, fraction) and ("result", label, overrides, why it failed or None) as each target's task
    returns (its verdict is in the cache then, unless it failed), then ("done", advice, sweep), ("unavailable", why)
    or ("error", why). A ("cancel",) from the language server (or its end) cancels the sweep."""
    from server.config import models
    from server.presentation import ray_verification
    from server.services.analysis import analyze

    models.set_default_maxtext_path(maxtext_path)
    cancel = CancelToken()
    lock = threading.Lock()

    def listen() -> None:
        try:
            while conn.recv()[0] != "cancel":
                pass
        except (EOFError, OSError):  # the language server went away: stop too
            pass
        cancel.cancel()

    def send(*msg: object) -> None:
        with lock, contextlib.suppress(OSError):
            conn.send(msg)

    threading.Thread(target=listen, name="asap-ray-cancel", daemon=True).start()
    try:
        an = analyze(Path(path), text, None, default_slice)
        # text None: the revised advice is logged by the language server, which reads it back from the cache
        advice, sweep = ray_verification.verify_advice_on_ray(
            cluster,
            an,
            report,
            default_slice,
            progress=lambda m, f: send("progress", m, f),
            cancel=cancel,
            maxtext_python=maxtext_python,
            on_result=lambda u, why: send("result", u.label, u.overrides, why),
        )
        send("done", advice, sweep)
    except ray_sweep.RayUnavailable as e:
        send("unavailable", str(e))
    except BaseException as e:  # the language server shows it; the traceback goes to this process's stderr
        traceback.print_exc()
        send("error", f"{type(e).__name__}: {e}")
    finally:
        conn.close()


# -- profiles -----------------------------------------------------------------------------------------------
def profile_of(ls: AsapServer, uri: str, an: Analysis) -> ProfileResult:
    """The linked profile from the cache only (safe in a worker thread); conversion is started apart."""
    if not an.config.is_maxtext:
        return ProfileResult(None, None, None)
    search = [Path(p) for p in ls.settings.profile_search_paths]
    res = profile_analysis.run(an, ls.workspace_root(uri), cached_only=True, search_paths=search)
    if res.files is not None and res.report is None and res.link is not None:
        why = ls.failed.get(profile_convert.files_key(res.files))
        if why is not None:
            res.findings.append(profile_analysis.at_link(res.link, profile_analysis.UNREADABLE, Severity.WARNING, why))
    check_outcome(ls, uri, an, res)
    return res


def check_outcome(ls: AsapServer, uri: str, an: Analysis, res: ProfileResult) -> None:
    """A profile of a config whose mesh is an applied proposal, captured after it was applied: record the
    outcome (once per profile), to be announced by the refresh. Runs in the worker thread with the lookup."""
    path = to_fs_path(uri)
    if not path or res.report is None or res.files is None:
        return
    key = (path, profile_convert.files_key(res.files))
    if key in ls.outcome_checked:
        return
    ls.outcome_checked.add(key)
    try:
        outcome = experiments.record_if_pending(
            an, Path(path), res.report, res.files, res.findings, ls.settings.maxtext_python
        )
        if outcome is not None:
            ls.state(uri).new_outcome = outcome
    except experiments.OutcomeError as e:
        log.info("no outcome recorded for %s: %s", path, e)
    except Exception:
        log.exception("recording the outcome of %s failed", path)


def start_conversion(ls: AsapServer, pf: ProfileFiles) -> None:
    if pf.run_dir not in ls.conversions:
        ls.conversions[pf.run_dir] = asyncio.ensure_future(convert(ls, pf))


async def convert(ls: AsapServer, pf: ProfileFiles) -> None:
    """Convert a linked profile through XProf in the background, with cancellable progress, then re-analyse the
    documents linked to it. A failure is remembered (and shown at the link) so it is not retried in a loop."""
    loop = asyncio.get_running_loop()
    cancel = CancelToken()
    key = profile_convert.files_key(pf)
    try:
        async with client_progress(ls, "ASAP: reading profile", pf.describe(), cancel=cancel) as progress:
            progress.end_message = "done"
            try:
                log.info("reading profile %s", pf.describe())
                await loop.run_in_executor(None, lambda: profile_convert.load_tools(pf, progress.report, cancel))
            except asyncio.CancelledError:  # the server is shutting down: kill the XProf child too
                cancel.cancel()
                raise
            except Cancelled:
                progress.end_message = "cancelled"
                ls.failed[key] = (
                    "reading the profile was cancelled; reopen the config or run 'ASAP: Link profile...' to retry"
                )
            except ProfileError as e:
                progress.end_message = "failed"
                ls.failed[key] = f"profile not read: {e}"
                log.warning("profile %s not read: %s", pf.run_dir, e)
            except Exception as e:  # a bug must not take the server down
                progress.end_message = "failed"
                ls.failed[key] = f"profile not read: internal error ({e})"
                log.exception("conversion of %s failed", pf.run_dir)
    finally:
        ls.conversions.pop(pf.run_dir, None)
    if progress.end_message == "done" and not profile_convert.is_cached(pf):
        # Never loop converting a profile the cache cannot hold: say so instead.
        ls.failed[key] = "the profile was converted but could not be kept in memory"
    for uri, st in list(ls.docs.items()):
        if st.profile is not None and st.profile.files is not None and st.profile.files.run_dir == pf.run_dir:
            ls.schedule(uri, invalidate=True)


def outcome_profile(ls: AsapServer, uri: str, profile: str | None) -> Path | None:
    """The profile an outcome is recorded from: the one given, else the config's linked one (None: neither)."""
    if profile:
        return Path(profile).expanduser()
    st = ls.docs.get(uri)
    prof = st.profile if st is not None else None
    return prof.files.run_dir if prof is not None and prof.files is not None else None
