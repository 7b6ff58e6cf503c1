"""Hovers and quick fixes over stdio: the resolved numbers in hovers, versioned minimal
edits that keep comments and layout, and no corrupting edit from a stale diagnostic."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types as lsp

from .conftest import AsapClient, Doc, apply_edits, by_code, codes, document_edit, lacks, value_range

pytestmark = pytest.mark.asyncio(loop_scope="module")

BAD = "bad-mesh-v5e-256.yml"
CLEAN = "llama2-7b-v5e-256.yml"


def line_of(text: str, key: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines()) if ln.startswith(f"{key}:"))


async def hover_md(doc: Doc, key: str, on_value: bool = False) -> str:
    line = line_of(doc.text, key)
    col = value_range(doc.text, key).start.character + 1 if on_value else 2
    hover = await doc.hover(line, col)
    assert hover is not None, f"no hover on {key}"
    assert isinstance(hover.contents, lsp.MarkupContent) and hover.contents.kind == lsp.MarkupKind.Markdown
    assert hover.range is not None and hover.range.start == lsp.Position(line, 0)
    assert hover.range.end == lsp.Position(line, len(key))
    return hover.contents.value


async def test_hover_resolved_numbers(shared: AsapClient, workdir: Path):
    doc = Doc(shared, workdir / CLEAN).open()
    await doc.diagnostics(version=1)

    fsdp = await hover_md(doc, "ici_fsdp_parallelism")
    assert "Degree: **256**" in fsdp and "fills 256" in fsdp, fsdp
    assert "16x16" in fsdp  # the physical axes it lands on
    # the estimate's information line sits on the key (not the value): its explanation follows the key's own
    on_value = await hover_md(doc, "ici_fsdp_parallelism", on_value=True)
    assert fsdp.startswith(on_value) and "**ASAP120**" in fsdp and "**ASAP120**" not in on_value
    assert fsdp.index("Degree:") < fsdp.index("**ASAP120**")

    tensor = await hover_md(doc, "ici_tensor_parallelism")
    assert "Degree: **1**" in tensor and "`tensor`" in tensor

    topo = await hover_md(doc, "compile_topology")
    assert "v5e-256" in topo and "16x16" in topo and "256 chips" in topo

    batch = await hover_md(doc, "per_device_batch_size")
    assert "4 × 256 devices = **1024**" in batch, batch
    assert "4096" in batch  # max_target_length comes from the parent, common.yml

    model = await hover_md(doc, "model_name")
    assert "llama2-7b" in model and "emb 4096" in model and "32 layers" in model and "6.74B parameters" in model


async def test_hover_off_keys_returns_none(shared: AsapClient, workdir: Path):
    doc = Doc(shared, workdir / CLEAN).open()
    await doc.diagnostics(version=1)
    lines = doc.text.splitlines()
    assert await doc.hover(0, 5) is None  # the comment line
    assert await doc.hover(lines.index(""), 0) is None  # a blank line
    assert await doc.hover(line_of(doc.text, "base_config"), 2) is None  # a key ASAP says nothing about
    assert await doc.hover(len(lines) + 3, 0) is None  # past the end


async def test_hover_on_bad_key_lists_its_finding(shared: AsapClient, workdir: Path):
    doc = Doc(shared, workdir / BAD).open()
    await doc.diagnostics(version=1)
    md = await hover_md(doc, "ici_fsdp_parallelism")
    assert "Degree: **32**" in md and "ASAP101" in md


async def test_quick_fix_product_mismatch_minimal_versioned_edit(shared: AsapClient, workdir: Path):
    doc = Doc(shared, workdir / BAD).open()
    diags = await doc.diagnostics(version=1)
    v2 = doc.replace_all(doc.text)  # a no-op change: the edit must carry the *current* version
    diags = await doc.diagnostics(version=v2)
    product = by_code(diags, "ASAP101")

    actions = await doc.code_actions([product])
    titles = [a.title for a in actions]
    fix = next((a for a in actions if a.title.startswith("Set ici_fsdp_parallelism to 16")), None)
    assert fix is not None, titles
    assert fix.kind == lsp.CodeActionKind.QuickFix and fix.is_preferred
    assert fix.diagnostics and fix.diagnostics[0].code == "ASAP101"

    change = document_edit(fix)
    assert change.text_document.uri == doc.uri and change.text_document.version == v2
    assert len(change.edits) == 1
    (edit,) = change.edits
    assert edit.new_text == "16"
    assert edit.range == value_range(doc.text, "ici_fsdp_parallelism"), "only the value `32`"

    before = doc.text
    after = apply_edits(before, change.edits)
    assert after == before.replace("ici_fsdp_parallelism: 32   #", "ici_fsdp_parallelism: 16   #", 1)
    assert after.splitlines()[0] == before.splitlines()[0]  # comments, blank lines, order kept

    v3 = doc.edit(change.edits)
    assert doc.text == after
    diags = await doc.diagnostics(version=v3)
    assert codes(diags) == ["ASAP111"]


async def test_quick_fix_ignored_key_comments_out_line(shared: AsapClient, workdir: Path):
    doc = Doc(shared, workdir / BAD).open()
    diags = await doc.diagnostics(version=1)
    actions = await doc.code_actions([by_code(diags, "ASAP111")])
    assert [a.title for a in actions] == ["Comment out ici_sequence_parallelism (ignored by MaxText)"]
    change = document_edit(actions[0])
    assert change.text_document.version == 1
    after = apply_edits(doc.text, change.edits)
    old = "ici_sequence_parallelism: 2  # legacy key, ignored by current MaxText"
    assert after == doc.text.replace(old, "# " + old)

    v2 = doc.edit(change.edits)
    diags = await doc.diagnostics(version=v2)
    assert codes(diags) == ["ASAP101"]


async def test_quick_fix_for_both_diagnostics_at_once(shared: AsapClient, workdir: Path):
    """A request for a range that covers both diagnostics (a selection over both lines, as VS Code sends the
    diagnostics it overlaps) gets both fixes."""
    doc = Doc(shared, workdir / BAD).open()
    diags = await doc.diagnostics(version=1)
    whole = lsp.Range(lsp.Position(0, 0), lsp.Position(len(doc.text.splitlines()), 0))
    res = await shared.text_document_code_action_async(
        lsp.CodeActionParams(lsp.TextDocumentIdentifier(doc.uri), whole, lsp.CodeActionContext(diagnostics=diags))
    )
    for_code = {a.diagnostics[0].code for a in res or [] if isinstance(a, lsp.CodeAction) and a.diagnostics}
    assert for_code == {"ASAP101", "ASAP111"}


async def test_quick_fix_with_stale_diagnostic_never_corrupts(shared: AsapClient, workdir: Path):
    doc = Doc(shared, workdir / BAD).open()
    stale = by_code(await doc.diagnostics(version=1), "ASAP101")  # line 6

    # Two lines inserted above: line 6 is now `per_device_batch_size: 4`.
    v2 = doc.edit([lsp.TextEdit(lsp.Range(lsp.Position(1, 0), lsp.Position(1, 0)), "# note\n# another\n")])
    assert doc.text.splitlines()[6].startswith("per_device_batch_size")

    # Before and after the server publishes v2: either no action, or one for the current text.
    for _ in range(2):
        actions = await doc.code_actions([stale])
        for action in actions:
            change = document_edit(action)
            assert change.text_document.version == v2, "an edit for old text must say which version"
            after = apply_edits(doc.text, change.edits)
            changed = [(a, b) for a, b in zip(doc.text.splitlines(), after.splitlines(), strict=True) if a != b]
            assert len(changed) == 1 and changed[0][0].startswith("ici_fsdp_parallelism: 32"), changed
        await doc.diagnostics(version=v2, where=lacks("none"))

    # The fresh diagnostic gets the fix, at its new place.
    fresh = by_code(await doc.diagnostics(version=v2), "ASAP101")
    assert fresh.range.start.line == 8
    actions = await doc.code_actions([fresh])
    edit = document_edit(actions[0]).edits[0]
    assert edit.range == value_range(doc.text, "ici_fsdp_parallelism")


async def test_quick_fix_ignores_other_sources(shared: AsapClient, workdir: Path):
    doc = Doc(shared, workdir / BAD).open()
    product = by_code(await doc.diagnostics(version=1), "ASAP101")
    foreign = lsp.Diagnostic(range=product.range, message="yaml-language-server says hi", source="yaml", code="ASAP101")
    assert await doc.code_actions([foreign]) == []


async def test_hover_explains_a_diagnostic_off_any_key(shared: AsapClient, tmp_path: Path):
    """A diagnostic that is not on a key (here a profile link to nothing) is explained where it is shown:
    its code and title, its own message, what it rests on and the fix."""
    cfg = tmp_path / "linked.yml"
    cfg.write_text(
        "# asap: profile=runs/missing\ncompile_topology: v5e-16\nmodel_name: llama2-7b\n"
        "per_device_batch_size: 1\nici_fsdp_parallelism: 16\n"
    )
    doc = Doc(shared, cfg).open()
    diags = await doc.diagnostics(version=1, where=lambda ds: any(d.code == "ASAP201" for d in ds))
    (link,) = [d for d in diags if d.code == "ASAP201"]
    hover = await doc.hover(link.range.start.line, link.range.start.character + 2)
    assert hover is not None and hover.range == link.range
    md = hover.contents.value
    assert md.startswith("**ASAP201**") and link.message in md
    assert "**Rests on:**" in md and "**Fix:**" in md
    elsewhere = await doc.hover(4, 3)  # ici_fsdp_parallelism: its own hover, without the link's explanation
    assert elsewhere is not None and "ASAP201" not in elsewhere.contents.value
    doc.close()


async def test_degree_maxtext_converts_is_a_hint_with_a_fix(shared: AsapClient, tmp_path: Path):
    """Issue 25: MaxText's pydantic config reads `ici_tensor_parallelism: "4"` as 4 and launches: a hint (ASAP009),
    never an error; the hover's degree is 4, and the quick fix writes 4 keeping the comment."""
    cfg = tmp_path / "quoted.yml"
    cfg.write_text(
        'compile_topology: v5e-16\nmodel_name: llama2-7b\nper_device_batch_size: 1\nici_tensor_parallelism: "4"  # tp\n'
    )
    doc = Doc(shared, cfg).open()
    diags = await doc.diagnostics(version=1)
    hint = by_code(diags, "ASAP009")
    assert hint.severity == lsp.DiagnosticSeverity.Hint
    assert [d.code for d in diags if d.severity == lsp.DiagnosticSeverity.Error] == []
    assert "Degree: **4**" in await hover_md(doc, "ici_tensor_parallelism")
    actions = await doc.code_actions([hint])
    assert [a.title for a in actions] == ["Write ici_tensor_parallelism: 4"]
    change = document_edit(actions[0])
    assert change.text_document.version == 1
    after = apply_edits(doc.text, change.edits)
    assert after == doc.text.replace('"4"  # tp', "4  # tp")
    v2 = doc.edit(change.edits)
    diags = await doc.diagnostics(version=v2)
    assert "ASAP009" not in codes(diags) and [d for d in diags if d.severity == lsp.DiagnosticSeverity.Error] == []
    doc.close()
