"""Compiler verification of a config and its proposals (issue 8): which meshes to compile, one compile at
a time across every ASAP process on the machine (the TPU compiler takes most of a small machine's cores),
and the results side by side. The compiling itself is server/compile/verify.py.

Compiler verdicts feed the advice (issue 18, `verify_advice`): the current mesh is compiled first and its verdict
handed on at once; then each proposal. A proposal the compiler rejects (it does not fit in HBM, it cannot be placed,
or it fails to compile) is withdrawn, and the engine's next-ranked candidates (server/agents/alternatives.py) are
compiled in its place, so that up to three proposals the compiler accepts remain when the slice has them. The
result is the report as it then stands: proposals with their compiler verdicts, the withdrawn ones apart, and one
line on why the estimate and the compiler differ.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import filelock

from server.agents import alternatives
from server.agents.proposal import MAX_PROPOSALS
from server.agents.report import AnalysisReport, CompilerVerdictView, ProposalView, ScheduleView, record
from server.agents.tools import mesh_overrides
from server.common import store
from server.common.codes import DiagCode
from server.common.findings import Finding, Severity, Span
from server.common.progress import CancelToken, Progress
from server.compile import verify as verify_mod
from server.compile.verify import VerifyStatus
from server.config.axes import mesh_label
from server.config.resolve import Config
from server.perf import wording
from server.services.analysis import Analysis

log = logging.getLogger("asap")

_THREAD_LOCK = threading.Lock()


@dataclass(frozen=True)
class Target:
    label: str  # "current mesh" or "proposal N"
    overrides: dict[str, Any]  # mesh keys (and batch/remat changes) over the config's
    rank: int | None = None  # the proposal's rank


def targets(analysis: AnalysisReport | None, include_current: bool = True) -> list[Target]:
    """The current mesh, then each proposal of an `asap analyze --json` document that changes it."""
    out = [Target("current mesh", {})] if include_current else []
    for p in analysis.proposals if analysis is not None else []:
        if p.keep_current:
            continue
        overrides = {**mesh_overrides(p.ici, p.dcn), **p.other_changes}
        out.append(Target(f"proposal {p.rank}", overrides, p.rank))
    return out


@contextlib.contextmanager
def one_at_a_time(wait: Progress | None = None) -> Iterator[None]:
    """Hold the machine-wide compile lock (a file lock in ASAP's cache directory, and a lock for this
    process's threads). `wait` hears about it when another compile holds the lock."""
    with _THREAD_LOCK:
        path = store.cache_dir() / "verify.lock"
        lock = filelock.FileLock(path)
        contended = False
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            lock.acquire(blocking=False)
        except filelock.Timeout:  # before OSError: filelock's Timeout is a TimeoutError
            contended = True
        except OSError:  # an unwritable cache: this process's lock alone
            yield
            return
        if contended:
            if wait is not None:
                wait("waiting for another ASAP compile to finish", None)
            lock.acquire()
        try:
            yield
        finally:
            lock.release()


@dataclass(frozen=True)
class VerifiedTarget:
    """One target compiled: its label, the proposal's rank (None: the config's own mesh), the mesh keys it set,
    and the verifier's result."""

    label: str
    rank: int | None
    overrides: dict[str, Any]
    result: verify_mod.VerifyResult

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "rank": self.rank, "overrides": self.overrides, "result": self.result.to_json()}


def verify_all(
    source: Config | Path,
    todo: list[Target],
    slice_name: str | None = None,
    max_layers: int = verify_mod.DEFAULT_MAX_LAYERS,
    timeout_s: float = verify_mod.DEFAULT_TIMEOUT_S,
    progress: Progress | None = None,
    cancel: CancelToken | None = None,
    maxtext_python: str | None = None,
) -> list[VerifiedTarget]:
    """Each target compiled in turn (cached ones answer at once).
    With `maxtext_python`, MaxText's own train_compile of the saved config is compiled instead of ASAP's
    reference program."""
    out: list[VerifiedTarget] = []
    for i, t in enumerate(todo):
        if cancel is not None and cancel.cancelled:
            break

        def report(message: str, frac: float | None, t: Target = t, i: int = i) -> None:
            if progress is not None:
                done = (i + (frac or 0.0)) / len(todo)
                progress(f"{t.label}: {message}", done)

        with one_at_a_time(report):
            res = verify_mod.verify(
                source,
                t.overrides or None,
                slice_name=slice_name,
                max_layers=max_layers,
                timeout_s=timeout_s,
                progress=report,
                cancel=cancel,
                maxtext_python=maxtext_python,
            )
        out.append(VerifiedTarget(t.label, t.rank, t.overrides, res))
    return out


# -- compiler verdicts feed the advice -------------------------------------------------------------------
# (the entries compiled so far, the report with their verdicts marked): what an editor shows meanwhile
Verdicts = Callable[[list["VerifiedTarget"], AnalysisReport | None], None]
MAX_COMPILES = 8  # per verification: the current mesh, the proposals and their replacements (minutes each)


def rejects(r: verify_mod.VerifyResult) -> bool:
    """Whether the compiler rejects the mesh: it does not fit in HBM, JAX cannot place it, or the compile failed
    (with the compiler's own words). A timeout, a crash without words, a missing compiler or a cancel decide
    nothing about the mesh."""
    return r.status in (VerifyStatus.DOES_NOT_FIT, VerifyStatus.UNPLACEABLE) or (
        r.status == VerifyStatus.ERROR and bool(r.detail)
    )


def verdict(r: verify_mod.VerifyResult) -> CompilerVerdictView:
    """A verification as the report's per-proposal `compiler` field."""
    c = r.compiled
    mem = c.memory_per_chip_bytes if c is not None else r.needs_bytes
    limit = c.hbm_limit_bytes if c is not None else r.available_bytes
    sch = c.schedule if c is not None and c.schedule and "step_s" in c.schedule else None
    schedule = (
        ScheduleView(
            step_s=float(sch["step_s"]),
            busy_s={k: float(v) for k, v in dict(sch.get("busy_s") or {}).items()},
            exposed_s={k: float(dict(g).get("exposed_s", 0.0)) for k, g in dict(sch.get("groups") or {}).items()},
            mfu=float(sch["mfu"]) if sch.get("mfu") else None,
        )
        if sch is not None
        else None
    )
    return CompilerVerdictView(
        status=str(r.status),
        fits=r.fits,
        memory_per_chip_bytes=round(mem) if mem else None,
        hbm_limit_bytes=round(limit) if limit else None,
        program=r.program,
        message=r.message,
        schedule=schedule,
    )


def target_of(p: ProposalView) -> Target:
    return Target(f"proposal {p.rank}", {**mesh_overrides(p.ici, p.dcn), **p.other_changes}, p.rank)


def changes_label(ici: dict[str, int], dcn: dict[str, int], other: dict[str, Any]) -> str:
    """'fsdp=16; per_device_batch_size=4'."""
    words = ", ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in other.items())
    return mesh_label(ici, dcn) + (f"; {words}" if words else "")


def proposal_label(p: ProposalView) -> str:
    return changes_label(p.ici, p.dcn, dict(p.other_changes))


def _marked(
    report: AnalysisReport, marks: dict[int, CompilerVerdictView], current: CompilerVerdictView | None = None
) -> AnalysisReport:
    """The report with the verdicts so far on its proposals (by rank) and on the current mesh, nothing withdrawn
    yet."""
    doc = report.model_copy(deep=True)
    doc.current_compiler = current.model_copy() if current is not None else None
    for p in doc.proposals:
        if not p.keep_current and p.rank in marks:
            p.compiler = marks[p.rank].model_copy()
    return doc


@dataclass
class Advice:
    """A verification of the current mesh and the advice: `entries` the current mesh and the proposals as they now
    stand (ranked as `report` ranks them), `withdrawn` the compiles of the proposals the compiler rejected, `report`
    the agents' report with the verdicts in it (None: no report, or the advice is unchanged because the
    verification stopped before its end), `compiles` how many compiles ran (the cache answers the others) and
    `cancelled`."""

    entries: list[VerifiedTarget] = field(default_factory=list)
    withdrawn: list[VerifiedTarget] = field(default_factory=list)
    report: AnalysisReport | None = None
    compiles: int = 0
    cancelled: bool = False


class _Steps:
    """Per-compile progress: "compiling 2/4: proposal 1 (fsdp=16) · 2 layer(s) (1 of 2) · 41 s", told again every
    TICK_S seconds while a compile runs, so the elapsed time moves even when the compiler says nothing for minutes."""

    TICK_S = 5.0

    def __init__(self, progress: Progress | None, total: int) -> None:
        self.progress, self.total, self.done, self.t0 = progress, total, 0, time.monotonic()
        self._last: tuple[str, str, float | None] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def _say(self) -> None:
        with self._lock:
            last, n, total = self._last, self.done, self.total
        if self.progress is None or last is None:
            return
        label, message, frac = last
        elapsed = time.monotonic() - self.t0
        detail = f" · {message.removeprefix('compiling ')}" if message else ""
        self.progress(f"compiling {n}/{total}: {label}{detail} · {elapsed:.0f} s in", (n - 1 + (frac or 0.0)) / total)

    def reporter(self, label: str) -> Progress:
        with self._lock:
            self.done += 1
            self.total = max(self.total, self.done)

        def report(message: str, frac: float | None) -> None:
            with self._lock:
                self._last = (label, message, frac)
            self._say()

        report("", 0.0)
        if self._ticker is None and self.progress is not None:
            self._ticker = threading.Thread(target=self._tick, name="asap-verify-progress", daemon=True)
            self._ticker.start()
        return report

    def _tick(self) -> None:
        while not self._stop.wait(self.TICK_S):
            self._say()

    def close(self) -> None:
        self._stop.set()


def verify_advice(
    an: Analysis,
    report: AnalysisReport | None,
    slice_name: str | None = None,
    *,
    max_layers: int = verify_mod.DEFAULT_MAX_LAYERS,
    timeout_s: float = verify_mod.DEFAULT_TIMEOUT_S,
    progress: Progress | None = None,
    cancel: CancelToken | None = None,
    maxtext_python: str | None = None,
    on_verdict: Verdicts | None = None,
    max_compiles: int = MAX_COMPILES,
    text: str | None = None,
    cached_only: bool = False,
) -> Advice:
    """Compile the current mesh, then the proposals of `report` (the agents' report of `an`), replacing those the
    compiler rejects by the engine's next-ranked candidates until MAX_PROPOSALS are accepted, the engine has no
    other, or `max_compiles` compiles ran. `on_verdict` hears the entries so far and the report with the verdicts so
    far marked on its proposals, after the current mesh's compile (before any proposal is compiled) and after each of
    the report's own proposals. `text`: the config's text, to log the revised advice in the experiment log (its
    proposals are ranked anew, so "Apply proposal N" records the right one). `cached_only`: compile nothing, apply
    the verdicts ASAP's cache keeps (a mesh not compiled yet keeps no verdict). Runs in a worker thread."""
    # copies: the verdicts are written into them, never into the report the editor shows meanwhile
    todo = [p.model_copy(deep=True) for p in report.proposals if not p.keep_current] if report is not None else []
    steps = _Steps(progress, 1 + len(todo))
    try:
        out = _verify_advice(an, report, todo, steps, slice_name, max_layers, timeout_s, cancel, maxtext_python,
                             on_verdict, max_compiles, cached_only)  # fmt: skip
    finally:
        steps.close()
    if out.report is not None and report is not None and text is not None:
        _log(out.report, report, an, text)
    return out


_LOGGED: dict[tuple[str, tuple[str, ...]], str] = {}  # (analysis id, revised proposals) -> the revision's id
_LOGGED_MAX = 256  # the latest only: one more per agents' report the cached verdicts revise, as long as the server runs


def _log(revised: AnalysisReport, report: AnalysisReport, an: Analysis, text: str) -> None:
    """The revised advice in the experiment log, under a new id, when the original was logged and the proposals
    changed (withdrawn, replaced, ranked anew)."""
    same = [alternatives.key_of(p) for p in revised.proposals] == [
        alternatives.key_of(p) for p in report.proposals if not p.keep_current
    ]
    if not report.experiment or an.config.path is None or same:
        return
    key = (report.experiment, tuple(p.model_dump_json() for p in revised.proposals))
    if key in _LOGGED:  # the same revision of the same analysis (the cache's verdicts, applied again): logged once
        revised.experiment = _LOGGED[key]
        return
    try:
        revised.experiment = _LOGGED[key] = record(revised, an, an.config.path, text)
        while len(_LOGGED) > _LOGGED_MAX:
            del _LOGGED[next(iter(_LOGGED))]
    except Exception as e:  # the log is a convenience: the advice stands without it
        log.warning("experiment log unavailable: %s", e)
        revised.experiment = None


def _verify_advice(
    an: Analysis,
    report: AnalysisReport | None,
    todo: list[ProposalView],
    steps: _Steps,
    slice_name: str | None,
    max_layers: int,
    timeout_s: float,
    cancel: CancelToken | None,
    maxtext_python: str | None,
    on_verdict: Verdicts | None,
    max_compiles: int,
    cached_only: bool,
) -> Advice:
    out = Advice()
    marks: dict[int, CompilerVerdictView] = {}

    now: list[CompilerVerdictView] = []  # the current mesh's verdict, once compiled

    def tell(entries: list[VerifiedTarget]) -> None:
        if on_verdict is not None:
            on_verdict(entries, _marked(report, marks, now[0] if now else None) if report is not None else None)

    def compile_(label: str, target: Target) -> verify_mod.VerifyResult:
        report_step = steps.reporter(label)
        # reading the cache compiles nothing: it need not wait for a compile elsewhere on the machine
        with contextlib.nullcontext() if cached_only else one_at_a_time(report_step):
            res = verify_mod.verify(
                an.config,
                target.overrides or None,
                slice_name=slice_name,
                max_layers=max_layers,
                timeout_s=timeout_s,
                progress=report_step,
                cancel=cancel,
                maxtext_python=maxtext_python,
                cached_only=cached_only,
            )
        out.compiles += not res.cached and res.status != VerifyStatus.UNAVAILABLE
        return res

    def stopped() -> bool:
        out.cancelled = bool(cancel is not None and cancel.cancelled)
        return out.cancelled

    current = VerifiedTarget("current mesh", None, {}, compile_("current mesh", Target("current mesh", {})))
    out.entries.append(current)
    if current.result.status != VerifyStatus.UNAVAILABLE and current.result.status != VerifyStatus.CANCELLED:
        now.append(verdict(current.result))
    tell(list(out.entries))
    # no compiler here: the proposals would not compile either (a cache lookup goes on: one may be kept)
    if stopped() or current.result.status == VerifyStatus.CANCELLED:
        out.cancelled = True
        return out
    unavailable = current.result.status == VerifyStatus.UNAVAILABLE and not cached_only
    if report is None or not todo or unavailable:
        return out

    accepted: list[tuple[ProposalView, VerifiedTarget]] = []
    withdrawn = [w.model_copy(deep=True) for w in report.withdrawn or []]  # by an earlier verification
    shown: list[VerifiedTarget] = []  # the report's own proposals compiled so far, by their ranks in it
    seen = {alternatives.key_of(p) for p in [*todo, *withdrawn]}
    replacing = False
    while todo and not stopped():
        p = todo.pop(0)
        name = f"proposal {p.rank}" if not replacing else "next candidate"
        t = target_of(p)
        if replacing:
            t = Target(f"next candidate ({proposal_label(p)})", t.overrides, p.rank)
        res = compile_(f"{name} ({proposal_label(p)})", t)
        if stopped() or res.status == VerifyStatus.CANCELLED:
            out.cancelled = True
            break
        if replacing:
            log.info("TPU compiler, %s: %s", t.label, res.message)
        if res.status != VerifyStatus.UNAVAILABLE:  # not compiled (no compiler, or not in the cache): no verdict
            p.compiler = verdict(res)
        entry = VerifiedTarget(t.label, p.rank, t.overrides, res)
        if rejects(res):
            withdrawn.append(p)
            out.withdrawn.append(entry)
        else:
            accepted.append((p, entry))
        if not replacing:
            shown.append(entry)
            if p.compiler is not None:
                marks[p.rank] = p.compiler
            tell([*out.entries, *shown])
        if todo or len(accepted) >= MAX_PROPOSALS or not withdrawn:
            continue
        budget = max_compiles - 1 - len(accepted) - len(withdrawn)
        if budget <= 0:
            break
        replacing = True
        try:
            nexts = alternatives.next_proposals(an, report, [alternatives.RuledOut.of(w) for w in withdrawn])
        except Exception:  # a bug in the engine must not lose the verdicts: no replacement then
            log.exception("the next candidates could not be priced")
            nexts = []
        fresh = [q for q in nexts if alternatives.key_of(q) not in seen]
        todo = fresh[: min(budget, MAX_PROPOSALS - len(accepted))]
        seen |= {alternatives.key_of(q) for q in todo}
        steps.total += len(todo)
    if out.cancelled:
        return out
    out.report = _revised(report, accepted, withdrawn, [*out.withdrawn, current], now[0] if now else None)
    out.entries += [
        VerifiedTarget(f"proposal {p.rank}", p.rank, e.overrides, e.result)
        for p, e in zip(out.report.proposals, (e for _, e in accepted), strict=True)
    ]
    return out


def _simulated_step(v: CompilerVerdictView | None) -> float | None:
    return float(v.schedule.step_s) if v is not None and v.schedule is not None and v.schedule.step_s else None


def by_simulated_step(
    accepted: list[tuple[ProposalView, VerifiedTarget]],
) -> tuple[list[tuple[ProposalView, VerifiedTarget]], bool]:
    """The accepted proposals ordered by their compiled programs' simulated steps, fastest first, when every one
    has one (issue 27); else as they were. Ties keep the engine's order. Whether the order changed."""
    steps = [_simulated_step(p.compiler) for p, _ in accepted]
    if len(accepted) < 2 or any(s is None for s in steps):
        return accepted, False
    order = sorted(range(len(accepted)), key=lambda i: steps[i])  # type: ignore[arg-type,return-value]
    return [accepted[i] for i in order], order != list(range(len(accepted)))


def _revised(
    report: AnalysisReport,
    accepted: list[tuple[ProposalView, VerifiedTarget]],
    withdrawn: list[ProposalView],
    compiled: list[VerifiedTarget],
    current: CompilerVerdictView | None = None,
) -> AnalysisReport:
    """The report with the compiler's verdicts: the accepted proposals ranked 1..n (the original ones first, then
    the replacements; by the simulated step of their compiled programs when every one has one), the rejected ones
    in `withdrawn`, the current mesh's verdict, and the estimate's disagreement with the compiler once. A proposal
    whose compiled program simulates no faster than the current mesh's says so among its tradeoffs."""
    doc = report.model_copy(deep=True)
    originals = {alternatives.key_of(p) for p in report.proposals}
    engine_rank = {id(p): i + 1 for i, (p, _) in enumerate(accepted)}
    accepted, reranked = by_simulated_step(accepted)
    now_s = _simulated_step(current)
    kept: list[ProposalView] = []
    for i, (p, _) in enumerate(accepted):
        q = p.model_copy(deep=True)
        q.rank = i + 1
        if alternatives.key_of(p) not in originals and withdrawn:
            names = ", ".join(proposal_label(w) for w in withdrawn)
            q.rationale = f"In place of {names}, which the TPU compiler rejected. {q.rationale}"
        sim_s = _simulated_step(p.compiler)
        if reranked and sim_s is not None and engine_rank[id(p)] != q.rank:
            q.rationale = (
                f"Ranked {q.rank} by the TPU compiler's schedule (simulated step {wording.seconds(sim_s)}); the "
                f"estimate ranked it {engine_rank[id(p)]}. {q.rationale}"
            )
        if now_s is not None and sim_s is not None and sim_s >= now_s:
            q.tradeoffs = [
                *q.tradeoffs,
                f"The TPU compiler's schedule simulates it no faster than the current mesh: step "
                f"{wording.seconds(sim_s)} against {wording.seconds(now_s)}.",
            ]
        kept.append(q)
    doc.proposals = kept
    doc.withdrawn = [w.model_copy(deep=True) for w in withdrawn] or None
    doc.compiler_note = compiler_note([*compiled, *(e for _, e in accepted)])
    doc.current_compiler = current.model_copy() if current is not None else None
    return doc


def _estimate_source(r: verify_mod.VerifyResult) -> str:
    c = r.compiled
    program = "MaxText's train_compile" if r.program == "maxtext" else "ASAP's reference train step"
    if c is not None:
        how = (
            f", extrapolated from {' and '.join(map(str, c.layers_compiled))} of {c.layers} layers"
            if c.extrapolated
            else ""
        )
        return f"libtpu's memory analysis of {program}{how}"
    return f"libtpu's out-of-memory report on {program}"


def compiler_note(entries: list[VerifiedTarget]) -> str | None:
    """The estimate's disagreement with the compiler on per-chip memory, said once: on the first of `entries` (the
    withdrawn proposals first, then the current mesh, then the others) whose figures differ by more than the
    tolerance. 'Withdrawn proposal 1 (fsdp=16): estimate 19.6 GiB per chip (ASAP's memory model), TPU compiler
    39.8 GiB of 31.25 GiB (libtpu's out-of-memory report on ASAP's reference train step); the compiler decides'."""
    for e in entries:
        r = e.result
        est = (r.estimate or {}).get("memory_per_chip_bytes")
        c = r.compiled
        got = c.memory_per_chip_bytes if c is not None else r.needs_bytes
        limit = c.hbm_limit_bytes if c is not None else r.available_bytes
        if not est or not got or abs(est - got) <= verify_mod.TOLERANCE * got:
            continue
        at_least = "at least " if c is None and "needs at least" in r.message else ""
        mesh = proposal_label_of(e.overrides) if e.rank is not None and not e.label.startswith("next") else ""
        label = "withdrawn " + e.label if e.rank is not None and rejects(r) else e.label  # not the new table's rank
        head = label[:1].upper() + label[1:] + (f" ({mesh})" if mesh else "")
        of = f" of {wording.gib(limit)} GiB" if limit else ""
        return (
            f"{head}: estimate {est / 2**30:.1f} GiB per chip (ASAP's memory model), TPU compiler {at_least}"
            f"{got / 2**30:.1f} GiB{of} ({_estimate_source(r)}); the compiler decides"
        )
    return None


def proposal_label_of(overrides: dict[str, Any]) -> str:
    """A target's mesh and changes as people read them, from its keys (every ici_*/dcn_* key set)."""

    def degrees(part: str) -> dict[str, int]:
        return {
            k.removeprefix(f"{part}_").removesuffix("_parallelism"): int(v)
            for k, v in overrides.items()
            if k.startswith(f"{part}_") and k.endswith("_parallelism") and v != 1
        }

    other = {k: v for k, v in overrides.items() if not k.endswith("_parallelism")}
    return changes_label(degrees("ici"), degrees("dcn"), other)


# -- what the editor shows -------------------------------------------------------------------------------
VERIFIED = DiagCode.COMPILER_VERIFIED
DOES_NOT_FIT = DiagCode.COMPILER_DOES_NOT_FIT
DISAGREES = DiagCode.COMPILER_DISAGREES
UNAVAILABLE = DiagCode.COMPILER_UNAVAILABLE
STALE = "[stale: the config changed since this compile; verify again] "


def _mesh_anchor(an: Analysis) -> tuple[str | None, Span]:
    e = an.config.mesh_anchor()
    return (e.key, e.key_span) if e is not None else (None, Span.point(0))


def current_entry(results: list[VerifiedTarget]) -> VerifiedTarget | None:
    return next((e for e in results if e.rank is None), None)


def findings(results: list[VerifiedTarget], an: Analysis, stale: bool) -> list[Finding]:
    """The current mesh's verification as diagnostics on the mesh block: verified (ASAP400), does not fit
    (ASAP401), each disagreement with the estimate (ASAP402), or why it could not run (ASAP403). An
    unplaceable mesh already has its static error (ASAP106)."""
    entry = current_entry(results)
    if entry is None:
        return []
    r = entry.result
    key, span = _mesh_anchor(an)
    prefix = STALE if stale else ""

    def at(code: DiagCode, sev: Severity, msg: str) -> Finding:
        return Finding(code, sev, prefix + msg, key, an.config.path, span, data={"verify": str(r.status)})

    st = r.status
    if st in (VerifyStatus.UNPLACEABLE, VerifyStatus.INVALID, VerifyStatus.CANCELLED):
        return []
    if st in (VerifyStatus.UNAVAILABLE, VerifyStatus.ERROR):
        return [at(UNAVAILABLE, Severity.INFORMATION, f"TPU compiler: {r.message}")]
    out = [
        at(DOES_NOT_FIT, Severity.ERROR, f"TPU compiler: {r.message}")
        if st == VerifyStatus.DOES_NOT_FIT
        else at(VERIFIED, Severity.INFORMATION, r.message[:1].upper() + r.message[1:])
    ]
    for d in r.disagreements:
        out.append(at(DISAGREES, Severity.WARNING, f"Estimate vs TPU compiler: {d['message']}"))
    return out


def summary(r: verify_mod.VerifyResult, figures: bool = True) -> str:
    """A proposal's verification in a few words: 'fits, 12.3 of 15.75 GiB' (with '; schedule 3.71 s, MFU 24.6%' when
    its compiled program was simulated) / 'does not fit' / ...; without
    `figures`, the verdict's words alone ('fits', 'does not fit')."""
    c = r.compiled
    if r.status == VerifyStatus.OK and c:
        mem, limit = round(c.memory_per_chip_bytes), round(c.hbm_limit_bytes)  # as the JSON has them
        sch = c.schedule or {}
        step = (
            f"; schedule {wording.seconds(float(sch['step_s']))}"
            + (f", MFU {float(sch['mfu']):.1%}" if sch.get("mfu") else "")
            if sch.get("step_s")
            else ""
        )
        return f"fits, {mem / 2**30:.1f} of {wording.gib(limit)} GiB{step}" if figures else "fits"
    if r.status == VerifyStatus.DOES_NOT_FIT:
        need, have = r.needs_bytes, r.available_bytes
        if not figures or not (need and have):
            return "does not fit"
        return f"does not fit, needs {need / 2**30:.1f} of {wording.gib(have)} GiB"
    return str(r.status)
