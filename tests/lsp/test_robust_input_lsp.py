"""Hostile input over stdio (issue 25 item 3): a per_device_batch_size that ASAP112 refuses (infinite, NaN,
subnormal, past the range ASAP reads) through the real server as an editor sends it. The finding is at the key;
the hover on the key answers with the value as written and its finding; the code lens answers; the agents'
background run (diagnosis and proposal engine) finishes; nothing is logged as an error. Each once raised: the
hover's global batch (OverflowError on .inf) and the agents' context need (math.ceil(devices / 1e-320))."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types as lsp

from .conftest import AsapClient, Doc, has, wait_for_log

pytestmark = pytest.mark.asyncio(loop_scope="module")

CONFIG = "compile_topology: v5e-256\nmodel_name: llama2-7b\nper_device_batch_size: {}\nici_fsdp_parallelism: -1\n"
REFUSED = [".inf", "-.inf", ".nan", "1e-320", "5e-324", "1e308"]


@pytest.mark.parametrize("value", REFUSED)
async def test_robust_input_lsp_refused_batch_size_hover_lens_and_agents(
    shared: AsapClient, tmp_path: Path, value: str
):
    path = tmp_path / "batch.yml"
    path.write_text(CONFIG.format(value), encoding="utf-8")
    logs = len(shared.log_messages)
    doc = Doc(shared, path).open()
    diags = await doc.diagnostics(version=1, where=has("ASAP112"))
    (batch,) = [d for d in diags if d.code == "ASAP112"]
    assert batch.range.start.line == 2
    hover = await doc.hover(2, 3)
    assert hover is not None and isinstance(hover.contents, lsp.MarkupContent)
    md = hover.contents.value
    assert "**per_device_batch_size** = " in md and "ASAP112" in md, md
    assert "Global batch" not in md  # nothing computed from the refused value
    lenses = await shared.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(doc.uri)))
    assert lenses is not None
    await wait_for_log(shared, f"agents, {path.name} (version 1)", start=logs, timeout=60)
    errors = [m.message for m in shared.log_messages[logs:] if m.type == lsp.MessageType.Error]
    assert errors == []
    doc.close()
