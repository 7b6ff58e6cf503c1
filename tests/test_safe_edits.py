"""Quick fixes that cannot break a file (server/config/safe_edits.py): inserted lines in the file's own line ending
and on a line of their own, no edit through an alias, a merge key or a shared anchor (an anchor only its key uses is
kept), and no fix offered whose result would not parse, would lose a key or comment, or would not clear its
finding; and one round trip through the language server over stdio on a CRLF document."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import pytest_lsp
from fuzzing import textmodel as tm
from hypothesis import given, settings
from hypothesis import strategies as st
from lsp.conftest import CONFIG, ROOT, AsapClient, Doc, apply_edits, capabilities, document_edit, has, lacks
from lsprotocol import types as lsp

from server.common.findings import Finding, Fix, Span, TextEdit
from server.config.apply import apply_text, line_ending_at, proposal_edits
from server.config.safe_edits import Vetted, static_checks, vet_fix
from server.services.analysis import analyze

PARENT = "ici_fsdp_parallelism: 1\n"
# fsdp comes from the parent as 1: the product fix inserts ici_fsdp_parallelism after the mesh block
INHERITED = (
    "base_config: parent.yml\nmodel_name: llama2-7b\ncompile_topology: v5e-256\nici_data_parallelism: 16  # dp\n"
    "steps: 10\n"
)
BAD = (
    "# Llama2-7B on v5e-256\nmodel_name: llama2-7b\ncompile_topology: v5e-256\n"
    "ici_fsdp_parallelism: 32   # tuned by hand\nici_tensor_parallelism: 16\n"
)


def product_fixes(path: Path | None, text: str) -> tuple[Finding, list[Vetted]]:
    """The ICI product finding of `text` and each of its fixes as vet_fix leaves it."""
    (f,) = [x for x in analyze(path, text).findings if x.code == "ASAP101"]
    recheck = static_checks(path)
    return f, [vet_fix(text, fx, path=path, clears=(f.code, f.key), recheck=recheck) for fx in f.fixes]


def by_title(vetted: list[Vetted], start: str) -> Vetted:
    (v,) = [x for x in vetted if x.title.startswith(start)]
    return v


# -- (a) line endings and the final newline ------------------------------------------------------------------


@pytest.mark.parametrize("eol", ["\r\n", "\r", "\n"])
def test_inserted_line_takes_the_files_line_ending(write, eol: str) -> None:
    write("parent.yml", PARENT)
    text = INHERITED.replace("\n", eol)
    _, vetted = product_fixes(write("c.yml", text), text)
    v = by_title(vetted, "Set ici_fsdp_parallelism to 16")
    assert v.ok and v.text == text.replace(f"# dp{eol}", f"# dp{eol}ici_fsdp_parallelism: 16{eol}")
    assert v.fix is not None and all(e.new_text in ("ici_fsdp_parallelism: 16" + eol,) for e in v.fix.edits)
    assert apply_text(text, list(v.fix.edits)) == v.text  # the offered edits give exactly the checked text


@pytest.mark.parametrize("eol", ["\r\n", "\r"])
def test_value_edit_on_a_later_line_of_a_crlf_or_cr_file(eol: str) -> None:
    text = BAD.replace("\n", eol)
    _, vetted = product_fixes(None, text)
    v = by_title(vetted, "Set ici_fsdp_parallelism to 16")
    assert v.text == text.replace("ici_fsdp_parallelism: 32 ", "ici_fsdp_parallelism: 16 ")


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
def test_key_inserted_after_a_last_line_without_a_line_break_gets_its_own_line(write, eol: str) -> None:
    write("parent.yml", PARENT)
    text = INHERITED.removesuffix("steps: 10\n").replace("\n", eol).removesuffix(eol)  # ends "# dp", no break
    _, vetted = product_fixes(write("c.yml", text), text)
    v = by_title(vetted, "Set ici_fsdp_parallelism to 16")
    assert v.ok and v.text == text + f"{eol}ici_fsdp_parallelism: 16"  # the file's ending (none) is kept
    assert analyze(write("c.yml", v.text), v.text).findings == []


def test_line_ending_is_the_one_of_the_line_replaced_or_followed() -> None:
    text = "a: 1\r\nb: 2\rc: 3\nd: 4"
    assert line_ending_at(text, 0) == "\r\n"  # the first line's own
    assert line_ending_at(text, text.index("b")) == "\r"  # a replacement on line b: b's
    assert line_ending_at(text, text.index("b"), insertion=True) == "\r\n"  # an insertion before b follows a
    assert line_ending_at(text, text.index("d"), insertion=True) == "\n"
    assert line_ending_at(text, text.index("4")) == "\n"  # the last line has none: the nearest above
    assert line_ending_at(text, len(text), insertion=True) == "\n"
    assert line_ending_at("a: 1\r", 5, insertion=True) == "\r"  # after a final line break: the line above
    assert line_ending_at("a: 1", 0) == line_ending_at("", 0) == "\n"  # no line break anywhere: LF


# -- golden before/after of every kind of fix, in each line ending -------------------------------------------
# Each kind's document in LF; "\r\n" and "\r" write every line so; "mixed" ends line i in MIXED[i % 3]. A fix
# that rewrites within a line leaves every ending as it was; one that inserts a line gives it the ending of the
# line it follows, which in the mixed documents is never the dominant one (the ending the fixes once wrote).
MIXED = ("\r", "\r\n", "\n")


def ended(text: str, eol: str) -> str:
    """`text` (LF) with every line written in `eol`, or with "mixed" line i ending in MIXED[i % 3]."""
    if eol != "mixed":
        return text.replace("\n", eol)
    lines = text.split("\n")
    return "".join(line + (MIXED[i % 3] if i < len(lines) - 1 else "") for i, line in enumerate(lines))


GOLDEN = {  # kind: (document, code of the finding, the fix's title, document after the fix)
    "value": (BAD, "ASAP101", "Set ici_fsdp_parallelism to 16", BAD.replace(": 32 ", ": 16 ")),
    "insert": (
        INHERITED,
        "ASAP101",
        "Set ici_fsdp_parallelism to 16",
        INHERITED.replace("# dp\n", "# dp\nici_fsdp_parallelism: 16\n"),
    ),
    "comment out": (
        "model_name: llama2-7b\ncompile_topology: v5e-256\nici_fsdp_parallelism: -1  # fill\n"
        "ici_sequence_parallelism: 2\nsteps: 10\n",
        "ASAP111",
        "Comment out ici_sequence_parallelism",
        "model_name: llama2-7b\ncompile_topology: v5e-256\nici_fsdp_parallelism: -1  # fill\n"
        "# ici_sequence_parallelism: 2\nsteps: 10\n",
    ),
    "rename": (
        "model_name: llama2-7b\ncompile_topology: v5e-256\nici_fsdp_parallelism: -1  # fill\n"
        "ici_tensr_parallelism: 2\nsteps: 10\n",
        "ASAP113",
        "Rename to ici_tensor_parallelism",
        "model_name: llama2-7b\ncompile_topology: v5e-256\nici_fsdp_parallelism: -1  # fill\n"
        "ici_tensor_parallelism: 2\nsteps: 10\n",
    ),
    "model name": (
        "model_name: llama2-7\ncompile_topology: v5e-256\nici_fsdp_parallelism: -1  # fill\nsteps: 10\n",
        "ASAP004",
        "Did you mean 'llama2-7b'?",
        "model_name: llama2-7b\ncompile_topology: v5e-256\nici_fsdp_parallelism: -1  # fill\nsteps: 10\n",
    ),
}
# The inserting kinds in a mixed document, written out: the new line ends as the line above it does.
GOLDEN_MIXED = {
    "insert": "base_config: parent.yml\rmodel_name: llama2-7b\r\ncompile_topology: v5e-256\n"
    "ici_data_parallelism: 16  # dp\rici_fsdp_parallelism: 16\rsteps: 10\r\n",
    "proposal": "model_name: llama2-7b\rcompile_topology: v5e-256\r\nici_fsdp_parallelism: -1  # fill\n"
    "ici_tensor_parallelism: 16\nremat_policy: full\r",
}
PROPOSED = "model_name: llama2-7b\ncompile_topology: v5e-256\nici_fsdp_parallelism: -1  # fill\nremat_policy: full\n"


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r", "mixed"])
@pytest.mark.parametrize("kind", sorted(GOLDEN))
def test_golden_fix_in_each_line_ending(write, kind: str, eol: str) -> None:
    before, code, title, after = GOLDEN[kind]
    write("parent.yml", PARENT)
    text = ended(before, eol)
    path = write("c.yml", text)
    an = analyze(path, text)
    (f,) = [x for x in an.findings if x.code == code]
    (fix,) = [fx for fx in f.fixes if fx.title.startswith(title)]
    v = vet_fix(text, fix, path=path, clears=(f.code, f.key), recheck=static_checks(path), document=an.config.document)
    assert v.ok, v.reason
    want = GOLDEN_MIXED[kind] if eol == "mixed" and kind in GOLDEN_MIXED else ended(after, eol)
    assert v.text == want
    assert v.fix is not None and apply_text(text, list(v.fix.edits)) == want  # what the editor is sent gives it


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r", "mixed"])
def test_golden_apply_proposal_in_each_line_ending(eol: str) -> None:
    """The agents' "Apply proposal" edits (server/config/apply.py), vetted as the editor offers them."""
    text = ended(PROPOSED, eol)
    an = analyze(None, text)
    edits = proposal_edits(an.config, {"fsdp": 16, "tensor": 16}, {})
    assert apply_text(text, edits) == (  # as the closed loop writes them, unvetted
        want := GOLDEN_MIXED["proposal"]
        if eol == "mixed"
        else ended(PROPOSED.replace("# fill\n", "# fill\nici_tensor_parallelism: 16\n"), eol)
    )
    v = vet_fix(text, Fix("Apply proposal 1", tuple(edits), proposal=1), document=an.config.document)
    assert v.ok and v.text == want


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("model_name: llama2-7b\r\ncompile_topology: v5e-256\rici_fsdp_parallelism: 64", "\r"),
        ("model_name: llama2-7b\rcompile_topology: v5e-256\nici_fsdp_parallelism: 64", "\n"),
        ("model_name: llama2-7b\ncompile_topology: v5e-256\r\nici_fsdp_parallelism: 64", "\r\n"),
    ],
)
def test_a_line_inserted_after_a_last_line_without_a_break_takes_the_ending_above(text: str, want: str) -> None:
    an = analyze(None, text)
    offered = [v for f in an.findings for fx in f.fixes if (v := vet_fix(text, fx)).ok and v.text != text]
    inserted = [v for v in offered if v.text is not None and len(v.text.splitlines()) > len(text.splitlines())]
    assert inserted
    for v in inserted:
        assert v.text is not None and v.text.startswith(text + want) and not v.text.endswith(("\n", "\r"))


def test_apply_text_counts_lines_as_the_editor_does() -> None:
    text = "a: 1\rb: 2\rc: 3\r"
    assert apply_text(text, [TextEdit(None, Span(1, 3, 1, 4), "9")]) == "a: 1\rb: 9\rc: 3\r"
    assert apply_text(text, [TextEdit(None, Span.point(3), "d: 4\r")]) == text + "d: 4\r"


# -- (b) where the value lives -------------------------------------------------------------------------------


def test_a_value_given_by_an_alias_is_refused_with_a_reason() -> None:
    text = "m: &m 8\n" + BAD.replace("32   # tuned by hand", "*m")  # 8 x 16 on 256 devices
    _, vetted = product_fixes(None, text)
    through = by_title(vetted, "Set ici_fsdp_parallelism to 16")
    assert not through.ok and through.refused
    assert through.reason is not None and "&m" in through.reason and "ici_fsdp_parallelism" in through.reason
    assert not by_title(vetted, "Set ici_fsdp_parallelism to -1").ok
    # a fix that writes another key is not through the alias: still offered, the anchor untouched
    other = [v for v in vetted if v.ok]
    assert [v.title for v in other] == ["Set ici_data_parallelism to 2 (ICI product 256)"]
    assert other[0].text is not None and other[0].text.startswith("m: &m 8\n")


def test_an_edit_on_the_alias_itself_is_refused() -> None:
    text = "m: &m 8\nici_fsdp_parallelism: *m\n"
    at = text.index("*m") - len("m: &m 8\n")
    v = vet_fix(text, Fix("Set it", (TextEdit(None, Span(1, at, 1, at + 2), "16"),)))
    assert v.refused and v.reason is not None and "alias *m" in v.reason


def test_an_edit_inside_a_merge_key_value_is_refused() -> None:
    text = "<<: {ici_fsdp_parallelism: 4}\nmodel_name: llama2-7b\n"
    col = text.index("4")
    v = vet_fix(text, Fix("Set it", (TextEdit(None, Span(0, col, 0, col + 1), "16"),)))
    assert v.refused and v.reason is not None and "merge key" in v.reason


def test_an_anchor_shared_through_a_merge_key_is_refused() -> None:
    text = "base: &b {ici_fsdp_parallelism: 4}\n<<: *b\nmodel_name: llama2-7b\n"
    col = text.index("4")
    v = vet_fix(text, Fix("Set it", (TextEdit(None, Span(0, col, 0, col + 1), "16"),)))
    assert v.refused and v.reason is not None and "&b" in v.reason and "<<" in v.reason


def test_an_anchor_used_only_by_the_fixed_key_is_edited_keeping_the_anchor() -> None:
    text = BAD.replace("32   # tuned", "&f 32   # tuned")
    _, vetted = product_fixes(None, text)
    v = by_title(vetted, "Set ici_fsdp_parallelism to 16")
    assert v.ok and v.text == text.replace("&f 32 ", "&f 16 ")
    shared = text + "dcn_fsdp_parallelism: *f\n"  # now another key uses it too
    _, vetted = product_fixes(None, shared)
    v = by_title(vetted, "Set ici_fsdp_parallelism to 16")
    assert v.refused and v.reason is not None and "dcn_fsdp_parallelism" in v.reason


# -- (c) read back and re-checked ----------------------------------------------------------------------------


def test_a_fix_that_does_not_clear_its_finding_is_not_offered() -> None:
    f, _ = product_fixes(None, BAD)
    start = BAD.splitlines()[3].index("32")
    fake = Fix("Set ici_fsdp_parallelism to 8", (TextEdit(None, Span(3, start, 3, start + 2), "8"),))
    v = vet_fix(BAD, fake, clears=(f.code, f.key), recheck=static_checks(None))
    assert not v.ok and not v.refused and v.reason is not None and "ASAP101" in v.reason


def test_a_fix_whose_result_does_not_parse_is_not_offered() -> None:
    broken = Fix("Break it", (TextEdit(None, Span.point(1), "ici_fsdp_parallelism: [\n"),))
    v = vet_fix(BAD, broken)
    assert not v.ok and not v.refused and v.reason is not None and "valid YAML" in v.reason


def test_a_fix_on_a_document_whose_aliases_expand_too_far_is_not_offered() -> None:
    """The vetting reads the document (and the result) with the reader's alias bound: an alias bomb is refused
    there, never expanded by the comparison of the values the fix does not edit (issue 25: that comparison made a
    code action wait 14 s)."""
    bomb = "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]\n" for i in range(1, 6)
    )
    text = bomb + BAD + "sweep: *l5\n"
    line = 6 + 3  # ici_fsdp_parallelism: 32
    col = text.splitlines()[line].index("32")
    v = vet_fix(text, Fix("Set ici_fsdp_parallelism to 16", (TextEdit(None, Span(line, col, line, col + 2), "16"),)))
    assert not v.ok and v.reason is not None and "alias bombs" in v.reason and "'x'" not in v.reason


def test_a_fix_that_loses_a_key_a_comment_or_another_value_is_not_offered() -> None:
    line = BAD.splitlines()[4]  # ici_tensor_parallelism: 16
    lose_key = Fix("Drop it", (TextEdit(None, Span(4, 0, 5, 0), ""),))
    assert "lose the key ici_tensor_parallelism" in str(vet_fix(BAD, lose_key).reason)
    lose_comment = Fix("Drop a comment", (TextEdit(None, Span(3, 24, 3, len(BAD.splitlines()[3])), ""),))
    assert "comment" in str(vet_fix(BAD, lose_comment).reason)
    dup = Fix("Set twice", (TextEdit(None, Span.point(5), f"{line}\n"),))
    assert not vet_fix(BAD, dup).ok  # a duplicate key does not parse


def test_the_rule_fixes_of_the_examples_are_all_offered(write) -> None:
    examples = {f.name: f.read_text(encoding="utf-8") for f in sorted((ROOT / "examples").glob("*.yml"))}
    paths = {name: write(name, text) for name, text in examples.items()}  # parents resolve next to the child
    offered = 0
    for name, text in examples.items():
        p = paths[name]
        for finding in analyze(p, text).findings:
            for fx in finding.fixes:
                v = vet_fix(text, fx, path=p, clears=(finding.code, finding.key), recheck=static_checks(p))
                assert v.ok, (name, fx.title, v.reason)
                offered += 1
    assert offered


# -- a base_config that names the document itself -----------------------------------------------------------
# Issue 25: "Rename to ici_tensor_parallelism" on a config whose base_config names the file itself left ASAP113.
# By its own name the chain stops at once (ASAP003) and the rename clears it. Through another name for the same
# file (a hard link here; another case of the name on a case-insensitive disk) the chain read the document's own
# text on disk as its parent: the misspelt key came back from there, so the rename could never clear its finding,
# the editor did not offer it, and `asap check` listed it anyway (it listed every fix unvetted). The document is
# never its own parent now, and the command line lists only the fixes the vetting offers.
SELF = (
    "base_config: {name}\nmodel_name: llama2-7b\ncompile_topology: v5e-256\nici_fsdp_parallelism: -1  # fill\n"
    "ici_tensr_parallelism: 16\n"
)


def self_referencing(tmp_path: Path, how: str) -> tuple[Path, str]:
    """c.yml whose base_config is itself: by its own name, or through a hard link to it."""
    path = tmp_path / "c.yml"
    text = SELF.format(name="c.yml" if how == "own name" else "h.yml")
    path.write_text(text, encoding="utf-8")
    if how == "hard link":
        try:
            os.link(path, tmp_path / "h.yml")
        except OSError as e:
            pytest.skip(f"no hard links here: {e}")
    return path, text


@pytest.mark.parametrize("how", ["own name", "hard link"])
def test_rename_with_a_self_referencing_base_config_is_vetted_on_the_edited_text(tmp_path: Path, how: str) -> None:
    path, text = self_referencing(tmp_path, how)
    an = analyze(path, text)
    (f,) = [x for x in an.findings if x.code == "ASAP113"]
    (fix,) = f.fixes
    v = vet_fix(text, fix, path=path, clears=(f.code, f.key), recheck=static_checks(path), document=an.config.document)
    assert v.ok, v.reason
    assert v.text == text.replace("ici_tensr_parallelism", "ici_tensor_parallelism")
    after = analyze(path, v.text)  # the file on disk still has the misspelt key: it is not the parent
    assert "ASAP113" not in [x.code for x in after.findings] and after.config.chain == []
    assert [x.code for x in after.findings if x.severity == 1] == ["ASAP003"]


def asap(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "server.cli.main", *args], capture_output=True, text=True, cwd=cwd, timeout=120
    )


@pytest.mark.parametrize("how", ["own name", "hard link"])
def test_cli_rename_with_a_self_referencing_base_config_clears_its_finding(tmp_path: Path, how: str) -> None:
    path, text = self_referencing(tmp_path, how)
    r = asap("check", "c.yml", "--json", cwd=tmp_path)  # a relative path, as a user types it
    (f,) = [x for x in json.loads(r.stdout)["findings"] if x["code"] == "ASAP113"]
    assert f["fixes"] == ["Rename to ici_tensor_parallelism"]
    assert "    fix: Rename to ici_tensor_parallelism" in asap("check", "c.yml", cwd=tmp_path).stdout
    path.write_text(text.replace("ici_tensr_parallelism", "ici_tensor_parallelism"), encoding="utf-8")
    codes = [x["code"] for x in json.loads(asap("check", "c.yml", "--json", cwd=tmp_path).stdout)["findings"]]
    assert "ASAP113" not in codes and "ASAP003" in codes


def test_cli_lists_only_the_fixes_the_vetting_offers(tmp_path: Path) -> None:
    """`asap check` named every fix a rule made; one through an alias (never offered in the editor) was listed too."""
    text = "m: &m 32\n" + BAD.replace("32   # tuned by hand", "*m")
    (tmp_path / "alias.yml").write_text(text, encoding="utf-8")
    unvetted = [fx.title for f in analyze(tmp_path / "alias.yml", text).findings for fx in f.fixes]
    assert any(t.startswith("Set ici_fsdp_parallelism") for t in unvetted)  # the rule makes them
    doc = json.loads(asap("check", "alias.yml", "--json", cwd=tmp_path).stdout)
    (f,) = [x for x in doc["findings"] if x["code"] == "ASAP101"]
    assert not any(t.startswith("Set ici_fsdp_parallelism") for t in f["fixes"]), f["fixes"]
    assert "fix: Set ici_fsdp_parallelism" not in asap("check", "alias.yml", cwd=tmp_path).stdout


# -- over stdio ----------------------------------------------------------------------------------------------


@pytest_lsp.fixture(config=CONFIG)
async def editor(lsp_client: AsapClient):
    """A server whose client shows disabled code actions (as VS Code does)."""
    caps = capabilities()
    assert caps.text_document is not None and caps.text_document.code_action is not None
    caps.text_document.code_action.disabled_support = True
    await asyncio.wait_for(
        lsp_client.initialize_session(lsp.InitializeParams(capabilities=caps, root_uri=ROOT.as_uri())), 30
    )
    yield lsp_client
    await lsp_client.shutdown_session()


async def test_lsp_quick_fix_on_a_crlf_document_inserts_a_crlf_line(editor: AsapClient, tmp_path: Path) -> None:
    (tmp_path / "parent.yml").write_text(PARENT)
    text = INHERITED.replace("\n", "\r\n")
    path = tmp_path / "c.yml"
    path.write_bytes(text.encode())
    doc = Doc(editor, path, text=text).open()
    diags = await doc.diagnostics(version=1, where=has("ASAP101"))
    product = [d for d in diags if d.code == "ASAP101"]
    actions = [a for a in await doc.code_actions(product) if a.title.startswith("Set ici_fsdp_parallelism to 16")]
    assert len(actions) == 1 and actions[0].disabled is None
    change = document_edit(actions[0])
    assert change.text_document.version == 1
    after = apply_edits(doc.text, change.edits)
    assert after == text.replace("# dp\r\n", "# dp\r\nici_fsdp_parallelism: 16\r\n")
    doc.edit(change.edits)  # the client applies it: the server sees the same text and the finding is gone
    await doc.diagnostics(where=lacks("ASAP101"))
    assert doc.text == after


@pytest.mark.parametrize("eol", ["\r", "mixed"])
async def test_lsp_quick_fix_on_a_cr_or_mixed_document_writes_the_lines_endings(
    editor: AsapClient, tmp_path: Path, eol: str
) -> None:
    """VS Code counts a bare CR as a line break, as LF and CRLF: the inserted line lands after the line the server
    means and ends as that line does, in the bytes the client holds after applying the edit."""
    (tmp_path / "parent.yml").write_text(PARENT)
    text = ended(INHERITED, eol)
    path = tmp_path / "c.yml"
    path.write_bytes(text.encode())
    doc = Doc(editor, path, text=text).open()
    diags = await doc.diagnostics(version=1, where=has("ASAP101"))
    actions = await doc.code_actions([d for d in diags if d.code == "ASAP101"])
    (action,) = [a for a in actions if a.title.startswith("Set ici_fsdp_parallelism to 16")]
    change = document_edit(action)
    after, _ = tm.apply_edits(doc.text, change.edits)  # the client's own line counting: CR, LF and CRLF only
    want = GOLDEN_MIXED["insert"] if eol == "mixed" else ended(GOLDEN["insert"][3], eol)
    assert after.encode("utf-8") == want.encode("utf-8")
    assert not tm.ending_mismatches(doc.text, change.edits)
    doc.edit(change.edits)  # the server applies the same change to its copy: the finding is gone there
    await doc.diagnostics(where=lacks("ASAP101"))
    assert doc.text.encode("utf-8") == want.encode("utf-8")


@pytest.mark.parametrize("how", ["own name", "hard link"])
async def test_lsp_rename_with_a_self_referencing_base_config_clears_its_finding(
    editor: AsapClient, tmp_path: Path, how: str
) -> None:
    path, text = self_referencing(tmp_path, how)
    doc = Doc(editor, path, text=text).open()
    diags = await doc.diagnostics(version=1, where=has("ASAP113"))
    actions = await doc.code_actions([d for d in diags if d.code == "ASAP113"])
    (action,) = [a for a in actions if a.title == "Rename to ici_tensor_parallelism"]
    assert action.disabled is None
    doc.edit(document_edit(action).edits)  # unsaved: the disk keeps the misspelt key
    after = await doc.diagnostics()
    assert "ASAP113" not in [d.code for d in after] and "ASAP003" in [d.code for d in after]
    assert doc.text == text.replace("ici_tensr_parallelism", "ici_tensor_parallelism")


async def test_lsp_fix_through_an_alias_is_shown_disabled_with_its_reason(editor: AsapClient, tmp_path: Path) -> None:
    text = "m: &m 32\r\n" + BAD.replace("32   # tuned by hand", "*m").replace("\n", "\r\n")
    path = tmp_path / "alias.yml"
    path.write_bytes(text.encode())
    doc = Doc(editor, path, text=text).open()
    diags = await doc.diagnostics(version=1, where=has("ASAP101"))
    actions = await doc.code_actions([d for d in diags if d.code == "ASAP101"])
    refused = [a for a in actions if a.title.startswith("Set ici_fsdp_parallelism")]
    assert refused and all(a.disabled is not None and a.edit is None for a in refused)
    assert all(a.disabled is not None and "&m" in a.disabled.reason for a in refused)
    for a in actions:  # whatever is offered leaves the anchor and its line alone
        if a.disabled is None:
            assert apply_edits(doc.text, document_edit(a).edits).startswith("m: &m 32\r\n")


# -- property: every offered fix of generated configs -------------------------------------------------------


def client_apply(text: str, edits: tuple[TextEdit, ...]) -> str:
    """Apply edits the way an editor does (lines as str.splitlines counts them), independently of apply_text."""
    lines = text.splitlines(keepends=True)

    def index(line: int, col: int) -> int:
        if line >= len(lines):
            return len(text)
        return sum(map(len, lines[:line])) + min(col, len(lines[line].rstrip("\r\n")))

    for e in sorted(edits, key=lambda e: (e.span.line, e.span.column), reverse=True):
        a, b = index(e.span.line, e.span.column), index(e.span.end_line, e.span.end_column)
        text = text[:a] + e.new_text + text[b:]
    return text


@st.composite
def messy_configs(draw: st.DrawFn) -> tuple[str, str]:
    """Configs with a wrong mesh, an ignored and a misspelt key, in any line ending, with or without a final
    newline, with comments, and with a degree sometimes given by an alias or an anchor."""
    fsdp, tensor = draw(st.sampled_from([(32, 16), (8, 16), (4, 4), (16, 8)]))
    entries = [("model_name", "llama2-7b"), ("compile_topology", "v5e-256"), ("ici_tensor_parallelism", str(tensor))]
    how = draw(st.sampled_from(["plain", "alias", "anchor", "anchor shared"]))
    head = []
    if how == "alias":
        head.append(f"m: &m {fsdp}")
        entries.append(("ici_fsdp_parallelism", "*m"))
    elif how.startswith("anchor"):
        entries.append(("ici_fsdp_parallelism", f"&f {fsdp}"))
        if how == "anchor shared":
            entries.append(("dcn_fsdp_parallelism", "*f"))
    else:
        entries.append(("ici_fsdp_parallelism", str(fsdp)))
    entries += draw(
        st.lists(
            st.sampled_from([("ici_sequence_parallelism", "2"), ("ici_data_paralelism", "1")]), max_size=2, unique=True
        )
    )
    lines = [*head]
    for k, v in draw(st.permutations(entries)):
        if draw(st.booleans()):
            lines.append(f"# about {k}")
        lines.append(f"{k}: {v}" + (f"  # note {k}" if draw(st.booleans()) else ""))
    eol = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    return eol.join(lines) + (eol if draw(st.booleans()) else ""), eol


@settings(max_examples=80, deadline=None, derandomize=True)
@given(messy_configs())
def test_every_offered_fix_keeps_the_file_whole_and_clears_its_finding(case: tuple[str, str]) -> None:
    text, eol = case
    recheck = static_checks(None)
    for f in analyze(None, text).findings:
        for fx in f.fixes:
            v = vet_fix(text, fx, clears=(f.code, f.key), recheck=recheck)
            if not v.ok:
                assert v.reason
                continue
            assert v.fix is not None
            after = client_apply(text, v.fix.edits)
            assert after == v.text
            assert set(re.findall(r"\r\n|\r|\n", after)) <= {eol}  # every line break the file's own
            assert after.endswith(("\n", "\r")) == text.endswith(("\n", "\r"))  # the final newline as it was
            left = [(x.code, x.key) for x in analyze(None, after).findings]
            assert (f.code, f.key) not in left, (fx.title, after)
            for line in text.splitlines():
                if line.startswith("m: &m") or line.startswith("# about"):
                    assert line in after.splitlines()  # anchors' own keys and comments untouched


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
def test_an_insert_after_a_last_line_without_a_break_stays_inside_the_document(tmp_path: Path, eol: str) -> None:
    # bench/fuzz.py found the edit written at line N of an N-line text (past its end): strict clients refuse that
    text = eol.join(["model_name: llama2-7b", "compile_topology: v5e-256", "ici_fsdp_parallelism: 64"])
    lines = len(text.split(eol))
    an = analyze(tmp_path / "c.yml", text)
    vetted = [vet_fix(text, fx, path=tmp_path / "c.yml") for f in an.diagnostics for fx in f.fixes]
    offered = [v for v in vetted if v.fix is not None]
    assert offered
    for v in offered:
        assert v.fix is not None
        for e in v.fix.edits:
            assert e.span.line < lines and e.span.end_line < lines, (v.title, e.span)
        assert v.text == apply_text(text, list(v.fix.edits)) and not v.text.endswith(eol)
