"""The `asap` commands: each reads its inputs, calls the services, agents, cost model or knowledge store, and
prints the typed result through server/cli/render.py, or its JSON document with `--json`. Each returns the exit
status (server/cli/main.py's docstring has the table): a command that cannot do its work returns `fail(args,
CliError(...))`, which says why on stderr and, with `--json`, prints `{"errors": [...]}` on stdout, so that every
exit path of a `--json` run prints one JSON document.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from server.cli import documents, launch, render
from server.common.codes import DiagCode
from server.common.findings import Finding, Severity
from server.config.mesh import check
from server.config.resolve import Config, load, parse_override, with_overrides
from server.config.run_flags import CLI_HOW, FlagSource
from server.config.source import YamlSyntaxError, read_text
from server.perf.enumeration import top_alternatives
from server.perf.estimate import EstimateError, estimate
from server.profiles.profile import ProfileError
from server.services.analysis import Analysis, analyze, offered_fixes
from server.services.profile_analysis import analyze_tools

if TYPE_CHECKING:
    from server.agents.report import AnalysisReport

EXIT_CLEAN = 0  # nothing to report (warnings allowed)
EXIT_FINDINGS = 1  # the config has errors (an invalid mesh, a mesh that does not fit, no estimate), or the
# command's own verdict is negative (verify: does not compile or fit; outcome: not a run of the proposal)
EXIT_UNREADABLE = 2  # an input cannot be read, or the command line is wrong
EXIT_INTERNAL = 3  # a bug in ASAP: a one-line message (the traceback with --debug)


@dataclass(frozen=True)
class CliError:
    """Why a command (or one file of it) could not do its work. `kind`: "read" (an input cannot be read),
    "usage" (the command line), "internal" (a bug in ASAP), or the command's own ("outcome", "model", "kb")."""

    kind: str
    message: str
    file: str | None = None
    status: int = EXIT_UNREADABLE
    prog: str = "asap"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message, **({"file": self.file} if self.file else {})}

    def line(self) -> str:
        return f"{self.prog}: {self.message}"


def fail(args: argparse.Namespace, *errors: CliError) -> int:
    """Report `errors` (stderr; `{"errors": [...]}` on stdout with --json); the exit status (the worst)."""
    for e in errors:
        print(e.line(), file=sys.stderr)
    if getattr(args, "json", False):
        _print_json({"errors": [e.to_json() for e in errors]}, documents.ErrorsDocument)
    return max(e.status for e in errors)


def internal_error(e: BaseException, debug: bool, file: str | None = None) -> CliError:
    """An exception ASAP did not expect, as one line (the traceback goes to stderr first when `debug`)."""
    if debug:
        traceback.print_exception(e, file=sys.stderr)
    what = (str(e).strip().splitlines() or [""])[0][:300]
    where = f" on {file}" if file else ""
    hint = "" if debug else "; --debug prints the traceback"
    return CliError(
        "internal",
        f"internal error{where}: {type(e).__name__}{': ' + what if what else ''} (a bug in ASAP{hint})",
        file,
        EXIT_INTERNAL,
    )


# Where `--json` documents go: stdout (None), or a function given them before they are serialised (`json_document`).
_JSON_SINK: ContextVar[Callable[[Any], None] | None] = ContextVar("asap_json_sink", default=None)
# A document's text given instead of its file (`json_document`'s `text`): (the name it goes by, its text).
_GIVEN_TEXT: ContextVar[tuple[str, str] | None] = ContextVar("asap_given_text", default=None)


def _print_json(doc: Any, model: type[BaseModel] | None = None, indent: int = 2) -> None:
    """Print the command's `--json` document, checked against its model (server/cli/documents.py) when it has one:
    the schema `asap mcp` publishes for it."""
    if model is not None:
        documents.checked(model, doc)
    sink = _JSON_SINK.get()
    if sink is not None:
        sink(doc)
        return
    print(json.dumps(doc, indent=indent))


def json_document(
    command: Callable[[argparse.Namespace], int], args: argparse.Namespace, text: tuple[str, str] | None = None
) -> tuple[int, Any]:
    """Run `command` (a `cmd_*` of this module) as `--json` would, and return its exit status and the document it
    prints, unserialised (None if it printed none): `asap mcp`'s tools answer with exactly what the CLI prints,
    from the same code. `text`: (name, text), a config's text read as if it were the file `name`. The stderr lines
    a command writes are still written (the MCP server's stderr is its log); nothing goes to stdout."""
    got: list[Any] = []
    args.json = True
    sink = _JSON_SINK.set(got.append)
    given = _GIVEN_TEXT.set(text)
    try:
        status = command(args)
    finally:
        _GIVEN_TEXT.reset(given)
        _JSON_SINK.reset(sink)
    return status, (got[-1] if got else None)


def _read_config(name: str) -> tuple[Path, str] | CliError:
    """The config's path and text, or why it cannot be read (a text `json_document` was given for `name` is taken
    as the file's)."""
    path = Path(name)
    given = _GIVEN_TEXT.get()
    if given is not None and given[0] == name:
        return path, given[1]
    try:
        return path, read_text(path)  # located: "not UTF-8 (byte 0xe9 at line 2)", "too large: ..."
    except OSError as e:
        return CliError("read", f"cannot read {name}: {e.strerror or e}", name)


def _analysed(
    args: argparse.Namespace, mesh: bool = False, config: str | None = None
) -> tuple[Path, str, Analysis, dict[str, Any]] | CliError:
    """`config` (default `args.config`) read and analysed for `args.slice`, with `args.mesh` parsed when `mesh`
    (else {}); or why the config cannot be read or the mesh does not parse."""
    read = _read_config(config if config is not None else args.config)
    if isinstance(read, CliError):
        return read
    overrides = _mesh_arg(args.mesh) if mesh else {}
    if isinstance(overrides, CliError):
        return overrides
    path, text = read
    if launch.is_launch_file(path, text):  # one run of a launch file: its document is the config (the run's keys
        # resolve as its command line) and the compile is the command's (verify.maxtext_source)
        la = launch.launch_analysis(path, text, args, _flags_arg(args))
        if isinstance(la, str):
            return CliError("usage", la, str(path))
        if len(la.runs) != 1:
            what = "no MaxText run" if not la.runs else f"{len(la.runs)} runs: pick one with --run N"
            return CliError("usage", f"{path} has {what}", str(path))
        ra = la.runs[0]
        return path, ra.document.text, ra.analysis, overrides
    if getattr(args, "run", None) is not None:
        return CliError("usage", f"--run picks a run of a launch file; {path} is a YAML config", str(path))
    return path, text, analyze(path, text, default_slice=args.slice, flags=_flags_arg(args)), overrides


def _flags_arg(args: argparse.Namespace) -> FlagSource | None:
    """`--xla-flags` as the run's flags (None when not given; `--xla-flags ""` states none: libtpu's defaults,
    over the config's comment)."""
    return FlagSource.given("cli", getattr(args, "xla_flags", None))


def _mesh_arg(text: str | None) -> dict[str, Any] | CliError:
    """`--mesh k=v,...` as config overrides ({} when absent), or why it does not parse."""
    if not text:
        return {}
    try:
        return parse_override(text)
    except (ValueError, YamlSyntaxError) as e:
        return CliError("usage", f"--mesh: {e}")


def cmd_check(args: argparse.Namespace) -> int:
    """Each file on its own: one that cannot be read, or that ASAP fails on, is an error entry of its own (exit
    status 2 or 3) and the others are reported as usual."""
    docs: list[dict[str, Any]] = []
    texts: list[str] = []
    status = EXIT_CLEAN
    for name in args.configs:
        done = _check_one(args, name)
        if isinstance(done, CliError):
            print(done.line(), file=sys.stderr)
            docs.append({"file": name, "errors": [done.to_json()]})
            status = max(status, done.status)
            continue
        if isinstance(done[0], int):  # a launch file: its runs' status and report
            status = max(status, done[0])
            (docs if isinstance(done[1], dict) else texts).append(done[1])  # type: ignore[arg-type]
            continue
        an, out = done
        if isinstance(out, dict):
            docs.append(out)
        else:
            texts.append(out)
        status = max(status, EXIT_FINDINGS if any(f.severity == Severity.ERROR for f in an.diagnostics) else 0)
    if args.json:
        for d in docs:  # each file's document, or why it has none
            documents.checked(documents.FileErrors if "errors" in d else documents.CheckDocument, d)
        _print_json(docs[0] if len(docs) == 1 else docs)
    elif texts:
        print("\n\n".join(texts))
    return status


def _check_one(
    args: argparse.Namespace, name: str
) -> tuple[Analysis, dict[str, Any] | str] | tuple[int, dict[str, Any] | str] | CliError:
    """One file of `asap check`: its analysis and report (the JSON document or the text), or why there is none. A
    launch file (server/cli/launch.py): its exit status and the report of its runs."""
    read = _read_config(name)
    if isinstance(read, CliError):
        return read
    if launch.is_launch_file(*read):
        try:
            la = launch.launch_analysis(*read, args, _flags_arg(args))
        except Exception as e:
            return internal_error(e, args.debug, name)
        if isinstance(la, str):
            return CliError("usage", la, name)
        total = len(launch.analyze_launch(*read).runs) if getattr(args, "run", None) else len(la.runs)
        status = EXIT_FINDINGS if launch.errors_in(la) else EXIT_CLEAN
        return status, (launch.check_json(la) if args.json else launch.check_text(la, total))
    elif getattr(args, "run", None) is not None:
        return CliError("usage", f"--run picks a run of a launch file; {name} is a YAML config", name)
    try:
        an = analyze(*read, default_slice=args.slice, flags=_flags_arg(args))
        an = offered_fixes(an, read[1], default_slice=args.slice)
        return an, (an.to_json() if args.json else render.check(an))
    except Exception as e:  # this file's failure is reported with it; the other files are not affected
        return internal_error(e, args.debug, name)


def cmd_estimate(args: argparse.Namespace) -> int:
    """The estimate of the mesh asked about: the config's, with `--mesh` over it. That mesh is checked as a
    config of its own (the file's mesh is never analysed when --mesh replaces it); when it has errors, they are
    the report (with --json, the `asap check --json` document of that config, the --mesh keys under
    `overrides`)."""
    read = _read_config(args.config)
    if isinstance(read, CliError):
        return fail(args, read)
    overrides = _mesh_arg(args.mesh)
    if isinstance(overrides, CliError):
        return fail(args, overrides)
    path, text = read
    if launch.is_launch_file(path, text):
        la = launch.launch_analysis(path, text, args, _flags_arg(args))
        if isinstance(la, str):
            return fail(args, CliError("usage", la, args.config))
        status, out = launch.estimate_runs(la, overrides, args.json, len(la.runs), args.slice)
        _print_json(out, documents.LaunchDocument) if args.json else print(out)
        return status
    if getattr(args, "run", None) is not None:
        return fail(args, CliError("usage", f"--run picks a run of a launch file; {args.config} is a YAML config"))
    cfg = load(path, text, flags=_flags_arg(args))
    if overrides:
        cfg = with_overrides(cfg, overrides)
    chk = check(cfg, args.slice)
    findings = [*cfg.findings, *chk.findings]
    errors = [f for f in findings if f.severity == Severity.ERROR]
    if not errors:
        try:
            est = estimate(cfg, chk)
        except EstimateError as e:
            errors = [_no_estimate(cfg, e)]
            findings.append(errors[0])
    if errors:
        findings.sort(key=lambda f: (f.span.line, f.span.column, f.code))
        about = [_override_of(f, cfg, overrides, args.mesh) for f in findings]
        if args.json:
            doc = Analysis(path, cfg, chk).to_json()
            doc["findings"] = [
                f.to_json() | ({"override": o} if o else {}) for f, o in zip(findings, about, strict=True)
            ]
            doc["overrides"] = overrides
            doc["xla_flags"] = cfg.run_flags.to_json()
            _print_json(doc, documents.CheckDocument)
        else:
            for f, o in zip(findings, about, strict=True):
                if f.severity == Severity.ERROR:  # located at the command line when it is about --mesh
                    line = (
                        f"--mesh {o}: {f.severity.label} {f.code}: {f.message}" if o else render.finding_line(f, path)
                    )
                    print(line, file=sys.stderr)
        return EXIT_FINDINGS
    ranked = top_alternatives(cfg, est, args.top) if args.top else None
    if args.json:
        doc = est.to_json()
        doc["xla_flags"] = cfg.run_flags.to_json()
        if ranked is not None:
            doc["alternatives"] = [r.to_json() for r in ranked]
        _print_json(doc, documents.EstimateDocument)
    else:
        print(render.estimate(path, est))
        print(f"  {cfg.run_flags.hover_line(CLI_HOW)}")
        if ranked is not None:
            print(render.alternatives(est.layout.slice.name, ranked))
    return 0 if est.memory.launches else 1  # tight is a warning, as in check and analyze


def _override_of(f: Finding, cfg: Config, overrides: dict[str, Any], mesh: str | None) -> str | None:
    """The --mesh assignment a finding is about: its key's, or the whole --mesh for a finding on a parallelism key
    the file does not write (the asked mesh as a whole, located by default at the file's top); None when it is
    about the file."""
    if not overrides or f.key is None:
        return None
    if f.key in overrides:
        return f"{f.key}={overrides[f.key]}"
    return mesh if f.key.endswith("_parallelism") and cfg.entry(f.key) is None else None


def _no_estimate(cfg: Config, e: EstimateError) -> Finding:
    """The cost model's refusal as the finding the editor shows for it (ASAP129), an error here: there is no
    estimate to print."""
    key = e.key or "model_name"
    file, span = cfg.anchor(key)
    return Finding(DiagCode.NO_ESTIMATE, Severity.ERROR, f"No estimate: {e}", key, file, span)


def cmd_profile(args: argparse.Namespace) -> int:
    from server.profiles import gcs, profile_convert

    an = None
    if args.config:
        read = _read_config(args.config)
        if isinstance(read, CliError):
            return fail(args, read)
        an = analyze(*read, flags=_flags_arg(args))

    def progress(msg: str, frac: float | None) -> None:
        if not args.json and sys.stderr.isatty():
            print(f"\r{msg}{'' if frac is None else f' ({frac:.0%})'}\033[K", end="", file=sys.stderr, flush=True)

    try:
        pf = profile_convert.find_profile(args.path if gcs.is_gcs(args.path) else Path(args.path))  # gs:// listed
        tools, _ = profile_convert.load_tools(pf, progress)
        report, findings = analyze_tools(tools, an, pf.describe())
    except ProfileError as e:
        said = str(e) if isinstance(e, gcs.GcsError) else f"{args.path}: {e}"  # a gs:// error names its URL
        return fail(args, CliError("read", said, args.path))
    if not args.json and sys.stderr.isatty():
        print("\r\033[K", end="", file=sys.stderr)
    if args.json:
        _print_json(report.to_json(), documents.ProfileDocument)
    else:
        print(render.profile(report, findings))
    return 0


def cmd_analyze(args: argparse.Namespace) -> int:
    from server.agents.coordinator import run_report
    from server.agents.types import Experiment

    read = _read_config(args.config)
    if isinstance(read, CliError):
        return fail(args, read)
    path, text = read
    search = tuple(Path(p) for p in args.profile_search_path or [])
    profile = Path(args.profile) if args.profile else None
    if launch.is_launch_file(path, text):
        if args.plot:
            return fail(args, CliError("usage", "--plot: draw a launch file's run with `asap analyze FILE --run N`"))
        la = launch.launch_analysis(path, text, args, _flags_arg(args))
        if isinstance(la, str):
            return fail(args, CliError("usage", la, args.config))

        def report_of(ra: launch.RunAnalysis) -> AnalysisReport:
            # the run's document is a config of its own: the agents read it as MaxText reads the command
            exp = Experiment(path, ra.document.text, args.slice, profile, Path.cwd(), search, _flags_arg(args))
            doc, _ = run_report(exp, args.llm)
            doc = cached_verdicts(doc, path, ra.document.text, args.slice, exp.xla_flags)
            return launch.located_report(doc, ra)

        run_status, out = launch.analyze_runs(la, report_of, args.json)
        if args.json:
            _print_json(out, documents.LaunchDocument)
        return run_status
    elif getattr(args, "run", None) is not None:
        return fail(args, CliError("usage", f"--run picks a run of a launch file; {args.config} is a YAML config"))
    exp = Experiment(path, text, args.slice, profile, Path.cwd(), search, _flags_arg(args))
    if args.json or not sys.stderr.isatty():
        doc, _ = run_report(exp, args.llm)
    else:
        from rich.console import Console

        with Console(stderr=True).status("analyzing") as status:
            doc, _ = run_report(exp, args.llm, progress=lambda m: status.update(m))
    doc = cached_verdicts(doc, path, text, args.slice, exp.xla_flags)
    if args.plot:
        from server.presentation.roofline_chart import write

        try:
            an = analyze(path, text, default_slice=args.slice, flags=exp.xla_flags)
            write(doc, Path(args.plot), an, args.plot_theme)
        except ValueError as e:
            return fail(args, CliError("usage", f"--plot: {e}"))
    if args.json:
        _print_json(doc.to_json(), documents.AnalyzeDocument)  # the shape: schema/analyze.schema.json
    else:
        render.analysis(doc)
        if args.plot:
            print(f"roofline chart: {args.plot}")
    errors = any(f.severity == "error" for f in doc.findings)
    return 1 if errors else 0


def cached_verdicts(
    doc: AnalysisReport, path: Path, text: str, slice_name: str | None, flags: FlagSource | None = None
) -> AnalysisReport:
    """The report with the TPU compiler's verdicts ASAP's cache keeps for its proposals (from `asap verify
    --proposals` or the editor's Verify, with $ASAP_MAXTEXT_PYTHON's MaxText when set): a proposal the compiler
    rejected is withdrawn and its cached replacements take its place, as the editor shows it. Compiles nothing."""
    from server.presentation import verification

    if not any(not p.keep_current for p in doc.proposals):
        return doc
    try:
        advice = verification.verify_advice(
            analyze(path, text, default_slice=slice_name, flags=flags),
            doc,
            slice_name,
            maxtext_python=os.environ.get("ASAP_MAXTEXT_PYTHON") or None,
            cached_only=True,
            text=text,
        )
    except Exception as e:  # the cache is a convenience: the agents' report stands without it
        print(f"asap: the TPU compiler's cached verdicts could not be read ({type(e).__name__}: {e})", file=sys.stderr)
        return doc
    revised = advice.report
    if revised is None or not any(p.compiler is not None for p in [*revised.proposals, *(revised.withdrawn or [])]):
        return doc
    return revised


@dataclass
class _Verified:
    """One config of `asap verify`: its name on the command line, then either why it could not be verified
    (`error`) or its verification (`entries`, and with --proposals `withdrawn` and the compiler's `note`)."""

    name: str
    loaded: tuple[Path, str, Analysis, dict[str, Any]] | None = None
    error: CliError | None = None
    report: AnalysisReport | None = None
    entries: list[Any] | None = None
    withdrawn: list[Any] | None = None
    note: str | None = None

    def status(self) -> int:
        """This config's exit status (main.py's table): 2 when the compiler was unavailable or failed, else 1 when
        the config's own mesh does not compile, fit or place."""
        from server.compile.verify import VerifyStatus

        if self.error is not None:
            return self.error.status
        statuses = [e.result.status for e in self.entries or []]
        if any(s in (VerifyStatus.UNAVAILABLE, VerifyStatus.ERROR) for s in statuses):
            return 2
        return 1 if not statuses or statuses[0] != VerifyStatus.OK else 0

    def document(self, proposals: bool) -> dict[str, Any]:
        """What `asap verify CONFIG --json` prints for this config alone."""
        if self.error is not None:
            return {"errors": [self.error.to_json()]}
        entries = self.entries or []
        if proposals:
            return {
                "results": [e.to_json() for e in entries],
                "withdrawn": [e.to_json() for e in self.withdrawn or []],
                "compiler_note": self.note,
            }
        return dict(entries[0].result.to_json())

    def text(self) -> str:
        if self.error is not None:
            return f"   {self.error.line()}"
        out = [render.verification(entry) for entry in self.entries or []]
        if self.withdrawn:
            out.append(render.withdrawn(self.withdrawn, self.note))
        return "\n".join(out)


def cmd_verify(args: argparse.Namespace) -> int:
    """The TPU compiler's verdict on each config's mesh (or `--mesh`). With `--proposals`, as the editor's Verify does
    (verification.verify_advice): the current mesh first, then the agents' proposals, each the compiler rejects
    withdrawn and the engine's next candidates compiled in its place; printed current mesh first, then the proposals
    as they now stand, then the withdrawn ones with the compiler's words. Several configs: each verified on its own
    (one that cannot be read is an error of its own, the others go on), locally one after another, on Ray (`--ray`)
    all in one sweep; the exit status is the worst of them."""
    names: list[str] = list(args.configs)
    ray = getattr(args, "ray", None)
    if ray not in (None, "auto") and (ray.endswith((".yml", ".yaml")) or Path(ray).is_file()):
        # `asap verify --proposals --ray a.yml b.yml`: argparse took the first config for the cluster's address
        names.insert(0, ray)
        args.ray = "auto"
    if not names:
        return fail(args, CliError("usage", "the following arguments are required: CONFIG.yml", prog="asap verify"))
    several = len(names) > 1
    runs = [_load_for_verify(args, name, catch=several) for name in names]
    if not several and runs[0].error is not None:
        return fail(args, runs[0].error)
    if args.proposals and any(r.loaded is not None and r.loaded[3] for r in runs):
        return fail(
            args,
            CliError(
                "usage",
                "--proposals verifies the config's own mesh and its proposals: write the --mesh into the config "
                "(or verify the mesh alone without --proposals)",
            ),
        )
    if getattr(args, "ray", None) is not None and not args.proposals:
        return fail(args, CliError("usage", "--ray runs a sweep: use it with --proposals", prog="asap verify"))
    todo = [r for r in runs if r.loaded is not None]
    hook = getattr(args, "progress_hook", None)  # `asap mcp`'s progress notifications (json_document's caller)

    def progress_of(i: int) -> Any:
        """Progress on stderr (a terminal's; never with --json): with several configs verified one after another,
        prefixed by which (i: its index in `todo`; -1: none, one sweep counting every config's compiles)."""
        prefix = f"[{i + 1}/{len(todo)}] {todo[i].name}: " if several and i >= 0 else ""

        def progress(message: str, frac: float | None) -> None:
            if hook is not None:
                hook(f"{prefix}{message}", frac)
            if not args.json and sys.stderr.isatty():
                print(f"\r\033[K{prefix}{message}"[:200], end="", file=sys.stderr, flush=True)

        return progress

    maxtext_python = args.maxtext_python or os.environ.get("ASAP_MAXTEXT_PYTHON") or None
    if args.proposals:
        from server.agents.coordinator import run_report
        from server.agents.types import Experiment

        for r in todo:
            assert r.loaded is not None
            path, text, _, _ = r.loaded
            with _on_its_own(args, r, several):
                r.report, _ = run_report(Experiment(path, text, args.slice, None, Path.cwd()), "off")
        todo = [r for r in todo if r.error is None]
        if getattr(args, "ray", None) is not None:
            stopped = _verify_on_ray(args, todo, progress_of(-1), maxtext_python) if todo else None
            if stopped is not None:
                return stopped
        else:
            for i, r in enumerate(todo):
                with _on_its_own(args, r, several):
                    _verify_proposals_here(args, r, progress_of(i), maxtext_python)
    else:
        from server.presentation import verification

        for i, r in enumerate(todo):
            assert r.loaded is not None
            _, _, an, base = r.loaded
            with _on_its_own(args, r, several):
                r.entries = verification.verify_all(
                    an.config,
                    [verification.Target("current mesh" if not base else "mesh", base)],
                    args.slice,
                    args.max_layers,
                    args.timeout,
                    progress=progress_of(i),
                    cancel=getattr(args, "cancel", None),
                    maxtext_python=maxtext_python,
                )
    if not args.json and sys.stderr.isatty():
        print("\r\033[K", end="", file=sys.stderr)
    if not several:
        if args.json:
            _print_json(runs[0].document(args.proposals), documents.VerifyDocument)
        else:
            print(runs[0].text())
        return runs[0].status()
    status = max(r.status() for r in runs)
    if args.json:  # each config: its own exit status, and its one-config document or its errors
        docs: list[dict[str, Any]] = []
        for r in runs:
            doc: dict[str, Any] = {"file": r.name, "exit_status": r.status()}
            if r.error is not None:
                doc["errors"] = [r.error.to_json()]
            else:
                doc["report"] = r.document(args.proposals)
            docs.append(doc)
        _print_json({"configs": docs, "exit_status": status})
    else:
        print("\n\n".join(f"=== {r.name}\n{r.text()}" for r in runs))
    return status


def _load_for_verify(args: argparse.Namespace, name: str, catch: bool) -> _Verified:
    """One config of `asap verify`, read and analysed (or why not: said on stderr at once when `catch`, i.e. with
    several configs, and ASAP failing on it is that config's internal error, not the command's)."""
    try:
        loaded = _analysed(args, mesh=True, config=name)
    except Exception as e:
        if not catch:
            raise
        loaded = internal_error(e, args.debug, name)
    if isinstance(loaded, CliError):
        if catch:
            print(loaded.line(), file=sys.stderr)
        return _Verified(name, error=loaded)
    return _Verified(name, loaded)


@contextlib.contextmanager
def _on_its_own(args: argparse.Namespace, r: _Verified, several: bool) -> Iterator[None]:
    """With several configs, ASAP failing on one is that config's internal error (said on stderr at once), and the
    others go on; with one, the command's (main's exit status 3)."""
    try:
        yield
    except Exception as e:
        if not several:
            raise
        r.error = internal_error(e, args.debug, r.name)
        print(r.error.line(), file=sys.stderr)


def _verify_proposals_here(args: argparse.Namespace, r: _Verified, progress: Any, maxtext_python: str | None) -> None:
    from server.presentation import verification

    assert r.loaded is not None
    _, text, an, _ = r.loaded
    advice = verification.verify_advice(
        an,
        r.report,
        args.slice,
        max_layers=args.max_layers,
        timeout_s=args.timeout,
        progress=progress,
        cancel=getattr(args, "cancel", None),
        maxtext_python=maxtext_python,
        text=text,
    )
    _take(r, advice)


def _take(r: _Verified, advice: Any) -> None:
    r.entries, r.withdrawn = advice.entries, advice.withdrawn
    r.note = advice.report.compiler_note if advice.report is not None else None


def _verify_on_ray(
    args: argparse.Namespace, todo: list[_Verified], progress: Any, maxtext_python: str | None
) -> int | None:
    """Every config's verification in one sweep on the Ray cluster (every (config, mesh) a task at once); None when
    it ran, else the command's exit status (the cluster unreachable: 2; cancelled: 130)."""
    from server.compile.ray_sweep import RayUnavailable
    from server.presentation import ray_verification

    configs = []
    for r in todo:
        assert r.loaded is not None
        _, text, an, _ = r.loaded
        configs.append(ray_verification.SweepConfig(an, r.report, text))
    try:
        advices, sweep = ray_verification.verify_advices_on_ray(
            None if args.ray == "auto" else args.ray,
            configs,
            args.slice,
            max_layers=args.max_layers,
            timeout_s=args.timeout,
            progress=progress,
            maxtext_python=maxtext_python,
        )
    except RayUnavailable as e:
        return fail(args, CliError("verify", str(e), status=2, prog="asap verify"))
    except KeyboardInterrupt:
        print("\nasap: cancelled: the cluster's pending compiles were cancelled", file=sys.stderr)
        return 130
    for r, advice in zip(todo, advices, strict=True):
        _take(r, advice)
    if not args.json:
        print(render_sweep(sweep), file=sys.stderr)
    return None


def render_sweep(sweep: Any) -> str:
    """One line on what the Ray sweep did (compiled, cached, failed, wall time)."""
    twins = f", {sweep.twins} the same compile as another config's" if sweep.twins else ""
    line = (
        f"Ray sweep: {sweep.compiled} compiled on the cluster, {sweep.cached} from the cache{twins}, "
        f"{len(sweep.failed)} failed; {sweep.wall_s:.1f} s wall"
    )
    lines = [line] + [f"  {label}: {why}" for label, why in {**sweep.failed, **sweep.mismatched}.items()]
    return "\n".join(lines)


def cmd_outcome(args: argparse.Namespace) -> int:
    from server.services import experiments

    if (args.experiment is None) != (args.proposal is None):
        return fail(args, CliError("usage", "--experiment and --proposal go together", prog="asap outcome"))
    loaded = _analysed(args)
    if isinstance(loaded, CliError):
        return fail(args, loaded)
    path, _, an, _ = loaded
    try:
        measured = experiments.measure(an, Path(args.profile))
        out = experiments.record_outcome(an, path, measured, args.experiment, args.proposal)
    except (experiments.OutcomeError, ProfileError) as e:
        return fail(args, CliError("outcome", str(e), status=EXIT_FINDINGS, prog="asap outcome"))
    if args.json:
        _print_json(out.model_dump(), documents.Outcome)
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
            if isinstance(read, CliError):
                return fail(args, read)
            path, text = read
            summaries = [model_summary.of_config(load(path, text, maxtext_path=args.maxtext_path))]
        else:
            summaries = model_summary.catalog(args.maxtext_path)
    except arith.ArithError as e:
        return fail(args, CliError("model", f"cannot price the model: {e.key}: {e}", status=EXIT_FINDINGS))
    if args.name:
        exact = [s for s in summaries if s.name == args.name]
        summaries = exact or [s for s in summaries if args.name in s.name]
    if args.json:
        models = [s.to_json() for s in summaries]
        documents.checked(documents.ModelsDocument, {"models": models})
        _print_json(models, indent=1)
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
                _print_json(
                    {"query": args.query, "results": [r.to_json() for r in results]}, documents.KbSearchDocument
                )
            elif results:
                print(render.kb_results(results))
        elif args.kb_command == "similar":
            store.ensure()
            parsed = _mesh_arg(args.mesh)
            if isinstance(parsed, CliError):
                return fail(args, parsed)
            try:
                mesh = {k: int(v) for k, v in parsed.items()}
            except (TypeError, ValueError):
                return fail(args, CliError("usage", f"--mesh: whole numbers expected, got {args.mesh}"))
            sit = Situation(args.params_b, args.slice, args.bottleneck, mesh, args.slices)
            found = store.similar_history(sit, args.k)
            if args.json:
                out = [{"id": r.id, "title": r.title, "score": round(sc, 4), "why": why} for r, sc, why in found]
                _print_json({"results": out})
            elif found:
                print(render.kb_similar(found))
        elif args.kb_command == "add-record":
            added = add_record(store, Path(args.file), force=args.force)
            how = "rebuilt" if added.stats.get("mode") == "full" else "updated"
            print(f"added {added.record.id} to {added.path}; index {how} ({added.stats['records']} records)")
        elif args.kb_command == "stats":
            store.ensure()
            st = store.stats()
            if args.json:
                _print_json(st)
            elif st:
                print(render.key_values(st))
    except BrokenPipeError:
        raise
    except (RecordError, KbError, OSError) as e:
        return fail(args, CliError("kb", str(e)))
    return 0
