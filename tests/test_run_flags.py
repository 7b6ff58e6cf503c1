"""Where the run's XLA flags come from (server/config/run_flags.py) and where they go: the config's
`# LIBTPU_INIT_ARGS=...` comment read with the line and column of every token, the precedence of the command line's
--xla-flags over the comment over the asap.xlaFlags setting over libtpu's defaults, the ASAP011 warning at a bad
token, the flags reaching every estimate of the config (its own, the agents' tools', the enumeration's), the analysis
cache key, the hover's one line and the `xla_flags` object of `asap estimate --json` and `asap analyze --json`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from server.agents import coordinator
from server.agents.report import AnalysisReport
from server.agents.tools import Context
from server.agents.types import Experiment
from server.cli.main import main as cli
from server.common.codes import DiagCode
from server.config.resolve import load, with_overrides
from server.config.run_flags import (
    MAX_REPORTED,
    PRECEDENCE,
    FlagSource,
    RunFlags,
    TokenAt,
    read_comment,
    resolve_flags,
)
from server.config.xla_flags import parse_xla_flags
from server.perf.enumeration import enumerate_meshes
from server.perf.estimate import inputs
from server.presentation import explain
from server.services.analysis import analyze

BASE = "model_name: llama2-7b\nper_device_batch_size: 4\ncompile_topology: v5e-256\nici_fsdp_parallelism: -1\n"
DP = "--xla_tpu_enable_data_parallel_all_reduce_opt=true --xla_tpu_data_parallel_opt_different_sized_ops=true"
AG = "--xla_tpu_enable_async_collective_fusion_fuse_all_gather=true"
# Line 2 (1-based) states two groups and an unknown flag; the config starts on line 3.
COMMENTED = f'# run flags\n# LIBTPU_INIT_ARGS="{DP} --xla_not_in_the_library=7"\n' + BASE


def _xla(name: str) -> str:
    return name.removeprefix("--").split("=")[0]


# -- reading the comment -------------------------------------------------------------------------------------
def test_run_flags_comment_quoted_export_and_several_lines_concatenate() -> None:
    lines = [
        "model_name: llama2-7b",
        f"# export LIBTPU_INIT_ARGS='{DP}'  # the team's flags",
        f"#XLA_FLAGS = {AG} # trailing words",
        '#  LIBTPU_INIT_ARGS="${LIBTPU_INIT_ARGS} --xla_tpu_scoped_vmem_limit_kib=98304"',
        "# libtpu_init_args=--xla_lowercase_is_not_the_variable=true",
        "key: '# LIBTPU_INIT_ARGS=--xla_in_a_value=true'",
    ]
    src = read_comment(lines)
    assert src is not None and src.kind == "comment"
    assert src.text == f"{DP} {AG} --xla_tpu_scoped_vmem_limit_kib=98304"
    assert src.variables == ("LIBTPU_INIT_ARGS", "XLA_FLAGS") and src.lines == (1, 2, 3)
    assert src.describe() == "the comments on lines 2-4"
    # every token located where it is written: the parser's token i is tokens[i]
    for i, tok in enumerate(src.text.split()):
        at = src.tokens[i]
        assert lines[at.line][at.column : at.end_column] == tok
    flags = parse_xla_flags(src.text)
    assert flags.enabled() == {"cf_for_all_gather": True, "data_parallel_overlap": True, "scoped_vmem_limit": 98304}


def test_run_flags_comment_unquoted_unclosed_empty_and_none() -> None:
    assert read_comment(["a: 1", "# just a comment"]) is None
    empty = read_comment(["# XLA_FLAGS="])
    assert empty is not None and empty.text == "" and empty.lines == (0,) and empty.tokens == ()
    unclosed = read_comment([f'# LIBTPU_INIT_ARGS="{AG}'])
    assert unclosed is not None and unclosed.text == AG
    # YAML ends a comment at U+2028 (Python's splitlines would not split there): what follows is not a flag
    sep = read_comment([f"# XLA_FLAGS={AG}\u2028key: 1"])
    assert sep is not None and sep.text == AG


def test_run_flags_precedence_cli_over_comment_over_setting_over_defaults() -> None:
    assert PRECEDENCE == ("cli", "launch", "comment", "setting")
    cli_src = FlagSource.given("cli", AG)
    setting = FlagSource.given("setting", DP)
    comment = read_comment([f"# XLA_FLAGS={DP} {AG}"])
    assert resolve_flags(setting, comment, cli_src).source is cli_src
    assert resolve_flags(setting, comment).source is comment
    assert resolve_flags(setting, None).source is setting
    none = resolve_flags(None, None)
    assert none == RunFlags() and none.flags is None and none.describe() == "libtpu defaults assumed"
    # a blank setting is the setting's default: it states nothing; a blank --xla-flags states "no flags"
    assert FlagSource.given("setting", "  ") is None and FlagSource.given("setting", None) is None
    blank = resolve_flags(FlagSource.given("cli", ""), comment)
    assert blank.source is not None and blank.source.kind == "cli" and blank.flags is not None
    assert (
        blank.flags.settings == () and blank.hover_line() == "XLA flags: --xla-flags sets none: libtpu defaults assumed"
    )


def test_run_flags_analysis_prices_under_the_winning_source() -> None:
    an = analyze(None, COMMENTED)
    inp = inputs(an.config)
    assert inp.flags is not None and inp.flags_source == "the comment on line 2"
    assert inp.flags.enabled() == {"data_parallel_overlap": True}
    assert [u.name for u in inp.flags.unknown] == ["xla_not_in_the_library"]
    # the setting is below the comment; the command line above it
    assert inputs(analyze(None, COMMENTED, flags=FlagSource.given("setting", AG)).config).flags_source == (
        "the comment on line 2"
    )
    over = inputs(analyze(None, COMMENTED, flags=FlagSource.given("cli", AG)).config)
    assert over.flags_source == "--xla-flags" and over.flags is not None
    assert over.flags.enabled() == {"cf_for_all_gather": True}
    plain = inputs(analyze(None, BASE, flags=FlagSource.given("setting", AG)).config)
    assert plain.flags_source == "the asap.xlaFlags setting" and plain.flags is not None
    defaults = inputs(analyze(None, BASE).config)
    assert defaults.flags is None and defaults.flags_source == "libtpu defaults assumed"


def test_run_flags_reach_the_agents_tools_and_the_enumeration() -> None:
    """Every estimate of the config sees its flags: a mesh the agents' tools price (with_overrides' copy), a key
    change, and the enumeration of every mesh of the slice."""
    an = analyze(None, COMMENTED)
    want = an.config.run_flags
    ctx = Context(an)
    ev = ctx.evaluate({"fsdp": 16, "tensor": 16}, {})
    assert ev.valid and ev.config is not None and ev.config.run_flags is want
    assert inputs(ev.config).flags is want.flags
    assert with_overrides(an.config, {"per_device_batch_size": 2}).run_flags is want
    sl = an.check.slice
    assert sl is not None
    en = enumerate_meshes(inputs(an.config), sl)
    assert en.ranked  # priced with the Inputs that carry the flags
    assert ctx.enumeration().ranked


# -- the warning ---------------------------------------------------------------------------------------------
def test_run_flags_problems_are_warnings_at_the_token() -> None:
    text = (
        f"# LIBTPU_INIT_ARGS='{AG} --xla_tpu_enable_data_parallel_all_reduce_opt=maybe'\n"
        f"# XLA_FLAGS='stray --xla_tpu_scoped_vmem_limit_kib=big {AG}'\n" + BASE
    )
    an = analyze(None, text)
    found = [f for f in an.diagnostics if f.code == DiagCode.XLA_FLAGS_PROBLEM]
    lines = text.splitlines()
    where = [(f.span.line, lines[f.span.line][f.span.column : f.span.end_column]) for f in found]
    assert where == [
        (0, "--xla_tpu_enable_data_parallel_all_reduce_opt=maybe"),
        (1, "stray"),
        (1, "--xla_tpu_scoped_vmem_limit_kib=big"),
        (1, AG),  # given twice: at the appearance whose value is used
    ]
    assert all(f.severity.label == "warning" and f.key is None for f in found)
    assert "expects true or false, got 'maybe'" in found[0].message
    assert "given more than once" in found[3].message
    assert an.estimate is not None  # warnings: the estimate is still made, under the rest of the flags


def test_run_flags_warnings_are_capped_with_a_count() -> None:
    junk = " ".join(f"bad{i}" for i in range(MAX_REPORTED + 7))
    an = analyze(None, f"# XLA_FLAGS={junk}\n" + BASE)
    found = [f for f in an.diagnostics if f.code == DiagCode.XLA_FLAGS_PROBLEM]
    assert len(found) == MAX_REPORTED and "7 more problems not listed" in found[-1].message
    js = an.config.run_flags.to_json()
    assert len(js["problems"]) == MAX_REPORTED and js["problems_total"] == MAX_REPORTED + 7


def test_run_flags_a_parent_states_none_for_its_child(tmp_path: Path) -> None:
    """The comment is the document's own (as `# asap: slice=`): a parent's is not read for the child."""
    (tmp_path / "base.yml").write_text(f"# XLA_FLAGS={AG}\nper_device_batch_size: 4\n", encoding="utf-8")
    child = tmp_path / "child.yml"
    child.write_text("base_config: base.yml\n" + BASE, encoding="utf-8")
    assert load(child).run_flags == RunFlags()


# -- the hover -----------------------------------------------------------------------------------------------
def test_run_flags_hover_line_on_the_estimate_and_on_the_comment() -> None:
    an = analyze(None, COMMENTED)
    md, _ = explain.hover(an, 4, 3, an.diagnostics) or ("", None)  # compile_topology: the estimate
    line = "XLA flags: from the comment on line 2: data_parallel_overlap (1 unknown kept: xla_not_in_the_library)"
    assert f"- {line}" in md and md.count("XLA flags:") == 1
    found = explain.hover(an, 1, 5, an.diagnostics)
    assert found is not None
    md, span = found
    assert span.line == 1 and span.end_column == len(COMMENTED.splitlines()[1])
    assert line in md and "`DATA_PARALLEL_OVERLAP`" in md and "`--xla_not_in_the_library`" in md
    plain = analyze(None, BASE)
    md, _ = explain.hover(plain, 2, 3, plain.diagnostics) or ("", None)
    assert "XLA flags: libtpu defaults assumed — state yours in a `# LIBTPU_INIT_ARGS=" in md
    assert "`asap.xlaFlags` setting" in md
    # the mesh block's estimate entry says it once too
    md, _ = explain.hover(plain, 3, 3, plain.diagnostics) or ("", None)
    assert md.count("XLA flags: libtpu defaults assumed") == 1


# -- the command line ----------------------------------------------------------------------------------------
def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_run_flags_cli_estimate_json_precedence_and_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "c.yml"
    p.write_text(COMMENTED, encoding="utf-8")
    code, out, _ = _run(capsys, "estimate", str(p), "--json")
    doc = json.loads(out)["xla_flags"]
    assert code == 0 and doc["source"] == "comment" and doc["lines"] == [2]
    assert doc["variables"] == ["LIBTPU_INIT_ARGS"] and doc["problems"] == [] and doc["problems_total"] == 0
    assert doc["groups"]["data_parallel_overlap"] == {
        "library_constant": "DATA_PARALLEL_OVERLAP",
        "key": "xla_tpu_enable_data_parallel_all_reduce_opt",
        "key_value": True,
        "flags": {
            "xla_tpu_enable_data_parallel_all_reduce_opt": True,
            "xla_tpu_data_parallel_opt_different_sized_ops": True,
        },
    }
    assert doc["unknown"] == [{"name": "xla_not_in_the_library", "value": 7}]
    # --xla-flags wins over the comment; its value may start with -- (argparse would take it for an option)
    code, out, _ = _run(capsys, "estimate", str(p), "--json", "--xla-flags", f"{AG} --xla_x=1 --xla_x=2")
    doc = json.loads(out)["xla_flags"]
    assert doc["source"] == "cli" and doc["lines"] == [] and doc["described"] == "--xla-flags"
    assert list(doc["groups"]) == ["cf_for_all_gather", "sparsecore_offload_all_gather"]
    assert doc["groups"]["cf_for_all_gather"]["key_value"] is True
    assert doc["repeated"] == ["xla_x"] and doc["problems_total"] == 1 and "line" not in doc["problems"][0]
    code, out, _ = _run(capsys, "estimate", str(p), f"--xla-flags={AG}")
    assert code == 0 and "  XLA flags: from --xla-flags: cf_for_all_gather\n" in out
    code, out, _ = _run(capsys, "estimate", str(p), "--xla-flags", "")
    assert "XLA flags: --xla-flags sets none: libtpu defaults assumed" in out
    p.write_text(BASE, encoding="utf-8")
    code, out, _ = _run(capsys, "estimate", str(p))
    assert "XLA flags: libtpu defaults assumed — state yours with --xla-flags or a `# LIBTPU_INIT_ARGS=" in out
    assert json.loads(_run(capsys, "estimate", str(p), "--json")[1])["xla_flags"]["source"] == "libtpu_defaults"


def test_run_flags_cli_check_reports_the_comment_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "c.yml"
    p.write_text(f"# XLA_FLAGS={AG} oops\n" + BASE, encoding="utf-8")
    code, out, _ = _run(capsys, "check", str(p))
    assert code == 0 and f"{p}:1:{len('# XLA_FLAGS=' + AG) + 2}: warning ASAP011: XLA flags: not a flag" in out
    code, out, _ = _run(capsys, "check", str(p), "--json", "--xla-flags", DP)  # the comment is wrong either way
    assert [f["code"] for f in json.loads(out)["findings"]] == ["ASAP011", "ASAP120"]


def test_run_flags_cli_analyze_json_has_the_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "c.yml"
    p.write_text(COMMENTED, encoding="utf-8")
    code, out, _ = _run(capsys, "analyze", str(p), "--json")
    report = AnalysisReport.from_json(json.loads(out))  # the published shape (schema/analyze.schema.json)
    assert code == 0 and report.xla_flags is not None
    assert report.xla_flags.source == "comment" and report.xla_flags.lines == [2]
    assert [u.name for u in report.xla_flags.unknown] == ["xla_not_in_the_library"]
    code, out, _ = _run(capsys, "analyze", str(p), "--json", "--xla-flags", AG)
    again = json.loads(out)["xla_flags"]
    assert again["source"] == "cli" and "cf_for_all_gather" in again["groups"]


def test_run_flags_are_part_of_the_analysis_cache_key(tmp_path: Path) -> None:
    p = tmp_path / "c.yml"
    p.write_text(BASE, encoding="utf-8")

    def key(text: str, flags: FlagSource | None = None) -> str:
        exp = Experiment(p, text, xla_flags=flags)
        return coordinator.cache_key(exp, analyze(p, text, flags=flags), "offline")

    plain = key(BASE)
    assert plain == key(BASE)  # the same inputs, the same key
    keys = {
        plain,
        key(BASE, FlagSource.given("setting", AG)),
        key(BASE, FlagSource.given("setting", DP)),
        key(BASE, FlagSource.given("cli", AG)),  # the same text from another source: another result's key
        key(BASE, FlagSource.given("cli", "")),
    }
    assert len(keys) == 5
    # a setting the comment overrides prices nothing differently: the key says so
    assert key(COMMENTED, FlagSource.given("setting", AG)) == key(COMMENTED)


def test_run_flags_token_at_maps_positions() -> None:
    src = read_comment([f"# XLA_FLAGS={AG} x"])
    assert src is not None and src.at(1) == TokenAt(0, 13 + len(AG), 14 + len(AG)) and src.at(2) is None
    assert FlagSource.given("cli", AG) is not None and FlagSource.given("cli", AG).at(0) is None  # type: ignore[union-attr]
    assert _xla(AG) in parse_xla_flags(AG).cf_for_all_gather.values


def test_run_flags_setting_model_reads_xla_flags(caplog: pytest.LogCaptureFixture) -> None:
    """asap.xlaFlags as the server's settings read it: blank is unset, a non-string falls back with a warning, and
    package.json declares it (tests/test_contract.py keeps the defaults in step)."""
    from server.editor.settings import Settings

    assert Settings.from_client({"xlaFlags": f"  {AG} "}).flags == FlagSource("setting", AG)
    assert Settings.from_client({"xlaFlags": " "}).flags is None and Settings().flags is None
    assert Settings.from_client({"xlaFlags": ["--xla_x=1"], "defaultSlice": "v5e-8"}) == Settings(default_slice="v5e-8")
    assert "asap.xlaFlags" in caplog.text
    package = json.loads((Path(__file__).resolve().parent.parent / "extension" / "package.json").read_text())
    prop = package["contributes"]["configuration"]["properties"]["asap.xlaFlags"]
    assert prop["type"] == "string" and "LIBTPU_INIT_ARGS" in prop["markdownDescription"]
