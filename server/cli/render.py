"""The `asap` commands' human output: text reports and tables, rendered from the typed results (the analysis,
the estimate and its alternatives, the profile report, the knowledge store's hits); the verifier's, the outcome's
and the track record's results are dicts (their `--json` documents). `--json` prints those documents instead
(server/cli/commands.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from server.common.findings import Finding, Severity
from server.config.axes import mesh_label
from server.config.run_flags import CLI_HOW, name_groups, summary_line
from server.perf import roofline, wording

if TYPE_CHECKING:
    from rich.console import Console

    from server.agents.report import AnalysisReport, NothingFitsView, XlaFlagsView
    from server.kb.records import Record
    from server.kb.store import Result
    from server.perf.enumeration import Alternative
    from server.perf.estimate import Estimate
    from server.perf.model_summary import ModelSummary
    from server.presentation.verification import VerifiedTarget
    from server.profiles import profile as prof
    from server.services.analysis import Analysis
    from server.services.experiments import Outcome


def gib(b: float | None) -> str:
    return "-" if b is None else f"{b / 1024**3:.2f} GiB"


def finding_line(f: Finding, default_file: Path | str | None) -> str:
    """'file:line:col: error ASAP101: message', compiler style (1-based line and column)."""
    return f"{f.file or default_file}:{f.span.line + 1}:{f.span.column + 1}: {f.severity.label} {f.code}: {f.message}"


# -- asap check ----------------------------------------------------------------------------------------------
def check(an: Analysis) -> str:
    """One config's findings (with their fixes), its slice and mesh, and the error and warning counts."""
    out = []
    chk = an.check
    rel = an.path
    if not an.config.is_maxtext:
        return f"{rel}: not a MaxText config (no MaxText keys); nothing to check"
    for f in an.diagnostics:
        out.append(finding_line(f, an.path))
        out.extend(f"    fix: {fx.title}" for fx in f.fixes)
    if chk.slice is not None:
        line = f"{rel}: slice {chk.slice.describe()} from {chk.slice_source}"
        if chk.resolved:
            line += "; " + mesh_label(chk.degrees("ici"), chk.degrees("dcn"), ici_prefix="ICI ")
        out.append(line)
    errors = sum(f.severity == Severity.ERROR for f in an.diagnostics)
    warnings = sum(f.severity == Severity.WARNING for f in an.diagnostics)
    out.append(f"{rel}: {errors} error(s), {warnings} warning(s)")
    return "\n".join(out)


def xla_flags_line(view: XlaFlagsView) -> str:
    """The flags the analysis was priced under, in one line (the hover's, with the command line's advice)."""
    if view.source == "libtpu_defaults":
        return summary_line(None, [], [], 0, CLI_HOW)
    named = name_groups((name, g.key, g.key_value) for name, g in view.groups.items())
    return summary_line(view.described, named, [u.name for u in view.unknown], view.problems_total, CLI_HOW)


# -- asap estimate -------------------------------------------------------------------------------------------
def estimate(path: Path, est: Estimate) -> str:
    """The estimate of a config on its slice: model, memory per device, time per step, roofline, throughput."""
    t = est.time
    mem = est.memory
    chip = est.layout.slice.chip
    bottleneck, margin, _ = t.bottleneck()
    points = sorted(t.points, key=lambda p: -p.seconds)

    def intensity(p: roofline.Point) -> str:
        oi = p.intensity  # inf: no HBM traffic
        return f"{oi:>7.0f} FLOP/B" if oi and oi != math.inf else f"{'-':>14}"

    # Bytes are rounded to whole bytes as in the --json document, so both print the same GiB.
    lines = [
        f"{path}: {est.layout.slice.describe()}; {est.layout.label()}",
        f"  model {est.shape.name}: {est.params.total(est.shape.layers) / 1e9:.2f}B params, "
        f"{est.tokens_per_step:,.0f} tokens/step, {est.model_flops_per_step:.3e} FLOPs/step (MaxText count; "
        f"{est.flops.executed * est.grad_accum:.3e} executed, remat {est.remat.name})",
        "  memory per device:",
        *(f"    {k:<12} {gib(round(v))}" for k, v in mem.components.items()),
        f"    {'total':<12} {gib(round(mem.total))} of {wording.gib(mem.usable)} GiB usable "
        f"({'fits' if mem.fits else 'DOES NOT FIT'})",
        *(f"    an upper bound: {note}" for note in mem.uncertain_notes()),
        "  time per step:",
        f"    compute {t.compute_s * 1e3:.1f} ms, HBM {t.hbm_s * 1e3:.1f} ms, "
        f"communication {t.comm_s * 1e3:.1f} ms ({t.exposed_comm_s * 1e3:.1f} ms exposed), "
        f"bubble {t.bubble_s * 1e3:.1f} ms",
        *(f"    {axis:<8} {s * 1e3:.1f} ms over {t.comm.paths[axis].physical}" for axis, s in t.comm_by_axis.items()),
        f"    step {t.step_s * 1e3:.1f} ms",
        f"  roofline (per device; HBM ridge {roofline.ridge_points(chip)['hbm']:.0f} FLOP/B):",
        *(
            f"    {p.name:<24} {p.seconds * 1e3:>9.1f} ms  {intensity(p)}  {p.bound}-bound"
            for p in points
            if p.seconds > 0
        ),
        f"  {est.tokens_per_s:,.0f} tokens/s, {est.tflops_per_chip:.1f} TFLOP/s per chip, MFU {est.mfu:.1%}",
        f"  bottleneck: {bottleneck} (margin {margin:.0%} of the step over the runner-up)",
    ]
    return "\n".join(lines)


def alternatives(slice_name: str, rows: Sequence[Alternative]) -> str:
    """`--top N`: the fastest valid meshes of the slice, with their speedup over the config's."""
    lines = [f"  fastest valid meshes on {slice_name} (of every assignment that launches and fits):"]
    for r in rows:
        lines.append(
            f"    {r.rank}. {r.label:<48} MFU {r.mfu:.1%}  step {r.step_s * 1e3:,.0f} ms  "
            f"{r.bottleneck}-bound  x{r.speedup:.2f}"
        )
        if r.equivalent:
            lines.append(f"       equivalent (priced the same): {'; '.join(r.equivalent)}")
    return "\n".join(lines)


# -- asap profile --------------------------------------------------------------------------------------------
def profile(report: prof.Report, findings: list[Finding]) -> str:
    """A profile's KPIs, top ops, categories, collectives and verdict (and the comparison with the estimate)."""
    k = report.kpis
    out = [f"profile: {report.source}"]
    dev = k.device_type or "unknown device"
    out.append(
        f"device: {dev}" + (f", {k.cores} cores" if k.cores else "") + (f", {k.hosts} host(s)" if k.hosts else "")
    )
    if k.steps is not None:
        st = k.steps
        dropped = ", ".join(f"step {s} ({ms:.1f} ms)" for s, ms in st.outliers)
        out_l = f"; outliers dropped: {dropped}" if dropped else ""
        out.append(
            f"steps: {st.n} (used {len(st.used_ms)}), median {st.median_ms:.1f} ms, mean {st.mean_ms:.1f} ms, "
            f"stddev {st.stddev_ms:.1f} ms{out_l}"
        )
    kp = []
    for label, v in (
        ("duty cycle", k.busy_fraction),
        ("waiting for input", k.input_fraction),
        ("MXU utilization", k.mxu_utilization),
        ("FLOP utilization", k.program_flop_utilization),
        ("goodput", k.goodput),
    ):
        if v is not None:
            kp.append(f"{label} {v:.1%}")
    if kp:
        out.append("KPIs: " + ", ".join(kp))
    out.append("top ops (self time):")
    for o in report.top_ops:
        fu = f"{o.flop_utilization:.0%} of peak FLOP/s" if o.flop_utilization is not None else "FLOP/s n/a"
        bu = f"{o.hbm_bw_utilization:.0%} of HBM BW" if o.hbm_bw_utilization is not None else "HBM BW n/a"
        flag = "  [implausible FLOP count: not believed]" if o.implausible else ""
        oi = f"{o.operational_intensity:.1f} FLOP/B" if o.operational_intensity is not None else "n/a"
        name = o.name if len(o.name) <= 48 else o.name[:45] + "..."
        out.append(
            f"  {o.self_time_fraction:6.1%}  {name} ({o.category}, {o.bound_by or '?'}): {fu}, {bu}, "
            f"intensity {oi}"
            f"{' - ' + o.layer if o.layer else ''}{flag}"
        )
    for o in report.implausible_ops:
        out.append(
            f"  flagged: {o.name[:48]} ({o.category}, {o.self_time_fraction:.1%}) claims "
            f"{o.claimed_efficiency or 0:.1f}x the peak FLOP/s: its FLOP count is not believed"
        )
    out.append("top categories: " + ", ".join(f"{cat} {f:.1%}" for cat, f in report.top_categories))
    c = report.collectives
    out.append(f"collectives: {c.share:.1%} of the step")
    for kind, g in c.by_kind.items():
        bw = f", {g.achieved_bw / 1e9:.1f} GB/s achieved" if g.achieved_bw else ""
        out.append(f"  {kind}: {g.fraction:.1%}, {g.occurrences} ops, {g.payload_bytes / 1e6:.1f} MB{bw}")
    for axis, g in c.by_axis.items():
        bw = f", {g.bw_utilization:.0%} of its ICI bandwidth" if g.bw_utilization is not None else ""
        out.append(f"  on {axis}{' (across slices)' if g.crosses_slices else ''}: {g.fraction:.1%}{bw}")
    verdict = report.verdict
    out.append(f"verdict: {verdict.bottleneck}-bound, confidence {verdict.confidence:.0%} (rule: {verdict.rule})")
    out.extend(f"  - {e}" for e in verdict.evidence)
    if report.comparison:
        cmp = report.comparison
        out.append(
            f"vs estimate: step {cmp['measured_step_s'] * 1e3:.1f} ms measured, {cmp['expected_step_s'] * 1e3:.1f} ms "
            f"expected ({cmp['step_gap']:+.0%}); MFU {cmp['measured_mfu']:.1%} vs {cmp['expected_mfu']:.1%}"
        )
    for f in findings:
        if f.severity <= Severity.WARNING:
            out.append(f"warning: {f.message}")
    for w in report.warnings:
        if not any(w in f.message for f in findings):
            out.append(f"note: {w}")
    return "\n".join(out)


# -- asap analyze --------------------------------------------------------------------------------------------
def analysis(doc: AnalysisReport) -> None:
    """The analysis report, printed with rich (colour on a terminal): slice, mesh, findings, estimate, diagnosis,
    the proposals' table and rationales, the backend and its notes."""
    from rich.console import Console
    from rich.table import Table

    con = Console()
    sl, mesh = doc.slice, doc.mesh
    con.print(f"[bold]{doc.config}[/bold]")
    if sl:
        con.print(f"slice {sl.name} ({sl.chips} chips x {sl.num_slices}, topology {sl.topology})")
    if mesh:
        con.print("mesh: " + mesh_label(mesh.ici, mesh.dcn, ici_prefix="ICI "))
    for f in doc.findings:
        if f.severity in ("error", "warning"):
            color = "red" if f.severity == "error" else "yellow"
            con.print(f"[{color}]{f.severity}[/{color}] {f.code} line {f.line}: {f.message}")
    est = doc.estimate
    if est:
        con.print(
            f"estimate: step {est.time.step_s * 1e3:,.0f} ms, MFU {est.mfu:.1%}, {est.bottleneck}-bound, "
            f"HBM {est.memory.total_bytes / 2**30:.1f} of {wording.gib(est.memory.usable_bytes)} GiB usable"
        )
    if doc.xla_flags is not None:
        con.print(xla_flags_line(doc.xla_flags), markup=False)
    d = doc.diagnosis
    if d:
        con.print(f"\n[bold]Diagnosis[/bold] ({d.source}): [bold]{d.bottleneck}[/bold], confidence {d.confidence:.0%}")
        con.print(f"  {d.summary}")
        for e in d.evidence:
            con.print(f"  - {e.text} [dim]({e.source})[/dim]")
        if d.keys:
            con.print(f"  keys: {', '.join(d.keys)}")
    if doc.calibration:
        con.print(f"[dim]{doc.calibration}[/dim]")
    if doc.nothing_fits is not None:
        _nothing_fits(con, doc.nothing_fits)
    if doc.proposals:
        t = Table(title="Proposals", show_lines=False)
        for col in ("#", "mesh and changes", "step", "MFU", "speedup", "confidence"):
            t.add_column(col)
        for p in doc.proposals:  # a proposal's ici and dcn hold only the axes that shard
            other = ", ".join(f"{k}={v}" for k, v in p.other_changes.items())
            label = ("keep: " if p.keep_current else "") + mesh_label(p.ici, p.dcn) + (f"; {other}" if other else "")
            ex = p.expected
            sp = f"x{ex.speedup:.2f}" if ex.speedup is not None else "-"
            t.add_row(str(p.rank), label, f"{ex.step_s * 1e3:,.0f} ms", f"{ex.mfu:.1%}", sp, f"{p.confidence:.0%}")
        con.print(t)
        for p in doc.proposals:
            con.print(f"[bold]{p.rank}.[/bold] {p.rationale}")
            for tr in p.tradeoffs:
                con.print(f"   trade-off: {tr}")
            con.print(f"   [dim]confidence rests on: {p.confidence_basis}[/dim]")
    b = doc.backend
    con.print(f"\nbackend: {b.name}" + (f" ({b.fallback_reason})" if b.fallback_reason else ""))
    for n in doc.notes:
        con.print(f"[dim]note: {n}[/dim]")


def _nothing_fits(con: Console, nf: NothingFitsView) -> None:
    """No mesh of the slice fits: the least-memory mesh, then what would fit, each priced, then what did not."""
    from rich.markup import escape

    from server.presentation.agent_findings import fit_option_text

    con.print(f"\n[bold red]{escape(nf.summary)}[/bold red]")
    con.print(f"  the least-memory mesh: {mesh_label(nf.least.ici, nf.least.dcn, ici_prefix='ICI ')}")
    if nf.options:
        con.print("  What would fit (each on its fastest mesh that launches):")
        for o in nf.options:
            con.print(f"  - {escape(fit_option_text(o))}")
            if o.note:
                con.print(f"    {escape(o.note)}")
    else:
        con.print("  Nothing ASAP can price fits on its own.")
    for t in nf.tried:
        con.print(f"  [dim]tried: {escape(t)}[/dim]")


# -- asap verify ---------------------------------------------------------------------------------------------
def withdrawn(entries: Sequence[VerifiedTarget], note: str | None) -> str:
    """The proposals the TPU compiler rejected (`asap verify --proposals`), one line each with its words, and the
    estimate's disagreement with the compiler once."""
    from server.presentation.verification import proposal_label_of

    out = [f"== withdrawn by the TPU compiler ({len(entries)}):"]
    out += [f"   {proposal_label_of(e.overrides)}: {e.result.message}" for e in entries]
    if note:
        out.append(f"   {note}")
    return "\n".join(out)


_secs = wording.seconds


def verification(entry: VerifiedTarget) -> str:
    """One verified mesh (an entry of `verification.verify_all`): status, message, and the compiler's memory and
    collectives beside the estimate's (bytes rounded as the JSON rounds them)."""
    r = entry.result
    changes = ", ".join(f"{k}={v}" for k, v in entry.overrides.items() if v != 1) or "as written"
    out = [f"== {entry.label} ({changes}) on {r.slice or '?'}: {r.status}", f"   {r.message}"]
    c, e = r.compiled, r.estimate
    if c is None:
        if e is not None:
            out.append(
                f"   estimate: {gib(e['memory_per_chip_bytes'])} per chip, {'fits' if e['fits'] else 'does not fit'}"
            )
        return "\n".join(out)
    out.append(f"   {'':<26}{'estimate':>14}{'compiler':>14}")
    est_mem = e["memory_per_chip_bytes"] if e else None
    out.append(f"   {'memory per chip':<26}{gib(est_mem):>14}{gib(round(c.memory_per_chip_bytes)):>14}")
    for part in sorted(c.components):
        out.append(f"   {'  ' + part:<26}{'':>14}{gib(round(c.components[part])):>14}")
    by_axis = {a: {k: round(v) for k, v in d.items()} for a, d in c.collectives_by_axis().items()}
    axes = sorted(set(by_axis) | set((e or {}).get("collectives_by_axis", {})))
    for a in axes:
        ev = sum((e or {}).get("collectives_by_axis", {}).get(a, {}).values()) if e else None
        cv = sum(by_axis.get(a, {}).values())
        out.append(f"   {'collectives on ' + a:<26}{gib(ev):>14}{gib(cv):>14}")
    sch = c.schedule if c.schedule and "step_s" in c.schedule else None
    if sch is not None:
        # the compiled program's step, simulated op by op on the slice (server/compile/schedule_sim.py); its MFU is
        # the estimate's FLOP count over that step (verify.with_schedule_mfu)
        est_step = float(e["step_s"]) if e and e.get("step_s") else None
        sim_step = float(sch["step_s"])
        out.append(f"   {'step (schedule simulated)':<26}{_secs(est_step):>14}{_secs(sim_step):>14}")
        if e and e.get("mfu") and sch.get("mfu"):
            out.append(f"   {'MFU':<26}{float(e['mfu']):>14.1%}{float(sch['mfu']):>14.1%}")
        from server.compile.verify import category_words, step_categories

        # where the step goes, in both (categories above 1% of the simulated step)
        for k, (ev_s, sv_s) in step_categories(e, sch).items():
            if max(ev_s, sv_s) >= 0.01 * sim_step:
                out.append(
                    f"   {'  ' + category_words(k, short=True):<26}{_secs(ev_s if e else None):>14}{_secs(sv_s):>14}"
                )
    how = f", extrapolated from {c.layers_compiled} of {c.layers} layers" if c.extrapolated else ""
    out.append(
        f"   compiled in {round(c.compile_s, 2):.1f} s{how}{' (cached)' if r.cached else ''}; "
        f"libtpu {r.versions.get('libtpu')}, jax {r.versions.get('jax')}"
    )
    out.extend(f"   ! {d['message']}" for d in r.disagreements)
    return "\n".join(out)


# -- asap outcome, asap stats --------------------------------------------------------------------------------
def outcome(out: Outcome) -> str:
    """An applied proposal's outcome (`experiments.record_outcome`): predicted against measured."""
    sp, psp = out.measured_speedup, out.predicted_speedup
    lines = [
        f"outcome of proposal {out.rank} (experiment {out.experiment_id}) on {out.slice}",
        f"  step time: predicted {out.predicted_step_s:.4g} s, measured {out.measured_step_s:.4g} s "
        f"({out.step_error:+.1%} error)",
    ]
    if sp is not None:
        verdict = "delivered" if out.delivered else "not delivered"
        lines.append(f"  speedup:   predicted x{psp:.2f}, measured x{sp:.2f}: {verdict}")
    else:
        lines.append("  speedup:   no measured baseline (the analysis had no profile of the mesh before)")
    lines.append(f"  bottleneck: {out.bottleneck_before} -> {out.bottleneck_after}")
    lines.append(f"  knowledge record: {out.record}")
    return "\n".join(lines)


def track_record(rec: dict[str, Any]) -> str:
    """ASAP's track record (`experiments.track_record`): errors per generation, confidence reliability. With the
    shared store (`rec["shared"]`): where the figures come from (the team's store, or this machine's log when the
    store did not answer; rows waiting to be synced), and a table per user and per generation."""
    lines = [
        f"ASAP's track record: {rec['outcomes']} outcomes of applied proposals ({rec['with_baseline']} with a "
        "measured baseline)"
    ]
    if "shared" in rec:
        lines += _team(rec)
    else:
        lines += _per_generation_lines(rec)
    lines.append("  reliability (stated confidence -> delivered the predicted direction):")
    lines.extend(
        f"    {b['stated']:>9}: n={b['n']:<3} stated {b['mean_stated']:.0%}, delivered {b['delivered']:.0%}"
        for b in rec["reliability"]
        if b["n"]
    )
    lines.append(f"  confidence shown to users: {rec['calibration']['note']}")
    return "\n".join(lines)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1%}"


def _table(head: list[str], rows: list[list[str]], indent: str = "    ") -> list[str]:
    """Columns padded to their widest cell; the first left-aligned, the others right-aligned."""
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]

    def line(cells: list[str]) -> str:
        return indent + "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    return [line(head), *(line(r) for r in rows)]


def _team(rec: dict[str, Any]) -> list[str]:
    """The shared store's part of `asap stats`: the source line, the per-user and per-generation tables."""
    sh = rec["shared"]
    waiting = int(sh.get("pending_sync") or 0)
    rows = "row waits" if waiting == 1 else "rows wait"
    outbox = (
        f"{waiting} {rows} in this machine's outbox, synced on the next connect"
        if waiting
        else "nothing waits to be synced"
    )
    if str(sh["source"]).startswith("shared"):
        source = f"  source: the team's shared store {sh['store']} (every user's outcomes); {outbox}"
    else:
        source = (
            f"  source: this machine's log only: the shared store {sh['store']} did not answer (see the notice "
            f"above); {outbox}"
        )
    out = [source, "  per user:"]
    user_rows = []
    for u, d in rec.get("per_user", {}).items():
        st = d["step_time_error"]
        user_rows.append(
            [
                u,
                str(d["outcomes"]),
                _pct(st["median_abs"]),
                _pct(st["p90_abs"]),
                _pct(st["mean_signed"]),
                _pct(d["delivered"]),
            ]
        )
    head = ["user", "outcomes", "step |error| median", "p90", "mean signed", "delivered"]
    out += _table(head, user_rows) if user_rows else ["    (no outcomes yet)"]
    out.append("  per generation:")
    gen_rows = []
    for g, d in rec["per_generation"].items():
        st, mem = d["step_time_error"], d["memory_error"]
        gen_rows.append(
            [
                g,
                str(d["outcomes"]),
                _pct(st["median_abs"]),
                _pct(st["p90_abs"]),
                _pct(mem["median_abs"]),
                str(d["bottleneck_moved"]),
                _pct(d.get("delivered")),
            ]
        )
    head = ["generation", "outcomes", "step |error| median", "p90", "memory |error| median", "bottleneck moved"]
    head.append("delivered")
    out += _table(head, gen_rows) if gen_rows else ["    (no outcomes yet)"]
    if user_rows:
        out.append(
            "  (step |error|: |predicted - measured| / measured step time; mean signed: its signed mean, above 0 when"
        )
        out.append(
            "   ASAP predicted a longer step than measured; delivered: of the outcomes with a measured baseline,"
        )
        out.append("   the share whose measured speedup went the predicted way; memory: against the TPU compiler)")
    return out


def _per_generation_lines(rec: dict[str, Any]) -> list[str]:
    lines = []
    for g, d in rec["per_generation"].items():
        st, mem = d["step_time_error"], d["memory_error"]
        line = f"  {g}: {d['outcomes']} outcomes"
        if st["n"]:
            line += f"; step time |error| median {st['median_abs']:.1%}, p90 {st['p90_abs']:.1%}"
        if mem["n"]:
            line += f"; memory |error| median {mem['median_abs']:.1%}"
        lines.append(line)
    return lines


# -- asap models ---------------------------------------------------------------------------------------------
def models_table(summaries: Sequence[ModelSummary]) -> str:
    """One line per model (block, layers, parameters, active parameters of MoE models, structure)."""
    lines = [f"{'model':<28} {'decoder_block':<18} {'layers':>6} {'params':>9} {'active':>9}  structure"]
    for s in summaries:
        active = f"{s.active / 1e9:8.2f}B" if s.arch.moe else f"{'':9}"
        structure = s.arch.summary().split(": ", 1)[-1]
        lines.append(
            f"{s.name:<28} {s.arch.decoder_block:<18} {s.arch.layers:>6} {s.total / 1e9:8.2f}B {active}  {structure}"
        )
    origin = {s.source.rsplit("@", 1)[-1] for s in summaries if "@" in s.source}
    lines.append(f"{len(summaries)} models; MaxText model files at {', '.join(sorted(origin)) or 'the given checkout'}")
    return "\n".join(lines)


# -- asap kb -------------------------------------------------------------------------------------------------
def kb_results(results: Iterable[Result]) -> str:
    """Search hits: score, source and heading, then the first 200 characters of the text on one line."""
    lines = []
    for r in results:
        lines.append(f"{r.score:.4f}  {r.source} :: {r.heading}")
        lines.append("        " + " ".join(r.text.split())[:200])
    return "\n".join(lines)


def kb_similar(found: Iterable[tuple[Record, float, list[str]]]) -> str:
    """Past optimizations closest to a situation, with why they match."""
    return "\n".join(f"{sc:.3f}  {r.id}: {r.title}  ({'; '.join(why) or 'weak match'})" for r, sc, why in found)


def key_values(d: dict[str, Any]) -> str:
    return "\n".join(f"{k}: {v}" for k, v in d.items())
