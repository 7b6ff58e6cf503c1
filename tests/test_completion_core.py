"""Completion and document links on any text (server/presentation/completion.py, navigation.py), without an
editor: never an exception, every item's range on the cursor's line and around the cursor, and the tables they
answer from agree with ASAP's own (base.yml's keys, the slice catalog, the cost model's remat policies)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from server.config import slices
from server.config.axes import IGNORED_KEYS, KEY_TO_AXIS
from server.config.defaults import base_defaults
from server.config.source import split_lines
from server.perf import remat
from server.presentation import navigation
from server.presentation.completion import complete, key_docs, values_for

# Lines a config is made of, and the pieces a half-typed line has.
LINES = st.sampled_from(
    [
        "model_name: llama3-8b",
        "compile_topology: v6e-16",
        "remat_policy: ",
        "scan_layers: tr",
        "ici_fsdp_parallelism: -1  # fill",
        "# asap: slice=v5e-",
        "# asap: profile=runs/x",
        "base_config: 'common.yml'",
        "  nested: 1",
        "- item",
        "[1, 2",
        'key: "unterminated',
        "model_name: 'lla",
        "\ufeffmodel_name: x",
        "",
        "---",
        ":",
        "<<: *a",
        "\t",
        "mod",
    ]
)
TEXTS = st.lists(st.one_of(LINES, st.text(max_size=30)), max_size=12).flatmap(
    lambda lines: st.tuples(st.just(lines), st.sampled_from(["\n", "\r\n", "\r"]), st.booleans())
)


@settings(derandomize=True, max_examples=400, database=None, deadline=None)
@given(TEXTS, st.integers(0, 14), st.integers(0, 40))
def test_completion_never_raises_and_ranges_stay_on_the_line(doc, line: int, column: int):
    lines, eol, final = doc
    text = eol.join(lines) + (eol if final else "")
    items = complete(text, line, column, Path("/nonexistent/c.yml"))
    text_lines = split_lines(text) or [""]
    for it in items:
        assert it.span.line == it.span.end_line == line
        assert 0 <= it.span.column <= it.span.end_column
        if line < len(text_lines):
            assert it.span.end_column <= len(text_lines[line])
    links = navigation.document_links(text, Path("/nonexistent/c.yml"), None)
    assert links == [], "nothing exists under /nonexistent"


def test_completion_tables_agree_with_asap():
    keys = key_docs()
    assert set(base_defaults()) - set(IGNORED_KEYS) <= set(keys), "every key of base.yml ASAP knows"
    assert set(KEY_TO_AXIS) - set(IGNORED_KEYS) <= set(keys), "every mesh key"
    assert not set(IGNORED_KEYS) & set(keys), "keys MaxText ignores are not offered"
    assert [v.value for v in values_for("compile_topology", None, None)] == [
        n for g in slices.CHIPS for n in slices.known_names(g)
    ]
    assert [v.value for v in values_for("remat_policy", None, None)] == [*remat.POLICIES, "custom"]
    assert [v.value for v in values_for("scan_layers", None, None)] == ["true", "false"]
    assert values_for("ici_fsdp_parallelism", None, None) == []
