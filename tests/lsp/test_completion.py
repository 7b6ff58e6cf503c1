"""textDocument/completion over stdio: MaxText keys (with their documentation, none already set) at a key's
position, slice names / model names / remat policies / booleans at a value's, and nothing (never an error) where
ASAP has nothing to offer: comments, nested lines, a non-mapping document, another kind of YAML, a document over
the size limit."""

from __future__ import annotations

from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types as lsp

from .conftest import CONFIG as SERVER
from .conftest import ROOT, AsapClient, Doc, apply_edits, capabilities

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_lsp.fixture(config=SERVER, scope="module")
async def shared(lsp_client: AsapClient):
    """One server for the module, initialized by a client that declares completion as VS Code does (Markdown
    documentation)."""
    caps = capabilities()
    assert caps.text_document is not None
    caps.text_document.completion = lsp.CompletionClientCapabilities(
        completion_item=lsp.ClientCompletionItemOptions(
            documentation_format=[lsp.MarkupKind.Markdown, lsp.MarkupKind.PlainText]
        ),
        context_support=True,
    )
    await lsp_client.initialize_session(lsp.InitializeParams(capabilities=caps, root_uri=ROOT.as_uri()))
    yield
    await lsp_client.shutdown_session()


CONFIG = "llama3-8b-v6e-16.yml"  # model_name, compile_topology, remat_policy, ici_data/fsdp/tensor set


async def complete(doc: Doc, line: int, character: int, trigger: str | None = None) -> list[lsp.CompletionItem]:
    context = (
        lsp.CompletionContext(lsp.CompletionTriggerKind.TriggerCharacter, trigger_character=trigger)
        if trigger
        else lsp.CompletionContext(lsp.CompletionTriggerKind.Invoked)
    )
    res = await doc.client.text_document_completion_async(
        lsp.CompletionParams(lsp.TextDocumentIdentifier(doc.uri), lsp.Position(line, character), context=context)
    )
    if res is None:
        return []
    return list(res.items if isinstance(res, lsp.CompletionList) else res)


def by_label(items: list[lsp.CompletionItem]) -> dict[str, lsp.CompletionItem]:
    return {i.label: i for i in items}


def applied(doc: Doc, item: lsp.CompletionItem) -> str:
    assert isinstance(item.text_edit, lsp.TextEdit), item
    return apply_edits(doc.text, [item.text_edit])


def open_with(client: AsapClient, path: Path, text: str) -> Doc:
    path.write_text(text)
    return Doc(client, path).open()


async def test_completion_keys_at_key_position(shared: AsapClient, workdir: Path):
    path = workdir / CONFIG
    doc = open_with(shared, path, path.read_text() + "ici_\n")
    line = len(doc.text.splitlines()) - 1
    items = by_label(await complete(doc, line, len("ici_")))

    expert = items["ici_expert_parallelism"]
    assert expert.kind == lsp.CompletionItemKind.Property
    assert isinstance(expert.documentation, lsp.MarkupContent)
    assert "Expert parallelism" in expert.documentation.value and "within a slice (ICI)" in expert.documentation.value
    assert (
        "dcn_data_parallelism" in items and "across slices (DCN)" in items["dcn_data_parallelism"].documentation.value
    )
    assert applied(doc, expert).endswith("\nici_expert_parallelism: \n"), "the typed prefix replaced, `: ` added"
    assert "default 1" in (items["gradient_accumulation_steps"].detail or ""), "base.yml's default"

    # keys already set are not offered; keys MaxText ignores neither
    for key in ("model_name", "compile_topology", "remat_policy", "ici_fsdp_parallelism", "ici_sequence_parallelism"):
        assert key not in items, key
    # a key with values ASAP completes asks for them once inserted
    assert items["scan_layers"].command is not None and items["steps"].command is None


async def test_completion_key_being_typed_is_offered(shared: AsapClient, workdir: Path):
    """The key on the cursor's own line is not "already set": retyping `model_name` there offers it."""
    path = workdir / CONFIG
    text = path.read_text().replace("model_name: llama3-8b", "model_na: llama3-8b")
    doc = open_with(shared, path, text)
    line = text.splitlines().index("model_na: llama3-8b")
    items = by_label(await complete(doc, line, len("model_na")))
    item = items["model_name"]
    assert item.text_edit is not None and item.text_edit.new_text == "model_name", "the colon is already there"
    assert "model_name: llama3-8b" in applied(doc, item)


async def test_completion_slice_names_after_compile_topology(shared: AsapClient, workdir: Path):
    path = workdir / CONFIG
    text = path.read_text().replace("compile_topology: v6e-16", "compile_topology:")
    doc = open_with(shared, path, text)
    line = text.splitlines().index("compile_topology:")

    items = by_label(await complete(doc, line, len("compile_topology:"), trigger=":"))
    for name in ("v6e-16", "v5e-256", "v5p-128", "v4-8", "tpu7x-8"):
        assert name in items, name
    assert items["v6e-16"].kind == lsp.CompletionItemKind.Value
    assert "16 chips 4x4" in (items["v6e-16"].detail or "")
    assert "compile_topology: v6e-256\n" in applied(doc, items["v6e-256"]), "a space after the colon"

    # with a partial value: it is replaced whole
    text = text.replace("compile_topology:", "compile_topology: v5e-2")
    doc.replace_all(text)
    items = by_label(await complete(doc, line, len("compile_topology: v5e")))
    assert "compile_topology: v5e-256\n" in applied(doc, items["v5e-256"])


async def test_completion_model_names_remat_policies_and_booleans(shared: AsapClient, workdir: Path):
    path = workdir / CONFIG
    text = path.read_text().replace("model_name: llama3-8b", 'model_name: "lla"')
    text = text.replace("remat_policy: full", "remat_policy: ") + "scan_layers: \n"
    doc = open_with(shared, path, text)
    lines = text.splitlines()

    models = by_label(await complete(doc, lines.index('model_name: "lla"'), len('model_name: "lla')))
    assert {"llama3-8b", "llama2-7b", "mixtral-8x7b", "default"} <= set(models)
    assert 'model_name: "llama3-8b"\n' in applied(doc, models["llama3-8b"]), "inside the quotes"

    remat = by_label(await complete(doc, lines.index("remat_policy: "), len("remat_policy: "), trigger=" "))
    assert {"full", "minimal", "save_qkv_proj", "custom"} <= set(remat)
    assert isinstance(remat["full"].documentation, lsp.MarkupContent)
    assert "recomputes" in remat["full"].documentation.value

    booleans = await complete(doc, lines.index("scan_layers: "), len("scan_layers: "), trigger=" ")
    assert [i.label for i in booleans] == ["true", "false"]


async def test_completion_of_the_slice_comment(shared: AsapClient, workdir: Path):
    path = workdir / CONFIG
    text = path.read_text() + "# asap: slice=v5\n"
    doc = open_with(shared, path, text)
    items = by_label(await complete(doc, len(text.splitlines()) - 1, len("# asap: slice=v5")))
    assert "# asap: slice=v5p-64\n" in applied(doc, items["v5p-64"])


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        ("model_name: llama3-8b\n# a comment about mod\n", 1, 20),  # in a comment
        ("model_name: llama3-8b\nmesh:\n  ici_\n", 2, 6),  # nested
        ("model_name: llama3-8b # note: x\n", 0, 30),  # in a value's comment
        ("- model_name\n- mod\n", 1, 5),  # not a mapping
        ("services:\n  web: {}\nvol\n", 2, 3),  # another kind of YAML
        ("model_name: [lla\n", 0, 16),  # a flow value
        ("model_name: 'x' y\n", 0, 17),  # past the closing quote
        ("ici_fsdp_parallelism: \n", 0, 22),  # no closed set of values
        ("compile_topology: v6e-16 \n", 0, 25),  # a space after the value: it is done
        ("model_name: llama3-8b\n", 7, 3),  # past the end
    ],
)
async def test_completion_offers_nothing_where_it_has_nothing(
    shared: AsapClient, tmp_path: Path, text: str, line: int, column: int
):
    doc = open_with(shared, tmp_path / "c.yml", text)
    assert await complete(doc, line, column) == []


async def test_completion_over_the_size_limit_is_empty(shared: AsapClient, tmp_path: Path):
    text = "model_name: llama3-8b\n" + "".join(f"k{i}: {i}\n" for i in range(10_050)) + "\n"
    doc = open_with(shared, tmp_path / "big.yml", text)
    assert await complete(doc, len(text.splitlines()), 0) == []
    # the server is still answering
    small = open_with(shared, tmp_path / "small.yml", "model_name: llama3-8b\n\n")
    assert "compile_topology" in by_label(await complete(small, 1, 0))


async def test_completion_on_the_line_after_the_last_break(shared: AsapClient, tmp_path: Path):
    """pygls maps a position past the last line to the end of the line before; completion must not: there the
    cursor is on an empty line (keys), not after `model_name: ` (models)."""
    doc = open_with(shared, tmp_path / "c.yml", "compile_topology: v5e-16\nmodel_name: x\n")
    items = by_label(await complete(doc, 2, 0))
    assert "per_device_batch_size" in items and "llama3-8b" not in items
