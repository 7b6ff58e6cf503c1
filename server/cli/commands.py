"""The `asap` commands: each reads its inputs, calls the services, agents, cost model or knowledge store, and
prints the typed result through server/cli/render.py, or its JSON document with `--json`. Each returns the exit
status (server/cli/main.py's docstring says which).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from server.cli import render
from server.common.findings import Severity
from server.config.mesh import check
from server.config.resolve import parse_override, with_overrides
from server.config.source import YamlSyntaxError
from server.perf.enumeration import top_alternatives
from server.perf.estimate import EstimateError, estimate
from server.profiles.profile import ProfileError
from server.services.analysis import Analysis, analyze
from server.services.profile_analysis import analyze_tools


def _print_json(doc: object, indent: int = 2) -> None:
    print(json.dumps(doc, indent=indent))


def _read_config(name: str) -> tuple[Path, str] | None:
    """The config's path and text, or None after saying why it cannot be read (exit status 2)."""
    path = Path(name)
    try:
        return path, path.read_text(encoding="utf-8")
    except OSError as e:
        print(f"asap: cannot read {name}: {e.strerror}", file=sys.stderr)
        return None


def _analysed(args: argparse.Namespace, mesh: bool = False) -> tuple[Path, str, Analysis, dict[str, Any]] | None:
    """`args.config` read and analysed for `args.slice`, with `args.mesh` parsed when `mesh` (else {}); None after
    saying why the config cannot be read or the mesh does not parse (exit status 2)."""
    read = _read_config(args.config)
    if read is None:
        return None
    path, text = read
    an = analyze(path, text, default_slice=args.slice)
    overrides = _mesh_arg(args.mesh) if mesh else {}
    return None if overrides is None else (path, text, an, overrides)


def _mesh_arg(text: str | None) -> dict[str, Any] | None:
    """`--mesh k=v,...` as config overrides ({} when absent); None after saying why it does not parse."""
    if not text:
        return {}
    try:
        return parse_override(text)
    except (ValueError, YamlSyntaxError) as e:
        print(f"asap: --mesh: {e}", file=sys.stderr)
        return None


def cmd_check(args: argparse.Namespace) -> int:
    results = []
    for name in args.configs:
        read = _read_config(name)
        if read is None:
            return 2
        results.append(analyze(*read, default_slice=args.slice))
    if args.json:
        _print_json(results[0].to_json() if len(results) == 1 else [r.to_json() for r in results])
    else:
        print("\n\n".join(render.check(r) for r in results))
    failed = any(f.severity == Severity.ERROR for r in results for f in r.diagnostics)
    return 1 if failed else 0


def cmd_estimate(args: argparse.Namespace) -> int:
    loaded = _analysed(args, mesh=True)
    if loaded is None:
        return 2
    path, _, an, overrides = loaded
    cfg = an.config
    if overrides:
        cfg = with_overrides(cfg, overrides)
    chk = check(cfg, args.slice)
    errors = [f for f in [*cfg.findings, *chk.findings] if f.severity == Severity.ERROR]
    if errors:
        for f in errors:
            print(render.finding_line(f, path), file=sys.stderr)
        return 1
    try:
        est = estimate(cfg, chk)
    except EstimateError as e:
        print(f"{path}: error: {e}" + (f" (key {e.key})" if e.key else ""), file=sys.stderr)
        return 1
    ranked = top_alternatives(cfg, est, args.top) if args.top else None
    if args.json:
        doc = est.to_json()
        if ranked is not None:
            doc["alternatives"] = [r.to_json() for r in ranked]
        _print_json(doc)
    else:
        print(render.estimate(path, est))
        if ranked is not None:
            print(render.alternatives(est.layout.slice.name, ranked))
    return 0 if est.memory.launches else 1  # tight is a warning, as in check and analyze


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
        _print_json(report.to_json())
    else:
        print(render.profile(report, findings))
    return 0


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
        _print_json(doc.to_json())  # the shape: schema/analyze.schema.json
    else:
        render.analysis(doc)
        if args.plot:
            print(f"roofline chart: {args.plot}")
    errors = any(f.severity == "error" for f in doc.findings)
    return 1 if errors else 0


def cmd_verify(args: argparse.Namespace) -> int:
    from server.compile.verify import VerifyStatus
    from server.presentation import verification

    loaded = _analysed(args, mesh=True)
    if loaded is None:
        return 2
    path, text, an, base = loaded
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
        _print_json(out[0].result.to_json() if len(out) == 1 else {"results": [e.to_json() for e in out]})
    else:
        for entry in out:
            print(render.verification(entry))
    statuses = [e.result.status for e in out]
    if any(s in (VerifyStatus.UNAVAILABLE, VerifyStatus.ERROR) for s in statuses):
        return 2
    return 1 if statuses[0] != VerifyStatus.OK else 0


def cmd_outcome(args: argparse.Namespace) -> int:
    from server.services import experiments

    loaded = _analysed(args)
    if loaded is None:
        return 2
    path, _, an, _ = loaded
    if (args.experiment is None) != (args.proposal is None):
        print("asap outcome: --experiment and --proposal go together", file=sys.stderr)
        return 2
    try:
        measured = experiments.measure(an, Path(args.profile))
        out = experiments.record_outcome(an, path, measured, args.experiment, args.proposal)
    except (experiments.OutcomeError, ProfileError) as e:
        print(f"asap outcome: {e}", file=sys.stderr)
        return 1
    if args.json:
        _print_json(out.model_dump())
    else:
        print(render.outcome(out))
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    from server.services import experiments

    rec = experiments.track_record()
    if args.json:
        _print_json(rec)
    else:
        print(render.track_record(rec))
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
        _print_json([s.to_json() for s in summaries], indent=1)
    elif args.config or len(summaries) == 1:
        for s in summaries:
            print(s.text())
    else:
        print(render.models_table(summaries))
    return 0


def cmd_kb(args: argparse.Namespace) -> int:
    from server.kb.records import RecordError
    from server.kb.store import KbError, KnowledgeStore, Situation, add_record

    def notices() -> None:
        for n in store.notices:
            print(f"note: {n}", file=sys.stderr)

    try:
        store = KnowledgeStore(
            path=Path(args.index) if args.index else None,
            root=Path(args.kb) if args.kb else None,
        )
        if args.kb_command == "build":
            stats = store.build()
            notices()
            print(
                f"indexed {stats['documents']} notes, {stats['records']} records, {stats['chunks']} chunks from "
                f"{store.root} into {store.path} in {stats['total_s']:.2f} s (embedding {stats['embed_s']:.2f} s)"
            )
        elif args.kb_command == "search":
            store.ensure()
            notices()
            results = store.search(args.query, args.k, args.generation, args.family, args.axis)
            if args.json:
                _print_json({"query": args.query, "results": [r.to_json() for r in results]})
            elif results:
                print(render.kb_results(results))
        elif args.kb_command == "similar":
            store.ensure()
            mesh = {k: int(v) for k, v in parse_override(args.mesh).items()} if args.mesh else {}
            sit = Situation(args.params_b, args.slice, args.bottleneck, mesh, args.slices)
            found = store.similar_history(sit, args.k)
            if args.json:
                out = [{"id": r.id, "title": r.title, "score": round(sc, 4), "why": why} for r, sc, why in found]
                _print_json({"results": out})
            elif found:
                print(render.kb_similar(found))
        elif args.kb_command == "add-record":
            added = add_record(store, Path(args.file), force=args.force)
            print(f"added {added.record.id} to {added.path}; index rebuilt ({added.stats['records']} records)")
        elif args.kb_command == "stats":
            store.ensure()
            st = store.stats()
            if args.json:
                _print_json(st)
            elif st:
                print(render.key_values(st))
    except (RecordError, KbError, OSError) as e:
        print(f"asap: {e}", file=sys.stderr)
        return 2
    return 0
