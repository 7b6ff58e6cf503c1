"""The incremental YAML reading must be indistinguishable from parsing the whole text."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from server.config import source
from server.config.source import YamlSyntaxError


def _full(text: str):
    """The reference: the whole document parsed at once."""
    return source.parse(text, incremental=False)


def _same(text: str) -> None:
    try:
        ref = _full(text)
    except YamlSyntaxError as e:
        with pytest.raises(YamlSyntaxError) as got:
            source.parse(text)
        assert (got.value.message, got.value.span) == (e.message, e.span)
        return
    inc = source.parse(text)
    assert inc.is_mapping == ref.is_mapping
    assert list(inc.entries) == list(ref.entries)
    for k, e in ref.entries.items():
        assert inc.entries[k] == e, k


ENTRIES = [
    "ici_fsdp_parallelism: -1",
    "ici_tensor_parallelism: 4   # tp",
    "run_name: 'a # b'",
    'base_output_directory: "gs://b/x"',
    "steps: [1, 2,\n  3]",
    "logical_axis_rules: [\n  ['batch', ['data', 'fsdp']],\n]",
    "mesh_axes:\n  - data\n  - fsdp",
    "notes: |\n  line one\n  line two: not a key",
    "nested:\n  a: 1\n  b: {c: 2}",
    "empty:",
    "'quoted key': 3",
    "# just a comment",
    "",
    "per_device_batch_size: 0.5",
    "flag: true",
]


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(ENTRIES), min_size=1, max_size=12))
def test_incremental_equals_whole_parse_on_valid_configs(parts):
    _same("\n".join(parts) + "\n")


BASE = (
    "# header\nmodel_name: llama2-7b\ncompile_topology: v5e-256\nsteps: [1,\n 2]\n"
    "ici_fsdp_parallelism: 32   # c\nnotes: |\n  text\nici_tensor_parallelism: 16\n"
)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.integers(0, len(BASE)), st.integers(0, 3), st.sampled_from(list("x:[]{}'\"#-&*\n \t|>,")))
def test_incremental_equals_whole_parse_under_random_edits(pos, cut, ch):
    _same(BASE[:pos] + ch + BASE[pos + cut :])


def test_empty_value_at_end_of_text_has_the_same_span_both_ways():
    # found by the random-edit property: `key:` with trailing spaces and no newline at the very end
    _same("steps: 1\nici_tensor_parallelism:  ")
    src = source.parse("steps: 1\nici_tensor_parallelism:  ")
    e = src.entries["ici_tensor_parallelism"]
    assert e.value is None and (e.value_span.line, e.value_span.column) == (1, len("ici_tensor_parallelism:"))


def test_an_edit_reparses_only_its_piece(monkeypatch):
    text = "".join(f"key_{i}: {i}\n" for i in range(200))
    source.parse(text)
    calls = []
    real = source._load_entries
    monkeypatch.setattr(source, "_load_entries", lambda t: calls.append(t) or real(t))
    src = source.parse(text.replace("key_100: 100", "key_100: 1000"))
    assert calls == ["key_100: 1000\n"]
    assert src.entries["key_100"].value == 1000 and src.entries["key_199"].key_span.line == 199


def test_cached_pieces_are_bounded_in_characters_too(monkeypatch):
    """Issue 25: each edit inside a long list value is a new piece, and a 480 KB one parsed takes 18 MiB: the pieces
    kept are bounded by their characters as well as by their number (the newest stays, and serves the next edit)."""
    monkeypatch.setattr(source, "_PIECES", source.OrderedDict())
    monkeypatch.setattr(source, "_pieces_chars", 0)
    monkeypatch.setattr(source, "_PIECES_MAX_CHARS", 20_000)
    big = "big: [" + ", ".join(str(i) for i in range(1500)) + "]\n"  # about 8,900 characters
    for v in range(6):  # six versions of the list, each edit inside it
        text = "model_name: llama2-7b\n" + big.replace("[0,", f"[{v},")
        _same(text)
        assert sum(map(len, source._PIECES)) == source._pieces_chars <= source._PIECES_MAX_CHARS
    calls = []
    real = source._load_entries
    monkeypatch.setattr(source, "_load_entries", lambda t: calls.append(t) or real(t))
    assert source.parse(text.replace("llama2-7b", "llama3-8b")).entries["big"].value[0] == 5
    assert calls == ["model_name: llama3-8b\n"]  # the newest list is still cached


def test_the_reused_loaders_keep_nothing_of_earlier_texts():
    """Issue 25: ruamel's YAML object adds a DocInfo at every load or parse and drops none; the loaders reused for
    every parse (here and in safe_edits.py's reading of anchors) grew with each version analysed."""
    from server.config import safe_edits

    for v in range(30):
        source.parse(f"model_name: llama2-7b\nsteps: {v}\n# v{v}\n", incremental=False)
        assert safe_edits._read_shape(f"a: &x {v}\nb: *x\n") is not None
    assert len(source._local.yaml.doc_infos) == 1 and len(safe_edits._local.yaml.doc_infos) == 1
