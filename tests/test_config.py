"""The config model: round-trip positions, base_config chains, model resolution, bad input."""

from __future__ import annotations

import os

import pytest

from server.common.findings import Severity
from server.config import resolve as config


def test_positions_of_keys_and_values_are_exact(write):
    p = write("c.yml", "# header\nmodel_name: llama2-7b\nici_fsdp_parallelism:   -1   # fill\nrun_name: 'a # b'\n")
    cfg = config.load(p)
    e = cfg.entry("ici_fsdp_parallelism")
    assert e is not None
    assert (e.key_span.line, e.key_span.column, e.key_span.end_column) == (2, 0, 20)
    line = p.read_text().splitlines()[2]
    assert line[e.value_span.column : e.value_span.end_column] == "-1"
    q = cfg.entry("run_name")
    assert q is not None and p.read_text().splitlines()[3][q.value_span.column : q.value_span.end_column] == "'a # b'"
    assert cfg.get("run_name") == "a # b"


def test_base_config_chain_child_overrides_parent_overrides_defaults(write):
    write("root.yml", "per_device_batch_size: 2\nici_tensor_parallelism: 2\nmax_target_length: 1024\n")
    write("mid.yml", "base_config: root.yml\nper_device_batch_size: 3\n")
    child = write("sub/child.yml", "base_config: ../mid.yml\nmax_target_length: 8192\n")
    cfg = config.load(child)
    assert not cfg.findings
    assert [p.name for p in cfg.chain] == ["mid.yml", "root.yml"]
    assert cfg.get("per_device_batch_size") == 3  # mid beats root
    assert cfg.get("max_target_length") == 8192  # document beats root
    assert cfg.get("ici_tensor_parallelism") == 2  # root beats MaxText's default
    assert cfg.get("ici_fsdp_parallelism") == -1  # MaxText's default
    assert cfg.values["per_device_batch_size"].origin == "parent"
    assert cfg.values["max_target_length"].origin == "document"


def test_base_config_missing_parent_is_located_error(write):
    p = write("c.yml", "model_name: llama2-7b\nbase_config: nowhere.yml\n")
    cfg = config.load(p)
    (f,) = cfg.findings
    assert (f.code, f.severity, f.key, f.span.line) == ("ASAP002", Severity.ERROR, "base_config", 1)
    assert "nowhere.yml" in f.message


def test_base_config_cycle_is_located_error(write):
    write("a.yml", "base_config: b.yml\nper_device_batch_size: 1\n")
    write("b.yml", "base_config: a.yml\n")
    cfg = config.load(write("c.yml", "model_name: llama2-7b\n\nbase_config: a.yml\n"))
    (f,) = cfg.findings
    assert f.code == "ASAP003" and f.span.line == 2 and "cycle" in f.message
    assert cfg.get("per_device_batch_size") == 1  # what was loaded before the cycle still counts


def test_self_reference_is_a_cycle(write):
    cfg = config.load(write("c.yml", "base_config: c.yml\nsteps: 1\n"))
    assert [f.code for f in cfg.findings] == ["ASAP003"]


def test_self_reference_under_another_name_is_a_cycle(write):
    """A hard link (or another case of the name on a case-insensitive disk) is the document itself: never read as
    its own parent, whose text on disk would set keys the buffer or a fix's result no longer has."""
    p = write("c.yml", "base_config: h.yml\nici_tensr_parallelism: 2\n")
    try:
        os.link(p, p.with_name("h.yml"))
    except OSError as e:  # a file system without hard links
        pytest.skip(f"no hard links here: {e}")
    cfg = config.load(p, "base_config: h.yml\nici_tensor_parallelism: 2\n")  # the buffer, edited
    assert cfg.chain == [] and [f.code for f in cfg.findings] == ["ASAP003"]
    assert "c.yml under another name" in cfg.findings[0].message
    assert "ici_tensr_parallelism" not in cfg.values  # only on disk: not a parent's key


def test_invalid_parent_yaml_is_reported_at_base_config(write):
    write("p.yml", "steps: [1, 2\n")
    cfg = config.load(write("c.yml", "steps: 3\nbase_config: p.yml\n"))
    (f,) = cfg.findings
    assert f.code == "ASAP001" and f.span.line == 1 and "p.yml" in f.message


def test_invalid_yaml_is_one_finding_at_the_parser_position(write):
    cfg = config.load(write("c.yml", "model_name: llama2-7b\nici_fsdp_parallelism: [4\nsteps: 1\n"))
    (f,) = cfg.findings
    assert f.code == "ASAP001" and f.severity == Severity.ERROR
    assert f.span.line >= 1  # at or after the unclosed flow sequence, never the top of the file
    assert cfg.is_maxtext


def test_duplicate_keys_are_located(write):
    cfg = config.load(write("c.yml", "steps: 1\nici_fsdp_parallelism: 4\nici_fsdp_parallelism: 8\n"))
    (f,) = cfg.findings
    assert f.code == "ASAP001" and f.span.line == 2 and "duplicate" in f.message.lower()


def test_non_maxtext_yaml_gets_nothing(write):
    k8s = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n"
    assert not config.load(write("pod.yml", k8s)).is_maxtext
    assert not config.load(write("broken.yml", "apiVersion: v1\nkind: [\n")).is_maxtext
    assert not config.load(write("list.yml", "- a\n- b\n")).is_maxtext


def test_model_name_resolves_dims_and_the_model_file_replaces_config_keys(write):
    """MaxText merges the model file over the config files (pyconfig.py:514@e591f30cb): a base_* key the config
    sets and the model file sets too is the model file's, with a warning at the key (it used to be the config's)."""
    cfg = config.load(write("c.yml", "model_name: llama3-8b\nbase_num_decoder_layers: 2\n"))
    m = cfg.model
    assert m is not None
    assert (m.emb_dim, m.num_query_heads, m.num_kv_heads, m.mlp_dim, m.vocab_size) == (4096, 32, 8, 14336, 128256)
    assert m.num_decoder_layers == 32
    assert cfg.get("base_emb_dim") == 4096 and cfg.values["base_emb_dim"].origin == "model"
    (f,) = cfg.findings
    assert (f.code, f.severity, f.key, f.span.line) == ("ASAP006", Severity.WARNING, "base_num_decoder_layers", 1)
    assert "32" in f.message and "override_model_config=true" in f.message


def test_unknown_model_without_dims_is_a_located_warning_with_hint(write):
    """MaxText only logs "Model config for ... not found" and trains base.yml's dims (pyconfig.py:487-488): a
    warning (it was an error), and the default dims are priced."""
    cfg = config.load(write("c.yml", "steps: 1\nmodel_name: llama2-8b\n"))
    (f,) = cfg.findings
    assert f.code == "ASAP004" and f.severity == Severity.WARNING
    assert f.span.line == 1 and f.span.column == len("model_name: ")
    assert "llama2-7b" in f.message  # suggests the family's known sizes
    assert cfg.model is not None and (cfg.model.emb_dim, cfg.model.num_decoder_layers) == (2048, 16)


def test_asap_comment_declares_slice(write):
    cfg = config.load(write("c.yml", "model_name: llama2-7b\n# asap: slice=v5p-512 slices=2\n"))
    assert (cfg.declared_slice, cfg.declared_num_slices) == ("v5p-512", 2)
    assert cfg.declared_slice_span is not None and cfg.declared_slice_span.line == 1


def test_unknown_keys_are_kept_and_ignored(write):
    cfg = config.load(write("c.yml", "model_name: llama2-7b\nmy_custom_flag: {a: 1}\n"))
    assert cfg.get("my_custom_flag") == {"a": 1}
    assert not cfg.findings


def test_overrides_of_model_dims_win_over_the_preset(write):
    """As on MaxText's command line with override_model_config=true: `base_emb_dim=...` overrides the model file
    (without the flag MaxText refuses it: a warning says so); a mesh override leaves the dims alone."""
    p = write("c.yml", "model_name: llama2-7b\ncompile_topology: v5e-16\nici_fsdp_parallelism: 16\n")
    cfg = config.load(p)
    assert cfg.model is not None and cfg.model.emb_dim == 4096 and cfg.model.vocab_size == 32000
    small = config.with_overrides(cfg, {"base_emb_dim": 512, "vocab_size": 1024, "base_num_decoder_layers": 2})
    assert small.model is not None
    assert (small.model.emb_dim, small.model.vocab_size, small.model.num_decoder_layers) == (512, 1024, 2)
    assert small.model.mlp_dim == cfg.model.mlp_dim  # not overridden: the preset's
    assert sorted(f.key for f in small.findings if f.code == "ASAP006") == [
        "base_emb_dim",
        "base_num_decoder_layers",
        "vocab_size",
    ]
    allowed = config.with_overrides(cfg, {"base_emb_dim": 512, "override_model_config": True})
    assert allowed.model is not None and allowed.model.emb_dim == 512 and not allowed.findings
    meshed = config.with_overrides(cfg, {"ici_fsdp_parallelism": 8, "ici_tensor_parallelism": 2})
    assert meshed.model == cfg.model and not meshed.findings


def test_base_config_base_yml_is_maxtexts_own(write):
    """`base_config: base.yml` with no such file next to the config is MaxText's base.yml (MaxText looks in its
    configs directory next): ASAP's defaults are that file, so it is no error. Any other missing parent is."""
    cfg = config.load(write("c.yml", "base_config: base.yml\nici_fsdp_parallelism: 8\n"))
    assert not cfg.findings and cfg.get("ici_tensor_parallelism") == 1
    other = config.load(write("d.yml", "base_config: models/llama2-7b.yml\nici_fsdp_parallelism: 8\n"))
    assert [f.code for f in other.findings] == ["ASAP002"]
