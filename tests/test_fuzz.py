"""A bounded fuzz of the command line (issue 17 item 6): a few hundred hostile configs, built by hypothesis from the
examples and MaxText model configs with issue 17's mutations (tests/fuzzing/mutations.py), through `asap check`
and `asap estimate`, with and without --json, in process. Nothing escapes `main`, the exit status is 0, 1 or 2,
--json prints one JSON document a strict parser reads, and no traceback is printed. Derandomized: every run
draws the same cases. bench/fuzz.py runs the long version (10,000 configs, and the large documents).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from fuzzing import cli
from fuzzing import textmodel as tm
from fuzzing.mutations import EXAMPLES, FILE_NAME, PARENT, Case
from fuzzing.strategies import cases, every_mutation
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lsprotocol import types as lsp

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


# -- the client-side text model the server fuzz checks against (tests/fuzzing/textmodel.py) --------------------
@given(st.text(alphabet="ab\r\n\u2028\x85\x0c\U0001f600é"), st.data())
@settings(derandomize=True, max_examples=200, database=None)
def test_fuzz_textmodel_positions_round_trip(text: str, data: st.DataObject):
    """Positions on the client's lines (only \\r\\n, \\r and \\n break one; UTF-16 columns) map back to their index."""
    index = data.draw(st.integers(0, len(text)))
    if tm.splits_crlf(text, index):
        index -= 1
    pos = tm.position(text, index)
    assert tm.offset(text, pos) == index
    assert pos.line < tm.line_count(text) == len(re.findall(r"\r\n|\r|\n", text)) + 1
    assert tm.in_range(text, lsp.Range(pos, pos))


def test_fuzz_textmodel_sees_what_a_fix_must_keep():
    before = "a: 1  # one\nb: 2\nici_sequence_parallelism: 1  # legacy\n"
    b_line = lsp.Range(lsp.Position(1, 3), lsp.Position(1, 4))
    fixed, spans = tm.apply_edits(before, [lsp.TextEdit(b_line, "4")])
    assert fixed == "a: 1  # one\nb: 4\nici_sequence_parallelism: 1  # legacy\n"
    assert tm.fix_violations(before, fixed, spans) == []  # the key it edits may change
    commented, spans = tm.apply_edits(before, [lsp.TextEdit(lsp.Range(lsp.Position(2, 0), lsp.Position(2, 0)), "# ")])
    assert tm.fix_violations(before, commented, spans) == []  # its key goes, its comment stays inside the new one
    assert any("'a'" in v for v in tm.fix_violations(before, before.replace("a: 1", "a: 9"), []))  # not edited
    assert any("comments lost" in v for v in tm.fix_violations(before, before.replace("  # one", ""), spans))
    assert tm.fix_violations(before, "a: [1\n", spans) == ["the fixed text is not a YAML mapping a parser reads"]
    aliased = "m: &m 1\nici_pipeline_paralelism: *m\n"  # a value that is an alias: its pair is the key's line
    renamed, spans = tm.apply_edits(aliased, [lsp.TextEdit(lsp.Range(lsp.Position(1, 0), lsp.Position(1, 23)), "x")])
    assert renamed == "m: &m 1\nx: *m\n" and tm.fix_violations(aliased, renamed, spans) == []
    assert tm.fix_violations("a: [1\n", "a: [\n", []) == []  # nothing to keep in a text that did not parse
    past_end = [lsp.TextEdit(lsp.Range(lsp.Position(1, 0), lsp.Position(1, 0)), "\nb: 2")]  # line 1 of 1
    with pytest.raises(ValueError, match="past the document"):
        tm.apply_edits("a: 1", past_end)
    assert tm.apply_edits("a: 1", past_end, clamp=True)[0] == "a: 1\nb: 2"  # as VS Code applies it


def test_fuzz_textmodel_sees_a_line_ending_mismatch():
    """The oracle of line-ending mismatches: the lines a fix writes end as the line they replace or follow."""

    def insert(line: int, col: int, new: str) -> list[lsp.TextEdit]:
        return [lsp.TextEdit(lsp.Range(lsp.Position(line, col), lsp.Position(line, col)), new)]

    mixed = "a: 1\r\nb: 2\rc: 3\nd: 4"
    assert tm.ending_mismatches(mixed, insert(2, 0, "x: 1\r")) == []  # after b, which ends in CR
    assert tm.ending_mismatches(mixed, insert(1, 0, "x: 1\r\n")) == []  # after a (CRLF)
    assert tm.ending_mismatches(mixed, insert(3, 0, "x: 1\n")) == []  # after c (LF)
    wrong = tm.ending_mismatches(mixed, insert(2, 0, "x: 1\n"))  # LF, the dominant ending, after a CR line
    assert len(wrong) == 1 and "'\\r'" in wrong[0]
    assert tm.ending_mismatches(mixed, insert(3, 4, "\nx: 1")) == []  # after the last line (no break): c's LF
    assert tm.ending_mismatches(mixed, insert(3, 4, "\rx: 1")) != []
    assert tm.ending_mismatches("a: 1\r", insert(1, 0, "b: 2\r")) == []  # after a final break: the line above
    assert tm.ending_mismatches("a: 1", insert(0, 4, "\nb: 2")) == []  # no break anywhere: LF
    assert tm.ending_mismatches(mixed, [lsp.TextEdit(lsp.Range(lsp.Position(1, 0), lsp.Position(1, 1)), "z")]) == []
