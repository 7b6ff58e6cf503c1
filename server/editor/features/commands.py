"""The server's workspace/executeCommand commands (their ids: server/editor/contract.py). A command that cannot do
what it was asked raises `CommandError` with an `ErrorCode` the extension branches on."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pygls.uris import to_fs_path
from pygls.workspace import TextDocument

from server.editor import background
from server.editor.contract import CommandError, ErrorCode, LinkProfileReply, RooflineReply, ServerCommand
from server.editor.progress import client_progress
from server.editor.server import AsapServer
from server.profiles import gcs, profile_convert, profile_link
from server.profiles.profile import ProfileError
from server.services import experiments
from server.services.analysis import Analysis

log = logging.getLogger("asap")


def _open_config(ls: AsapServer, uri: str, why: str) -> tuple[Path, TextDocument]:
    path = to_fs_path(uri)
    doc = ls.workspace.text_documents.get(uri)
    if not path or doc is None:
        raise CommandError(ErrorCode.CONFIG_NOT_OPEN, why)
    return Path(path), doc


async def _analysis(ls: AsapServer, doc: TextDocument) -> Analysis:
    """The analysis of the document as it is now, awaited off the event loop (the server answers other requests
    meanwhile); a document over the size limit is not analysed."""
    an = await ls.analysis(doc)
    if an is None:
        big = ls.too_large(doc)
        raise CommandError(ErrorCode.NO_ESTIMATE, big.message if big is not None else "the config is not analysed")
    return an


async def analyze(ls: AsapServer, uri: str) -> dict[str, Any]:
    """Diagnosis and proposals for an open config (the Coordinator), off the event loop, with progress: the
    `asap analyze --json` document (schema/analyze.schema.json), with the TPU compiler's verdicts ASAP's cache
    keeps for its proposals (ASAP: Verify compiles them)."""
    from server.agents.coordinator import run_report

    uri, _, fragment = uri.partition(RUN_FRAGMENT)
    path, doc = _open_config(ls, uri, "analysis needs a saved config open in the editor")
    text = doc.source
    whole = await _analysis(ls, doc)
    if whole.runs is not None:  # a launch file: its run N (default the first with an estimate), as its document
        runs = [r for r in whole.runs if r.analysis.estimate is not None]
        runs = [r for r in runs if r.index == int(fragment)] if fragment.isdigit() else runs
        if not runs:
            raise CommandError(ErrorCode.NO_ESTIMATE, "no run of this launch file has an estimate to analyse")
        text = runs[0].document.text
    exp, kb, llm = background.experiment(ls, uri, text), background.kb_path(ls), ls.settings.llm
    loop = asyncio.get_running_loop()
    async with client_progress(ls, "ASAP: analyzing", path.name) as progress:
        report, cached = await loop.run_in_executor(None, lambda: run_report(exp, llm, progress.report, kb_path=kb))
    log.info("analysis of %s (%s)", path, "cached" if cached else report.backend.name)
    an = await ls.analysis(doc) if doc.source == exp.text else None
    if an is not None:  # the TPU compiler's verdicts its cache keeps: proposals it rejected are withdrawn
        report = await loop.run_in_executor(None, background.cached_verdicts, ls, an, report, doc.source)
    elif whole.runs is not None:
        ra = next(r for r in whole.runs if r.document.text == exp.text)
        run_text: str = ra.document.text
        report = await loop.run_in_executor(None, background.cached_verdicts, ls, ra.analysis, report, run_text)
    return report.to_json()


async def record_applied(ls: AsapServer, experiment_id: str, rank: int, uri: str) -> dict[str, Any]:
    """The editor applied "Apply proposal N" of this analysis: log it, so the next profile is its outcome."""
    path = to_fs_path(uri)
    if not path:
        raise CommandError(ErrorCode.BAD_ARGUMENT, "recording a proposal needs a config file")
    loop = asyncio.get_running_loop()
    row = await loop.run_in_executor(None, lambda: experiments.record_applied(experiment_id, int(rank), Path(path)))
    log.info("proposal %s of experiment %s applied to %s", rank, experiment_id, Path(path).name)
    return row


async def record_outcome(ls: AsapServer, uri: str, profile: str | None = None) -> dict[str, Any]:
    """The outcome of the applied proposal from a profile (given, else the config's linked profile)."""
    path, doc = _open_config(ls, uri, "recording an outcome needs the config open in the editor")
    an = await _analysis(ls, doc)
    target = background.outcome_profile(ls, uri, profile)
    if target is None:
        raise CommandError(
            ErrorCode.NO_PROFILE_LINKED, "no profile is linked to this config: link the run's profile, or pass its path"
        )

    def record() -> experiments.Outcome:
        try:
            return experiments.record_outcome(an, path, experiments.measure(an, target))
        except experiments.OutcomeError as e:
            raise CommandError(ErrorCode.OUTCOME_REFUSED, str(e)) from e
        except ProfileError as e:
            raise CommandError(ErrorCode.BAD_PROFILE, str(e)) from e

    out = await asyncio.get_running_loop().run_in_executor(None, record)
    log.info("%s: %s", path.name, experiments.describe(out))
    return out.model_dump()


def verify(ls: AsapServer, uri: str) -> None:
    """Compile the current mesh and the agents' proposals for the slice (the code lens' "Verify"; a launch file's
    run N: `<uri>#run=N`). Refused in an untrusted workspace: a compile runs the interpreter and code it names."""
    if not ls.settings.trusted:
        raise CommandError(ErrorCode.UNTRUSTED_WORKSPACE, UNTRUSTED_VERIFY)
    uri, _, fragment = uri.partition(RUN_FRAGMENT)
    background.start(ls, uri, "verify", int(fragment) if fragment.isdigit() else None)


UNTRUSTED_VERIFY = (
    "Verify is off in Restricted Mode: it compiles the config's train step, which runs code. "
    "Trust the workspace (Manage Workspace Trust) to verify."
)


def run_agents(ls: AsapServer, uri: str) -> None:
    """Re-run the agents on the open document now (the code lens' "Analyze")."""
    background.start(ls, uri, "agents")


async def roofline(ls: AsapServer, uri: str, theme: str = "light") -> dict[str, Any]:
    """The roofline chart of an open config as Vega-Lite: the estimate for the text as it is now, the linked
    profile's top ops, and the agents' proposals (with the compiled points of the meshes Verify simulated) when
    their analysis is of this version."""
    from server.agents.report import EstimateView, ProfileView
    from server.presentation import roofline_chart

    uri, _, fragment = uri.partition(RUN_FRAGMENT)  # a launch file's run: `<uri>#run=N` (its code lens' Roofline)
    doc = ls.workspace.text_documents.get(uri)
    if doc is None:
        raise CommandError(ErrorCode.CONFIG_NOT_OPEN, "the roofline needs the config open in the editor")
    an = await _analysis(ls, doc)
    if an.runs is not None:
        return _run_roofline(ls, doc, an, theme, int(fragment) if fragment.isdigit() else None)
    if an.estimate is None:
        raise CommandError(
            ErrorCode.NO_ESTIMATE, "no estimate for this config: declare its slice and fix the mesh errors first"
        )
    report = ls.agents_of(doc)
    prof = ls.state(uri).profile
    chart = roofline_chart.chart(
        EstimateView.from_json(an.estimate.to_json()),
        an,
        theme,
        slice_name=an.estimate.layout.slice.name,
        profile=ProfileView.from_json(prof.report.to_json()) if prof is not None and prof.report is not None else None,
        proposals=report.proposals if report is not None else [],
        current_compiler=report.current_compiler if report is not None else None,
    )
    name = Path(to_fs_path(uri) or uri).name
    return RooflineReply(title=f"ASAP roofline: {name}", spec=chart, fresh=report is not None).model_dump()


RUN_FRAGMENT = "#run="


def _run_roofline(ls: AsapServer, doc: TextDocument, an: Analysis, theme: str, index: int | None) -> dict[str, Any]:
    """A launch file's roofline: run `index` (default: the first with an estimate), with its agents' proposals."""
    from server.agents.report import EstimateView
    from server.presentation import roofline_chart

    runs = [r for r in an.runs or [] if r.analysis.estimate is not None and index in (None, r.index)]
    if not runs:
        raise CommandError(
            ErrorCode.NO_ESTIMATE, "no estimate for this run: declare its slice and fix the mesh errors first"
        )
    ra = runs[0]
    est = ra.analysis.estimate
    assert est is not None
    report = ls.run_agents_of(doc, ra.index)
    chart = roofline_chart.chart(
        EstimateView.from_json(est.to_json()),
        ra.analysis,
        theme,
        slice_name=est.layout.slice.name,
        proposals=report.proposals if report is not None else [],
        current_compiler=report.current_compiler if report is not None else None,
    )
    name = Path(to_fs_path(doc.uri) or doc.uri).name
    title = f"ASAP roofline: {name}" + (f", run {ra.index}" if len(an.runs or []) > 1 else "")
    return RooflineReply(title=title, spec=chart, fresh=report is not None).model_dump()


async def link_profile(ls: AsapServer, uri: str, profile: str | None = None) -> dict[str, Any]:
    """Store (or remove, with no path) the profile link of a config in <workspace>/.asap/links.json. A gs:// URL
    is stored as it is, once its newest run is listed (off the event loop: a request to Cloud Storage)."""
    path = to_fs_path(uri)
    ws = ls.workspace_root(uri)
    if not path or ws is None:
        raise CommandError(
            ErrorCode.CONFIG_NOT_OPEN, "linking a profile needs a saved config inside a workspace folder"
        )
    target: Path | str | None = None
    if profile and gcs.is_gcs(profile):
        target = await asyncio.get_running_loop().run_in_executor(None, _listed_gcs, profile.strip())
    elif profile:
        local = Path(profile).expanduser()
        if not local.is_absolute():
            local = ws / local
        try:
            profile_convert.find_profile(local)
        except ProfileError as e:
            raise CommandError(ErrorCode.BAD_PROFILE, str(e)) from e
        target = local
    written = profile_link.write_link(ws, Path(path), target)
    ls.failed.clear()
    ls.schedule(uri, invalidate=True)
    log.info("profile link of %s -> %s (%s)", path, target, written)
    return LinkProfileReply(links_file=str(written), profile=str(target) if target else None).model_dump()


def _listed_gcs(url: str) -> str:
    """`url` when a profile run is listed under it (a fresh listing: the user just asked); else BAD_PROFILE with
    the reason in gcs.py's words (bucket not found, permission denied, no credentials, no profile). Worker thread."""
    try:
        run = gcs.find_run(url, max_age_s=0)
    except gcs.GcsError as e:
        raise CommandError(ErrorCode.BAD_PROFILE, str(e)) from e
    log.info("%s: newest run %s (%d file(s))", url, run.url, len(run.objects))
    return url


COMMANDS: dict[ServerCommand, Callable[..., Any]] = {
    ServerCommand.LINK_PROFILE: link_profile,
    ServerCommand.ANALYZE: analyze,
    ServerCommand.RUN_AGENTS: run_agents,
    ServerCommand.ROOFLINE: roofline,
    ServerCommand.VERIFY: verify,
    ServerCommand.RECORD_APPLIED: record_applied,
    ServerCommand.RECORD_OUTCOME: record_outcome,
}
