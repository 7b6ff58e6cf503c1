"""Applying a proposal to a config: golden before/after documents, and a property over generated configs that
everything but the mesh keys stays byte-identical and the result validates to the proposal."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from server.config.apply import ApplyError, apply_text, proposal_edits
from server.services.analysis import analyze


def apply(text: str, ici: dict, dcn: dict | None = None, other: dict | None = None, path: Path | None = None) -> str:
    an = analyze(path, text)
    return apply_text(text, proposal_edits(an.config, ici, dcn or {}, other))


def mesh_of(text: str, path: Path | None = None) -> tuple[dict, dict]:
    an = analyze(path, text)
    mesh_errors = [f for f in an.findings if f.severity == 1]  # the static checks (HBM fit is the estimate's)
    assert not mesh_errors, [f.message for f in mesh_errors]
    ici = {d.axis.name: int(d.degree) for d in an.check.ici if d.degree != 1}
    dcn = {d.axis.name: int(d.degree) for d in an.check.dcn if d.degree != 1}
    return ici, dcn


GOLDEN = [
    (
        "values replaced in place, comments and other keys untouched",
        """\
        # Llama 2 7B on a v5e-256 slice
        compile_topology: v5e-256   # the slice we got
        model_name: llama2-7b
        per_device_batch_size: 4
        ici_fsdp_parallelism: 16    # tuned by hand last week
        ici_tensor_parallelism: 16
        remat_policy: full
        """,
        ({"fsdp": 256}, {}, None),
        """\
        # Llama 2 7B on a v5e-256 slice
        compile_topology: v5e-256   # the slice we got
        model_name: llama2-7b
        per_device_batch_size: 4
        ici_fsdp_parallelism: 256    # tuned by hand last week
        ici_tensor_parallelism: 1
        remat_policy: full
        """,
    ),
    (
        "a -1 that still resolves right stays -1; a missing key is inserted after the mesh block",
        """\
        compile_topology: v5e-256
        model_name: llama2-7b
        per_device_batch_size: 4
        ici_fsdp_parallelism: -1
        remat_policy: full
        """,
        ({"fsdp": 64, "tensor": 4}, {}, None),
        None,  # tensor 4 cannot be placed on v5e-256 without splitting: checked below with a placeable one
    ),
    (
        "-1 kept, tensor inserted right after the mesh block",
        """\
        compile_topology: v5e-256
        model_name: llama2-7b
        per_device_batch_size: 4
        ici_fsdp_parallelism: -1
        remat_policy: full
        """,
        ({"fsdp": 16, "tensor": 16}, {}, None),
        """\
        compile_topology: v5e-256
        model_name: llama2-7b
        per_device_batch_size: 4
        ici_fsdp_parallelism: -1
        ici_tensor_parallelism: 16
        remat_policy: full
        """,
    ),
    (
        "batch and remat changes in place; the DCN key inserted (dcn_data's default -1 still resolves to 1)",
        """\
        compile_topology: v5e-256
        compile_topology_num_slices: 2
        model_name: llama2-7b
        per_device_batch_size: 4
        ici_fsdp_parallelism: 256
        remat_policy: full
        """,
        ({"fsdp": 256}, {"fsdp": 2}, {"per_device_batch_size": 8, "remat_policy": "minimal"}),
        """\
        compile_topology: v5e-256
        compile_topology_num_slices: 2
        model_name: llama2-7b
        per_device_batch_size: 8
        ici_fsdp_parallelism: 256
        dcn_fsdp_parallelism: 2
        remat_policy: minimal
        """,
    ),
]


@pytest.mark.parametrize(("name", "before", "proposal", "after"), [g for g in GOLDEN if g[3] is not None])
def test_golden(name: str, before: str, proposal: tuple, after: str) -> None:
    before, after = textwrap.dedent(before), textwrap.dedent(after)
    ici, dcn, other = proposal
    out = apply(before, ici, dcn, other)
    assert out == after, name
    assert mesh_of(out) == (ici, dcn)  # re-validated: launches with exactly the proposed mesh


def test_nothing_to_change_gives_no_edit() -> None:
    text = "compile_topology: v5e-256\nmodel_name: llama2-7b\nici_fsdp_parallelism: -1\n"
    an = analyze(None, text)
    assert proposal_edits(an.config, {"fsdp": 256}, {}) == []


def test_keys_inherited_from_a_parent_are_overridden_in_the_child(tmp_path: Path) -> None:
    (tmp_path / "base.yml").write_text("ici_fsdp_parallelism: 16\nici_tensor_parallelism: 16\n")
    child = tmp_path / "c.yml"
    text = "base_config: base.yml\ncompile_topology: v5e-256\nmodel_name: llama2-7b\n"
    child.write_text(text)
    out = apply(text, {"fsdp": 256}, path=child)
    assert out == text + "ici_fsdp_parallelism: 256\nici_tensor_parallelism: 1\n"
    assert (tmp_path / "base.yml").read_text() == "ici_fsdp_parallelism: 16\nici_tensor_parallelism: 16\n"
    assert mesh_of(out, child) == ({"fsdp": 256}, {})


def test_a_file_without_a_final_newline_keeps_its_ending() -> None:
    text = "compile_topology: v5e-256\nmodel_name: llama2-7b\nici_fsdp_parallelism: 256"
    out = apply(text, {"fsdp": 16, "tensor": 16})
    assert (
        out == "compile_topology: v5e-256\nmodel_name: llama2-7b\nici_fsdp_parallelism: 16\nici_tensor_parallelism: 16"
    )
    text2 = "compile_topology: v5e-256\nmodel_name: llama2-7b"  # no mesh key at all, no final newline
    assert apply(text2, {"fsdp": 16, "tensor": 16}).endswith("llama2-7b\nici_tensor_parallelism: 16")


def test_a_collection_value_is_not_rewritten() -> None:
    an = analyze(None, "compile_topology: v5e-256\nmodel_name: llama2-7b\nici_tensor_parallelism:\n  - 4\n")
    with pytest.raises(ApplyError, match="collection"):
        proposal_edits(an.config, {"fsdp": 256}, {})


# -- property: random key order, comments, blank lines, quoting --------------------------------------------
OTHER = [
    ("model_name", "llama2-7b"),
    ("per_device_batch_size", "4"),
    ("remat_policy", "full"),
    ("max_target_length", "2048"),
    ("steps", "100"),
    ("run_name", '"my run"'),
    ("dataset_type", "synthetic"),
]
PROPOSALS = [
    ({"fsdp": 256}, {}),
    ({"fsdp": 16, "tensor": 16}, {}),
    ({"data": 16, "fsdp": 16}, {}),
    ({"fsdp": 16, "context": 16}, {}),
]


@st.composite
def configs(draw: st.DrawFn) -> str:
    keys = [("compile_topology", "v5e-256"), *OTHER]
    mesh = draw(
        st.sampled_from([{"fsdp": "-1"}, {"fsdp": "16", "tensor": "16"}, {"fsdp": "256"}, {"data": "2", "fsdp": "-1"}])
    )
    keys += [(f"ici_{a}_parallelism", v) for a, v in mesh.items()]
    order = draw(st.permutations(keys))
    lines = []
    for k, v in order:
        if draw(st.booleans()):
            lines.append(f"# about {k}")
        comment = f"  # note {k}" if draw(st.booleans()) else ""
        lines.append(f"{k}: {v}{comment}")
        if draw(st.booleans()):
            lines.append("")
    return "\n".join(lines) + "\n"


@settings(max_examples=60, deadline=None, derandomize=True)
@given(configs(), st.sampled_from(PROPOSALS))
def test_applying_keeps_everything_else_byte_identical(text: str, proposal: tuple) -> None:
    ici, dcn = proposal
    out = apply(text, ici, dcn)
    assert mesh_of(out) == (ici, dcn)

    def strip(s: str) -> list[str]:
        return [ln for ln in s.splitlines() if not ln.split("#")[0].strip().split(":")[0].endswith("_parallelism")]

    assert strip(out) == strip(text)  # every non-mesh line, comment and blank line unchanged, in order
    for ln in text.splitlines():  # comments on mesh lines survive too
        if "_parallelism" in ln and "#" in ln:
            assert ln[ln.index("#") :] in out


@pytest.mark.parametrize("eol", ["\r\n", "\r"])
def test_inserted_keys_take_the_files_line_ending(eol: str) -> None:
    text = "compile_topology: v5e-256\nmodel_name: llama2-7b\nici_fsdp_parallelism: -1  # fill\nremat_policy: full\n"
    out = apply(text.replace("\n", eol), {"fsdp": 16, "tensor": 16})
    assert out == text.replace("# fill\n", "# fill\nici_tensor_parallelism: 16\n").replace("\n", eol)
    bare = eol.join(["compile_topology: v5e-256", "model_name: llama2-7b", "ici_fsdp_parallelism: 16"])  # no break
    assert apply(bare, {"fsdp": 16, "tensor": 16}) == bare + f"{eol}ici_tensor_parallelism: 16"
