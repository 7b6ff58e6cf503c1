"""`asap` command line: the same analysis as the editor, for terminals and CI.

    asap check CONFIG.yml [CONFIG.yml ...] [--json] [--slice v5e-256]
    asap estimate CONFIG.yml [--mesh k=v,...] [--top N] [--json]
    asap profile PATH [--config CONFIG.yml] [--json]
    asap analyze CONFIG.yml [--profile PATH] [--slice NAME] [--llm off|auto] [--json]
    asap verify CONFIG.yml [--mesh k=v,...] [--proposals] [--slice NAME] [--json]
    asap outcome CONFIG.yml --profile PATH [--experiment ID --proposal N] [--json]
    asap stats [--json]
    asap kb build | search "query" [--json] | similar --params-b N --slice S | add-record FILE.yaml | stats

Exit status: 0 when no config has an error, 1 when any has, 2 for usage errors
(a file that cannot be read). `verify`: 0 when the (first) mesh compiles and fits, 1 when it does not fit,
cannot be placed or is invalid, 2 when the compiler is unavailable or failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from server.common.findings import Finding, Severity
from server.config.mesh import check
from server.config.models import MAXTEXT_PATH_HELP, MaxTextPathAction
from server.config.resolve import Config, parse_override, with_overrides
from server.config.source import YamlSyntaxError
from server.perf.enumeration import enumerate_meshes
from server.perf.estimate import Estimate, EstimateError, estimate, inputs
from server.profiles import profile as prof
from server.profiles.profile import ProfileError
from server.services.analysis import Analysis, analyze
from server.services.profile_analysis import analyze_tools

if TYPE_CHECKING:  # the agents load when a command needs them
    from server.agents.report import AnalysisReport


def _human(an: Analysis) -> str:
    out = []
    chk = an.check
    rel = an.path
    if not an.config.is_maxtext:
        return f"{rel}: not a MaxText config (no MaxText keys); nothing to check"
    for f in an.diagnostics:
        where = f.file or an.path
        out.append(f"{where}:{f.span.line + 1}:{f.span.column + 1}: {f.severity.label} {f.code}: {f.message}")
        out.extend(f"    fix: {fx.title}" for fx in f.fixes)
    if chk.slice is not None:
        mesh = {d.axis.name: d.degree for d in chk.ici if d.degree != 1}
        dcn = {d.axis.name: d.degree for d in chk.dcn if d.degree != 1}
        parts = [f"{rel}: slice {chk.slice.describe()} from {chk.slice_source}"]
        if chk.resolved:
            parts.append("ICI " + (" x ".join(f"{k}={v}" for k, v in mesh.items()) or "all 1"))
            if dcn:
                parts.append("DCN " + " x ".join(f"{k}={v}" for k, v in dcn.items()))
        out.append("; ".join(parts))
    errors = sum(f.severity == Severity.ERROR for f in an.diagnostics)
    warnings = sum(f.severity == Severity.WARNING for f in an.diagnostics)
    out.append(f"{rel}: {errors} error(s), {warnings} warning(s)")
    return "\n".join(out)


def _read_config(name: str) -> tuple[Path, str] | None:
    """The config's path and text, or None after saying why it cannot be read (exit status 2)."""
    path = Path(name)
    try:
        return path, path.read_text(encoding="utf-8")
    except OSError as e:
        print(f"asap: cannot read {name}: {e.strerror}", file=sys.stderr)
        return None


def cmd_check(args: argparse.Namespace) -> int:
    results = []
    for name in args.configs:
        path = Path(name)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            print(f"asap: cannot read {name}: {e.strerror}", file=sys.stderr)
            return 2
        results.append(analyze(path, text, default_slice=args.slice))
    if args.json:
        payload: object = results[0].to_json() if len(results) == 1 else [r.to_json() for r in results]
        json.dump(payload, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print("\n\n".join(_human(r) for r in results))
    failed = any(f.severity == Severity.ERROR for r in results for f in r.diagnostics)
    return 1 if failed else 0


def _gib(b: float | None) -> str:
    return "-" if b is None else f"{b / 1024**3:.2f} GiB"


def _estimate_human(path: Path, est: Estimate) -> str:
    j = est.to_json()
    t = j["time"]
    mem = j["memory"]
    lines = [
        f"{path}: {est.layout.slice.describe()}; {est.layout.label()}",
        f"  model {est.shape.name}: {j['params'] / 1e9:.2f}B params, {j['tokens_per_step']:,.0f} tokens/step, "
        f"{j['flops_per_step']:.3e} FLOPs/step (MaxText count; {j['executed_flops_per_step']:.3e} executed, "
        f"remat {est.remat.name})",
        "  memory per device:",
        *(f"    {k:<12} {_gib(v)}" for k, v in mem["components"].items()),
        f"    {'total':<12} {_gib(mem['total_bytes'])} of {_gib(mem['usable_bytes'])} usable "
        f"({'fits' if mem['fits'] else 'DOES NOT FIT'})",
        "  time per step:",
        f"    compute {t['compute_s'] * 1e3:.1f} ms, HBM {t['hbm_s'] * 1e3:.1f} ms, "
        f"communication {t['comm_s'] * 1e3:.1f} ms ({t['exposed_comm_s'] * 1e3:.1f} ms exposed), "
        f"bubble {t['bubble_s'] * 1e3:.1f} ms",
        *(
            f"    {axis:<8} {s * 1e3:.1f} ms over {j['links'][axis]['physical']}"
            for axis, s in t["comm_by_axis"].items()
        ),
        f"    step {t['step_s'] * 1e3:.1f} ms",
        f"  roofline (per device; HBM ridge {j['roofline']['ridge_points']['hbm']:.0f} FLOP/B):",
        *(
            f"    {p['name']:<24} {p['seconds'] * 1e3:>9.1f} ms  "
            + (f"{p['operational_intensity']:>7.0f} FLOP/B" if p["operational_intensity"] else f"{'-':>14}")
            + f"  {p['bound']}-bound"
            for p in sorted(j["roofline"]["points"], key=lambda p: -p["seconds"])
            if p["seconds"] > 0
        ),
        f"  {j['tokens_per_s']:,.0f} tokens/s, {j['tflops_per_chip']:.1f} TFLOP/s per chip, MFU {j['mfu']:.1%}",
        f"  bottleneck: {j['bottleneck']} (margin {j['margin']:.0%} of the step over the runner-up)",
    ]
    return "\n".join(lines)


def _mesh_arg(text: str | None) -> dict[str, Any] | None:
    """`--mesh k=v,...` as config overrides ({} when absent); None after saying why it does not parse."""
    if not text:
        return {}
    try:
        return parse_override(text)
    except (ValueError, YamlSyntaxError) as e:
        print(f"asap: --mesh: {e}", file=sys.stderr)
        return None


def cmd_estimate(args: argparse.Namespace) -> int:
    read = _read_config(args.config)
    if read is None:
        return 2
    path, text = read
    an = analyze(path, text, default_slice=args.slice)
    cfg = an.config
    overrides = _mesh_arg(args.mesh)
    if overrides is None:
        return 2
    if overrides:
        cfg = with_overrides(cfg, overrides)
    chk = check(cfg, args.slice)
    errors = [f for f in [*cfg.findings, *chk.findings] if f.severity == Severity.ERROR]
    if errors:
        for f in errors:
            print(
                f"{f.file or path}:{f.span.line + 1}:{f.span.column + 1}: error {f.code}: {f.message}", file=sys.stderr
            )
        return 1
    try:
        est = estimate(cfg, chk)
    except EstimateError as e:
        print(f"{path}: error: {e}" + (f" (key {e.key})" if e.key else ""), file=sys.stderr)
        return 1
    ranked = _alternatives(cfg, est, args.top) if args.top else None
    if args.json:
        doc = est.to_json()
        if ranked is not None:
            doc["alternatives"] = ranked
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(_estimate_human(path, est))
        if ranked is not None:
            print(f"  fastest valid meshes on {est.layout.slice.name} (of every assignment that launches and fits):")
            for r in ranked:
                print(
                    f"    {r['rank']}. {r['label']:<48} MFU {r['mfu']:.1%}  step {r['step_s'] * 1e3:,.0f} ms  "
                    f"{r['bottleneck']}-bound  x{r['speedup']:.2f}"
                )
    return 0 if est.memory.fits else 1


def _alternatives(cfg: Config, est: Estimate, top: int) -> list[dict[str, Any]]:
    """The `top` fastest meshes of the slice (mesh enumeration), with their speedup over this one."""
    allow_split = bool(cfg.get("allow_split_physical_axes", False))
    en = enumerate_meshes(inputs(cfg), est.layout.slice, allow_split)
    out = []
    for i, c in enumerate(en.ranked[:top], 1):
        e = c.estimate
        out.append(
            {
                "rank": i,
                "label": c.layout.label(),
                "ici": {k: v for k, v in c.layout.ici.items() if v != 1},
                "dcn": {k: v for k, v in c.layout.dcn.items() if v != 1},
                "mfu": e.mfu,
                "step_s": e.time.step_s,
                "bottleneck": e.time.bottleneck()[0],
                "hbm_bytes": e.memory.total,
                "speedup": est.time.step_s / e.time.step_s,
            }
        )
    return out


def _profile_human(report: prof.Report, findings: list[Finding]) -> str:
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


def cmd_profile(args: argparse.Namespace) -> int:
    from server.profiles import profile_convert

    an = None
    if args.config:
        cpath = Path(args.config)
        try:
            an = analyze(cpath, cpath.read_text(encoding="utf-8"))
        except OSError as e:
            print(f"asap: cannot read {args.config}: {e.strerror}", file=sys.stderr)
            return 2

    def progress(msg: str, frac: float | None) -> None:
        if not args.json and sys.stderr.isatty():
            print(f"\r{msg}{'' if frac is None else f' ({frac:.0%})'}\033[K", end="", file=sys.stderr, flush=True)

    try:
        pf = profile_convert.find_profile(Path(args.path))
        tools, _ = profile_convert.load_tools(pf, progress)
        report, findings = analyze_tools(tools, an, pf.describe())
    except ProfileError as e:
        print(f"asap: {args.path}: {e}", file=sys.stderr)
        return 2
    if not args.json and sys.stderr.isatty():
        print("\r\033[K", end="", file=sys.stderr)
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        print(_profile_human(report, findings))
    return 0


def _kb_store(args: argparse.Namespace) -> Any:
    from server.kb.store import KnowledgeStore

    return KnowledgeStore(
        path=Path(args.index) if args.index else None,
        root=Path(args.kb) if args.kb else None,
    )


def cmd_kb(args: argparse.Namespace) -> int:
    import shutil

    from server.kb.records import RecordError, load_record
    from server.kb.store import KbError, Situation

    try:
        store = _kb_store(args)
        if args.kb_command == "build":
            stats = store.build()
            for n in store.notices:
                print(f"note: {n}", file=sys.stderr)
            print(
                f"indexed {stats['documents']} notes, {stats['records']} records, {stats['chunks']} chunks from "
                f"{store.root} into {store.path} in {stats['total_s']:.2f} s (embedding {stats['embed_s']:.2f} s)"
            )
        elif args.kb_command == "search":
            store.ensure()
            for n in store.notices:
                print(f"note: {n}", file=sys.stderr)
            results = store.search(args.query, args.k, args.generation, args.family, args.axis)
            if args.json:
                print(json.dumps({"query": args.query, "results": [r.to_json() for r in results]}, indent=2))
            else:
                for r in results:
                    print(f"{r.score:.4f}  {r.source} :: {r.heading}")
                    print("        " + " ".join(r.text.split())[:200])
        elif args.kb_command == "similar":
            store.ensure()
            mesh = {k: int(v) for k, v in parse_override(args.mesh).items()} if args.mesh else {}
            sit = Situation(args.params_b, args.slice, args.bottleneck, mesh, args.slices)
            found = store.similar_history(sit, args.k)
            if args.json:
                out = [{"id": r.id, "title": r.title, "score": round(sc, 4), "why": why} for r, sc, why in found]
                print(json.dumps({"results": out}, indent=2))
            else:
                for r, sc, why in found:
                    print(f"{sc:.3f}  {r.id}: {r.title}  ({'; '.join(why) or 'weak match'})")
        elif args.kb_command == "add-record":
            src = Path(args.file)
            rec = load_record(src)
            dest = store.root / "history" / f"{rec.id}.yaml"
            if dest.exists() and not args.force and dest.resolve() != src.resolve():
                print(f"asap: {dest} already exists (use --force to replace it)", file=sys.stderr)
                return 2
            dest.parent.mkdir(parents=True, exist_ok=True)
            if dest.resolve() != src.resolve():
                shutil.copyfile(src, dest)
            stats = store.build()
            print(f"added {rec.id} to {dest}; index rebuilt ({stats['records']} records)")
        elif args.kb_command == "stats":
            store.ensure()
            st = store.stats()
            if args.json:
                print(json.dumps(st, indent=2))
            else:
                for k, v in st.items():
                    print(f"{k}: {v}")
    except (RecordError, KbError, OSError) as e:
        print(f"asap: {e}", file=sys.stderr)
        return 2
    return 0


def _analyze_human(doc: AnalysisReport) -> None:
    from rich.console import Console
    from rich.table import Table

    con = Console()
    sl, mesh = doc.slice, doc.mesh
    con.print(f"[bold]{doc.config}[/bold]")
    if sl:
        con.print(f"slice {sl.name} ({sl.chips} chips x {sl.num_slices}, topology {sl.topology})")
    if mesh:
        ici = " x ".join(f"{a}={d}" for a, d in mesh.ici.items() if d != 1) or "all 1"
        dcn = " x ".join(f"{a}={d}" for a, d in mesh.dcn.items() if d != 1)
        con.print(f"mesh: ICI {ici}" + (f"; DCN {dcn}" if dcn else ""))
    for f in doc.findings:
        if f.severity in ("error", "warning"):
            color = "red" if f.severity == "error" else "yellow"
            con.print(f"[{color}]{f.severity}[/{color}] {f.code} line {f.line}: {f.message}")
    est = doc.estimate
    if est:
        con.print(
            f"estimate: step {est.time.step_s * 1e3:,.0f} ms, MFU {est.mfu:.1%}, {est.bottleneck}-bound, "
            f"HBM {est.memory.total_bytes / 2**30:.1f} of {est.memory.usable_bytes / 2**30:.1f} GiB"
        )
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
    if doc.proposals:
        t = Table(title="Proposals", show_lines=False)
        for col in ("#", "mesh and changes", "step", "MFU", "speedup", "confidence"):
            t.add_column(col)
        for p in doc.proposals:
            ici = " x ".join(f"{a}={v}" for a, v in p.ici.items()) or "all 1"
            dcn = " x ".join(f"{a}={v}" for a, v in p.dcn.items())
            other = ", ".join(f"{k}={v}" for k, v in p.other_changes.items())
            label = (
                ("keep: " if p.keep_current else "")
                + ici
                + (f"; DCN {dcn}" if dcn else "")
                + (f"; {other}" if other else "")
            )
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


def cmd_analyze(args: argparse.Namespace) -> int:
    from server.agents.coordinator import run_report
    from server.agents.types import Experiment

    read = _read_config(args.config)
    if read is None:
        return 2
    path, text = read
    search = tuple(Path(p) for p in args.profile_search_path or [])
    exp = Experiment(path, text, args.slice, Path(args.profile) if args.profile else None, Path.cwd(), search)
    if args.json or not sys.stderr.isatty():
        doc, _ = run_report(exp, args.llm)
    else:
        from rich.console import Console

        with Console(stderr=True).status("analyzing") as status:
            doc, _ = run_report(exp, args.llm, progress=lambda m: status.update(m))
    if args.plot:
        from server.presentation.roofline_chart import write

        try:
            write(doc, Path(args.plot), analyze(path, text, default_slice=args.slice), args.plot_theme)
        except ValueError as e:
            print(f"asap: --plot: {e}", file=sys.stderr)
            return 2
    if args.json:
        print(json.dumps(doc.to_json(), indent=2))  # the shape: schema/analyze.schema.json
    else:
        _analyze_human(doc)
        if args.plot:
            print(f"roofline chart: {args.plot}")
    errors = any(f.severity == "error" for f in doc.findings)
    return 1 if errors else 0


def _verify_human(entry: dict[str, Any]) -> None:
    r = entry["result"]
    changes = ", ".join(f"{k}={v}" for k, v in entry["overrides"].items() if v != 1) or "as written"
    print(f"== {entry['label']} ({changes}) on {r['slice'] or '?'}: {r['status']}")
    print(f"   {r['message']}")
    c, e = r["compiled"], r["estimate"]
    if c is None:
        if e is not None:
            print(
                f"   estimate: {_gib(e['memory_per_chip_bytes'])} per chip, {'fits' if e['fits'] else 'does not fit'}"
            )
        return
    print(f"   {'':<26}{'estimate':>14}{'compiler':>14}")
    print(
        f"   {'memory per chip':<26}{_gib(e and e['memory_per_chip_bytes']):>14}{_gib(c['memory_per_chip_bytes']):>14}"
    )
    for part in sorted(c["components"]):
        print(f"   {'  ' + part:<26}{'':>14}{_gib(c['components'][part]):>14}")
    axes = sorted(set(c["collectives_by_axis"]) | set((e or {}).get("collectives_by_axis", {})))
    for a in axes:
        ev = sum((e or {}).get("collectives_by_axis", {}).get(a, {}).values()) if e else None
        cv = sum(c["collectives_by_axis"].get(a, {}).values())
        print(f"   {'collectives on ' + a:<26}{_gib(ev):>14}{_gib(cv):>14}")
    how = f", extrapolated from {c['layers_compiled']} of {c['layers']} layers" if c["extrapolated"] else ""
    print(
        f"   compiled in {c['compile_s']:.1f} s{how}{' (cached)' if r['cached'] else ''}; "
        f"libtpu {r['versions'].get('libtpu')}, jax {r['versions'].get('jax')}"
    )
    for d in r["disagreements"]:
        print(f"   ! {d['message']}")


def cmd_verify(args: argparse.Namespace) -> int:
    from server.presentation import verification

    read = _read_config(args.config)
    if read is None:
        return 2
    path, text = read
    an = analyze(path, text, default_slice=args.slice)
    base = _mesh_arg(args.mesh)
    if base is None:
        return 2
    todo = [verification.Target("current mesh" if not base else "mesh", base)]
    if args.proposals:
        from server.agents.coordinator import run_report
        from server.agents.types import Experiment

        doc, _ = run_report(Experiment(path, text, args.slice, None, Path.cwd()), "off")
        todo += verification.targets(doc, include_current=False)

    def progress(message: str, frac: float | None) -> None:
        if not args.json and sys.stderr.isatty():
            print(f"\r\033[K{message}"[:200], end="", file=sys.stderr, flush=True)

    out = verification.verify_all(
        an.config,
        todo,
        args.slice,
        args.max_layers,
        args.timeout,
        progress=progress,
        maxtext_python=args.maxtext_python or os.environ.get("ASAP_MAXTEXT_PYTHON") or None,
    )
    if not args.json and sys.stderr.isatty():
        print("\r\033[K", end="", file=sys.stderr)
    if args.json:
        print(json.dumps(out[0]["result"] if len(out) == 1 else {"results": out}, indent=2))
    else:
        for entry in out:
            _verify_human(entry)
    statuses = [e["result"]["status"] for e in out]
    if any(s in ("unavailable", "error") for s in statuses):
        return 2
    return 1 if statuses[0] != "ok" else 0


def cmd_outcome(args: argparse.Namespace) -> int:
    from server.profiles.profile import ProfileError
    from server.services import experiments

    read = _read_config(args.config)
    if read is None:
        return 2
    path, text = read
    if (args.experiment is None) != (args.proposal is None):
        print("asap outcome: --experiment and --proposal go together", file=sys.stderr)
        return 2
    an = analyze(path, text, default_slice=args.slice)
    try:
        measured = experiments.measure(an, Path(args.profile))
        out = experiments.record_outcome(an, path, measured, args.experiment, args.proposal)
    except (experiments.OutcomeError, ProfileError) as e:
        print(f"asap outcome: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    sp, psp = out["measured_speedup"], out["predicted_speedup"]
    print(f"outcome of proposal {out['rank']} (experiment {out['experiment_id']}) on {out['slice']}")
    print(
        f"  step time: predicted {out['predicted_step_s']:.4g} s, measured {out['measured_step_s']:.4g} s "
        f"({out['step_error']:+.1%} error)"
    )
    if sp is not None:
        verdict = "delivered" if out["delivered"] else "not delivered"
        print(f"  speedup:   predicted x{psp:.2f}, measured x{sp:.2f}: {verdict}")
    else:
        print("  speedup:   no measured baseline (the analysis had no profile of the mesh before)")
    print(f"  bottleneck: {out['bottleneck_before']} -> {out['bottleneck_after']}")
    print(f"  knowledge record: {out['record']}")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    from server.services import experiments

    rec = experiments.track_record()
    if args.json:
        print(json.dumps(rec, indent=2))
        return 0
    print(
        f"ASAP's track record: {rec['outcomes']} outcomes of applied proposals ({rec['with_baseline']} with a "
        "measured baseline)"
    )
    for g, d in rec["per_generation"].items():
        st, mem = d["step_time_error"], d["memory_error"]
        line = f"  {g}: {d['outcomes']} outcomes"
        if st["n"]:
            line += f"; step time |error| median {st['median_abs']:.1%}, p90 {st['p90_abs']:.1%}"
        if mem["n"]:
            line += f"; memory |error| median {mem['median_abs']:.1%}"
        print(line)
    print("  reliability (stated confidence -> delivered the predicted direction):")
    for b in rec["reliability"]:
        if b["n"]:
            print(f"    {b['stated']:>9}: n={b['n']:<3} stated {b['mean_stated']:.0%}, delivered {b['delivered']:.0%}")
    print(f"  confidence shown to users: {rec['calibration']['note']}")
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    from server.config.resolve import load
    from server.perf import arith, model_summary

    try:
        if args.config:
            read = _read_config(args.config)
            if read is None:
                return 2
            path, text = read
            summaries = [model_summary.of_config(load(path, text, maxtext_path=args.maxtext_path))]
        else:
            summaries = model_summary.catalog(args.maxtext_path)
    except arith.ArithError as e:
        print(f"asap: cannot price the model: {e.key}: {e}", file=sys.stderr)
        return 1
    if args.name:
        exact = [s for s in summaries if s.name == args.name]
        summaries = exact or [s for s in summaries if args.name in s.name]
    if args.json:
        print(json.dumps([s.to_json() for s in summaries], indent=1))
        return 0
    if args.config or len(summaries) == 1:
        for s in summaries:
            print(s.text())
        return 0
    print(f"{'model':<28} {'decoder_block':<18} {'layers':>6} {'params':>9} {'active':>9}  structure")
    for s in summaries:
        active = f"{s.active / 1e9:8.2f}B" if s.arch.moe else f"{'':9}"
        structure = s.arch.summary().split(": ", 1)[-1]
        print(f"{s.name:<28} {s.arch.decoder_block:<18} {s.arch.layers:>6} {s.total / 1e9:8.2f}B {active}  {structure}")
    origin = {s.source.rsplit("@", 1)[-1] for s in summaries if "@" in s.source}
    print(f"{len(summaries)} models; MaxText model files at {', '.join(sorted(origin)) or 'the given checkout'}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="asap", description="ASAP: performance advisor for MaxText configs on TPU")
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="validate the sharding mesh of MaxText configs for their TPU slice")
    c.add_argument("configs", nargs="+", metavar="CONFIG.yml")
    c.add_argument("--json", action="store_true", help="machine-readable output (see README)")
    c.add_argument("--slice", metavar="NAME", help="slice to assume when a config declares none (e.g. v5e-256)")
    c.add_argument("--maxtext-path", metavar="PATH", action=MaxTextPathAction, help=MAXTEXT_PATH_HELP)
    c.set_defaults(func=cmd_check)
    e = sub.add_parser("estimate", help="roofline, memory, collectives, step time and MFU of a config on its slice")
    e.add_argument("config", metavar="CONFIG.yml")
    e.add_argument(
        "--mesh", metavar="KEY=V,...", help="override keys, e.g. ici_fsdp_parallelism=64,ici_tensor_parallelism=4"
    )
    e.add_argument("--slice", metavar="NAME", help="slice to assume when the config declares none")
    e.add_argument("--json", action="store_true", help="machine-readable output (see README)")
    e.add_argument("--top", type=int, default=0, metavar="N", help="also list the N fastest valid meshes of the slice")
    e.add_argument("--maxtext-path", metavar="PATH", action=MaxTextPathAction, help=MAXTEXT_PATH_HELP)
    e.set_defaults(func=cmd_estimate)
    pr = sub.add_parser("profile", help="KPIs, top ops, collectives and bottleneck verdict of an XProf profile")
    pr.add_argument("path", metavar="PATH", help="a .xplane.pb, a run directory, or a directory of exported tool JSON")
    pr.add_argument(
        "--config", metavar="CONFIG.yml", help="compare with this config's declared slice, mesh and estimate"
    )
    pr.add_argument("--json", action="store_true", help="machine-readable output (see README)")
    pr.add_argument("--maxtext-path", metavar="PATH", action=MaxTextPathAction, help=MAXTEXT_PATH_HELP)
    pr.set_defaults(func=cmd_profile)
    an = sub.add_parser("analyze", help="diagnose a config (and its profile) and propose up to three better meshes")
    an.add_argument("config", metavar="CONFIG.yml")
    an.add_argument("--profile", metavar="PATH", help="an XProf profile to use instead of the config's link")
    an.add_argument("--slice", metavar="NAME", help="slice to assume when the config declares none")
    an.add_argument(
        "--profile-search-path",
        action="append",
        metavar="DIR",
        help="where <run_name>/tensorboard/plugins/profile may be (repeatable; like asap.profileSearchPaths)",
    )
    an.add_argument("--llm", choices=["off", "auto"], default="off", help="auto: Claude when a key is set")
    an.add_argument("--maxtext-path", metavar="PATH", action=MaxTextPathAction, help=MAXTEXT_PATH_HELP)
    an.add_argument("--json", action="store_true", help="machine-readable output (see README)")
    an.add_argument("--plot", metavar="FILE", help="also write the roofline chart (.svg or .png)")
    an.add_argument("--plot-theme", choices=("light", "dark"), default="light", help="colours of --plot")
    an.set_defaults(func=cmd_analyze)
    ve = sub.add_parser("verify", help="compile the config's train step for its TPU slice (libtpu, no TPU) and compare")
    ve.add_argument("config", metavar="CONFIG.yml")
    ve.add_argument(
        "--mesh", metavar="KEY=V,...", help="override keys, e.g. ici_fsdp_parallelism=8,ici_tensor_parallelism=2"
    )
    ve.add_argument("--proposals", action="store_true", help="also compile each of `asap analyze`'s proposals")
    ve.add_argument("--slice", metavar="NAME", help="slice to assume when the config declares none")
    ve.add_argument("--max-layers", type=int, default=4, metavar="N", help="compile at most N layers, extrapolate")
    ve.add_argument("--timeout", type=float, default=900.0, metavar="S", help="stop a compile after S seconds")
    ve.add_argument("--maxtext-path", metavar="PATH", action=MaxTextPathAction, help=MAXTEXT_PATH_HELP)
    ve.add_argument(
        "--maxtext-python",
        metavar="PYTHON",
        help="compile MaxText's own train step with this interpreter's MaxText (default: $ASAP_MAXTEXT_PYTHON; "
        "without it, ASAP's reference program)",
    )
    ve.add_argument("--json", action="store_true", help="machine-readable output (see README)")
    ve.set_defaults(func=cmd_verify)
    oc = sub.add_parser("outcome", help="record what an applied proposal did, from a profile of the changed config")
    oc.add_argument("config", metavar="CONFIG.yml")
    oc.add_argument("--profile", required=True, metavar="PATH", help="a profile of the run with the applied proposal")
    oc.add_argument("--experiment", metavar="ID", help="the analysis whose proposal was applied (with --proposal)")
    oc.add_argument("--proposal", type=int, metavar="N", help="which proposal was applied (with --experiment)")
    oc.add_argument("--slice", metavar="NAME", help="slice to assume when the config declares none")
    oc.add_argument("--maxtext-path", metavar="PATH", action=MaxTextPathAction, help=MAXTEXT_PATH_HELP)
    oc.add_argument("--json", action="store_true")
    oc.set_defaults(func=cmd_outcome)
    sts = sub.add_parser("stats", help="ASAP's track record: prediction errors and confidence reliability")
    sts.add_argument("--json", action="store_true")
    sts.set_defaults(func=cmd_stats)
    mo = sub.add_parser("models", help="MaxText's models as ASAP prices them: block structure, parameters, active")
    mo.add_argument("name", nargs="?", default="", help="only the models whose name contains this")
    mo.add_argument("--config", metavar="CONFIG.yml", help="the model a config resolves to (model file, overrides)")
    mo.add_argument("--json", action="store_true", help="machine-readable output (see README)")
    mo.add_argument("--maxtext-path", metavar="PATH", action=MaxTextPathAction, help=MAXTEXT_PATH_HELP)
    mo.set_defaults(func=cmd_models)
    kb = sub.add_parser("kb", help="the knowledge store: build, search, similar, add-record, stats")
    kb.add_argument("--kb", metavar="DIR", help="knowledge content directory (default: $ASAP_KB_DIR or the repo's kb/)")
    kb.add_argument("--index", metavar="PATH", help="index file (default: $ASAP_KB_PATH or the cache's kb.sqlite)")
    ks = kb.add_subparsers(dest="kb_command", required=True)
    ks.add_parser("build", help="(re)build the index from the content directory")
    se = ks.add_parser("search", help="hybrid search (BM25 + vectors) over notes and records")
    se.add_argument("query")
    se.add_argument("--k", type=int, default=5)
    se.add_argument("--generation", choices=["v4", "v5e", "v5p", "v6e", "tpu7x"])
    se.add_argument("--family", help="model family, e.g. llama, mixtral")
    se.add_argument("--axis", help="parallelism axis, e.g. fsdp, tensor, expert")
    se.add_argument("--json", action="store_true")
    si = ks.add_parser("similar", help="past optimizations closest to a situation")
    si.add_argument("--params-b", type=float, required=True, help="model size in billions of parameters")
    si.add_argument("--slice", required=True, help="e.g. v6e-256")
    si.add_argument("--slices", type=int, default=1)
    si.add_argument("--bottleneck", choices=["compute", "hbm", "communication", "memory", "input", "host"])
    si.add_argument("--mesh", metavar="KEY=V,...", help="the current mesh, e.g. ici_fsdp_parallelism=256")
    si.add_argument("--k", type=int, default=3)
    si.add_argument("--json", action="store_true")
    ad = ks.add_parser("add-record", help="validate an optimization record, add it to kb/history and reindex")
    ad.add_argument("file", metavar="FILE.yaml")
    ad.add_argument("--force", action="store_true", help="replace a record with the same id")
    st = ks.add_parser("stats", help="what the index holds")
    st.add_argument("--json", action="store_true")
    kb.set_defaults(func=cmd_kb)
    return p


def main(argv: list[str] | None = None) -> int:
    import logging

    logging.getLogger("asap").setLevel(logging.WARNING)  # the CLI prints its own report; the editor wants the log
    args = build_parser().parse_args(argv)
    return int(args.func(args))


def run() -> None:
    """Console-script entry point."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:  # `asap check ... | head`
        sys.stderr.close()
        code = 0
    sys.exit(code)


if __name__ == "__main__":
    run()
