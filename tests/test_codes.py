"""The diagnostic-code catalog (server/common/codes.py) and the hover that explains a diagnostic: every code
the server emits has an entry, every note it cites exists, docs/diagnostics.md lists the same codes, and the
hover over real analyses explains the diagnostic under the cursor and nothing elsewhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from server.common.codes import CODES, DiagCode
from server.common.findings import Finding
from server.presentation import explain
from server.profiles import profile_link
from server.services.analysis import analyze

ROOT = Path(__file__).resolve().parent.parent
LITERAL = re.compile(r"""["'](ASAP\d{3})["']""")
MEMBER = re.compile(r"\bDiagCode\.([A-Z0-9_]+)\b")


def server_sources() -> list[Path]:
    """The server's Python files, the catalog itself excluded."""
    return [py for py in sorted((ROOT / "server").rglob("*.py")) if py != ROOT / "server" / "common" / "codes.py"]


def emitted_codes() -> set[str]:
    """Every ASAP code a producer names (`DiagCode.X`) in the server's source, the catalog itself excluded."""
    found: set[str] = set()
    for py in server_sources():
        found |= {DiagCode[name].value for name in MEMBER.findall(py.read_text(encoding="utf-8"))}
    return found


def test_codes_no_producer_spells_a_code_as_a_bare_string():
    bare = [
        f"{py.relative_to(ROOT)}:{n}"
        for py in server_sources()
        for n, line in enumerate(py.read_text(encoding="utf-8").splitlines(), 1)
        if LITERAL.search(line)
    ]
    assert bare == [], "use the DiagCode member (server/common/codes.py), not the bare code"


def front_matter_title(note: Path) -> str:
    m = re.search(r'^title:\s*"(?P<t>[^"]+)"\s*$', note.read_text(encoding="utf-8"), re.M)
    assert m, f"{note} has no quoted title"
    return m["t"]


def test_codes_every_emitted_code_has_an_entry_and_no_entry_is_stale():
    emitted = emitted_codes()
    assert {"ASAP001", "ASAP106", "ASAP121", "ASAP201", "ASAP300"} <= emitted  # the scan sees every producer
    assert sorted(emitted - CODES.keys()) == [], "codes emitted without a catalog entry (server/common/codes.py)"
    assert sorted(CODES.keys() - emitted) == [], "catalog entries for codes nothing emits"


def test_codes_entries_are_complete_and_titles_distinct():
    for c in CODES.values():
        assert all((c.title, c.layer, c.meaning, c.basis, c.fix)), c.code
        assert len(c.title) <= 50, c.code  # a title, not a sentence
    titles = [c.title for c in CODES.values()]
    assert len(set(titles)) == len(titles)


def test_codes_cited_notes_exist_and_their_titles_are_read():
    cited = {n for c in CODES.values() for n in c.notes}
    assert cited, "the catalog cites no knowledge notes"
    for name in sorted(cited):
        path = ROOT / "kb" / "docs" / name
        assert path.is_file(), f"{name} is cited by the catalog but not in kb/docs"
        found = explain.note_title(name)
        assert found is not None and found[0] == front_matter_title(path)


def test_codes_docs_table_lists_exactly_the_catalog():
    doc = (ROOT / "docs" / "diagnostics.md").read_text(encoding="utf-8")
    section = doc.split("## Diagnostic codes", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\|\s*(ASAP\d{3})\s*\|", section, re.M)
    assert len(rows) == len(set(rows)), "a code is listed twice"
    assert sorted(rows) == sorted(CODES)


HEAD = "model_name: llama2-7b\nper_device_batch_size: 4\ncompile_topology: v5e-256\n"
TOO_BIG = "model_name: llama2-70b\nper_device_batch_size: 8\ncompile_topology: v5e-16\n"  # 70B on 16 x 16 GB
# (code, config text, a line and column where no finding is)
CASES = [
    ("ASAP001", "model_name: llama2-7b\nici_fsdp_parallelism: [1, 2\ncompile_topology: v5e-256\n", (0, 3)),
    ("ASAP005", "# asap: slice=v9z-1\nmodel_name: llama2-7b\nper_device_batch_size: 4\n", (1, 3)),
    ("ASAP008", HEAD + "".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}' if i else 'x'] * 10)}]\n" for i in range(6)),
     (0, 3)),
    ("ASAP009", HEAD + 'ici_tensor_parallelism: "1"\n', (0, 3)),
    ("ASAP011", "# XLA_FLAGS='--xla_tpu_scoped_vmem_limit_kib=big'\n" + HEAD, (1, 3)),
    ("ASAP105", HEAD + "dcn_data_parallelism: 2\n", (3, 23)),
    ("ASAP106", HEAD + "ici_tensor_parallelism: 64\n", (0, 3)),
    ("ASAP120", HEAD + "ici_fsdp_parallelism: -1\n", (3, 22)),
    ("ASAP121", TOO_BIG + "ici_fsdp_parallelism: -1\n", (1, 3)),
]  # fmt: skip


def only(findings: list[Finding], code: str) -> Finding:
    hits = [f for f in findings if f.code == code]
    assert len(hits) == 1, [(f.code, f.message) for f in findings]
    return hits[0]


@pytest.mark.parametrize(("code", "text", "elsewhere"), CASES, ids=[c[0] for c in CASES])
def test_codes_diagnostic_hover_explains_the_finding_under_the_cursor(code, text, elsewhere):
    an = analyze(None, text)
    f = only(an.diagnostics, code)
    c = CODES[code]
    mid = (f.span.column + f.span.end_column) // 2
    found = explain.diagnostic_md(an.diagnostics, f.span.line, mid)
    assert found is not None
    md, span = found
    assert span == f.span
    section = next(s.strip() for s in md.split("\n---\n") if s.strip().startswith(f"**{code}** "))
    assert section.startswith(f"**{code}** {c.title}")
    assert f.message in section  # the numbers behind the verdict
    assert c.meaning in section and c.basis in section and c.fix in section
    for name in c.notes:
        title = front_matter_title(ROOT / "kb" / "docs" / name)
        assert f"[{title}](" in section and name in section
    assert explain.diagnostic_md(an.diagnostics, *elsewhere) is None


def test_codes_several_diagnostics_on_one_key_errors_first_each_explained_once():
    an = analyze(None, HEAD + "ici_tensor_parallelism: 64\n")
    assert sorted(f.code for f in an.diagnostics) == ["ASAP106", "ASAP107", "ASAP108"]
    found = explain.diagnostic_md(an.diagnostics, 3, 5)
    assert found is not None
    heads = re.findall(r"^\*\*(ASAP\d{3})\*\*", found[0], re.M)
    assert heads == ["ASAP106", "ASAP107", "ASAP108"]
    assert "query heads" not in found[0].split("**ASAP107**")[0]  # each message under its own code


def test_codes_file_level_finding_is_explained_on_its_line_only():
    an = analyze(None, "model_name: llama2-7b\nper_device_batch_size: 4\n")
    f = only(an.diagnostics, "ASAP010")
    assert (f.span.line, f.span.column, f.span.end_column) == (0, 0, 0)  # an empty span: the editor shows line 1
    for col in (0, 5, 30):
        found = explain.diagnostic_md(an.diagnostics, 0, col)
        assert found is not None and found[0].startswith("**ASAP010** No TPU slice declared")
    assert explain.diagnostic_md(an.diagnostics, 1, 0) is None


def test_codes_profile_link_finding_is_explained_at_the_path(write):
    p = write("c.yml", "compile_topology: v5e-4\n# asap: profile=nowhere/run\nmodel_name: llama2-7b\n")
    an = analyze(p)
    _, findings = profile_link.resolve(an.config, p.parent)
    f = only(findings, "ASAP201")
    found = explain.diagnostic_md(findings, 1, f.span.column + 2)
    assert found is not None and found[0].startswith("**ASAP201** Linked profile missing")
    assert "nowhere" in found[0]
    assert explain.diagnostic_md(findings, 1, f.span.column - 3) is None  # on '# asap:', not the path


def test_codes_key_hover_names_its_diagnostics_and_does_not_repeat_what_it_explains():
    text = HEAD + "dcn_data_parallelism: 2\n"
    an = analyze(None, text)
    f = only(an.diagnostics, "ASAP105")
    title = CODES["ASAP105"].title
    plain = explain.hover(an, 3, 2)  # without the published findings: the key hover alone, as before
    assert plain is not None and f"`ASAP105` **{title}**: {f.message}" in plain[0]
    assert not plain[0].startswith("**ASAP105**")
    both = explain.hover(an, 3, 2, an.diagnostics)
    assert both is not None
    md, span = both
    assert md.startswith(f"**ASAP105** {title}") and "**dcn_data_parallelism**" in md
    assert md.count(f.message) == 1 and f"`ASAP105` **{title}** (explained above)" in md
    assert span == an.config.document.entries["dcn_data_parallelism"].key_span  # type: ignore[union-attr]
    on_value = explain.hover(an, 3, 23, an.diagnostics)  # the value: no diagnostic there, the key lists it in full
    assert on_value is not None and on_value[0].startswith("**dcn_data_parallelism**")
    assert f"`ASAP105` **{title}**: {f.message}" in on_value[0]


def test_codes_hover_explains_a_diagnostic_where_no_key_is():
    text = "model_name: llama2-7b\nici_fsdp_parallelism: [1, 2\ncompile_topology: v5e-256\n"
    an = analyze(None, text)
    f = only(an.diagnostics, "ASAP001")
    assert explain.hover(an, f.span.line, f.span.column) is None  # no document, so no key to explain
    found = explain.hover(an, f.span.line, f.span.column, an.diagnostics)
    assert found is not None and found[0].startswith("**ASAP001** Invalid YAML") and found[1] == f.span


def test_batch_hover_shows_the_estimates_tokens_per_step():
    text = HEAD + "ici_fsdp_parallelism: -1\nmax_target_length: 4096\ngradient_accumulation_steps: 2\n"
    an = analyze(None, text)
    assert an.estimate is not None
    found = explain.hover(an, 1, 3)  # per_device_batch_size
    assert found is not None
    assert f"- Tokens per step: {an.estimate.tokens_per_step:,.0f} (max_target_length 4096)" in found[0]
    assert "- Tokens per step: 8,388,608 " in found[0]  # 4 x 256 devices x 4096 x 2
