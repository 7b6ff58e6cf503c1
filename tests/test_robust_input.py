"""Hostile input (issue 17: items 1 and 10, input causes 1-8): each is a finding located at file, line and key,
never an exception, through the analysis service and through `asap check`; the rest of the file is still read.

Every text is written as exact bytes or built in Python, so the characters under test are really there.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

import pytest

from server.cli.main import main as cli
from server.common.codes import DiagCode
from server.common.findings import Finding
from server.config import source
from server.config.source import (
    MAX_ALIAS_NODES,
    MAX_COLLECTION_ALIASES,
    MAX_DEPTH,
    MAX_DOCUMENT_BYTES,
    MAX_DOCUMENT_LINES,
    MAX_INT_DIGITS,
    MAX_READ_BYTES,
    split_lines,
)
from server.perf import architecture
from server.services.analysis import analyze

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

# Lines 1-4; a case appends from line 5.
BASE = "compile_topology: v5e-256\nmodel_name: llama2-7b\nper_device_batch_size: 2\nici_fsdp_parallelism: -1\n"
NO_BATCH = BASE.replace("per_device_batch_size: 2\n", "")  # lines 1-3 (a merge key's value must not be overridden)
# The same without model_name, for a model written as base_* keys (a model file would replace them).
DIMS = (
    "compile_topology: v5e-256\nper_device_batch_size: 2\nici_fsdp_parallelism: -1\n"
    "base_emb_dim: 4096\nbase_num_query_heads: 32\nbase_num_kv_heads: 32\nbase_mlp_dim: 11008\n"
    "base_num_decoder_layers: 32\n"
)


def _with(text: str, key: str, value: str) -> str:
    """`text` with `key: value` replacing that key's line (appended when absent)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(f"{key}:"):
            lines[i] = f"{key}: {value}"
            return "\n".join(lines) + "\n"
    return text + f"{key}: {value}\n"


def _deep_mapping(levels: int) -> str:
    return "a:\n" + "".join("  " * (i + 1) + f"k{i}:\n" for i in range(levels)) + "  " * (levels + 1) + "x: 1\n"


def _one(findings: list[Finding], code: str) -> Finding:
    got = [f for f in findings if f.code == code]
    assert len(got) == 1, [(f.code, f.span.line + 1, f.key, f.message) for f in findings]
    return got[0]


PDBS = "per_device_batch_size"
YAML, BATCH, NO_EST = DiagCode.INVALID_YAML, DiagCode.BAD_BATCH_SIZE, DiagCode.NO_ESTIMATE
BIG = DiagCode.DOCUMENT_TOO_LARGE
SLICE, NOT_FOUND = DiagCode.UNKNOWN_SLICE, DiagCode.BASE_CONFIG_NOT_FOUND
FSDP, DEGREE = "ici_fsdp_parallelism", DiagCode.INVALID_DEGREE
SLICE_COMMENT = "# asap: slice=v5e-256 slices="
NO_TOPOLOGY = BASE.removeprefix("compile_topology: v5e-256\n")  # lines 2-4 after a comment on line 1
ALIASES = DiagCode.ALIASES_EXPAND_TOO_FAR
# An alias bomb: l0 a list of ten values, each level a list of ten aliases of the one before; l5 is 10^6 values.
ALIAS_BOMB = "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]\n" for i in range(1, 6)
)
# The same with mappings, brought into the top level by a merge key.
MAPPING_BOMB = (
    "m0: &m0 {" + ", ".join(f"k{j}: x" for j in range(10)) + "}\n"
    + "".join(f"m{i}: &m{i} {{" + ", ".join(f"k{j}: *m{i - 1}" for j in range(10)) + "}\n" for i in range(1, 6))
)  # fmt: skip


def _alias_chain(n: int, levels: int = 30) -> str:
    """`d0` a list `levels` deep; each next key as deep again around an alias of the one before."""
    inner = ["x", *(f"*d{i}" for i in range(n - 1))]
    return "".join(f"d{i}: &d{i} " + "[" * levels + inner[i] + "]" * levels + "\n" for i in range(n))


def _aliases_of(anchored: str, n: int) -> str:
    return f"one: &o {anchored}\nmany: [{', '.join(['*o'] * n)}]\n"


def case(name: str, text: str, code: str, line: int, key: str | None, word: str) -> Any:
    """The file's text, the code expected, its 1-based line and key, and a word its message has."""
    return pytest.param(text, code, line, key, word, id=name)


CASES = [
    # 1. limits: nesting, size, integer length
    case("deep-flow-sequence", BASE + "a: " + "[" * 300 + "]" * 300 + "\n", YAML, 5, "a", "too deeply"),
    case("deep-block-mapping", BASE + _deep_mapping(300), YAML, 5 + MAX_DEPTH, "a", "too deeply"),
    case("deep-flow-mapping", BASE + "a: " + "{b: " * 300 + "1" + "}" * 300 + "\n", YAML, 5, "a", "deep"),
    case("too-large", BASE + "# " + "x" * (MAX_DOCUMENT_BYTES + 10) + "\n", BIG, 1, None, "KiB, over"),
    case("too-many-lines", BASE + "# a sweep line\n" * MAX_DOCUMENT_LINES, BIG, 1, None, "lines, over"),
    # 2. merge keys: the merged key is read, and located at the merge
    case("merge-inline", NO_BATCH + "<<: {per_device_batch_size: .nan}\n", BATCH, 4, PDBS, "finite"),
    case("merge-alias", "defaults: &d\n  per_device_batch_size: 0\n" + NO_BATCH + "<<: *d\n", BATCH, 6, PDBS, "> 0"),
    # 3. the batch size is a finite number in range
    case("batch-nan", _with(BASE, PDBS, ".nan"), BATCH, 3, PDBS, "finite"),
    case("batch-inf", _with(BASE, PDBS, ".inf"), BATCH, 3, PDBS, "finite"),
    case("batch-minus-inf", _with(BASE, PDBS, "-.inf"), BATCH, 3, PDBS, "finite"),
    case("batch-subnormal", _with(BASE, PDBS, "1e-320"), BATCH, 3, PDBS, "too small"),
    case("batch-huge", _with(BASE, PDBS, "1e300"), BATCH, 3, PDBS, "too large"),
    case("batch-text", _with(BASE, PDBS, "'2'"), BATCH, 3, PDBS, "number"),
    # 4. a model dimension that is not a whole number, or absurdly large
    case("experts-text", DIMS + "num_experts: abc\n", NO_EST, 9, "num_experts", "whole number"),
    case("emb-text", _with(DIMS, "base_emb_dim", "abc"), NO_EST, 4, "base_emb_dim", "whole number"),
    case("emb-superscript", _with(DIMS, "base_emb_dim", '"\u00b2"'), NO_EST, 4, "base_emb_dim", "whole number"),
    case("heads-huge", _with(DIMS, "base_num_query_heads", "1e300"), NO_EST, 5, "base_num_query_heads", "at most"),
    case("layers-huge", _with(DIMS, "base_num_decoder_layers", str(10**9)), NO_EST, 8, "base_num_decoder_layers",
         "at most"),
    # 5. an integer longer than Python converts (4300 digits), and longer than ASAP reads
    case("int-4301-digits", BASE + "steps: " + "9" * 4301 + "\n", YAML, 5, "steps", "digits"),
    case("int-batch-4301-digits", _with(BASE, PDBS, "1" * 4301), YAML, 3, PDBS, "digits"),
    case("int-past-limit", BASE + "steps: " + "1" * (MAX_INT_DIGITS + 1) + "\n", YAML, 5, "steps", "digits"),
    # 6. a base_config no file system can look up
    case("base-config-nul", 'base_config: "a\\x00b.yml"\n' + BASE, NOT_FOUND, 1, "base_config", "NUL"),
    # 7. the slice comment's count in ASCII digits only
    case("slices-superscript", SLICE_COMMENT + "\u00b2\n" + NO_TOPOLOGY, SLICE, 1, None, "slices"),
    case("slices-arabic-indic", SLICE_COMMENT + "\u0663\n" + NO_TOPOLOGY, SLICE, 1, None, "slices"),
    case("slices-zero", SLICE_COMMENT + "0\n" + NO_TOPOLOGY, SLICE, 1, None, "slices"),
    # 10. characters Python takes for line breaks and editors do not
    case("form-feed-in-comment", "# a\x0cb\n" + BASE, YAML, 1, None, "U+000C"),
    case("line-separator-ends-comment", "# a\u2028b\n" + BASE, YAML, 2, "compile_topology", "U+2028"),
    case("line-separator-then-error", "# a\u2028# b\n" + _with(BASE, "ici_fsdp_parallelism", "3"),
         DiagCode.ICI_PRODUCT_MISMATCH, 5, "ici_fsdp_parallelism", "256"),
    case("paragraph-separator-in-value", 'run_name: "a\u2029b"\n' + _with(BASE, PDBS, "0"), BATCH, 4, PDBS, "> 0"),
    case("next-line-in-comment", "# a\x85# b\n" + _with(BASE, PDBS, "0"), BATCH, 4, PDBS, "> 0"),
    # 11. aliases that expand too far (issue 25): at the top-level key where the bound is crossed
    case("alias-bomb", NO_BATCH + ALIAS_BOMB + f"{PDBS}: *l5\n", ALIASES, 6, "l2", "1,000 values"),
    case("alias-bomb-merged", NO_BATCH + MAPPING_BOMB + "<<: *m5\n", ALIASES, 6, "m2", "1,000 values"),
    case("alias-count", BASE + _aliases_of("[1]", MAX_COLLECTION_ALIASES + 1), ALIASES, 6, "many", "100 aliases"),
    case("alias-depth", BASE + _alias_chain(3), ALIASES, 7, "d2", "levels deep"),
    # 12. whole numbers MaxText's config refuses (issue 25: what it reads, 4.0, "4", true, is no error)
    case("degree-text-dot", _with(BASE, FSDP, '"256."'), DEGREE, 4, FSDP, "unable to parse string"),
    case("degree-text-hex", _with(BASE, FSDP, '"0x100"'), DEGREE, 4, FSDP, "unable to parse string"),
    case("degree-yaml11-0o", _with(BASE, FSDP, "0o400"), DEGREE, 4, FSDP, "unable to parse string"),
    case("degree-fraction", _with(BASE, FSDP, "256.5"), DEGREE, 4, FSDP, "fractional"),
    case("degree-null", _with(BASE, FSDP, "~"), DEGREE, 4, FSDP, "not a valid integer"),
    case("slices-text-dot", BASE + 'num_slices: "2."\n', SLICE, 5, "num_slices", "unable to parse string"),
    case("slices-disagree", BASE + "compile_topology_num_slices: 2\nnum_slices: 4\n", SLICE, 6, "num_slices",
         "disagree"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "code", "line", "key", "word"), CASES)
def test_robust_input_analysis_locates_the_finding(
    tmp_path: Path, text: str, code: str, line: int, key: Any, word: str
):
    path = tmp_path / "c.yml"
    an = analyze(path, text)
    f = _one(an.diagnostics, code)
    assert (f.span.line + 1, f.key, f.file) == (line, key, path), f.message
    assert word in f.message
    assert 0 <= f.span.line <= max(0, len(split_lines(text)) - 1)  # on a line the editor has


@pytest.mark.parametrize(("text", "code", "line", "key", "word"), CASES)
def test_robust_input_cli_check_reports_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, code: str, line: int, key: Any, word: str
):
    path = tmp_path / "c.yml"
    path.write_bytes(text.encode("utf-8"))
    status = cli(["check", str(path), "--json"])
    out = capsys.readouterr()
    assert status in (0, 1), out.err  # findings (ASAP129 is a warning); 3 would be an exception inside ASAP
    found = [f for f in json.loads(out.out)["findings"] if f["code"] == code]
    assert [(f["line"], f["key"]) for f in found] == [(line, key)], out.out


def test_robust_input_merged_keys_resolve_and_fixes_leave_the_merge_alone(tmp_path: Path):
    inline = analyze(tmp_path / "a.yml", BASE + "<<: {ici_tensor_parallelism: 4}\n")
    assert inline.check.degrees("ici", drop_ones=True) == {"fsdp": 64, "tensor": 4}
    anchored = analyze(tmp_path / "b.yml", "defaults: &d\n  ici_tensor_parallelism: 4\n" + BASE + "<<: *d\n")
    assert anchored.check.degrees("ici", drop_ones=True) == {"fsdp": 64, "tensor": 4}
    doc = anchored.config.document
    assert doc is not None and "ici_tensor_parallelism" in doc.merged and "ici_tensor_parallelism" not in doc.entries
    assert anchored.config.entry("ici_tensor_parallelism") is None  # no line of its own to rewrite
    # a mesh error on a merged key: located at the merge, and its fixes never rewrite the `<<` line
    bad = analyze(tmp_path / "c.yml", _with(BASE, "ici_fsdp_parallelism", "64") + "<<: {ici_tensor_parallelism: 2}\n")
    f = _one(bad.diagnostics, DiagCode.ICI_PRODUCT_MISMATCH)
    assert f.fixes and all(e.span.line != 4 or e.span.column == e.span.end_column for x in f.fixes for e in x.edits)


def test_robust_input_alias_anchor_and_bom_spans():
    src = source.parse("a: &v 5\nb: *v\n&k c: 1\n")
    assert src.entries["b"].value_span == source.Span(1, 3, 1, 5)  # the alias, not the anchored value on line 1
    assert src.entries["c"].key_span == source.Span(2, 3, 2, 4)  # the key, past its anchor
    a = source.parse("\ufeffa: 1\n").entries["a"]  # ruamel counts no column for a byte-order mark; the text does
    assert (a.key_span, a.value_span) == (source.Span(0, 1, 0, 2), source.Span(0, 4, 0, 5))


def test_robust_input_document_not_utf8(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    path = tmp_path / "latin1.yml"
    path.write_bytes(("model_name: llama2-7b\n# caf\u00e9\n" + BASE).encode("latin-1"))
    an = analyze(path)  # read by the loader: a located finding
    f = _one(an.diagnostics, DiagCode.INVALID_YAML)
    assert (f.span.line + 1, f.span.column + 1, f.key) == (2, 6, None)
    assert "not UTF-8 (byte 0xe9 at line 2)" in f.message
    with pytest.raises(OSError, match=r"not UTF-8 \(byte 0xe9 at line 2\)"):
        source.read_text(path)
    status = cli(["check", str(path), "--json"])  # the CLI reads the file itself: cannot read, exit status 2
    out = capsys.readouterr()
    assert status == 2 and "UTF-8" in out.out + out.err


def test_robust_input_parent_not_utf8(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    (tmp_path / "parent.yml").write_bytes("steps: 1\n# \u00e9t\u00e9\n".encode("latin-1"))
    path = tmp_path / "child.yml"
    path.write_text("# child\nbase_config: parent.yml\n" + BASE + "dcn_data_parallelism: 2\n", encoding="utf-8")
    for findings in (
        analyze(path, path.read_text()).diagnostics,
        analyze(path, path.read_text(), reader=lambda p: p.read_text(encoding="utf-8")).diagnostics,  # the editor's
    ):
        f = _one(findings, DiagCode.BASE_CONFIG_NOT_FOUND)
        assert (f.span.line + 1, f.key) == (2, "base_config")
        assert "not UTF-8 (byte 0xe9 at line 2)" in f.message
        assert any(x.code == DiagCode.DCN_ON_ONE_SLICE for x in findings)  # the document itself is still checked
    assert cli(["check", str(path), "--json"]) == 1
    found = [f for f in json.loads(capsys.readouterr().out)["findings"] if f["code"] == DiagCode.BASE_CONFIG_NOT_FOUND]
    assert [(f["line"], f["key"]) for f in found] == [(2, "base_config")]


def test_robust_input_too_large_finding_and_reader_limit(tmp_path: Path):
    big = "model_name: llama2-7b\n# " + "\u00e9" * (MAX_DOCUMENT_BYTES // 2) + "\n"  # 2 bytes each in UTF-8
    f = source.too_large(big, tmp_path / "c.yml")
    assert f is not None and (f.code, f.span.line, f.key) == (DiagCode.DOCUMENT_TOO_LARGE, 0, None)
    assert source.too_large("model_name: x\n" * 1000) is None
    path = tmp_path / "big.yml"
    path.write_text(big, encoding="utf-8")
    assert source.read_text(path) == big  # over the analysis limit, under the read limit: read, then refused
    an = analyze(path)
    assert [(x.code, x.span.line) for x in an.diagnostics] == [(DiagCode.DOCUMENT_TOO_LARGE, 0)]
    huge = tmp_path / "huge.yml"
    huge.write_bytes(b"# " + b"x" * MAX_READ_BYTES + b"\n")
    with pytest.raises(OSError, match="too large"):
        source.read_text(huge)


def test_robust_input_cli_one_limit_for_every_front_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """The editor and the CLI refuse the same documents with the same finding (one limit, one code)."""
    from server.editor.server import oversize

    for name, text in {
        "lines.yml": "model_name: llama2-7b\n" + "".join(f"sweep_{i}: {i}\n" for i in range(MAX_DOCUMENT_LINES)),
        "bytes.yml": "model_name: llama2-7b\nnote: '" + "x" * MAX_DOCUMENT_BYTES + "'\n",
        "fits.yml": "model_name: llama2-7b\n" + "".join(f"sweep_{i}: {i}\n" for i in range(MAX_DOCUMENT_LINES - 2)),
    }.items():
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        status = cli(["check", str(path), "--json"])
        codes = [f["code"] for f in json.loads(capsys.readouterr().out)["findings"]]
        editor = oversize(text)
        if name == "fits.yml":
            assert DiagCode.DOCUMENT_TOO_LARGE not in codes and editor is None
        else:
            assert (status, codes) == (1, [DiagCode.DOCUMENT_TOO_LARGE]), name
            assert editor is not None and editor.code == DiagCode.DOCUMENT_TOO_LARGE


def test_robust_input_long_sequences_are_priced_without_visiting_every_block():
    started = time.perf_counter()
    text = _with(DIMS, "max_target_length", str(10**30))
    analyze(None, text)  # used to loop over 2e27 query blocks
    assert time.perf_counter() - started < 5


def test_robust_input_block_key_count_closed_form_equals_the_loop():
    rng = random.Random(17)
    for _ in range(3000):
        block = rng.choice([2, 3, 7, 16, 64, 512])
        seq = rng.randint(1, 2500)
        window = rng.randint(1, 3000) if rng.random() < 0.4 else 0
        chunk = rng.randint(1, 3000) if not window and rng.random() < 0.5 else 0
        loop = 0
        for q0 in range(0, seq, block):
            q1 = min(q0 + block, seq) - 1
            first = architecture._first_key(q0, window, chunk)
            loop += (q1 // block - first // block + 1) * block * (q1 - q0 + 1)
        assert architecture._block_keys(seq, window, chunk, block) in (None, loop), (seq, window, chunk, block)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "a",
        "a\n",
        "a\n\n",
        "a\r\nb",
        "a\rb\r",
        "\n\n",
        "a\u2028b\x85c\x0bd\x0ce\x1cf\x1dg\x1eh\u2029i\nj",
        "a\r\n\r",
    ],
)
def test_robust_input_split_lines_breaks_only_at_newlines(text: str):
    plain = text.replace("\r\n", "\n").replace("\r", "\n")
    assert source.split_lines(text) == (plain.split("\n")[: -1 if plain.endswith("\n") else None] if text else [])
    assert "".join(source.split_lines(text, keepends=True)) == text
    assert len(source.split_lines(text, keepends=True)) == len(source.split_lines(text))
    if not any(c in text for c in source.ODD_BREAKS):
        assert source.split_lines(text) == text.splitlines()


def test_robust_input_fix_edits_land_on_the_client_line():
    text = "# a\u2028# b\ncompile_topology: v5e-256\nmodel_name: llama2-7b\nici_fsdp_parallelism: 3\n"
    an = analyze(None, text)
    f = _one(an.diagnostics, DiagCode.ICI_PRODUCT_MISMATCH)
    (edit,) = f.fixes[0].edits
    lines = source.split_lines(text, keepends=True)
    start = sum(map(len, lines[: edit.span.line])) + edit.span.column
    end = sum(map(len, lines[: edit.span.end_line])) + edit.span.end_column
    assert text[start:end] == "3"
    fixed = text[:start] + edit.new_text + text[end:]
    assert not [x for x in analyze(None, fixed).diagnostics if x.severity == 1]


# -- a seeded mutation loop: nothing a keystroke can produce raises ------------------------------------------
_POOL = [
    "abc", ".nan", ".inf", "-.inf", "1e-320", "1e300", "0", "-1", "'²'", "[[[[]]]]", "{a: {b: [1]}}", "*nowhere",
    "&x 5", "!!binary aGk=", '"a\\x00b"', "9" * 70, "~", "true", "[1, 2", "'unclosed", "\u2028", "?", "- x",
]  # fmt: skip
_KEYS = [
    "per_device_batch_size", "ici_fsdp_parallelism", "ici_tensor_parallelism", "dcn_data_parallelism",
    "compile_topology", "compile_topology_num_slices", "num_slices", "base_config", "model_name", "base_emb_dim",
    "num_experts", "head_dim", "remat_policy", "<<", "logical_axis_rules", "steps",
]  # fmt: skip
_SNIPPETS = ["\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\t", "\r", "\r\n", "#", ":", "- ", "&a ", "*a", "<<:"]


def _mutate(rng: random.Random, text: str) -> str:
    lines = text.split("\n")
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(5)
        i = rng.randrange(len(lines))
        if op == 0:
            lines.insert(i, f"{rng.choice(_KEYS)}: {rng.choice(_POOL)}")
        elif op == 1 and lines[i]:
            j = rng.randrange(len(lines[i]) + 1)
            lines[i] = lines[i][:j] + rng.choice(_SNIPPETS) + lines[i][j:]
        elif op == 2:
            del lines[i]
        elif op == 3:
            lines.insert(i, "# asap: slice=" + rng.choice(["v5e-256", "v5e-²", "x"]) + " slices=" + rng.choice(_POOL))
        else:
            lines.insert(i, lines[rng.randrange(len(lines))] if lines else "")
        if not lines:
            lines = [""]
    return "\n".join(lines)


def test_robust_input_seeded_mutations_never_raise(tmp_path: Path):
    rng = random.Random(1717)
    seeds = [p.read_text(encoding="utf-8") for p in sorted(EXAMPLES.glob("*.yml"))]
    for p in EXAMPLES.glob("*.yml"):
        (tmp_path / p.name).write_text(p.read_text(encoding="utf-8"), encoding="utf-8")  # parents resolve here
    started = time.perf_counter()
    for n in range(48):
        text = _mutate(rng, rng.choice(seeds))
        path = tmp_path / f"m{n}.yml"
        try:
            an = analyze(path, text)
        except Exception as e:  # pragma: no cover - the report names the input
            raise AssertionError(f"analyze raised {type(e).__name__}: {e} on {text!r}") from e
        n_lines = max(1, len(split_lines(text)))
        for f in an.diagnostics:
            assert f.file in (path, None) or f.file.parent == tmp_path, f
            assert 0 <= f.span.line < n_lines + 1 and (f.key is None or isinstance(f.key, str)), (f, text)
    assert time.perf_counter() - started < 20


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("max_target_length", "1e300", "beyond what ASAP prices"),
        ("max_target_length", ".nan", "finite number > 0"),
        ("max_target_length", "4096.5", "whole number"),
        ("gradient_accumulation_steps", "1e300", "beyond what ASAP prices"),
        ("gradient_accumulation_steps", ".inf", "finite number > 0"),
    ],
)
def test_sequence_and_accumulation_are_checked_where_the_estimate_reads_them(key: str, value: str, words: str) -> None:
    an = analyze(None, f"model_name: llama2-7b\ncompile_topology: v5e-16\n{key}: {value}\n")
    assert an.estimate is None
    found = [f for f in an.diagnostics if f.code == "ASAP129"]
    assert found and words in found[0].message and key in found[0].message
    assert found[0].span.line == 2  # 0-based: the key's own line


def test_robust_input_nesting_limit_is_exact_when_brackets_in_quotes_and_comments_mislead_the_guess():
    """The depth check reads a prefix of the text cut where counting brackets guesses the limit is crossed; brackets
    in a comment or a quoted string make that guess wrong, and the whole text decides."""
    many = "[" * (MAX_DEPTH + 5)
    quoted = BASE + f"# {many}\nnote: '{many}'\nlabel: \"{many}\"\n"
    assert "too deeply" not in " ".join(f.message for f in analyze(None, quoted).diagnostics)
    # and one level past the limit, after the misleading ones: found, on its line
    deep = quoted + "a: " + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "\n"
    found = [f for f in analyze(None, deep).diagnostics if "too deeply" in f.message]
    assert [(f.code, f.span.line, f.key) for f in found] == [(DiagCode.INVALID_YAML, len(split_lines(quoted)), "a")]


@pytest.mark.parametrize("n", [MAX_DEPTH, 1000, 5000])
def test_robust_input_long_bracket_lines_are_located(n: int):
    """A line of thousands of nested brackets (ruamel's scanner is quadratic in them) is refused where the limit is
    crossed: the mapping holding `a` is one level, so its MAX_DEPTH-th bracket is the first too deep."""
    text = BASE + "a: " + "[" * n + "]" * n + "\n"
    found = [f for f in analyze(None, text).diagnostics if "too deeply" in f.message]
    assert [(f.span.line, f.key) for f in found] == [(len(split_lines(BASE)), "a")]
    assert found[0].span.column == len("a: ") + MAX_DEPTH - 1


# -- issue 25 item 3: a batch size ASAP112 refuses reaches no consumer --------------------------------------------
REFUSED_BATCH = [".inf", "-.inf", ".nan", "1e-320", "5e-324", "1e308"]


@pytest.mark.parametrize("value", REFUSED_BATCH)
def test_robust_input_refused_batch_size_reaches_no_consumer(tmp_path: Path, value: str):
    """The resolved config hands every consumer the checked value (None), never the one ASAP112 refuses: the
    estimate and all that prices through it (enumeration, the agents, nothing-fits), an override or an agent's
    proposal of that value, the hover, the reference model of a verification. Each used to compute with it:
    OverflowError in the hover's global batch, math.ceil(devices / 1e-320) in the agents' context need."""
    from server.agents.coordinator import run
    from server.agents.types import Experiment
    from server.compile.verify import VerifyError, ref_spec
    from server.config.resolve import with_overrides
    from server.perf.estimate import EstimateError, inputs
    from server.presentation.explain import hover

    path = tmp_path / "c.yml"
    text = _with(BASE, PDBS, value)
    path.write_text(text, encoding="utf-8")
    an = analyze(path, text)
    cfg = an.config
    written = float(value.replace(".inf", "inf").replace(".nan", "nan"))
    assert repr(cfg.raw(PDBS)) == repr(written)  # as resolved, for the check and for showing
    problem = cfg.problem(PDBS)
    assert problem is not None and _one(an.diagnostics, BATCH).message == problem
    assert cfg.get(PDBS) is None and cfg.get(PDBS, 12) is None  # not the default either: the config sets it
    with pytest.raises(EstimateError) as est:
        inputs(cfg)
    assert (est.value.key, str(est.value)) == (PDBS, problem)
    proposed = with_overrides(analyze(path, BASE).config, {PDBS: written})  # an agent's or a command line's value
    with pytest.raises(EstimateError, match="per_device_batch_size"):
        inputs(proposed)
    assert an.check.slice is not None
    with pytest.raises(VerifyError, match="per_device_batch_size"):
        ref_spec(proposed, an.check.slice)
    found = hover(an, 2, 0)
    assert found is not None
    md = found[0]
    assert f"**per_device_batch_size** = {written}" in md and "ASAP112" in md
    assert "Global batch" not in md  # nothing computed from it
    result = run(Experiment(path, text), use_kb=False)  # the agents' diagnosis and proposal engine
    assert result.diagnosis is not None and result.diagnosis.bottleneck == "invalid"
    assert result.notes == [] and result.proposals == []


BATCH_CLI_VALUES = [*REFUSED_BATCH, "1" * 4301]


@pytest.mark.parametrize("value", BATCH_CLI_VALUES, ids=[*REFUSED_BATCH, "4301-digits"])
@pytest.mark.parametrize("command", ["analyze", "estimate", "check"])
def test_robust_input_cli_refused_batch_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: str, value: str
):
    """`asap analyze/estimate/check --json` on a batch size ASAP112 (or the YAML reader) refuses: exit status 1,
    one strict JSON document with the finding at line 3, no traceback, and (analyze) the agents say nothing
    failed."""
    monkeypatch.setenv("ASAP_CACHE_DIR", str(tmp_path / "cache"))  # no analysis another build cached
    path = tmp_path / "c.yml"
    path.write_text(_with(BASE, PDBS, value), encoding="utf-8")
    status = cli([command, str(path), "--json"])
    out = capsys.readouterr()
    assert status == 1, out.err
    assert "Traceback" not in out.err and "failed" not in out.err, out.err
    doc = json.loads(out.out, parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))
    code = YAML if len(value) > 64 else BATCH
    found = [(f["code"], f["line"], f["key"]) for f in doc["findings"] if f["code"] in (YAML, BATCH)]
    assert found == [(code, 3, PDBS)], doc["findings"]
    assert doc.get("estimate") is None
    if command == "analyze":
        assert doc["notes"] == [] and doc["proposals"] == []


# -- issue 25 item 2: an alias bomb is refused before anything expands it ---------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        pytest.param(_aliases_of("[1]", MAX_COLLECTION_ALIASES), id="aliases-at-the-count"),
        pytest.param(_aliases_of(f"[{', '.join(['x'] * 49)}]", MAX_ALIAS_NODES // 50), id="values-at-the-bound"),
        pytest.param(_alias_chain(2), id="nested-60-levels-through-an-alias"),
        pytest.param(f"m: &m 4\nmany: [{', '.join(['*m'] * 500)}]\n", id="scalar-aliases-are-not-counted"),
        pytest.param("a: &a [1, *a]\nb: &b {k: *b}\nc: *a\n", id="an-alias-inside-its-own-anchor"),
    ],
)
def test_robust_input_aliases_within_the_bounds_are_read(text: str):
    src = source.parse(BASE + text)
    assert "many" in src.entries or "d1" in src.entries or "c" in src.entries
    assert all(f.code != ALIASES for f in analyze(None, BASE + text).diagnostics)


def test_robust_input_alias_bomb_reaches_no_consumer(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """The bomb as a value: one finding, at the key where it crosses the bound, and nothing built from the value
    (its messages used to print the million values: `asap check` took 70-90 s, a code action 14 s, and
    `model_name: *l5` was an internal error, a file name too long)."""
    path = tmp_path / "bomb.yml"
    for key in (PDBS, "model_name", "ici_fsdp_parallelism", "compile_topology"):
        text = ALIAS_BOMB + _with(BASE, key, "*l5")
        an = analyze(path, text)
        assert [(f.code, f.key, f.span.line) for f in an.diagnostics] == [(ALIASES, "l2", 2)]
        assert an.config.values == {} and an.estimate is None
        path.write_text(text, encoding="utf-8")
        for command in (["check"], ["analyze"], ["estimate"], ["check", "--json"]):
            status = cli([*command, str(path)])
            out = capsys.readouterr()
            said = out.out + out.err
            assert status == 1 and "Traceback" not in said, said[:2000]
            assert "ASAP008" in said and len(said) < 4000 and "'x', 'x'" not in said, said[:500]


def test_robust_input_alias_bomb_in_a_knowledge_record(tmp_path: Path):
    """A record comes from `asap kb add` and the team's shared store: its loader has the same bound."""
    from server.kb.records import RecordError, load_record

    path = tmp_path / "r1.yaml"
    path.write_text("id: r1\n" + ALIAS_BOMB + "title: *l5\n", encoding="utf-8")
    with pytest.raises(RecordError, match="alias bombs") as e:
        load_record(path)
    assert e.value.line == 4  # l2, where the bound is crossed


@pytest.mark.parametrize("command", ["check", "analyze"])
def test_robust_input_model_name_longer_than_any_file_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """A model_name of 5,000 characters is an unknown model (ASAP004), not ENAMETOOLONG from the lookup on disk."""
    path = tmp_path / "long.yml"
    path.write_text(f"model_name: {'a' * 5000}\nici_fsdp_parallelism: -1\ncompile_topology: v5e-8\n")
    assert cli([command, str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(f["code"], f["line"]) for f in out["findings"] if f["code"] == "ASAP004"] == [("ASAP004", 1)]
    assert cli(["estimate", str(path), "--json"]) == 0  # priced with base.yml's dimensions
    assert json.loads(capsys.readouterr().out)["mfu"] > 0


# -- issue 25 item 8: a whole number MaxText's config converts reaches every consumer as that number ----------------
@pytest.mark.parametrize("value", ["16.0", '"16"', "' 16 '", "!!str 16"])
def test_robust_input_converted_degree_reaches_every_consumer_as_the_number(tmp_path: Path, value: str):
    """MaxText reads `ici_tensor_parallelism: "16"` (and 16.0) as 16 and launches. Every consumer sees 16, as for the
    config that writes 16: the mesh, the estimate, the hover, an override of the value, the agents' diagnosis and
    proposals; the only difference is ASAP009's hint."""
    from server.agents.coordinator import run
    from server.agents.types import Experiment
    from server.config import mesh
    from server.config.resolve import with_overrides
    from server.presentation.explain import hover

    tp = "ici_tensor_parallelism"
    plain, spelled = _with(BASE, tp, "16"), _with(BASE, tp, value)
    (tmp_path / "plain.yml").write_text(plain, encoding="utf-8")
    path = tmp_path / "c.yml"
    path.write_text(spelled, encoding="utf-8")
    a, b = analyze(tmp_path / "plain.yml", plain), analyze(path, spelled)
    assert [f.code for f in b.diagnostics if f.code != DiagCode.NUMBER_SPELLING] == [f.code for f in a.diagnostics]
    assert _one(b.diagnostics, DiagCode.NUMBER_SPELLING).span.line == 4
    assert b.check.mesh_dict() == a.check.mesh_dict() and b.config.get(tp) == 16
    assert a.estimate is not None and b.estimate is not None and b.estimate.time.step_s == a.estimate.time.step_s
    over = with_overrides(a.config, {tp: value.strip("'\" ").removeprefix("!!str ")})  # a proposal's or CLI value
    assert over.get(tp) == 16 and mesh.check(over).degree("tensor") == 16
    md = hover(b, 4, 0)
    assert md is not None and "Degree: **16**" in md[0]
    ra, rb = run(Experiment(tmp_path / "plain.yml", plain), use_kb=False), run(Experiment(path, spelled), use_kb=False)
    assert ra.diagnosis is not None and rb.diagnosis is not None
    assert rb.diagnosis.bottleneck == ra.diagnosis.bottleneck
    assert [(p.ici, p.dcn, p.other_changes) for p in rb.proposals] == [
        (p.ici, p.dcn, p.other_changes) for p in ra.proposals
    ]


@pytest.mark.parametrize("written", ["[1, 2]", "{a: 1}", "7", "*a0"])
@pytest.mark.parametrize("key", ["dtype", "weight_dtype"])
def test_robust_input_a_dtype_that_is_no_name_is_refused_by_verify(key: str, written: str) -> None:
    """The fuzz's one internal error (seed 2512051): `dtype: *a0` (a list) made the reference model's dtype lookup
    raise TypeError (unhashable) while the editor read cached verdicts; verify refuses it at the key instead."""
    from server.compile.verify import VerifyError, ref_spec

    an = analyze(None, f"a0: &a0 [1, *a0]\ncompile_topology: v5e-16\nmodel_name: llama2-7b\n{key}: {written}\n")
    with pytest.raises(VerifyError, match=key):
        ref_spec(an.config, an.check.slice)


# -- the run's XLA flags (issue 26 item 1): a comment, --xla-flags and asap.xlaFlags never raise ------------------
JUNK_FLAGS = [
    "--",
    "- = -- =",
    "--=1 ---x --9lives=1 --a==b",
    "--xla_tpu_scoped_vmem_limit_kib=" + "9" * 5000,  # int() refuses over 4,300 digits
    "--xla_tpu_pcie_bandwidth_multiplier=1e999 --xla_unknown=1e999",  # infinity is no JSON number
    "--xla_x=\x00\x01\x7f --\u200fxla_rtl=1 --xla_tab=1\t--xla_nbsp=1\u00a0--xla_ideographic=1\u3000x",
    '\'"`$(rm -rf /)` ${HOME} --xla_quote="a b"',
    "--xla_tpu_enable_data_parallel_all_reduce_opt " * 3000,  # one flag, repeated: one problem
]


@pytest.mark.parametrize("flags", JUNK_FLAGS, ids=range(len(JUNK_FLAGS)))
def test_robust_input_xla_flags_junk_through_every_source(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: str
) -> None:
    """Junk as the config's comment is ASAP011 warnings on that line, at most MAX_REPORTED; as --xla-flags it is the
    `xla_flags` problems of a valid JSON document; the estimate is made either way."""
    from server.config.run_flags import MAX_REPORTED

    comment = f"# LIBTPU_INIT_ARGS={flags}\n"
    an = analyze(None, comment + BASE)
    said = [f for f in an.diagnostics if f.code == DiagCode.XLA_FLAGS_PROBLEM]
    if any(f.code == DiagCode.INVALID_YAML for f in an.diagnostics):  # YAML refuses control characters anywhere
        assert said == [] and any(c in flags for c in "\x00\x01\x7f")
    else:
        assert said and len(said) <= MAX_REPORTED and {f.span.line for f in said} == {0}
        assert an.estimate is not None
    path = tmp_path / "c.yml"
    path.write_text(BASE, encoding="utf-8")
    status = cli(["estimate", str(path), "--json", "--xla-flags", flags])
    out = capsys.readouterr()
    assert status == 0, out.err
    doc = json.loads(out.out)["xla_flags"]  # strict JSON: no Infinity
    assert doc["source"] == "cli" and doc["problems_total"] >= 1 and len(doc["problems"]) <= MAX_REPORTED
    assert cli(["estimate", str(path), "--xla-flags", flags]) == 0
    assert "XLA flags: from --xla-flags" in capsys.readouterr().out


def test_robust_input_xla_flags_huge_strings_are_cut_and_say_so(tmp_path: Path) -> None:
    from server.config.run_flags import MAX_FLAGS_CHARS, FlagSource, read_comment

    huge = "--xla_tpu_enable_async_collective_fusion_fuse_all_gather=true " + "--xla_filler=1 " * 200_000
    src = FlagSource.given("setting", huge)
    assert src is not None and src.truncated and len(src.text) == MAX_FLAGS_CHARS
    an = analyze(None, BASE, flags=src)
    rf = an.config.run_flags
    assert rf.flags is not None and rf.flags.enabled() == {"cf_for_all_gather": True}
    assert rf.to_json()["problems"][-1]["message"].startswith(f"longer than {MAX_FLAGS_CHARS:,} characters")
    assert len(rf.hover_line()) < 300  # one line, whatever the string
    comment = read_comment([f"# XLA_FLAGS={huge}"])
    assert comment is not None and comment.truncated and len(comment.text) <= MAX_FLAGS_CHARS
    assert len(comment.tokens) == len(comment.text.split())


def test_robust_input_xla_flags_undecodable_bytes_on_the_command_line(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 on the command line arrive as lone surrogates (Python's surrogateescape): printed
    and hashed as replacement characters, not a UnicodeEncodeError (exit status 3)."""
    import subprocess
    import sys

    path = tmp_path / "c.yml"
    path.write_text(BASE, encoding="utf-8")
    for extra in ([b"--json"], []):
        r = subprocess.run(
            [sys.executable, "-m", "server.cli.main", "estimate", str(path).encode(), b"--xla-flags",
             b"--xla_x=\xe9\xff --xla_tpu_enable_data_parallel_all_reduce_opt=tr\xc3", *extra],
            capture_output=True, cwd=ROOT, timeout=120,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr.decode(errors="replace")
        out = r.stdout.decode("utf-8")
        if extra:
            doc = json.loads(out)["xla_flags"]
            assert doc["unknown"][0]["name"] == "xla_x" and "\ufffd" in doc["unknown"][0]["value"]
            assert "expects true or false" in doc["problems"][0]["message"]
        else:
            assert "XLA flags: from --xla-flags: data_parallel_overlap=tr\ufffd" in out
