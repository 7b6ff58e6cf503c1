"""Line breaks over stdio (issue 17 item 10): a client counts lines only at \\n, \\r\\n and \\r. U+2028, U+2029,
U+0085, \\v, \\f and \\x1c-\\x1e inside a line are characters of that line, and the server must agree: an
incremental edit below such a character lands where the client made it, and diagnostics, fixes and hovers are
on the client's lines. This file keeps its own client-side model of the text (conftest's helpers split lines as
Python does), so the test cannot agree with the server by making the same mistake."""

from __future__ import annotations

from pathlib import Path

import pytest
from fuzzing.textmodel import client_lines, offset
from lsprotocol import types as lsp

from .conftest import AsapClient, by_code, codes, document_edit, wait_for_publish

pytestmark = pytest.mark.asyncio(loop_scope="module")


def at(line: int, start: int, end: int | None = None) -> lsp.Range:
    return lsp.Range(lsp.Position(line, start), lsp.Position(line, start if end is None else end))


class ClientDoc:
    """An open document as the client keeps it: text, version, incremental changes."""

    def __init__(self, client: AsapClient, path: Path, text: str) -> None:
        self.client, self.uri, self.text, self.version = client, path.as_uri(), text, 1
        path.write_bytes(text.encode("utf-8"))
        self.mark = len(client.publishes)
        client.text_document_did_open(
            lsp.DidOpenTextDocumentParams(
                lsp.TextDocumentItem(uri=self.uri, language_id="yaml", version=self.version, text=text)
            )
        )

    def change(self, rng: lsp.Range, new_text: str) -> int:
        start, end = offset(self.text, rng.start, clamp=True), offset(self.text, rng.end, clamp=True)
        self.text = self.text[:start] + new_text + self.text[end:]
        self.version += 1
        self.mark = len(self.client.publishes)
        self.client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                lsp.VersionedTextDocumentIdentifier(uri=self.uri, version=self.version),
                [lsp.TextDocumentContentChangePartial(range=rng, text=new_text)],
            )
        )
        return self.version

    def text_at(self, rng: lsp.Range) -> str:
        return self.text[offset(self.text, rng.start, clamp=True) : offset(self.text, rng.end, clamp=True)]

    async def diagnostics(self) -> list[lsp.Diagnostic]:
        found = await wait_for_publish(self.client, self.uri, lambda p: p.version == self.version, start=self.mark)
        return list(found.diagnostics)

    def close(self) -> None:
        self.client.text_document_did_close(lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(self.uri)))


# Line 0 holds two comments and a U+2028 between them (YAML's scanner ends the first comment there; the second
# is a comment too, so the document stays valid). Python, and pygls before ASAP's own document, saw 7 lines.
TEXT = (
    "# tuned for v5e\u2028# see the notes, \U0001f600 included\n"  # 0 (an astral character: 2 UTF-16 units)
    "compile_topology: v5e-256\n"  # 1
    "model_name: llama2-7b\n"  # 2
    "per_device_batch_size: 2\n"  # 3
    "ici_fsdp_parallelism: 3   # a paragraph separator ends this comment\u2029\n"  # 4
    "ici_tensor_parallelism: 1\n"  # 5
)


async def test_line_breaks_incremental_edits_below_a_line_separator(shared: AsapClient, tmp_path: Path):
    doc = ClientDoc(shared, tmp_path / "ls.yml", TEXT)
    diags = await doc.diagnostics()
    assert codes(diags) == ["ASAP101"]
    product = by_code(diags, "ASAP101")
    assert product.range == at(4, 0, len("ici_fsdp_parallelism"))
    assert doc.text_at(product.range) == "ici_fsdp_parallelism"

    # fsdp 3 -> 256, an edit on the client's line 4: the server applies it there, not one line up
    doc.change(at(4, 22, 23), "256")
    diags = await doc.diagnostics()
    assert codes(diags) == [], [(d.code, d.range.start.line, d.message) for d in diags]
    (est,) = [d for d in diags if d.code == "ASAP120"]
    assert est.range.start.line == 4  # the mesh block: the first parallelism key

    # tensor 1 -> 16 on line 5 (after two separators): 256 x 16 is 4096, the slice has 256
    doc.change(at(5, 24, 25), "16")
    diags = await doc.diagnostics()
    product = by_code(diags, "ASAP101")
    assert product.range.start.line == 5 and "4096" in product.message  # on the key just edited (tensor)

    # the fix the server computes from its text is an edit of the client's text: applied, the mesh is right
    res = await shared.text_document_code_action_async(
        lsp.CodeActionParams(
            lsp.TextDocumentIdentifier(doc.uri), product.range, lsp.CodeActionContext(diagnostics=[product])
        )
    )
    actions = [a for a in res or [] if isinstance(a, lsp.CodeAction) and a.title.startswith("Set ici_fsdp")]
    assert actions, [a.title for a in res or []]
    (edit,) = document_edit(actions[0]).edits
    assert edit.range.start.line == 4 and doc.text_at(edit.range) == "256"
    doc.change(edit.range, edit.new_text)
    assert client_lines(doc.text)[4].startswith("ici_fsdp_parallelism: 16   # a paragraph")
    assert codes(await doc.diagnostics()) == []

    # a hover below the separators names the key under the cursor on the client's line
    hover = await shared.text_document_hover_async(
        lsp.HoverParams(lsp.TextDocumentIdentifier(doc.uri), lsp.Position(5, 3))
    )
    assert hover is not None and "tensor" in str(hover.contents)
    doc.close()


async def test_line_breaks_control_characters_are_located_on_the_client_line(shared: AsapClient, tmp_path: Path):
    text = "# a\x0cb and \x1c\n" + TEXT.split("\n", 1)[1]  # YAML refuses \f: one ASAP001 where it is
    doc = ClientDoc(shared, tmp_path / "ff.yml", text)
    (err,) = await doc.diagnostics()
    assert err.code == "ASAP001" and err.range.start == lsp.Position(0, 3)
    assert "U+000C" in err.message

    doc.change(at(4, 22, 23), "256")  # below the form feed: lands on line 4 all the same
    (err,) = await doc.diagnostics()
    assert err.code == "ASAP001"
    doc.change(at(0, 3, 4), "")  # the form feed goes; the \x1c is next
    (err,) = await doc.diagnostics()
    assert err.code == "ASAP001" and err.range.start == lsp.Position(0, 9)
    doc.change(at(0, 9, 10), "")
    diags = await doc.diagnostics()
    assert codes(diags) == [] and any(d.code == "ASAP120" for d in diags), "the fsdp edit landed on line 4"
    assert client_lines(doc.text)[4] == "ici_fsdp_parallelism: 256   # a paragraph separator ends this comment\u2029\n"
    doc.close()
