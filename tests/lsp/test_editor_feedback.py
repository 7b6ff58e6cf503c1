"""The editor as a user lives in it (issue 18): quick fixes only where they fix something, short hovers with
readable sources and links, errors on the token that is wrong, a mesh product error on the key just edited, and a
stale diagnosis that never jumps to line 1 while the YAML is broken."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from lsprotocol import types as lsp

from .conftest import AGENTS, AsapClient, Doc, by_code, codes, initialize, position_of, utf16_len, wait_for_log

module_loop = pytest.mark.asyncio(loop_scope="module")

# v5e-16: 16 devices; fsdp 4 x tensor 4 is a valid mesh, tensor-heavy enough for the agents to propose a change
MESH = """\
# a comment line: no lightbulb here
compile_topology: v5e-16
model_name: llama2-7b
per_device_batch_size: 1
ici_fsdp_parallelism: 4
ici_tensor_parallelism: 4
ici_expert_parallelism: 1
"""

INFO = {"settings": {"showInformationDiagnostics": True}}


def line_of(text: str, key: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines()) if ln.startswith(f"{key}:"))


def point(line: int, character: int = 0) -> lsp.Range:
    return lsp.Range(lsp.Position(line, character), lsp.Position(line, character))


async def actions_at(doc: Doc, rng: lsp.Range, diags: list[lsp.Diagnostic]) -> list[lsp.CodeAction]:
    """A code action request as VS Code sends it for the cursor at `rng`, with every diagnostic of the file in
    its context (a client that does not filter them by range)."""
    res = await doc.client.text_document_code_action_async(
        lsp.CodeActionParams(lsp.TextDocumentIdentifier(doc.uri), rng, lsp.CodeActionContext(diagnostics=diags))
    )
    return [a for a in res or [] if isinstance(a, lsp.CodeAction)]


def set_value(doc: Doc, key: str, value: str) -> int:
    """An incremental edit of `key`'s value (as typing over it does); returns the new version."""
    line = line_of(doc.text, key)
    text = doc.text.splitlines()[line]
    start = text.index(":") + 2
    end = len(text.split(" #")[0].rstrip())
    return doc.edit([lsp.TextEdit(lsp.Range(lsp.Position(line, start), lsp.Position(line, end)), value)])


# -- code actions only on their ranges ---------------------------------------------------------------------


@module_loop
async def test_code_actions_only_on_the_ranges_they_fix(shared: AsapClient, tmp_path: Path):
    cfg = tmp_path / "product.yml"
    cfg.write_text(MESH.replace("ici_tensor_parallelism: 4", "ici_tensor_parallelism: 8"))
    doc = Doc(shared, cfg).open()
    diags = await doc.diagnostics(version=1)
    product = by_code(diags, "ASAP101")
    assert await actions_at(doc, point(0, 4), diags) == [], "a comment line gets no quick fix"
    assert await actions_at(doc, point(line_of(doc.text, "model_name"), 2), diags) == []
    here = await actions_at(doc, point(product.range.start.line, 3), diags)
    assert here and all(a.diagnostics and a.diagnostics[0].code == "ASAP101" for a in here)
    doc.close()


async def test_proposals_only_on_the_keys_the_diagnosis_implicates(fresh: AsapClient, tmp_path: Path):
    """The agents' proposals fix their diagnosis: offered on the keys it implicates (and on the mesh block's
    first key, where the code lens' "Proposals" opens them), not on a comment or an unrelated key. Problems
    lists the diagnosis once, the other keys as related information."""
    await initialize(fresh, INFO)
    cfg = tmp_path / "tp.yml"
    cfg.write_text(MESH.replace("ici_fsdp_parallelism: 4", "ici_fsdp_parallelism: 1").replace(": 4", ": 16"))
    doc = Doc(fresh, cfg).open()
    diags = await doc.diagnostics(version=1, where=lambda ds: any(d.code == AGENTS for d in ds), timeout=60)
    (diag,) = [d for d in diags if d.code == AGENTS]  # one entry, however many keys it implicates
    implicated = [diag.range, *(r.location.range for r in diag.related_information or [])]

    def proposals(actions: list[lsp.CodeAction]) -> list[str]:
        return [a.title for a in actions if a.title.startswith("Apply proposal")]

    assert proposals(await actions_at(doc, diag.range, diags)), "offered on the diagnosis"
    for rng in implicated[1:]:
        assert proposals(await actions_at(doc, rng, [])), f"offered on the implicated key at line {rng.start.line}"
    mesh_block = point(line_of(doc.text, "ici_fsdp_parallelism"), 0)  # where the code lens' "Proposals" opens them
    assert proposals(await actions_at(doc, mesh_block, []))
    assert proposals(await actions_at(doc, point(0, 3), diags)) == []  # the comment line
    assert proposals(await actions_at(doc, point(line_of(doc.text, "model_name"), 3), diags)) == []
    # the hover on the diagnosis: short, proposals table before the evidence, sources by name, links to read more
    hover = await doc.hover(diag.range.start.line, diag.range.start.character + 1)
    assert hover is not None
    md = hover.contents.value
    assert_short_readable(md)
    assert "| 1 |" in md and md.index("| 1 |") < md.index("**Why:**")
    assert "confidence" in md and "ASAP's step-time model" in md
    assert re.search(r"\]\(file://[^)]+/kb/docs/[\w.-]+\.md(#L\d+)?\)", md), "knowledge notes are links"
    doc.close()


def assert_short_readable(md: str) -> None:
    """At most about 15 lines (blank lines aside), no internal module path, no sentence said twice."""
    lines = [ln for ln in md.splitlines() if ln.strip() and ln.strip() != "---"]
    assert len(lines) <= 15, f"{len(lines)} lines:\n{md}"
    assert "server/" not in md and not re.search(r"\w\.py\b", md), md
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n", md) if len(s.strip()) > 40]
    assert len(sentences) == len(set(sentences)), f"a sentence repeated:\n{md}"


# -- hovers --------------------------------------------------------------------------------------------------


@module_loop
async def test_hovers_are_short_with_readable_sources_and_links(shared: AsapClient, tmp_path: Path):
    cfg = tmp_path / "h.yml"
    cfg.write_text(MESH)
    doc = Doc(shared, cfg).open()
    await doc.diagnostics(version=1)
    for key in ("compile_topology", "model_name", "per_device_batch_size", "ici_fsdp_parallelism"):
        hover = await doc.hover(line_of(doc.text, key), 2)
        assert hover is not None, key
        assert_short_readable(hover.contents.value)
    topo = (await doc.hover(line_of(doc.text, "compile_topology"), 2)).contents.value  # type: ignore[union-attr]
    # one usable-HBM figure, with what it is; labelled numbers
    assert "15.75 GiB usable" in topo and "TPU compiler's limit" in topo, topo
    assert re.search(r"\d+\.\d% MFU", topo) and "ahead of the next" not in topo
    batch = (await doc.hover(line_of(doc.text, "per_device_batch_size"), 2)).contents.value  # type: ignore[union-attr]
    assert "of 15.75 GiB usable" in batch, batch
    doc.close()


@module_loop
async def test_error_hover_is_short_with_links(shared: AsapClient, tmp_path: Path):
    cfg = tmp_path / "e.yml"
    cfg.write_text(MESH.replace("ici_tensor_parallelism: 4", "ici_tensor_parallelism: 8"))
    doc = Doc(shared, cfg).open()
    product = by_code(await doc.diagnostics(version=1), "ASAP101")
    hover = await doc.hover(product.range.start.line, 2)
    assert hover is not None
    md = hover.contents.value
    assert md.startswith("**ASAP101**") and md.count(product.message) == 1
    assert "**Fix:**" in md and re.search(r"\]\(file://[^)]+/docs/diagnostics\.md#L\d+\)", md), md
    assert_short_readable(md)
    doc.close()


# -- ranges on the token that is wrong -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("broken", "token", "line"),
    [
        ('model_name: "llama2-7b\ncompile_topology: v5e-16\n', '"llama2-7b', 0),  # an unclosed quote
        ("model_name: llama2-7b\nici_fsdp_parallelism 16\ncompile_topology: v5e-16\n", "ici_fsdp_parallelism", 1),
        ("model_name: llama2-7b\ncompile_topology: v5e-16: x\n", ":", 1),  # the second colon
        ("model_name: llama2-7b\nper_device_batch_size\n", "per_device_batch_size", 1),  # a key at the very end
    ],
)
@module_loop
async def test_yaml_syntax_error_is_on_the_offending_token(
    shared: AsapClient, tmp_path: Path, broken: str, token: str, line: int
):
    cfg = tmp_path / "broken.yml"
    cfg.write_text(broken)
    doc = Doc(shared, cfg).open()
    diags = await doc.diagnostics(version=1)
    (err,) = [d for d in diags if d.code == "ASAP001"]
    assert err.range.start.line == err.range.end.line == line
    assert err.range.end.character > err.range.start.character, "never a zero-width mark"
    text = broken.splitlines()[line]
    assert text[err.range.start.character : err.range.end.character] == token, err.range
    doc.close()


async def test_stale_diagnosis_never_jumps_to_line_one_on_a_syntax_error(fresh: AsapClient, tmp_path: Path):
    await initialize(fresh, INFO)
    cfg = tmp_path / "tp.yml"
    cfg.write_text(MESH.replace("ici_fsdp_parallelism: 4", "ici_fsdp_parallelism: 1").replace(": 4", ": 16"))
    doc = Doc(fresh, cfg).open()
    await doc.diagnostics(version=1, where=lambda ds: any(d.code == AGENTS for d in ds), timeout=60)
    v2 = doc.replace_all(doc.text.replace("compile_topology: v5e-16", "compile_topology: v5e-16: x"))
    diags = await doc.diagnostics(version=v2)
    assert [d.code for d in diags] == ["ASAP001"], [(d.code, d.range.start.line) for d in diags]
    v3 = doc.replace_all(doc.text.replace("v5e-16: x", "v5e-16"))  # fixed: the (stale) diagnosis is back on its key
    diags = await doc.diagnostics(version=v3, where=lambda ds: any(d.code == AGENTS for d in ds))
    (diag,) = [d for d in diags if d.code == AGENTS]
    assert diag.message.startswith("[stale") and diag.range.start.line > 0
    doc.close()


# -- a mesh product error on the key the user edited ---------------------------------------------------------


@module_loop
async def test_mesh_product_error_goes_on_the_key_last_edited(shared: AsapClient, tmp_path: Path):
    cfg = tmp_path / "m.yml"
    cfg.write_text(MESH)
    doc = Doc(shared, cfg).open()
    assert codes(await doc.diagnostics(version=1)) == []
    fsdp, expert = line_of(doc.text, "ici_fsdp_parallelism"), line_of(doc.text, "ici_expert_parallelism")

    v2 = set_value(doc, "ici_expert_parallelism", "2")  # 4 x 4 x 2 = 32 of 16 devices
    product = by_code(await doc.diagnostics(version=v2), "ASAP101")
    assert product.range.start.line == expert, "on the key just edited, not on ici_fsdp_parallelism"
    assert product.range.end.character == utf16_len("ici_expert_parallelism")
    related = {r.location.range.start.line: r.message for r in product.related_information or []}
    assert fsdp in related and "ici_fsdp_parallelism" in related[fsdp], related
    # its quick fixes are still offered there (they rewrite the product's factors, wherever it is shown)
    actions = await doc.code_actions([product])
    assert any(a.title.startswith("Set ") for a in actions), [a.title for a in actions]

    v3 = set_value(doc, "ici_tensor_parallelism", "8")  # now the tensor key was edited last
    product = by_code(await doc.diagnostics(version=v3), "ASAP101")
    assert product.range.start.line == line_of(doc.text, "ici_tensor_parallelism")

    # a whole-document change (a client without incremental sync) is compared with the last analysis
    v4 = doc.replace_all(
        doc.text.replace("ici_tensor_parallelism: 8", "ici_tensor_parallelism: 4").replace(
            "ici_fsdp_parallelism: 4", "ici_fsdp_parallelism: 8"
        )
    )
    product = by_code(await doc.diagnostics(version=v4), "ASAP101")  # 8 x 4 x 2 = 64
    assert product.range.start.line in (fsdp, line_of(doc.text, "ici_tensor_parallelism"))
    doc.close()


@module_loop
async def test_mesh_product_error_without_an_edit_stays_on_the_fill_axis(shared: AsapClient, tmp_path: Path):
    cfg = tmp_path / "opened.yml"
    cfg.write_text(MESH.replace("ici_expert_parallelism: 1", "ici_expert_parallelism: 2"))
    doc = Doc(shared, cfg).open()
    product = by_code(await doc.diagnostics(version=1), "ASAP101")
    assert product.range.start == position_of(doc.text, "ici_fsdp_parallelism")
    lines = {r.location.range.start.line for r in product.related_information or []}
    assert {line_of(doc.text, "ici_tensor_parallelism"), line_of(doc.text, "ici_expert_parallelism")} <= lines
    doc.close()


# -- a refused command: a short, complete message, no internal error -------------------------------------------


async def test_link_profile_to_a_folder_without_profiles_is_a_user_error(fresh: AsapClient, tmp_path: Path):
    from pygls.exceptions import JsonRpcException

    from .test_profile import MESH as PROFILE_MESH
    from .test_profile import link, open_in_workspace

    await open_in_workspace(fresh, tmp_path)
    (tmp_path / "empty").mkdir()
    cfg = tmp_path / "train.yml"
    cfg.write_text(PROFILE_MESH)
    doc = Doc(fresh, cfg).open()
    await doc.diagnostics(version=1)
    start = len(fresh.log_messages)
    with pytest.raises(JsonRpcException) as refused:
        await link(fresh, doc.uri, str(tmp_path / "empty"))
    message = str(refused.value)
    assert message.startswith(f"no profiles in {tmp_path / 'empty'}: expected") and "\n" not in message
    assert "Error:" not in message  # no exception class for people to read
    await wait_for_log(fresh, "no profiles in", start)
    logged = fresh.log_messages[start:]
    assert all(m.type != lsp.MessageType.Error for m in logged), [m.message for m in logged]
    assert not any("Traceback" in m.message or "internal error" in m.message for m in logged)
    # one log format: the message alone (the client adds the time and the level), no "INFO asap:" of its own
    assert not any(m.message.startswith(("INFO ", "WARNING ", "ERROR ")) for m in fresh.log_messages)
    doc.close()


async def test_no_slice_is_quiet_on_a_file_of_shared_settings_only(fresh: AsapClient, tmp_path: Path):
    """ASAP010 (no TPU slice declared) is about the config itself and stays published by default, except on a file
    that sets neither a model nor a mesh: shared settings that configs name as their base_config."""
    await initialize(fresh, {"settings": {"showInformationDiagnostics": False}})
    shared_settings = tmp_path / "common.yml"
    shared_settings.write_text("# shared by the runs\nrun_name: team\ndataset_type: synthetic\nsteps: 10\n")
    config = tmp_path / "run.yml"
    config.write_text("base_config: common.yml\nmodel_name: llama2-7b\nper_device_batch_size: 1\n")
    parent = Doc(fresh, shared_settings).open()
    child = Doc(fresh, config).open()
    assert "ASAP010" in codes(await child.diagnostics(version=1))
    assert "ASAP010" not in codes(await parent.diagnostics(version=1))
    parent.close()
    child.close()
