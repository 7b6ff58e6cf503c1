"""Quick fixes as golden before/after text: only the value changes; comments, order,
quoting and blank lines survive, and the fixed file checks clean."""

from __future__ import annotations

from server.common.findings import Fix
from server.services.analysis import analyze


def apply(text: str, fix: Fix) -> str:
    lines = text.splitlines(keepends=True)
    for e in sorted(fix.edits, key=lambda e: (e.span.line, e.span.column), reverse=True):
        s, t = e.span, e.span
        if s.line >= len(lines):
            lines.append("")
        start = sum(len(x) for x in lines[: s.line]) + s.column
        end = sum(len(x) for x in lines[: t.end_line]) + t.end_column
        joined = "".join(lines)
        joined = joined[:start] + e.new_text + joined[end:]
        lines = joined.splitlines(keepends=True)
    return "".join(lines)


BAD = """\
# Llama2-7B on v5e-256
model_name: llama2-7b
compile_topology: "v5e-256"

per_device_batch_size: 4
ici_fsdp_parallelism: 32   # tuned by hand last week
ici_tensor_parallelism: 16
ici_sequence_parallelism: 4  # legacy
"""


def test_product_fix_changes_only_the_value(write):
    p = write("c.yml", BAD)
    an = analyze(p)
    (f,) = [x for x in an.findings if x.code == "ASAP101"]
    fixed = apply(BAD, f.fixes[0])
    assert fixed == BAD.replace("ici_fsdp_parallelism: 32 ", "ici_fsdp_parallelism: 16 ")
    after = analyze(write("c.yml", fixed))
    assert "ASAP101" not in [x.code for x in after.findings]


def test_fill_fix_writes_minus_one(write):
    an = analyze(write("c.yml", BAD))
    (f,) = [x for x in an.findings if x.code == "ASAP101"]
    fill = next(x for x in f.fixes if "-1" in x.title)
    assert apply(BAD, fill) == BAD.replace("ici_fsdp_parallelism: 32 ", "ici_fsdp_parallelism: -1 ")


def test_product_fix_inserts_fsdp_after_the_mesh_block_when_inherited(write):
    write("parent.yml", "ici_fsdp_parallelism: 1\n")
    text = (
        "base_config: parent.yml\nmodel_name: llama2-7b\ncompile_topology: v5e-256\n"
        "ici_data_parallelism: 16  # dp\nsteps: 10\n"
    )
    an = analyze(write("c.yml", text))
    (f,) = [x for x in an.findings if x.code == "ASAP101"]
    assert f.span.line == 3  # at the key the document writes, not in the parent
    fixed = apply(text, f.fixes[0])
    assert fixed == text.replace("# dp\n", "# dp\nici_fsdp_parallelism: 16\n")
    assert [x.code for x in analyze(write("c.yml", fixed)).findings] == []


def test_ignored_key_fix_comments_the_line_out_keeping_its_comment(write):
    an = analyze(write("c.yml", BAD))
    (f,) = [x for x in an.findings if x.code == "ASAP111"]
    fixed = apply(BAD, f.fixes[0])
    assert fixed == BAD.replace("ici_sequence_parallelism: 4  # legacy", "# ici_sequence_parallelism: 4  # legacy")


def test_quoted_degree_is_read_as_maxtext_reads_it_and_the_fix_writes_the_number(write):
    text = "model_name: llama2-7b\ncompile_topology: v5e-256\nici_fsdp_parallelism: '32'\nici_tensor_parallelism: 16\n"
    an = analyze(write("c.yml", text))
    # MaxText's pydantic config reads '32' as 32 (issue 25): no ASAP100, the product is 32 x 16, and a hint
    assert sorted(x.code for x in an.findings) == ["ASAP009", "ASAP101"]
    assert "512" in next(x for x in an.findings if x.code == "ASAP101").message
    (f,) = [x for x in an.findings if x.code == "ASAP009"]
    fixed = apply(text, f.fixes[0])
    assert fixed == text.replace("'32'", "32")
    assert [x.code for x in analyze(write("c.yml", fixed)).findings] == ["ASAP101"]


def test_typo_fix_renames_the_key_only(write):
    text = "model_name: llama2-7b\ncompile_topology: v5e-256\nici_fsdp_paralelism: 256  # all\n"
    an = analyze(write("c.yml", text))
    (f,) = [x for x in an.findings if x.code == "ASAP113"]
    assert apply(text, f.fixes[0]) == text.replace("paralelism", "parallelism")
