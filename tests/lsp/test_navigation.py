"""Go to definition and document links over stdio: `base_config` leads to the parent file, a key set in a parent
to its line in the nearest parent that sets it, a key only in MaxText's base.yml to its line there when ASAP knows
the checkout, `model_name` to its model file on disk; links on `base_config` and `# asap: profile=` paths that
exist locally (none for gs:// or a missing path)."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types as lsp

from .conftest import AsapClient, Doc, codes, initialize, position_of

pytestmark = pytest.mark.asyncio(loop_scope="module")

CHILD = "llama2-7b-v5e-256.yml"  # base_config: common.yml


async def definition(doc: Doc, pos: lsp.Position) -> lsp.Location | None:
    res = await doc.client.text_document_definition_async(
        lsp.DefinitionParams(lsp.TextDocumentIdentifier(doc.uri), pos)
    )
    if res is None or isinstance(res, lsp.Location):
        return res
    assert len(res) == 1, res
    assert isinstance(res[0], lsp.Location), res
    return res[0]


async def links(doc: Doc) -> list[lsp.DocumentLink]:
    res = await doc.client.text_document_document_link_async(
        lsp.DocumentLinkParams(lsp.TextDocumentIdentifier(doc.uri))
    )
    return list(res or [])


def inside(pos: lsp.Position, chars: int = 2) -> lsp.Position:
    return lsp.Position(pos.line, pos.character + chars)


def line_of(path: Path, key: str) -> int:
    return next(i for i, ln in enumerate(path.read_text().splitlines()) if ln.startswith(f"{key}:"))


async def test_definition_on_base_config_opens_the_parent(shared: AsapClient, workdir: Path):
    doc = Doc(shared, workdir / CHILD).open()
    loc = await definition(doc, inside(position_of(doc.text, "common.yml")))
    assert loc is not None and loc.uri == (workdir / "common.yml").as_uri()
    assert loc.range.start == lsp.Position(0, 0)


async def test_definition_on_a_key_set_in_the_nearest_parent(shared: AsapClient, workdir: Path):
    """child -> middle -> common.yml; both parents set max_target_length: the nearest one is the answer; a key only
    the grandparent sets leads there."""
    (workdir / "middle.yml").write_text("base_config: common.yml\n# the middle layer\nmax_target_length: 2048\n")
    child = workdir / "child.yml"
    child.write_text(
        "base_config: middle.yml\nmodel_name: llama2-7b\ncompile_topology: v5e-16\n"
        "max_target_length: 1024\nscan_layers: false\nici_fsdp_parallelism: -1\n"
    )
    doc = Doc(shared, child).open()
    loc = await definition(doc, inside(position_of(doc.text, "max_target_length")))
    assert loc is not None and loc.uri == (workdir / "middle.yml").as_uri()
    assert loc.range.start == lsp.Position(2, 0) and loc.range.end == lsp.Position(2, len("max_target_length"))

    loc = await definition(doc, inside(position_of(doc.text, "scan_layers")))
    assert loc is not None and loc.uri == (workdir / "common.yml").as_uri()
    assert loc.range.start.line == line_of(workdir / "common.yml", "scan_layers")

    # a key no parent sets, without a MaxText checkout: nowhere to go
    assert await definition(doc, inside(position_of(doc.text, "ici_fsdp_parallelism"))) is None
    # on a value other than base_config's or model_name's: nothing either
    assert await definition(doc, inside(position_of(doc.text, "1024"), 1)) is None


async def test_definition_follows_the_parent_buffer(shared: AsapClient, workdir: Path):
    """An open parent with unsaved edits: the key's line is the buffer's, not the file's."""
    parent = Doc(shared, workdir / "common.yml").open()
    parent.replace_all("# moved down\n\n" + parent.text)
    doc = Doc(shared, workdir / CHILD).open()
    text = doc.text + "steps: 5\n"
    doc.replace_all(text)
    loc = await definition(doc, inside(position_of(text, "steps:")))
    assert loc is not None and loc.uri == parent.uri
    assert loc.range.start.line == line_of(workdir / "common.yml", "steps") + 2
    parent.close()


def checkout(root: Path) -> Path:
    """A MaxText checkout's layout: src/maxtext/configs/{base.yml, models/}."""
    configs = root / "src" / "maxtext" / "configs"
    (configs / "models").mkdir(parents=True)
    (configs / "base.yml").write_text("# MaxText's defaults\nrun_name: ''\n\nper_device_batch_size: 12.0\n")
    (configs / "models" / "tiny-test.yml").write_text(
        "base_emb_dim: 256\nbase_num_query_heads: 4\nbase_num_kv_heads: 4\nbase_mlp_dim: 512\n"
        "base_num_decoder_layers: 2\nhead_dim: 64\nvocab_size: 1024\n"
    )
    return configs


async def test_definition_into_maxtext_base_yml_and_model_file(shared: AsapClient, tmp_path: Path):
    """A config inside a MaxText checkout: a key only base.yml sets leads to its line there; model_name's value to
    the model file the checkout has."""
    configs = checkout(tmp_path / "maxtext")
    path = configs / "my-run.yml"
    path.write_text("model_name: tiny-test\ncompile_topology: v5e-16\nper_device_batch_size: 4\n")
    doc = Doc(shared, path).open()

    loc = await definition(doc, inside(position_of(doc.text, "per_device_batch_size")))
    assert loc is not None and loc.uri == (configs / "base.yml").as_uri()
    assert loc.range.start == lsp.Position(3, 0)

    loc = await definition(doc, inside(position_of(doc.text, "tiny-test")))
    assert loc is not None and loc.uri == (configs / "models" / "tiny-test.yml").as_uri()


@pytest.mark.asyncio(loop_scope="function")  # a server of its own, with the setting from the start
async def test_definition_into_base_yml_of_the_maxtext_path_setting(fresh: AsapClient, tmp_path: Path):
    configs = checkout(tmp_path / "maxtext")
    await initialize(fresh, options={"settings": {"maxtextPath": str(tmp_path / "maxtext")}}, configuration=False)
    path = tmp_path / "run.yml"
    path.write_text("model_name: tiny-test\ncompile_topology: v5e-16\nper_device_batch_size: 4\n")
    doc = Doc(fresh, path).open()
    loc = await definition(doc, inside(position_of(doc.text, "per_device_batch_size")))
    assert loc is not None and loc.uri == (configs / "base.yml").as_uri()
    loc = await definition(doc, inside(position_of(doc.text, "tiny-test")))
    assert loc is not None and loc.uri == (configs / "models" / "tiny-test.yml").as_uri()


async def test_document_links_on_base_config_and_profile_paths(shared: AsapClient, workdir: Path):
    (workdir / "runs" / "r1").mkdir(parents=True)
    text = (
        "# asap: profile=runs/r1\n"
        "# asap: profile=gs://bucket/run/tensorboard\n"
        "# asap: profile='runs/missing'\n"
        'base_config: "common.yml"  # shared settings\n'
        "model_name: llama2-7b\n"
    )
    path = workdir / "linked.yml"
    path.write_text(text)
    doc = Doc(shared, path).open()
    got = sorted(await links(doc), key=lambda k: k.range.start.line)
    assert [(k.range.start.line, k.target) for k in got] == [
        (0, (workdir / "runs" / "r1").as_uri()),
        (3, (workdir / "common.yml").as_uri()),
    ]
    assert got[0].range == lsp.Range(lsp.Position(0, 16), lsp.Position(0, 23)), "the path"
    assert got[1].range == lsp.Range(lsp.Position(3, 14), lsp.Position(3, 24)), "inside the quotes"


async def test_navigation_on_odd_documents_answers_nothing(shared: AsapClient, tmp_path: Path):
    """Not valid YAML, not a mapping, a missing parent: no location, no link, no error reply."""
    for name, text in (
        ("broken.yml", "base_config: common.yml\nmodel_name: [\n"),
        ("list.yml", "- base_config\n- x\n"),
        ("missing.yml", "base_config: nowhere.yml\nmodel_name: llama2-7b\n"),
    ):
        path = tmp_path / name
        path.write_text(text)
        doc = Doc(shared, path).open()
        assert await definition(doc, lsp.Position(0, 15)) is None, name
        assert await links(doc) == [], name
    big = tmp_path / "big.yml"
    big.write_text("base_config: missing.yml\n" + "".join(f"k{i}: {i}\n" for i in range(10_050)))
    doc = Doc(shared, big).open()
    assert await definition(doc, lsp.Position(0, 15)) is None
    assert await links(doc) == []
    assert codes(await doc.diagnostics(version=1)) == ["ASAP007"]
