"""A bounded fuzz of the command line (issue 17 item 6): a few hundred hostile configs, built by hypothesis from the
examples and MaxText model configs with issue 17's mutations (tests/fuzzing/mutations.py), through `asap check`
and `asap estimate`, with and without --json, in process. Nothing escapes `main`, the exit status is 0, 1 or 2,
--json prints one JSON document a strict parser reads, and no traceback is printed. Derandomized: every run
draws the same cases. bench/fuzz.py runs the long version (10,000 configs, and the large documents).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import pytest
from fuzzing import cli
from fuzzing.mutations import EXAMPLES, FILE_NAME, PARENT, Case
from fuzzing.strategies import cases, every_mutation
from hypothesis import HealthCheck, given, settings

from server.cli import main as cli_main

# server/config/source.py ignores ruamel's ReusedAnchorWarning (a redefined anchor is legal YAML 1.2) for the
# process; pytest's per-test warning filters come first, so the same here.
pytestmark = pytest.mark.filterwarnings("ignore::ruamel.yaml.error.ReusedAnchorWarning")


@pytest.fixture(scope="module")
def config_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where each case is written, next to the examples' parent."""
    d = tmp_path_factory.mktemp("fuzz")
    (d / PARENT).write_text((EXAMPLES / PARENT).read_text(encoding="utf-8"), encoding="utf-8")
    return d / FILE_NAME


@settings(
    derandomize=True,
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(case=cases())
@every_mutation
def test_fuzz_cli_check_and_estimate_never_fail(config_path: Path, case: Case):
    config_path.write_bytes(case.data)
    problems, _ = cli.check(config_path)
    assert not problems, f"{case.describe()}\nbytes: {case.data[:400]!r}\n" + "\n".join(
        f"-- {p.kind}: asap {' '.join(p.argv)}\n{p.detail[-3000:]}" for p in problems
    )


def _raises(args: object) -> int:
    raise RuntimeError("injected")


def _prints_nan(args: object) -> int:
    print('{"speedup": NaN}')
    return 0


def _prints_text(args: object) -> int:
    print("not json")
    return 0


@pytest.mark.parametrize(
    ("command", "kind"), [(_raises, "internal error"), (_prints_nan, "json nan"), (_prints_text, "bad json")]
)
def test_fuzz_cli_oracle_counts_what_it_must(
    config_path: Path, monkeypatch: pytest.MonkeyPatch, command: Callable[[object], int], kind: str
):
    """The oracle itself: `asap check --json` replaced by a command that raises (exit status 3, counted with the
    traceback --debug prints), one that prints NaN, and one that prints no JSON."""
    config_path.write_text("model_name: llama2-7b\ncompile_topology: v5e-256\n")
    build_parser = cli_main.build_parser

    def parser() -> argparse.ArgumentParser:
        p = build_parser()
        sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
        sub.choices["check"].set_defaults(func=command)
        return p

    monkeypatch.setattr(cli_main, "build_parser", parser)
    problems, _ = cli.check(config_path, (("check", "--json"),))
    assert [p.kind for p in problems] == [kind], problems
    if kind == "internal error":
        assert "Traceback" in problems[0].detail and "RuntimeError: injected" in problems[0].detail
