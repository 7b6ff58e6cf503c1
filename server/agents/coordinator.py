"""The Coordinator: the one entry point for the CLI and the language server. It runs the Analyzer, then the
Proposal agent (offline, or Claude checked by the offline engine), reports progress, and caches each
result by the hash of everything it depends on (the config and its parents' text, the slice, the profile's
content key, the knowledge index, the backend).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import math
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from server.agents import analyzer
from server.agents.proposal import Calibration, calibration, propose
from server.agents.report import AnalysisReport, NothingFitsView, record
from server.agents.tools import Context, compact
from server.agents.types import Backend, Diagnosis, Evidence, Experiment, Proposal, Result
from server.common import store as cache_store
from server.common.build import build_key
from server.common.findings import Severity
from server.perf import wording
from server.profiles import profile_convert
from server.profiles.profile import ProfileError, Report
from server.services import experiments, nothing_fits
from server.services.analysis import Analysis, analyze
from server.services.profile_analysis import analyze_tools
from server.services.profile_analysis import run as run_profile

log = logging.getLogger("asap")
Progress = Callable[[str], None]


def _kb(notes: list[str], path: Path | None = None) -> Any:
    from server.kb.store import KbError, KnowledgeStore

    try:
        kb = KnowledgeStore(path=path).ensure()
        notes += kb.notices
        return kb
    except (KbError, OSError, ValueError) as e:
        notes.append(f"knowledge store unavailable ({e}); proposals cite no sources")
        return None


def _profile(an: Analysis, exp: Experiment, notes: list[str], progress: Progress | None) -> tuple[Report | None, str]:
    """The profile report (explicit path, else the config's link) and its cache identity."""
    try:
        if exp.profile is not None:
            pf = profile_convert.find_profile(exp.profile)
            if progress:
                progress(f"reading profile {pf.describe()}")
            tools, _ = profile_convert.load_tools(pf)
            report, findings = analyze_tools(tools, an, pf.describe())
            notes += [f.message for f in findings]
            return report, pf.describe()
        res = run_profile(an, exp.workspace, search_paths=list(exp.profile_search_paths))
        notes += [f.message for f in res.findings if f.severity <= Severity.WARNING]
        return res.report, res.files.describe() if res.files else ""
    except ProfileError as e:
        notes.append(f"profile not read: {e}")
        return None, ""


@functools.cache
def _shape_key() -> str:
    """The document's shape (its JSON schema), hashed: a key added with a default still parses from an old entry."""
    return hashlib.sha256(json.dumps(AnalysisReport.model_json_schema(), sort_keys=True).encode()).hexdigest()


def cache_key(exp: Experiment, an: Analysis, backend: str) -> str:
    """Everything a result depends on: ASAP's build (its version and code) and the document's shape, the backend,
    the config's path and its and its parents' text, the slice override, the XLA flags priced under, the profile
    files (path, size, mtime) and the knowledge content."""
    from server.kb.store import content_hash, kb_dir
    from server.profiles import profile_link

    h = hashlib.sha256(f"{build_key()}|{backend}|{exp.config.resolve()}|{exp.slice}|{exp.workspace}".encode())
    h.update(_shape_key().encode())  # a stored document of another shape is analysed again, not read as this one
    h.update((exp.text or "").encode())
    h.update(an.config.run_flags.key().encode())  # the XLA flags priced under: --xla-flags, comment or setting
    for p in an.config.chain:
        with contextlib.suppress(OSError):
            h.update(p.read_bytes())
    target = exp.profile
    if target is None:
        link, _ = profile_link.resolve(an.config, exp.workspace, list(exp.profile_search_paths))
        target = link.path if link else None
    if target is not None:
        with contextlib.suppress(ProfileError, OSError):
            h.update(repr(profile_convert.files_key(profile_convert.find_profile(target))).encode())
    with contextlib.suppress(OSError):
        h.update(content_hash(kb_dir(), "", cache_store.outcomes_dir()).encode())
    h.update(experiments.calibrator().key().encode())  # new outcomes recalibrate the stated confidence
    return h.hexdigest()


def run_report(
    exp: Experiment,
    llm: str = "off",
    progress: Progress | None = None,
    client: Any = None,
    kb_path: Path | None = None,
) -> tuple[AnalysisReport, bool]:
    """The analysis as the typed `asap analyze --json` document, from ASAP's store when nothing it depends on
    changed: (report, cached). The store keeps the JSON; a fresh result and a stored one are both parsed into
    `AnalysisReport`, so a reader sees the same thing either way."""
    from server.common import store

    text = exp.text if exp.text is not None else exp.config.read_text(encoding="utf-8")
    exp = replace(exp, text=text)
    an = analyze(exp.config, text, default_slice=exp.slice, flags=exp.xla_flags)
    backend = "offline" if llm == "off" else "auto"
    key = cache_key(exp, an, backend)
    try:
        db = store.connect()
        if "analyses" in db.table_names():
            rows = list(db.query("select result from analyses where key = ?", [key]))
            if rows:
                try:
                    return AnalysisReport.from_json(json.loads(rows[0]["result"])), True
                except ValidationError as e:  # written by a build with another shape: analyse again
                    log.warning("stored analysis unreadable, recomputing: %s", e)
    except Exception as e:
        log.warning("analysis cache unavailable: %s", e)
        db = None
    report = run(exp, llm, progress, client, kb_path=kb_path).report()
    report.nothing_fits = _nothing_fits(an, progress)
    _calibrate(report)
    if db is not None and an.config.is_maxtext:  # the experiment log: this analysis, its predictions, an id
        try:
            report.experiment = record(report, an, exp.config, text, db)
        except Exception as e:
            log.warning("experiment log unavailable: %s", e)
    if db is not None and report.backend.fallback_reason is None:  # a fallback is retried next time
        with contextlib.suppress(Exception):
            db.table("analyses").upsert(
                {"key": key, "created": time.time(), "result": json.dumps(report.to_json())}, pk="key"
            )
    return report, False


def _nothing_fits(an: Analysis, progress: Progress | None) -> NothingFitsView | None:
    """When no mesh of the slice launches: what would fit, each option priced (server/services/nothing_fits.py)."""
    if an.estimate is not None and an.estimate.memory.launches:
        return None  # the config's own mesh launches
    if progress:
        progress("looking for what would fit")
    try:
        nf = nothing_fits.for_analysis(an)
    except Exception:
        log.exception("nothing_fits failed")
        return None
    return None if nf is None else NothingFitsView.from_json(nf.to_json())


def _calibrate(report: AnalysisReport) -> None:
    """Stated confidence through ASAP's track record (experiments.Calibrator), once it has enough outcomes."""
    cal = experiments.calibrator()
    for p in report.proposals:
        p.stated_confidence = p.confidence
        if cal.active:
            p.confidence = round(cal(p.confidence), 2)
            p.confidence_basis = f"{p.confidence_basis}; {cal.note}"


def _slice_json(an: Analysis) -> dict[str, Any] | None:
    sl = an.check.slice
    if sl is None:
        return None
    return {
        "name": sl.name,
        "chips": sl.chips,
        "devices": sl.devices,
        "num_slices": sl.num_slices,
        "topology": list(sl.topology),
    }


def _mesh_json(an: Analysis) -> dict[str, Any] | None:
    if an.check.slice is None or not an.check.consistent:
        return None
    return {
        "ici": an.check.degrees("ici"),
        "dcn": an.check.degrees("dcn"),
    }


def run(
    exp: Experiment,
    llm: str = "off",
    progress: Progress | None = None,
    client: Any = None,
    use_kb: bool = True,
    kb_path: Path | None = None,
) -> Result:
    """Analyze one experiment. `llm`: "off" (offline engine) or "auto" (Claude when a key is set, checked by
    the offline engine, offline on any failure). `client`: an anthropic client to use (tests)."""
    t0 = time.perf_counter()
    text = exp.text if exp.text is not None else exp.config.read_text(encoding="utf-8")
    exp = replace(exp, text=text)
    if progress:
        progress("checking the config")
    an = analyze(exp.config, text, default_slice=exp.slice, flags=exp.xla_flags)
    notes: list[str] = []
    findings = [
        {"code": f.code, "severity": f.severity.label, "message": f.message, "key": f.key, "line": f.span.line + 1}
        for f in an.diagnostics
    ]
    report, _ = _profile(an, exp, notes, progress) if an.config.is_maxtext else (None, "")
    kb = _kb(notes, kb_path) if use_kb and an.config.is_maxtext else None
    ctx = Context(an, report, kb)
    est = an.estimate
    if progress:
        progress("diagnosing")
    matching = report is not None and (report.comparison is not None or est is None)
    if report is not None and matching:
        diag: Diagnosis | None = analyzer.from_profile(report, est)
    elif est is not None:
        diag = analyzer.from_estimate(est)
        if report is not None:
            diag.evidence.append(
                Evidence(
                    f"the linked profile says {report.verdict.bottleneck}-bound, but it is not of this config's slice "
                    "and mesh",
                    f"profile: {report.source}",
                )
            )
    elif an.check.slice is not None and an.config.is_maxtext:
        errors = [f for f in an.diagnostics if f.severity == Severity.ERROR]
        diag = Diagnosis(
            "invalid",
            0.95,
            [Evidence(f"{f.code}: {f.message}", f"static check at line {f.span.line + 1}") for f in errors[:3]],
            [f.key for f in errors if f.key],
            "config",
            "the current mesh does not launch on the slice; every proposal is a valid alternative",
        )
    else:
        diag = None
    proposals: list[Proposal] = []
    backend = Backend("offline")
    cal = calibration(est, report.comparison if report is not None and matching else None) if est else None
    if diag is not None and an.check.slice is not None:
        if progress:
            progress("pricing candidate meshes")
        try:
            proposals = propose(ctx, diag, cal or Calibration())
        except Exception as e:
            log.exception("proposal engine failed")
            notes.append(f"no proposals: {type(e).__name__}: {e}")
        if llm == "auto":
            proposals, backend = _claude(ctx, diag, proposals, cal, client, progress)
    log.info("analysis of %s took %.2f s", exp.config, time.perf_counter() - t0)
    return Result(
        exp.config,
        _slice_json(an),
        _mesh_json(an),
        findings,
        est,
        diag,
        proposals,
        backend,
        report if an.config.is_maxtext else None,
        cal.note if cal else None,
        notes,
        an.config.run_flags.to_json() if an.config.is_maxtext else None,
    )


def _claude(
    ctx: Context, diag: Diagnosis, offline: list[Proposal], cal: Any, client: Any, progress: Progress | None
) -> tuple[list[Proposal], Backend]:
    """Claude's proposals, re-validated and re-priced by the offline engine; the offline ones on any failure."""
    try:
        from server.agents import claude
    except ImportError as e:  # pragma: no cover - the module ships with ASAP
        return offline, Backend("offline", f"Claude backend unavailable: {e}")
    key = claude.api_key()
    if client is None and not key:
        return offline, Backend("offline", "no Anthropic API key (set ANTHROPIC_API_KEY or ASAP: Set API key)")
    if progress:
        progress("asking Claude")
    brief = {
        "slice": _slice_json(ctx.analysis),
        "mesh": _mesh_json(ctx.analysis),
        "diagnosis": diag.to_json(),
        "offline_proposals": [p.to_json() for p in offline],
    }
    try:
        c = client if client is not None else claude.make_client(key or "")
        ans = claude.run(ctx, brief, c, log=log)
    except claude.ClaudeUnavailable as e:
        log.warning("Claude unavailable, using the offline engine: %s", e.reason)
        return offline, Backend("offline", f"Claude unavailable: {e.reason}")
    except Exception as e:  # any other failure (a reply the SDK parsed into nonsense): offline
        log.warning("Claude backend failed (%s), using the offline engine", type(e).__name__)
        return offline, Backend("offline", f"Claude unavailable: unexpected reply ({type(e).__name__})")
    cur = ctx.current
    out: list[Proposal] = []
    for ev, raw in ans.proposals:
        pe = ev.estimate
        if pe is None:
            continue
        step = (cal or Calibration()).step(pe)
        speed = (
            (pe.tokens_per_step / step) / (cur.tokens_per_step / (cal or Calibration()).step(cur)) if cur else math.nan
        )
        out.append(
            Proposal(
                len(out) + 1,
                compact(pe.layout.ici),
                compact(pe.layout.dcn),
                ev.other_changes,
                step,
                pe.mfu * pe.time.step_s / step,
                speed,
                pe.memory.total,
                pe.memory.usable,
                [f"HBM {pe.memory.total / 1024**3:.1f} of {wording.gib(pe.memory.usable)} GiB usable per chip"],
                str(raw.get("rationale", "")),
                [str(r) for r in raw.get("references", [])],
                float(raw.get("confidence", 0.5)),
                "Claude's proposal, re-validated and re-priced by the deterministic engine",
            )
        )
    for raw, why in ans.dropped:
        log.info("dropped Claude proposal %s: %s", json.dumps(raw)[:200], why)
    if not out and not ans.keep_current:
        return offline, Backend(
            "offline", "Claude proposed no valid mesh that fits; offline proposals shown", ans.model
        )
    return out or offline, Backend("claude", None, ans.model)
