"""Mesh validation rules: each located at its key, with the numbers in the message."""

from __future__ import annotations

import math

import pytest

from server.common.findings import Severity
from server.config.integers import read_int, yaml11
from server.config.resolve import parse_override, with_overrides
from server.services.analysis import analyze


def codes(an):
    return [f.code for f in an.findings]


def only(an, code):
    hits = [f for f in an.findings if f.code == code]
    assert len(hits) == 1, an.findings
    return hits[0]


@pytest.fixture
def check(write):
    def _check(body: str, topo: str | None = "v5e-256", default_slice: str | None = None, **kw):
        head = "model_name: llama2-7b\n"
        if "per_device_batch_size" not in body:
            head += "per_device_batch_size: 4\n"
        if topo:
            head += f"compile_topology: {topo}\n"
        return analyze(write("c.yml", head + body), default_slice=default_slice)

    return _check


def test_clean_default_mesh_resolves_fsdp_to_the_slice(check):
    an = check("")
    assert codes(an) == []
    assert an.check.degree("fsdp") == 256 and an.check.degree("data") == 1


def test_product_mismatch_is_located_at_fsdp_with_fixes(check):
    an = check("ici_fsdp_parallelism: 32\nici_tensor_parallelism: 16\n")
    f = only(an, "ASAP101")
    assert f.severity == Severity.ERROR and f.key == "ici_fsdp_parallelism" and f.span.line == 3
    assert "256" in f.message and "512" in f.message
    assert f.fixes[0].title.startswith("Set ici_fsdp_parallelism to 16")
    assert f.fixes[0].preferred


def test_product_mismatch_without_fsdp_in_file_inserts_it(check):
    an = check("ici_data_parallelism: 2\nici_fsdp_parallelism: 1\nici_tensor_parallelism: 4\n")
    f = only(an, "ASAP101")
    assert f.fixes[0].title.startswith("Set ici_fsdp_parallelism to 32")


def test_more_than_one_unspecified_axis(check):
    an = check("ici_fsdp_parallelism: -1\nici_data_parallelism: -1\n")
    f = only(an, "ASAP102")
    assert f.key in ("ici_data_parallelism", "ici_fsdp_parallelism") and "ici_data_parallelism" in f.message
    assert f.related  # points at the other -1


def test_unresolvable_unspecified_axis(check):
    an = check("ici_fsdp_parallelism: -1\nici_tensor_parallelism: 3\n")
    f = only(an, "ASAP103")
    assert f.key == "ici_fsdp_parallelism" and "256" in f.message and "3" in f.message


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("0", "zero"),
        ("-4", "negative"),
        ("2.5", "fractional part"),
        ("four", "whole number"),
        ("", "whole number"),
        ('"2."', "whole number"),  # pydantic reads "2.0" and "2.00", not "2."
        ('"1e0"', "whole number"),
        ('"0x10"', "whole number"),  # text: pydantic reads no base prefix (a plain 0x10 is YAML 1.1's hex 16)
        ("0o2", "whole number"),  # YAML 1.1 has no 0o: text to MaxText (ruamel's YAML 1.2 reads 2)
        ("[2]", "whole number"),
        (".inf", "finite"),
    ],
)
def test_bad_degrees_are_errors_not_crashes(check, value, why):
    an = check(f"ici_tensor_parallelism: {value}\n")
    f = only(an, "ASAP100")
    assert f.key == "ici_tensor_parallelism" and why in f.message and f.span.line == 3


def test_dcn_above_one_on_a_single_slice(check):
    an = check("dcn_fsdp_parallelism: 2\n")
    f = only(an, "ASAP105")
    assert f.key == "dcn_fsdp_parallelism" and "single slice" in f.message


def test_dcn_product_must_equal_slices(check):
    an = check("compile_topology_num_slices: 4\ndcn_data_parallelism: 1\ndcn_fsdp_parallelism: 2\n")
    f = only(an, "ASAP104")
    assert "4" in f.message and "2" in f.message
    assert f.fixes and f.fixes[0].title.startswith("Set dcn_data_parallelism to 2")


def test_multislice_default_dcn_data_fills_slices(check):
    an = check("compile_topology_num_slices: 2\n")
    assert codes(an) == [] and an.check.degree("data") == 2 and an.check.degree("fsdp") == 256


def errors(an):
    return [f.code for f in an.findings if f.severity == Severity.ERROR]


# Issue 25: MaxText never reads the DCN list on a single slice (maxtext_utils.create_device_mesh fills it only when
# num_slices > 1), so a second -1 beside the default dcn_data_parallelism: -1 launches: a warning, never an error.
# tests/test_mesh_vs_maxtext.py checks the same against MaxText itself.
@pytest.mark.parametrize(
    ("topo", "body"),
    [
        ("v4-128", "dcn_expert_parallelism: -1\n"),
        ("v5e-256", "dcn_fsdp_parallelism: -1\n"),
        ("v6e-64", "dcn_tensor_parallelism: -1\ndcn_expert_parallelism: -1\n"),
        ("v4-128", "compile_topology_num_slices: 1\ndcn_data_parallelism: -1\ndcn_pipeline_parallelism: -1\n"),
    ],
)
def test_several_dcn_fill_axes_on_one_slice_are_a_warning(check, topo, body):
    an = check(body, topo=topo)
    assert errors(an) == []
    f = [f for f in an.findings if f.code == "ASAP102"]
    assert f and all(x.severity == Severity.WARNING for x in f)
    assert "ignores the DCN list on a single slice" in f[0].message and f"({topo})" in f[0].message
    assert an.check.consistent and all(d.degree == 1 for d in an.check.dcn)


def test_several_dcn_fill_axes_on_several_slices_stay_an_error(check):
    an = check("compile_topology_num_slices: 2\ndcn_expert_parallelism: -1\n", topo="v4-128")
    f = only(an, "ASAP102")
    assert f.severity == Severity.ERROR and "single slice" not in f.message


def test_dcn_zero_on_one_slice_is_a_warning_and_on_several_an_error(check):
    # MaxText multiplies the DCN degrees on one slice and refuses only a product above 1 in absolute value
    one = check("dcn_fsdp_parallelism: 0\ndcn_tensor_parallelism: 4\n", topo="v4-128")
    assert errors(one) == [] and sorted(codes(one)) == ["ASAP100", "ASAP105"]
    two = check("compile_topology_num_slices: 2\ndcn_fsdp_parallelism: 0\n", topo="v4-128")
    assert errors(two) == ["ASAP100"]


def test_dcn_product_above_one_on_one_slice_is_an_error(check):
    an = check("dcn_fsdp_parallelism: -2\n", topo="v4-128")  # -1 x -2: MaxText's |product| 2 > 1
    assert errors(an) == ["ASAP100"]
    seq = check("dcn_sequence_parallelism: 2\n", topo="v4-128")  # outside mesh_axes, inside MaxText's product
    f = only(seq, "ASAP105")
    assert f.severity == Severity.ERROR and f.key == "dcn_sequence_parallelism"


def test_dcn_diloco_fill_is_resolved_before_the_others(check):
    # MaxText resolves dcn_diloco_parallelism: -1 first, so beside dcn_data_parallelism: -1 it is not a second -1
    an = check("compile_topology_num_slices: 4\ndcn_diloco_parallelism: -1\n", topo="v5e-16")
    assert errors(an) == [] and an.check.degree("diloco") == 4 and an.check.degree("data") == 1
    bad = check("dcn_diloco_parallelism: -1\ndcn_fsdp_parallelism: 0\n", topo="v5e-16")  # its assertion: other > 0
    assert errors(bad) == ["ASAP103"] and only(bad, "ASAP103").key == "dcn_diloco_parallelism"


def test_several_dcn_fill_axes_without_a_slice_are_a_warning(check):
    an = check("dcn_expert_parallelism: -1\n", topo=None)
    assert errors(an) == [] and only(an, "ASAP102").severity == Severity.WARNING


def test_layer3_unplaceable_axis_names_axis_and_physical_mesh(check):
    # DOMAIN.md §2: v5e 16x16 with fsdp=64, tensor=4 fails
    an = check("ici_fsdp_parallelism: 64\nici_tensor_parallelism: 4\n")
    f = only(an, "ASAP106")
    assert f.key == "ici_tensor_parallelism"
    assert "16x16" in f.message and "NotImplementedError" in f.message and "1, 16, 256" in f.message


def test_layer3_allow_split_physical_axes_accepts_it(check):
    an = check("ici_fsdp_parallelism: 64\nici_tensor_parallelism: 4\nallow_split_physical_axes: true\n")
    assert "ASAP106" not in codes(an)
    assert an.check.placement is not None and an.check.placement.split


def test_layer3_v6e_4x4_data_tensor_maps_cleanly(check):
    an = check("ici_data_parallelism: 4\nici_fsdp_parallelism: 1\nici_tensor_parallelism: 4\n", topo="v6e-16")
    assert codes(an) == []
    p = an.check.placement
    assert p is not None and p.ok and not p.split


def test_heads_divisible_by_tensor_parallelism_pass(check):
    # llama2-7b: 32 query and 32 kv heads; tensor 16 on v6e-16 divides both
    an = check("ici_fsdp_parallelism: 1\nici_tensor_parallelism: 16\n", topo="v6e-16")
    assert "ASAP107" not in codes(an) and "ASAP108" not in codes(an)


def test_kv_heads_not_divisible(write):
    # llama3-8b: 32 q heads, 8 kv heads; tensor=16 on v6e-16 splits q heads but not kv heads
    an = analyze(
        write(
            "c.yml",
            "model_name: llama3-8b\ncompile_topology: v6e-16\nper_device_batch_size: 1\n"
            "ici_fsdp_parallelism: 1\nici_tensor_parallelism: 16\n",
        )
    )
    f = only(an, "ASAP108")
    assert f.key == "ici_tensor_parallelism" and "8" in f.message and "16" in f.message
    assert "ASAP107" not in codes(an)


def test_query_heads_not_divisible(write):
    # gemma2-9b: 16 query heads; tensor 32 on v5e-32
    an = analyze(
        write(
            "c.yml",
            "model_name: gemma2-9b\ncompile_topology: v5e-32\nper_device_batch_size: 1\n"
            "ici_fsdp_parallelism: 1\nici_tensor_parallelism: 32\n",
        )
    )
    assert "ASAP107" in codes(an)


def test_global_batch_not_divisible_by_batch_shards(check):
    # 1.5 x 256 devices = 384 sequences over 256 fsdp shards
    an = check("per_device_batch_size: 1.5\n")
    f = only(an, "ASAP109")
    assert f.key == "per_device_batch_size" and "384" in f.message and "256" in f.message
    # the same batch over 128 shards (fsdp 128 x tensor 2, split axes allowed) divides
    an = check(
        "per_device_batch_size: 1.5\nici_fsdp_parallelism: 128\nici_tensor_parallelism: 2\n"
        "allow_split_physical_axes: true\n"
    )
    assert "ASAP109" not in codes(an)


def test_fractional_batch_without_tensor_or_context_parallelism(write):
    an = analyze(write("c.yml", "model_name: llama2-7b\ncompile_topology: v5e-256\nper_device_batch_size: 0.5\n"))
    f = only(an, "ASAP110")
    assert f.key == "per_device_batch_size" and "2" in f.message and f.span.line == 2


def test_fractional_batch_covered_by_tensor_parallelism(write):
    an = analyze(
        write(
            "c.yml",
            "model_name: llama2-7b\ncompile_topology: v5e-256\nper_device_batch_size: 0.5\n"
            "ici_fsdp_parallelism: 16\nici_tensor_parallelism: 16\n",
        )
    )
    assert "ASAP110" not in codes(an) and "ASAP109" not in codes(an)


@pytest.mark.parametrize("value", ["0", "-1", "big"])
def test_bad_batch_size(check, value):
    an = check(f"per_device_batch_size: {value}\n")
    assert codes(an) == ["ASAP112"]


def test_invalid_yaml_reports_only_the_syntax_error(write):
    an = analyze(write("c.yml", "model_name: llama2-7b\nper_device_batch_size: 4\nper_device_batch_size: 0\n"))
    assert codes(an) == ["ASAP001"] and an.findings[0].span.line == 2


def test_ignored_key_warns_and_says_value_not_applied(check):
    an = check(
        "ici_sequence_parallelism: 4\nici_fsdp_parallelism: 64\nici_tensor_parallelism: 4\n"
        "allow_split_physical_axes: true\n"
    )
    f = only(an, "ASAP111")
    assert f.severity == Severity.WARNING and "NOT applied" in f.message and f.span.line == 3


@pytest.mark.parametrize("written", ["1", "1.0", "'1'", "true"])
@pytest.mark.parametrize("key", ["ici_sequence_parallelism", "dcn_sequence_parallelism"])
def test_ignored_key_of_degree_one_is_no_warning(check, key, written):
    """A removed axis set to 1 shards nothing, ignored or not: MaxText's own base.yml sets both so (no ASAP111)."""
    an = check(f"{key}: {written}\nici_fsdp_parallelism: 256\n")
    assert "ASAP111" not in codes(an) and errors(an) == []


@pytest.mark.parametrize("value", ["2", "-1", "0"])
def test_ignored_key_of_another_degree_warns(check, value):
    f = only(check(f"ici_sequence_parallelism: {value}\nici_fsdp_parallelism: 256\n"), "ASAP111")
    assert f.severity == Severity.WARNING and f"its value {value} is NOT applied" in f.message


def test_unknown_parallelism_key_suggests_the_right_one(check):
    an = check("ici_fsdp_paralelism: 256\n")
    f = only(an, "ASAP113")
    assert "ici_fsdp_parallelism" in f.message and f.fixes


def test_no_slice_declared_is_one_information(check):
    an = check("", topo=None)
    f = only(an, "ASAP010")
    assert f.severity == Severity.INFORMATION and "compile_topology" in f.message
    assert an.check.slice is None


def test_slice_from_comment_then_setting(check, write):
    an = analyze(write("c.yml", "# asap: slice=v6e-16\nmodel_name: llama2-7b\n"))
    assert an.check.slice_source == "comment" and an.check.slice is not None and an.check.slice.name == "v6e-16"
    an = check("", topo=None, default_slice="v5e-16")
    assert an.check.slice_source == "setting" and codes(an) == []


def test_unknown_slice_is_located_at_compile_topology_value(check):
    an = check("", topo="v5e-48")
    f = only(an, "ASAP005")
    assert f.span.line == 2 and f.span.column == len("compile_topology: ") and "v5e-256" in f.message


def test_findings_anchor_where_the_user_can_act(write):
    write("parent.yml", "ici_tensor_parallelism: 3\n")
    head = "model_name: llama2-7b\ncompile_topology: v5e-256\nbase_config: parent.yml\n"
    # the unresolvable -1 is MaxText's default fsdp, written nowhere: the top of the document
    f = only(analyze(write("c.yml", head)), "ASAP103")
    assert (f.key, f.span.line) == ("ici_fsdp_parallelism", 0)
    # once the document writes fsdp, the mismatch sits on that line
    g = only(analyze(write("d.yml", head + "ici_fsdp_parallelism: 64\n")), "ASAP101")
    assert (g.key, g.span.line) == ("ici_fsdp_parallelism", 3)


def test_finding_in_parent_points_to_base_config_with_related_location(write):
    write("parent.yml", "ici_tensor_parallelism: 32\nici_fsdp_parallelism: 1\n")
    an = analyze(
        write(
            "c.yml",
            "model_name: gemma2-9b\ncompile_topology: v5e-32\nper_device_batch_size: 1\nbase_config: parent.yml\n",
        )
    )
    f = only(an, "ASAP107")
    assert f.span.line == 3 and "parent.yml:1" in f.message
    assert f.related and f.related[0].file is not None and f.related[0].file.name == "parent.yml"


# Issue 25: MaxText reads a whole-number setting as its YAML loader (OmegaConf: YAML 1.1) and pydantic's lax int read
# it, so 2.0, "2" and true launch as 2, 2 and 1. ASAP reads the same number (no error) and says how it is written
# (ASAP009: a hint, or a warning where the number read is not the one written), with a fix that writes the number.
# tests/test_mesh_vs_maxtext.py checks the same spellings against MaxText 0.2.5.
SPLIT = "allow_split_physical_axes: true\n"  # any tensor degree placeable on v5e-256's 16x16


@pytest.mark.parametrize(
    ("token", "degree", "severity"),
    [
        ("4", 4, None),
        ("4.0", 4, Severity.HINT),
        ("4e0", 4, Severity.HINT),  # OmegaConf's float rule (YAML 1.1 wants a dot)
        ("4.", 4, Severity.HINT),
        ('"4"', 4, Severity.HINT),
        ("' 4 '", 4, Severity.HINT),
        ('"4.00"', 4, Severity.HINT),
        ('"+4"', 4, Severity.HINT),
        ('"04"', 4, Severity.HINT),
        ("!!str 4", 4, Severity.HINT),
        ("!!float 4", 4, Severity.HINT),
        ("true", 1, Severity.WARNING),
        ("yes", 1, Severity.WARNING),  # YAML 1.1's boolean (ruamel's YAML 1.2 reads the text 'yes')
        ("On", 1, Severity.WARNING),
        ("010", 8, Severity.WARNING),  # YAML 1.1's octal (ruamel's YAML 1.2 reads 10)
        ("+4", 4, None),
        ("0x4", 4, None),
        ("0b100", 4, None),
        ("0_4", 4, None),
    ],
)
def test_degree_is_read_as_maxtext_reads_it(check, token, degree, severity):
    an = check(f"ici_tensor_parallelism: {token}  # tensor\n{SPLIT}")
    assert errors(an) == [], an.findings
    assert an.check.degree("tensor") == degree and an.check.degree("fsdp") == 256 // degree
    assert an.config.get("ici_tensor_parallelism") == degree and an.config.problem("ici_tensor_parallelism") is None
    assert an.estimate is not None and an.estimate.layout.ici.get("tensor", 1) == degree
    said = [f for f in an.findings if f.code == "ASAP009"]
    if severity is None:
        assert said == []
        return
    (f,) = said
    assert f.severity == severity and f.key == "ici_tensor_parallelism" and f.span.line == 3
    assert f"integer {degree}" in f.message or f"ici_tensor_parallelism {degree}" in f.message
    if token.startswith("!!"):
        assert f.fixes == []  # the fix would drop the tag
        return
    (fix,) = f.fixes
    (edit,) = fix.edits
    assert fix.title == f"Write ici_tensor_parallelism: {degree}" and edit.new_text == str(degree)
    text = an.config.document.text
    line = text.splitlines()[edit.span.line]
    fixed_line = line[: edit.span.column] + edit.new_text + line[edit.span.end_column :]
    assert fixed_line == f"ici_tensor_parallelism: {degree}  # tensor"
    again = check(f"ici_tensor_parallelism: {degree}  # tensor\n{SPLIT}")
    assert codes(again) == [c for c in codes(an) if c != "ASAP009"]


def test_slice_count_and_dcn_degree_spellings_are_read_too(check):
    an = check('compile_topology_num_slices: "2"\ndcn_data_parallelism: 2.0\n', topo="v5e-16")
    assert errors(an) == [] and an.check.slice is not None and an.check.slice.num_slices == 2
    assert an.check.degree("data") == 2 and sorted(f.key for f in an.findings if f.code == "ASAP009") == [
        "compile_topology_num_slices",
        "dcn_data_parallelism",
    ]
    one = check("compile_topology_num_slices: true\n", topo="v5e-16")  # read as 1
    assert errors(one) == [] and one.check.slice is not None and one.check.slice.num_slices == 1
    assert only(one, "ASAP009").severity == Severity.WARNING


@pytest.mark.parametrize(
    ("body", "slices", "error"),
    [
        ("compile_topology_num_slices: 2\n", 2, None),
        ("num_slices: 2\n", 2, None),  # train.py's count; train_compile also wants compile_topology_num_slices
        ("compile_topology_num_slices: 2\nnum_slices: 2\n", 2, None),
        ("compile_topology_num_slices: 2\nnum_slices: -1\n", 2, None),  # -1: not set, as MaxText's default
        ("compile_topology_num_slices: -1\nnum_slices: 4\n", 4, None),
        ("compile_topology_num_slices: 2\nnum_slices: 4\n", 4, "disagree"),  # num_slices first, as MaxText
        ("compile_topology_num_slices: 4\nnum_slices: 1\n", 1, "disagree"),
        ("num_slices: 0\n", 1, "from 1 to"),
        ("num_slices: 2.5\n", 1, "fractional part"),
        ('compile_topology_num_slices: "2."\n', 1, "unable to parse string as an integer"),
    ],
)
def test_num_slices_comes_before_compile_topology_num_slices(check, body, slices, error):
    """max_utils.get_num_slices: num_slices unless it is -1, else compile_topology_num_slices when it is > 0."""
    an = check("dcn_data_parallelism: -1\n" + body, topo="v5e-16")
    assert an.check.slice is not None and an.check.slice.num_slices == slices
    if error is None:
        assert errors(an) == [] and an.check.degree("data") == slices
        return
    f = only(an, "ASAP005")
    assert f.severity == Severity.ERROR and error in f.message
    if error == "disagree":
        assert f.key == "num_slices" and f.related and "compile_topology_num_slices" in f.related[0].message


def test_num_slices_wins_over_the_slice_comment(write):
    an = analyze(write("c.yml", "# asap: slice=v5e-16 slices=4\nmodel_name: llama2-7b\nnum_slices: 2\n"))
    assert an.check.slice is not None and an.check.slice.num_slices == 2 and errors(an) == []


def test_ignored_sequence_key_that_maxtext_refuses_is_an_error(check):
    an = check('dcn_sequence_parallelism: "x"\n')
    assert errors(an) == ["ASAP100"] and only(an, "ASAP100").key == "dcn_sequence_parallelism"
    assert "ASAP111" in codes(an)


def test_override_is_read_as_maxtexts_command_line_reads_it(check):
    assert parse_override("ici_tensor_parallelism=010,num_slices=yes,ici_fsdp_parallelism='4'") == {
        "ici_tensor_parallelism": 8,  # OmegaConf.from_cli loads each value as YAML 1.1
        "num_slices": True,
        "ici_fsdp_parallelism": "4",
    }
    an = check("")
    cfg = with_overrides(an.config, {"ici_tensor_parallelism": "4", "ici_fsdp_parallelism": 64.0})
    assert cfg.get("ici_tensor_parallelism") == 4 and cfg.get("ici_fsdp_parallelism") == 64


# pydantic's lax int (MaxText's types.py validates these keys as `int`, strict mode off), on the spellings the
# differential test against MaxText 0.2.5 (pydantic 2.14.4) met and their neighbours: (value, the integer, or a part
# of the reason pydantic refuses it). A pydantic that reads them otherwise fails here before it reads configs otherwise.
READ_INT_CASES = [
    *[(v, 2) for v in (2, 2.0, "2", " 2 ", "\u30002\t", "+2", "02", "0002", "2.0", "2.00", "0_2")],
    *[(True, 1), (False, 0), ("-0", 0), ("0-5", -5), ("1_0", 10), ("9" * 19, int("9" * 19)), (-(2**70), -(2**70))],
    (2.5, "a number with a fractional part"),
    (1e-300, "a number with a fractional part"),
    (float("inf"), "not a finite number"),
    (float("nan"), "not a finite number"),
    (None, "not a valid integer"),
    ([2], "not a valid integer"),
    *[(v, "unable to parse string as an integer") for v in ("2.", "1e0", "0x10", "0o2", "２", "1__0", "_1", "+-2")],
    *[(v, "exceeded maximum size") for v in ("1" * 4301, 2.0**63)],
]


@pytest.mark.parametrize(("value", "expected"), READ_INT_CASES, ids=lambda v: repr(v)[:20])
def test_read_int_reads_as_maxtexts_pydantic_reads(value, expected):
    n, problem = read_int(value)
    if isinstance(expected, int):
        assert (n, problem) == (expected, None) and type(n) is int
    else:
        assert n is None and problem is not None and expected in problem and not problem[0].isupper()


# OmegaConf's YAML loader on a plain token (the values OmegaConf 2.4.0 with PyYAML 6.0.4 gives `k: <token>`, as
# MaxText 0.2.5 installs them): YAML 1.1's booleans, octal, binary, hex, base 60 and underscores, and OmegaConf's
# float rule, which reads `1e0` (YAML 1.1 wants a dot) and is tried after YAML 1.1's int rule (`2:00` stays 120).
YAML11_CASES = {
    **{"2": 2, "+2": 2, "-2": -2, "02": 2, "010": 8, "-010": -8, "0b10": 2, "-0b1": -1, "0x10": 16, "0x_2": 2},
    **{"1_0": 10, "0_7": 7, "1__0": 10, "2_": 2, "2:00": 120, "-1:30": -90},
    **{"1:30.5": 90.5, "2.0": 2.0, "2.": 2.0, "1e0": 1.0, "1E2": 100.0, "-1e0": -1.0, "1.0e+0": 1.0, ".5": 0.5},
    **{"1_0.5": 10.5, "1e20": 1e20, ".inf": math.inf, "-.Inf": -math.inf},
    **{"yes": True, "Yes": True, "NO": False, "on": True, "OFF": False, "true": True},
    **{"~": None, "null": None, "": None},
    # text: no 0o in YAML 1.1, 8 is no octal digit, no timestamps (OmegaConf drops the rule), y/n are no booleans
    **{t: t for t in ("0o2", "08", "0X2", "_1", "1e", "+.5", "y", "n", "2020-01-01", "0b_")},  # 0b_: PyYAML fails
    # not one plain scalar: the token as it is
    **{t: t for t in ("'2'", "!!str 2", "!!float 2", "[2]", "2: 3", "--- 2", "2 # c", "2\n---\n3", "*a")},
}


@pytest.mark.parametrize(("token", "expected"), YAML11_CASES.items(), ids=repr)
def test_yaml11_reads_a_token_as_omegaconfs_loader(token, expected):
    got = yaml11(token)
    assert got == expected and type(got) is type(expected)


def test_yaml11_reads_nan():
    assert math.isnan(yaml11(".nan")) and math.isnan(yaml11(".NaN"))
