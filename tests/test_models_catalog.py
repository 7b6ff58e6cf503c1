"""The model catalog from MaxText's own model files: the script that writes it, the committed catalog, and
model_name lookup in MaxText's order (models/ next to the config, the MaxText checkout, the catalog)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from server.common.findings import Severity
from server.config import models
from server.config import resolve as config
from server.config.mesh import check
from server.perf.estimate import estimate
from server.services.analysis import analyze

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "models_from_maxtext.py"
COMMITTED = ROOT / "server" / "config" / "data" / "maxtext_models.json"


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("models_from_maxtext", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(autouse=True)
def no_default_checkout(monkeypatch):
    """No MaxText checkout from the developer's shell, and none left behind by a test."""
    monkeypatch.delenv(models.MAXTEXT_PATH_ENV, raising=False)
    models.set_default_maxtext_path(None)
    yield
    models.set_default_maxtext_path(None)


BASE_YML = """\
# MaxText's defaults (a small stand-in)
model_name: "default"
base_emb_dim: 2048
base_num_query_heads: 16
base_num_kv_heads: 16
base_mlp_dim: 7168
base_num_decoder_layers: 16
head_dim: 128
vocab_size: 32_000
decoder_block: "llama2"
mlp_activations: ["silu", "linear"]
num_experts: 1
sliding_window_size: 0
normalization_layer_epsilon: 1.0e-05
rope_max_timescale: 10_000
steps: 150_001
logical_axis_rules: [['norm', ['tensor']], ['embed', ['fsdp']]]
"""

ALPHA = """\
# a dense model
base_emb_dim: 1024
base_num_query_heads: 8
base_num_kv_heads: 2
base_mlp_dim: 4096
base_num_decoder_layers: 12
head_dim: 128
vocab_size: 50_000
decoder_block: "llama2"
normalization_layer_epsilon: 1e-6
logits_via_embedding: True
"""

BETA = """\
base_emb_dim: 512
base_num_query_heads: 4
base_num_kv_heads: 4
base_mlp_dim: 256
base_moe_mlp_dim: 256
base_num_decoder_layers: 4
num_experts: 8
num_experts_per_tok: 2
decoder_block: "mixtral"
mlp_activations: ["silu","linear"]
vocab_size: 1024
rope_max_timescale: 1_000_000
logical_axis_rules: [['norm', 'fsdp']]
"""


def fake_checkout(root: Path, layout: str = "src/maxtext/configs", extra: dict[str, str] | None = None) -> Path:
    """A MaxText tree with base.yml and model files under `layout`."""
    configs = root / layout
    (configs / "models").mkdir(parents=True)
    (configs / "base.yml").write_text(BASE_YML, encoding="utf-8")
    for name, text in {"alpha-1b": ALPHA, "beta-moe": BETA, **(extra or {})}.items():
        (configs / "models" / f"{name}.yml").write_text(text, encoding="utf-8")
    return root


def git(root: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@e",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@e",
        "GIT_AUTHOR_DATE": "2026-08-22T10:00:00+00:00",
        "GIT_COMMITTER_DATE": "2026-08-22T10:00:00+00:00",
    }
    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=True, env=env
    ).stdout.strip()


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_catalog_script_output_round_trips_through_the_loader(tmp_path):
    repo = fake_checkout(tmp_path / "maxtext")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "models")
    sha = git(repo, "rev-parse", "HEAD")
    (repo / "src/maxtext/configs/models/alpha-1b.yml").write_text("base_emb_dim: 1\n")  # the work tree: not read
    out = tmp_path / "catalog.json"
    script = load_script()
    assert script.main(["--maxtext", str(repo), "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert script.main(["--maxtext", str(repo / ".git"), "--commit", sha, "--out", str(tmp_path / "again.json")]) == 0
    assert (tmp_path / "again.json").read_text(encoding="utf-8") == text  # deterministic, git dir or work tree
    data = json.loads(text)
    assert (data["repository"], data["commit"], data["models_dir"]) == (
        "AI-Hypercomputer/maxtext",
        sha,
        "src/maxtext/configs/models",
    )
    assert data["commit_date"].startswith("2026-08-22")
    cat = models.catalog_from_json(data)
    assert sorted(cat.models) == ["alpha-1b", "beta-moe"]
    git(repo, "checkout", "-q", "--", ".")  # the files on disk as committed: the loader reads them from there
    for name, mf in cat.models.items():
        assert mf.file == f"src/maxtext/configs/models/{name}.yml" and mf.commit == sha
        on_disk = models.find_model(name, maxtext_path=repo)
        assert on_disk is not None and on_disk.origin == models.ORIGIN_CHECKOUT
        assert on_disk.keys == mf.keys  # the same reader for both
    alpha = cat.models["alpha-1b"].keys
    assert alpha["vocab_size"] == 50000 and alpha["normalization_layer_epsilon"] == 1e-6  # as MaxText's loader reads
    assert alpha["logits_via_embedding"] is True and cat.models["beta-moe"].keys["mlp_activations"] == [
        "silu",
        "linear",
    ]
    # base.yml: every key a model file sets and the structural keys it has; nothing else
    assert cat.base["rope_max_timescale"] == 10000 and cat.base["sliding_window_size"] == 0
    assert cat.base["logical_axis_rules"] == [["norm", ["tensor"]], ["embed", ["fsdp"]]]
    assert "steps" not in cat.base and "attention_type" not in cat.base  # not a structural key; not in this base.yml


def test_catalog_script_reads_a_plain_source_tree(tmp_path):
    root = fake_checkout(tmp_path / "old", layout="MaxText/configs")
    script = load_script()
    data = script.build_catalog(script.open_source(root, "abc123"))
    assert (data["commit"], data["models_dir"]) == ("abc123", "MaxText/configs/models")
    assert data["base"]["file"] == "MaxText/configs/base.yml" and sorted(data["models"]) == ["alpha-1b", "beta-moe"]


def test_committed_catalog_is_maxtext_at_the_issue_commit_with_all_78_models():
    text = COMMITTED.read_text(encoding="utf-8")
    assert load_script().dumps(json.loads(text)) == text  # the script's stable formatting
    cat = models.catalog()
    assert cat.commit.startswith("e591f30cb") and len(cat.commit) == 40
    assert len(cat.models) == 78 and models.catalog_names() == sorted(cat.models) == sorted(models.MODELS)
    for name, mf in cat.models.items():
        assert mf.file == f"{cat.models_dir}/{name}.yml" and mf.origin == models.ORIGIN_CATALOG
        for key in (*models.DIM_KEYS, "vocab_size", "decoder_block"):
            assert key in mf.keys, (name, key)
        assert all(isinstance(v, (int, float)) and not isinstance(v, bool) for k, v in mf.keys.items() if "dim" in k)
    base = models.base_keys()
    assert (base["base_emb_dim"], base["head_dim"], base["vocab_size"], base["decoder_block"]) == (
        2048,
        128,
        32000,
        "llama2",
    )
    every_model_key = {k for mf in cat.models.values() for k in mf.keys}
    assert len(every_model_key - base.keys()) <= 2  # model-only keys base.yml lacks (vision_encoder_block, ...)
    for key in ("attention_type", "sliding_window_size", "q_lora_rank", "first_num_dense_layers", "mtp_num_layers"):
        assert key in base


@pytest.mark.skipif(not os.environ.get("ASAP_MAXTEXT_GIT"), reason="set ASAP_MAXTEXT_GIT to a MaxText git dir")
def test_committed_catalog_is_what_the_script_writes_from_maxtext(tmp_path):
    out = tmp_path / "c.json"
    commit = models.catalog().commit
    assert load_script().main(["--maxtext", os.environ["ASAP_MAXTEXT_GIT"], "--commit", commit, "--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == COMMITTED.read_text(encoding="utf-8")


@pytest.mark.parametrize("name", models.catalog_names())
def test_every_catalog_model_resolves_by_model_name(write, name):
    cfg = config.load(write("c.yml", f"model_name: {name}\nper_device_batch_size: 1\n"))
    mf = cfg.model_file
    assert mf is not None and mf.name == name and mf.origin == models.ORIGIN_CATALOG
    assert not [f for f in cfg.findings if f.code == "ASAP004"]
    assert cfg.model is not None and cfg.model.name == name and mf.file in cfg.model.source
    assert (
        cfg.model.emb_dim == mf.keys["base_emb_dim"]
        and cfg.model.num_decoder_layers == mf.keys["base_num_decoder_layers"]
    )
    for key, value in mf.keys.items():
        if key != "logical_axis_rules":
            assert cfg.get(key) == value and cfg.values[key].origin == "model"


def test_instruct_suffix_is_stripped_as_maxtext_does(write):
    cfg = config.load(write("c.yml", "model_name: llama3.1-8b-Instruct\n"))
    assert cfg.model_file is not None and cfg.model_file.name == "llama3.1-8b" and not cfg.findings
    assert cfg.model is not None and cfg.model.name == "llama3.1-8b-Instruct" and cfg.model.vocab_size == 128256


def test_models_dir_next_to_the_config_wins_over_the_catalog(write, tmp_path):
    write("models/llama2-7b.yml", ALPHA)
    cfg = config.load(write("c.yml", "model_name: llama2-7b\n"))
    assert cfg.model_file is not None and cfg.model_file.origin == models.ORIGIN_CONFIG
    assert cfg.model_file.path == tmp_path / "models" / "llama2-7b.yml"
    assert cfg.model is not None and (cfg.model.emb_dim, cfg.model.vocab_size) == (1024, 50000)
    assert cfg.values["base_emb_dim"].file == tmp_path / "models" / "llama2-7b.yml"  # located in the model file
    # MaxText's second place: models/ next to the config's directory
    nested = config.load(write("recipes/v5e/c.yml", "model_name: alpha-1b\n"))
    assert nested.model_file is None  # tmp_path/recipes/models does not exist; tmp_path/models has no alpha-1b
    write("recipes/models/alpha-1b.yml", ALPHA)
    nested = config.load(write("recipes/v5e/c.yml", "model_name: alpha-1b\n"))
    assert nested.model_file is not None and nested.model_file.path == tmp_path / "recipes/models/alpha-1b.yml"


def test_maxtext_path_finds_a_model_released_tomorrow(write, tmp_path):
    checkout = fake_checkout(tmp_path / "maxtext", extra={"llama9-1b": ALPHA})
    p = write("work/c.yml", "model_name: llama9-1b\ncompile_topology: v5e-16\n")
    unknown = config.load(p)
    assert [(f.code, f.severity) for f in unknown.findings] == [("ASAP004", Severity.WARNING)]
    cfg = config.load(p, maxtext_path=checkout)
    assert not cfg.findings and cfg.model_file is not None and cfg.model_file.origin == models.ORIGIN_CHECKOUT
    assert cfg.model is not None and cfg.model.emb_dim == 1024 and str(checkout) in cfg.model.source
    # a model MaxText has at the catalog's commit still comes from the checkout first (it may have changed)
    write("maxtext/src/maxtext/configs/models/llama2-7b.yml", BETA)
    assert config.load(write("work/d.yml", "model_name: llama2-7b\n"), maxtext_path=checkout).get("base_emb_dim") == 512
    # the older source layouts, and $ASAP_MAXTEXT_PATH when no path is passed
    old = fake_checkout(tmp_path / "old", layout="src/MaxText/configs", extra={"llama9-1b": BETA})
    assert config.load(p, maxtext_path=old).get("base_emb_dim") == 512
    os.environ[models.MAXTEXT_PATH_ENV] = str(checkout)  # the autouse fixture removes it again
    assert config.load(p).get("base_emb_dim") == 1024
    # a later model_name on the command line is looked up again, in the same places
    again = config.with_overrides(
        config.load(write("work/e.yml", "model_name: llama2-7b\n")), {"model_name": "llama9-1b"}
    )
    assert again.model_file is not None and again.model_file.origin == models.ORIGIN_CHECKOUT


def test_a_chain_inside_a_maxtext_checkout_reads_its_models(write, tmp_path):
    fake_checkout(tmp_path / "mt", extra={"newmodel-3b": BETA})
    base = "../mt/src/maxtext/configs/base.yml"
    cfg = config.load(write("work/c.yml", f"base_config: {base}\nmodel_name: newmodel-3b\n"))
    assert cfg.model_file is not None and cfg.model_file.origin == models.ORIGIN_CHECKOUT
    assert cfg.model_file.path == (tmp_path / "mt/src/maxtext/configs/models/newmodel-3b.yml").resolve()
    assert cfg.get("base_emb_dim") == 512  # the model file over base.yml's 2048
    assert not cfg.findings  # base.yml is MaxText's own: its values being replaced is no finding
    assert cfg.get("logical_axis_rules") == [["embed", ["fsdp"]], ["norm", "fsdp"]]  # merged rule by rule


def test_model_file_value_over_a_config_key_is_a_warning_at_the_key(write, tmp_path):
    write("parent.yml", "base_num_decoder_layers: 2\nvocab_size: 32000\n")  # vocab_size equals the model's
    p = write("c.yml", "base_config: parent.yml\nmodel_name: llama2-7b\nbase_emb_dim: 512  # small\n")
    cfg = config.load(p)
    assert cfg.model is not None and (cfg.model.emb_dim, cfg.model.num_decoder_layers) == (4096, 32)
    by_key = {f.key: f for f in cfg.findings}
    assert sorted(by_key) == ["base_emb_dim", "base_num_decoder_layers"] and {f.code for f in cfg.findings} == {
        "ASAP006"
    }
    doc = by_key["base_emb_dim"]
    assert doc.severity == Severity.WARNING and (doc.span.line, doc.span.column) == (2, 0)
    assert "512" in doc.message and "4096" in doc.message and "llama2-7b.yml" in doc.message
    assert "drop model_name" in doc.message and "override_model_config=true" in doc.message
    inherited = by_key["base_num_decoder_layers"]
    assert inherited.span.line == 0 and "parent.yml:1" in inherited.message  # at base_config
    assert inherited.related and inherited.related[0].file == tmp_path / "parent.yml"
    # override_model_config in a config file changes nothing for config keys (pyconfig.py:481-486)
    omc = config.load(write("d.yml", "model_name: llama2-7b\noverride_model_config: true\nbase_emb_dim: 512\n"))
    (f,) = omc.findings
    assert f.code == "ASAP006" and omc.get("base_emb_dim") == 4096 and "command-line overrides" in f.message
    # a model file on disk: the related information points at its line
    write("m/models/tiny-1b.yml", ALPHA)
    disk = config.load(write("m/c.yml", "model_name: tiny-1b\nvocab_size: 1024\n"))
    (f,) = disk.findings
    assert f.related and f.related[-1].file == tmp_path / "m/models/tiny-1b.yml" and f.related[-1].span.line == 7


def test_unknown_name_with_dims_is_information_and_priced(write):
    dims = (
        "base_emb_dim: 1024\nbase_num_query_heads: 8\nbase_num_kv_heads: 8\nbase_mlp_dim: 4096\n"
        "base_num_decoder_layers: 8\n"
    )
    text = f"model_name: mything-1b\ncompile_topology: v5e-16\nper_device_batch_size: 1\n{dims}"
    cfg = config.load(write("c.yml", text))
    (f,) = cfg.findings
    assert (f.code, f.severity, f.key, f.span.line) == ("ASAP004", Severity.INFORMATION, "model_name", 0)
    assert "e591f30cb" in f.message and "priced from the base_* keys set here" in f.message
    est = estimate(cfg, check(cfg))
    same = config.load(
        write("d.yml", f"model_name: default\ncompile_topology: v5e-16\nper_device_batch_size: 1\n{dims}")
    )
    assert est.params == estimate(same, check(same)).params
    an = analyze(None, text)
    assert an.estimate is not None and not any(x.severity == Severity.ERROR for x in an.diagnostics)


def test_unknown_name_without_all_dims_is_a_warning_naming_what_is_missing(write):
    cfg = config.load(write("c.yml", "model_name: mything-1b\nbase_emb_dim: 1024\n"))
    (f,) = cfg.findings
    assert f.code == "ASAP004" and f.severity == Severity.WARNING
    assert "Model config for 'mything-1b' not found" in f.message and "base_num_decoder_layers" in f.message
    assert "base_emb_dim" not in f.message.split("set ")[-1]  # set here: not asked for
    assert cfg.model is not None and (cfg.model.emb_dim, cfg.model.num_decoder_layers) == (1024, 16)


def test_unreadable_model_file_is_an_error_at_model_name(write):
    write("models/broken-1b.yml", "base_emb_dim: [1\n")
    cfg = config.load(write("c.yml", "steps: 1\nmodel_name: broken-1b\n"))
    (f,) = cfg.findings
    assert f.code == "ASAP001" and f.severity == Severity.ERROR and f.span.line == 1 and "broken-1b" in f.message


def asap(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k != models.MAXTEXT_PATH_ENV}
    return subprocess.run(
        [sys.executable, "-m", "server.cli.main", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={**clean, **(env or {})},
    )


def test_cli_maxtext_path_option_and_environment(tmp_path):
    checkout = fake_checkout(tmp_path / "maxtext", extra={"llama9-1b": ALPHA})
    p = tmp_path / "work" / "c.yml"
    p.parent.mkdir()
    p.write_text("model_name: llama9-1b\ncompile_topology: v5e-16\nper_device_batch_size: 1\n")

    def codes(r: subprocess.CompletedProcess[str]) -> list[str]:
        assert r.returncode in (0, 1), r.stderr
        return [f["code"] for f in json.loads(r.stdout)["findings"]]

    assert "ASAP004" in codes(asap("check", str(p), "--json"))
    assert "ASAP004" not in codes(asap("check", str(p), "--json", "--maxtext-path", str(checkout)))
    assert "ASAP004" not in codes(asap("check", str(p), "--json", env={models.MAXTEXT_PATH_ENV: str(checkout)}))
    r = asap("estimate", str(p), "--json", "--maxtext-path", str(checkout))
    assert r.returncode == 0, r.stderr
    cfg = config.load(p, maxtext_path=checkout)
    assert json.loads(r.stdout)["params"] == estimate(cfg, check(cfg)).to_json()["params"]


def test_editor_setting_maxtext_path_is_the_checkout_config_loading_uses(tmp_path):
    from server.lsp import AsapServer, Settings

    assert Settings.from_client({"maxtextPath": " ~/mt "}).maxtext_path == str(Path("~/mt").expanduser())
    assert Settings.from_client({"maxtextPath": ""}).maxtext_path is None
    checkout = fake_checkout(tmp_path / "maxtext", extra={"llama9-1b": ALPHA})
    p = tmp_path / "c.yml"
    p.write_text("model_name: llama9-1b\n")
    ls = AsapServer()
    ls.settings = Settings.from_client({"maxtextPath": str(checkout)})
    assert models.default_maxtext_path() == checkout and os.environ[models.MAXTEXT_PATH_ENV] == str(checkout)
    assert analyze(p).config.model_file is not None  # what the server's analyses call finds it
    ls.settings = Settings()
    assert models.default_maxtext_path() is None and models.MAXTEXT_PATH_ENV not in os.environ
    assert analyze(p).config.model_file is None
