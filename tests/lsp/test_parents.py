"""base_config parents: a child's diagnostics follow the parent's unsaved buffer, the
parent's text on disk at save, and a reverted parent buffer."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import AsapClient, Doc, by_code, codes, has, lacks

pytestmark = pytest.mark.asyncio(loop_scope="module")

# llama2-7b-v5e-256.yml without its own ici_tensor_parallelism, so the parent's counts.
CHILD = """\
# Llama2-7B pretraining on one v5e-256 slice: FSDP across all 256 chips.
base_config: common.yml
model_name: llama2-7b
compile_topology: v5e-256
per_device_batch_size: 4

ici_fsdp_parallelism: -1    # fills the slice: 256
"""
BREAK = "ici_tensor_parallelism: 3\n"  # 256 / 3 is not whole: fsdp=-1 cannot be resolved


def child_in(workdir: Path) -> Path:
    path = workdir / "child.yml"
    path.write_text(CHILD)
    return path


async def test_child_follows_parent_unsaved_edits(shared: AsapClient, workdir: Path):
    parent = Doc(shared, workdir / "common.yml").open()
    await parent.diagnostics(version=1)
    child = Doc(shared, child_in(workdir)).open()
    assert codes(await child.diagnostics(version=1)) == []

    # Unsaved edit of the parent: the child (unchanged, still version 1) is re-analysed.
    mark = len(shared.publishes)
    parent.replace_all(parent.text + BREAK)
    child.mark = mark
    diags = await child.diagnostics(version=1, where=has("ASAP103"), timeout=5)
    err = by_code(diags, "ASAP103")
    assert err.range.start.line == 6, "on the child's ici_fsdp_parallelism: -1"
    assert "3" in err.message
    hover = await child.hover(6, 2)
    assert hover is not None and "ASAP103" in hover.contents.value, "hover sees the same analysis"

    # Undo in the parent: the child is clean again.
    child.mark = len(shared.publishes)
    parent.replace_all(parent.text.replace(BREAK, ""))
    assert codes(await child.diagnostics(version=1, where=lacks("ASAP103"))) == []


async def test_child_save_rereads_parent_from_disk(shared: AsapClient, workdir: Path):
    child = Doc(shared, child_in(workdir)).open()
    assert codes(await child.diagnostics(version=1)) == []
    # The parent changes on disk (git pull, another tool); it is not open in the editor.
    common = workdir / "common.yml"
    common.write_text(common.read_text() + BREAK)
    child.save()
    diags = await child.diagnostics(version=1, timeout=5)
    assert codes(diags) == ["ASAP103"], "save re-analyses with the parent as it is on disk now"


async def test_child_follows_parent_closed_without_saving(shared: AsapClient, workdir: Path):
    parent = Doc(shared, workdir / "common.yml").open()
    await parent.diagnostics(version=1)
    child = Doc(shared, child_in(workdir)).open()
    assert codes(await child.diagnostics(version=1)) == []
    child.mark = len(shared.publishes)
    parent.replace_all(parent.text + BREAK)
    await child.diagnostics(version=1, where=has("ASAP103"), timeout=5)

    # Closing the parent discards its unsaved edit: the disk version (clean) counts again.
    child.mark = len(shared.publishes)
    parent.close()
    assert codes(await child.diagnostics(version=1, where=lacks("ASAP103"), timeout=5)) == []
