"""The "did you mean" quick fix on an unknown model_name, over stdio: offered on ASAP004, a minimal versioned edit
of the value alone, and once applied the diagnostic is gone."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types as lsp

from .conftest import AsapClient, Doc, apply_edits, by_code, document_edit, lacks

pytestmark = pytest.mark.asyncio(loop_scope="module")

TEXT = """\
# a typo in the model's name
model_name: llama3-8c   # was llama3-8b
compile_topology: v6e-16
per_device_batch_size: 2
max_target_length: 8192

ici_fsdp_parallelism: 4
ici_tensor_parallelism: 4
"""


async def test_model_name_did_you_mean_fix_applies_and_clears(shared: AsapClient, tmp_path: Path):
    path = tmp_path / "typo.yml"
    path.write_text(TEXT)
    doc = Doc(shared, path).open()
    diag = by_code(await doc.diagnostics(version=1), "ASAP004")
    assert diag.range.start == lsp.Position(1, len("model_name: "))

    actions = await doc.code_actions([diag])
    titles = [a.title for a in actions]
    assert titles[0] == "Did you mean 'llama3-8b'?", titles
    fix = actions[0]
    assert fix.kind == lsp.CodeActionKind.QuickFix and fix.is_preferred
    change = document_edit(fix)
    assert change.text_document.version == 1
    (edit,) = change.edits
    assert edit.new_text == "llama3-8b"
    assert edit.range == lsp.Range(lsp.Position(1, 12), lsp.Position(1, 21)), "the value only"
    assert apply_edits(doc.text, change.edits) == TEXT.replace("model_name: llama3-8c", "model_name: llama3-8b")

    v2 = doc.edit(change.edits)
    diags = await doc.diagnostics(version=v2, where=lacks("ASAP004"))
    assert all(d.code != "ASAP004" for d in diags)
    assert "# was llama3-8b" in doc.text, "the comment is kept"
