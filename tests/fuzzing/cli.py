"""The command line's contract on one config, in process: `server.cli.main.main` for `asap check` and
`asap estimate`, with and without --json. No exception escapes `main`; its exit status is 0, 1 or 2 (3 is an
internal error: a bug in ASAP); with --json stdout is one JSON document a strict parser reads (no NaN or
Infinity); nothing prints a traceback without --debug."""

from __future__ import annotations

import contextlib
import io
import json
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from server.cli.main import main

COMMANDS: tuple[tuple[str, ...], ...] = (("check",), ("check", "--json"), ("estimate",), ("estimate", "--json"))
EXPECTED_STATUS = (0, 1, 2)
INTERNAL = 3


@dataclass(frozen=True)
class CliProblem:
    """What went wrong with one command on one config. `kind`: "crash" (an exception escaped main), "internal
    error" (exit status 3), "bad status" (another status), "bad json" (--json output that does not parse),
    "json nan" (NaN or Infinity in the --json output: not JSON to a strict reader), "traceback" (on stderr)."""

    kind: str
    argv: tuple[str, ...]
    detail: str  # the traceback, the message, or the output that does not parse

    def signature(self) -> str:
        """What tells two problems apart: the kind, the command and the traceback's last line and frame."""
        lines = [ln for ln in self.detail.strip().splitlines() if ln.strip()]
        frames = [ln.strip() for ln in lines if ln.strip().startswith("File ")]
        return f"{self.kind} | {self.argv[0]} | {frames[-1] if frames else ''} | {lines[-1][:160] if lines else ''}"


@dataclass(frozen=True)
class CliRun:
    argv: tuple[str, ...]
    status: int | None  # None when an exception escaped
    out: str
    err: str
    seconds: float


def run(argv: list[str]) -> tuple[CliRun, str | None]:
    """`main(argv)` with stdout and stderr captured; the traceback of an exception that escaped it, if any."""
    out, err = io.StringIO(), io.StringIO()
    escaped = None
    status: int | None = None
    started = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(argv)
        except (Exception, SystemExit) as e:  # main promises none: any is a crash
            escaped = "".join(traceback.format_exception(e))
    return CliRun(tuple(argv), status, out.getvalue(), err.getvalue(), time.perf_counter() - started), escaped


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def check(path: Path, commands: tuple[tuple[str, ...], ...] = COMMANDS) -> tuple[list[CliProblem], list[CliRun]]:
    """Every command on `path`: the problems found and the runs (for their statuses and times)."""
    problems: list[CliProblem] = []
    runs: list[CliRun] = []
    for cmd in commands:
        argv = [cmd[0], str(path), *cmd[1:]]
        done, escaped = run(argv)
        runs.append(done)
        key = tuple(argv)
        if escaped is not None:
            problems.append(CliProblem("crash", key, escaped))
            continue
        if done.status == INTERNAL:
            debug, _ = run([*argv, "--debug"])  # the same again, for its traceback
            problems.append(CliProblem("internal error", key, debug.err or done.err))
        elif done.status not in EXPECTED_STATUS:
            problems.append(CliProblem("bad status", key, f"exit status {done.status!r}\n{done.err}"))
        if "Traceback (most recent call last)" in done.err:
            problems.append(CliProblem("traceback", key, done.err))
        if "--json" in cmd:
            try:
                json.loads(done.out)
            except ValueError as e:
                problems.append(CliProblem("bad json", key, f"{e}\n{done.out[:2000]}"))
                continue
            try:
                json.loads(done.out, parse_constant=_reject_constant)
            except ValueError as e:
                problems.append(CliProblem("json nan", key, f"{e}\n{done.out[:2000]}"))
    return problems, runs
