"""The "did you mean" quick fix on an unknown model_name (ASAP004): the closest names MaxText would find, written
in the value's own quoting, vetted like every fix (server/config/safe_edits.py) so that it clears the finding."""

from __future__ import annotations

from pathlib import Path

import pytest

from server.common.findings import Finding
from server.config import resolve
from server.config.safe_edits import static_checks, vet_fix


def unknown(cfg: resolve.Config) -> Finding:
    (f,) = [f for f in cfg.findings if f.code == "ASAP004"]
    return f


@pytest.mark.parametrize(
    ("written", "first"),
    [
        ("llama3-8c", "llama3-8b"),
        ("lama2-7b", "llama2-7b"),
        ("Llama3-8B", "llama3-8b"),  # case ignored in the match, the catalog's spelling written
        ("'mixtral-8x7c'", "'mixtral-8x7b'"),
        ('"gemma2-9"', '"gemma2-9b"'),
    ],
)
def test_model_name_fix_suggests_the_closest_names(write, written: str, first: str):
    text = f"steps: 1\nmodel_name: {written}  # the model\n"
    path = write("c.yml", text)
    cfg = resolve.load(path)
    f = unknown(cfg)
    assert f.fixes, "a did-you-mean fix"
    assert 1 <= len(f.fixes) <= 3
    best = f.fixes[0]
    assert best.preferred and best.title == f"Did you mean '{first.strip(chr(39) + chr(34))}'?"
    (edit,) = best.edits
    assert edit.new_text == first
    line = text.splitlines()[1]
    assert line[edit.span.column : edit.span.end_column] == written, "only the value, quotes included"

    vetted = vet_fix(text, best, path=path, clears=("ASAP004", "model_name"), recheck=static_checks(path))
    assert vetted.ok, vetted.reason
    assert vetted.text == text.replace(written, first)
    assert "# the model" in (vetted.text or "")


def test_model_name_fix_none_for_a_name_like_no_other(write):
    assert unknown(resolve.load(write("c.yml", "steps: 1\nmodel_name: zzqqxx\n"))).fixes == []


def test_model_name_fix_none_when_the_name_is_set_in_a_parent(write):
    write("parent.yml", "model_name: llama3-8c\n")
    cfg = resolve.load(write("c.yml", "base_config: parent.yml\nsteps: 1\n"))
    assert unknown(cfg).fixes == [], "the document does not hold the value: nothing to edit here"


def test_model_name_fix_includes_a_local_model_file(write, tmp_path: Path):
    write("models/my-custom-7b.yml", "base_emb_dim: 256\n")
    cfg = resolve.load(write("c.yml", "steps: 1\nmodel_name: my-custom-7c\n"))
    assert [fx.edits[0].new_text for fx in unknown(cfg).fixes][:1] == ["my-custom-7b"]
