"""`asap` command line: the same analysis as the editor, for terminals and CI.

    asap check CONFIG.yml [CONFIG.yml ...] [--json] [--slice v5e-256] [--xla-flags FLAGS] [--run N]
    asap estimate CONFIG.yml [--mesh k=v,...] [--top N] [--json] [--xla-flags FLAGS] [--run N]
    asap profile PATH [--config CONFIG.yml] [--json]
    asap analyze CONFIG.yml [--profile PATH] [--slice NAME] [--llm off|auto] [--json] [--xla-flags FLAGS] [--run N]
    asap verify CONFIG.yml [CONFIG.yml ...] [--mesh k=v,...] [--proposals [--ray [ADDRESS]]] [--slice NAME] [--json]
                [--run N]
    asap outcome CONFIG.yml --profile PATH [--experiment ID --proposal N] [--json]
    asap stats [--json]
    asap kb build | search "query" [--json] | similar --params-b N --slice S | add-record FILE.yaml | stats
    asap mcp    (the MCP server over stdio, for coding agents: docs/mcp.md)

Exit status, every command (server/cli/commands.py's EXIT_*):
    0  clean: nothing to report (warnings allowed)
    1  findings: a config has errors (an invalid mesh, one that does not fit, no estimate), or the command's own
       negative verdict (verify: the mesh does not compile, fit or place; outcome: the profile is not a run of it)
    2  cannot read an input (a missing file, a directory, no permission, not UTF-8, not a profile), or a usage
       error (the command line); verify also when the compiler is unavailable or failed
    3  internal error: a bug in ASAP, one line on stderr (the traceback with --debug)
With --json, stdout holds one JSON document on every exit path: the command's report, the check document of an
invalid config (`asap estimate` too), or `{"errors": [{"kind", "message", "file"?}]}` when there is no report.
`asap check A.yml B.yml` reports each file on its own: one that cannot be read or that ASAP fails on is an entry
`{"file", "errors"}` of its own (the exit status is the worst of the files) and the others print as usual.
`asap verify A.yml B.yml` likewise: with one config its output is as ever; with several, the text has a section per
config (`=== A.yml`) and --json is `{"configs": [{"file", "exit_status", "report" | "errors"}], "exit_status"}`,
`report` being the document `asap verify A.yml --json` prints; the exit status is the worst of the configs.

CONFIG.yml may also be a launch file (a shell script, Makefile, Markdown file or Kubernetes manifest holding MaxText
runs, server/cli/launch.py): check, estimate and analyze report each run (`--run N` picks one); verify and outcome
take its one run, or run N.

This module is the parser and the entry point; the commands are in server/cli/commands.py and their human
output in server/cli/render.py.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any, NoReturn

from server.cli.commands import (
    CliError,
    cmd_analyze,
    cmd_check,
    cmd_estimate,
    cmd_kb,
    cmd_models,
    cmd_outcome,
    cmd_profile,
    cmd_stats,
    cmd_verify,
    fail,
    internal_error,
)
from server.config.models import MAXTEXT_PATH_HELP, MaxTextPathAction

# The flags several commands share, declared once: name -> (option, add_argument's keywords).
SHARED_FLAGS: dict[str, tuple[str, dict[str, Any]]] = {
    "json": ("--json", {"action": "store_true", "help": "machine-readable output (see docs/cli.md)"}),
    "slice": ("--slice", {"metavar": "NAME", "help": "slice to assume when the config declares none"}),
    "maxtext-path": ("--maxtext-path", {"metavar": "PATH", "action": MaxTextPathAction, "help": MAXTEXT_PATH_HELP}),
    "run": (
        "--run",
        {
            "type": int,
            "metavar": "N",
            "help": "a launch file's run N (1-based, in file order); default: every run of the file",
        },
    ),
    "xla-flags": (
        "--xla-flags",
        {
            "metavar": "FLAGS",
            "help": 'the run\'s LIBTPU_INIT_ARGS / XLA_FLAGS, written --xla-flags="--xla_a=true --xla_b=1" (with `=`: '
            "the value starts with --); over the config's `# LIBTPU_INIT_ARGS=...` comment (default: that comment, "
            "else libtpu's defaults)",
        },
    ),
}


DEBUG_HELP = "on an internal error (exit status 3), print the traceback"


class UsageError(Exception):
    """A command line argparse rejects: raised instead of argparse's exit, so that `main` reports it (and with
    --json prints its JSON document)."""

    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(message)
        self.parser = parser
        self.message = message


class Parser(argparse.ArgumentParser):
    """argparse's parser, raising UsageError for a bad command line (its subcommands' parsers are of this class)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(self, message)


def add_shared(p: argparse.ArgumentParser, *flags: str, **helps: str | None) -> None:
    """Add the shared `flags` (SHARED_FLAGS' names) to `p`, in the order given (the order `--help` lists them);
    `helps` replaces a flag's help text, by its name with '_' for '-' (None: listed without one)."""
    for name in flags:
        option, kw = SHARED_FLAGS[name]
        key = name.replace("-", "_")
        p.add_argument(option, **({**kw, "help": helps[key]} if key in helps else kw))


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="asap", description="ASAP: performance advisor for MaxText configs on TPU")
    p.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="validate the sharding mesh of MaxText configs for their TPU slice")
    c.add_argument("configs", nargs="+", metavar="CONFIG.yml")
    add_shared(c, "json", "slice", "maxtext-path", slice="slice to assume when a config declares none (e.g. v5e-256)")
    add_shared(c, "xla-flags", "run")
    c.set_defaults(func=cmd_check)
    e = sub.add_parser("estimate", help="roofline, memory, collectives, step time and MFU of a config on its slice")
    e.add_argument("config", metavar="CONFIG.yml")
    e.add_argument(
        "--mesh", metavar="KEY=V,...", help="override keys, e.g. ici_fsdp_parallelism=64,ici_tensor_parallelism=4"
    )
    add_shared(e, "slice", "json")
    e.add_argument("--top", type=int, default=0, metavar="N", help="also list the N fastest valid meshes of the slice")
    add_shared(e, "maxtext-path", "xla-flags", "run")
    e.set_defaults(func=cmd_estimate)
    pr = sub.add_parser("profile", help="KPIs, top ops, collectives and bottleneck verdict of an XProf profile")
    pr.add_argument("path", metavar="PATH", help="a .xplane.pb, a run directory, or a directory of exported tool JSON")
    pr.add_argument(
        "--config", metavar="CONFIG.yml", help="compare with this config's declared slice, mesh and estimate"
    )
    add_shared(pr, "json", "maxtext-path", "xla-flags")
    pr.set_defaults(func=cmd_profile)
    an = sub.add_parser("analyze", help="diagnose a config (and its profile) and propose up to three better meshes")
    an.add_argument("config", metavar="CONFIG.yml")
    an.add_argument("--profile", metavar="PATH", help="an XProf profile to use instead of the config's link")
    add_shared(an, "slice")
    an.add_argument(
        "--profile-search-path",
        action="append",
        metavar="DIR",
        help="where <run_name>/tensorboard/plugins/profile may be (repeatable; like asap.profileSearchPaths)",
    )
    an.add_argument("--llm", choices=["off", "auto"], default="off", help="auto: Claude when a key is set")
    add_shared(an, "maxtext-path", "json", "xla-flags", "run")
    an.add_argument("--plot", metavar="FILE", help="also write the roofline chart (.svg or .png)")
    an.add_argument("--plot-theme", choices=("light", "dark"), default="light", help="colours of --plot")
    an.set_defaults(func=cmd_analyze)
    ve = sub.add_parser("verify", help="compile configs' train steps for their TPU slice (libtpu, no TPU) and compare")
    ve.add_argument(
        "configs",
        nargs="*",  # one or more: `--ray a.yml` may take the only one as ADDRESS (cmd_verify gives it back)
        metavar="CONFIG.yml",
        help="one or more configs; with several, each is verified on its own (with --ray, all in one sweep)",
    )
    ve.add_argument(
        "--mesh", metavar="KEY=V,...", help="override keys, e.g. ici_fsdp_parallelism=8,ici_tensor_parallelism=2"
    )
    ve.add_argument(
        "--proposals",
        action="store_true",
        help="also compile the proposals, withdrawing those the TPU compiler rejects and compiling the next "
        "candidates in their place (not with --mesh)",
    )
    add_shared(ve, "slice", "run")
    ve.add_argument("--max-layers", type=int, default=4, metavar="N", help="compile at most N layers, extrapolate")
    ve.add_argument("--timeout", type=float, default=900.0, metavar="S", help="stop a compile after S seconds")
    add_shared(ve, "maxtext-path")
    ve.add_argument(
        "--maxtext-python",
        metavar="PYTHON",
        help="compile MaxText's own train step with this interpreter's MaxText (default: $ASAP_MAXTEXT_PYTHON; "
        "without it, ASAP's reference program)",
    )
    ve.add_argument(
        "--ray",
        nargs="?",
        const="auto",
        default=None,
        metavar="ADDRESS",
        help="with --proposals: run each compile of every config as a task on the Ray cluster at ADDRESS (host:port; "
        "default: the one `ray start` runs here), all at once, kept in ASAP's cache as it comes back",
    )
    add_shared(ve, "json")
    ve.set_defaults(func=cmd_verify)
    oc = sub.add_parser("outcome", help="record what an applied proposal did, from a profile of the changed config")
    oc.add_argument("config", metavar="CONFIG.yml")
    oc.add_argument("--profile", required=True, metavar="PATH", help="a profile of the run with the applied proposal")
    oc.add_argument("--experiment", metavar="ID", help="the analysis whose proposal was applied (with --proposal)")
    oc.add_argument("--proposal", type=int, metavar="N", help="which proposal was applied (with --experiment)")
    add_shared(oc, "slice", "maxtext-path", "json", json=None)
    oc.set_defaults(func=cmd_outcome)
    sts = sub.add_parser("stats", help="ASAP's track record: prediction errors and confidence reliability")
    add_shared(sts, "json", json=None)
    sts.set_defaults(func=cmd_stats)
    mo = sub.add_parser("models", help="MaxText's models as ASAP prices them: block structure, parameters, active")
    mo.add_argument("name", nargs="?", default="", help="only the models whose name contains this")
    mo.add_argument("--config", metavar="CONFIG.yml", help="the model a config resolves to (model file, overrides)")
    add_shared(mo, "json", "maxtext-path")
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
    add_shared(se, "json", json=None)
    si = ks.add_parser("similar", help="past optimizations closest to a situation")
    si.add_argument("--params-b", type=float, required=True, help="model size in billions of parameters")
    si.add_argument("--slice", required=True, help="e.g. v6e-256")
    si.add_argument("--slices", type=int, default=1)
    si.add_argument("--bottleneck", choices=["compute", "hbm", "communication", "memory", "input", "host"])
    si.add_argument("--mesh", metavar="KEY=V,...", help="the current mesh, e.g. ici_fsdp_parallelism=256")
    si.add_argument("--k", type=int, default=3)
    add_shared(si, "json", json=None)
    ad = ks.add_parser("add-record", help="validate an optimization record, add it to kb/history and reindex")
    ad.add_argument("file", metavar="FILE.yaml")
    ad.add_argument("--force", action="store_true", help="replace a record with the same id")
    st = ks.add_parser("stats", help="what the index holds")
    add_shared(st, "json", json=None)
    kb.set_defaults(func=cmd_kb)
    mc = sub.add_parser("mcp", help="serve ASAP's tools to coding agents over MCP on stdio (docs/mcp.md)")
    mc.set_defaults(func=cmd_mcp)
    _add_debug(p)
    return p


def _add_debug(p: argparse.ArgumentParser) -> None:
    """`--debug` after any subcommand too (`asap check x.yml --debug`); it never resets `asap --debug ...`."""
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                sub.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP)
                _add_debug(sub)


def _joined(argv: list[str], option: str) -> list[str]:
    """`option VALUE` as `option= VALUE`: argparse takes a value that starts with `-` for an option of its own
    (`--xla-flags "--xla_x=true"` would be "expected one argument"), and a flags string always does."""
    out: list[str] = []
    it = iter(argv)
    for arg in it:
        if arg == "--":  # the rest is positional, as argparse reads it
            out += [arg, *it]
            break
        nxt = next(it, None) if arg == option else None
        # a space first: argparse drops an explicit value of exactly `--` (flags strings are split at spaces anyway)
        out.append(f"{arg}= {nxt}" if nxt is not None else arg)
    return out


def main(argv: list[str] | None = None) -> int:
    """Run one command; its exit status (the module's docstring). Exceptions do not escape: an unexpected one
    is exit status 3 with a one-line message (the traceback with --debug)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    log = logging.getLogger("asap")
    log.setLevel(logging.WARNING)  # the CLI prints its own report; the editor wants the log
    notes = _StderrNotes()
    log.addHandler(notes)  # the stores' notices (a file moved aside, a store in memory) and other warnings
    try:
        try:
            args = build_parser().parse_args(_joined(argv, "--xla-flags"))
        except UsageError as e:
            e.parser.print_usage(sys.stderr)
            wants_json = argparse.Namespace(json=SHARED_FLAGS["json"][0] in argv)
            return fail(wants_json, CliError("usage", e.message, prog=f"{e.parser.prog}: error"))
        try:
            return int(args.func(args))
        except BrokenPipeError:  # the reader went away (`asap check ... | head`): run() handles it
            raise
        except KeyboardInterrupt:  # Ctrl-C: a local compile's child is in its own group, killed by childproc
            print("\nasap: cancelled", file=sys.stderr)
            return 130
        except Exception as e:
            return fail(args, internal_error(e, getattr(args, "debug", False)))
    finally:
        log.removeHandler(notes)


def cmd_mcp(args: argparse.Namespace) -> int:
    """`asap mcp`: the MCP server (server/mcp_server/) on stdio until the client closes it."""
    from server.mcp_server import main as serve

    serve()
    return 0


class _StderrNotes(logging.Handler):
    """Warnings of the "asap" loggers as `asap: ...` lines on stderr (never stdout: it may hold the JSON)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            print(f"asap: {record.getMessage()}", file=sys.stderr)
        except Exception:
            self.handleError(record)


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
