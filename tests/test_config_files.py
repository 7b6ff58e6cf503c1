"""MaxText's configs resolve as MaxText resolves them (issue 28, item 5): a `base_config` next to the config, then in
MaxText's configs directory (the checkout the config lies in, the `maxtext_path` checkout, ASAP's catalog of MaxText's
configs); a command line's config path as `resolve_config_path` reads it; the catalog's script and committed data."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

from server.cli.main import main as cli
from server.common.codes import DiagCode
from server.common.findings import Severity
from server.config import models
from server.config import resolve as config
from server.config.config_files import ConfigFile, configs_catalog, configs_catalog_from_json, find_config
from server.config.mesh import _finding
from server.config.models import ORIGIN_CATALOG, ORIGIN_CHECKOUT, ORIGIN_CONFIG
from server.services.analysis import analyze

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "configs_from_maxtext.py"
COMMITTED = ROOT / "server" / "config" / "data" / "maxtext_configs.json"
JETSTREAM = "inference/inference_jetstream.yml"
NOT_FOUND = DiagCode.BASE_CONFIG_NOT_FOUND
# The 9 configs of MaxText e591f30cb whose base_config is not next to them (ASAP002 before the fallback).
ELSEWHERE = (
    "inference/multihost/disaggregation/llama3_405b_v6e-16-16.yml",
    "inference/multihost/interleaved/llama2_70b_v5e-16.yml",
    "inference/multihost/interleaved/llama3_405b_v5e-64.yml",
    "inference/multihost/interleaved/llama3_70b_v5e-16.yml",
    "post_train/distillation-sft.yml",
    "tpu/v5e/llama2_70b_v5e-16.yml",
    "tpu/v5e/llama3_405b_v5e-64.yml",
    "tpu/v5e/llama3_70b_v5e-16.yml",
    "tpu/v6e/inference/llama4_maverick_v6e-64.yml",
)


@pytest.fixture(autouse=True)
def no_default_checkout(monkeypatch):
    """No MaxText checkout from the developer's shell, and none left behind by a test."""
    monkeypatch.delenv(models.MAXTEXT_PATH_ENV, raising=False)
    models.set_default_maxtext_path(None)
    yield
    models.set_default_maxtext_path(None)


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("configs_from_maxtext", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def materialise(root: Path, keys: list[str] | None = None) -> Path:
    """The catalog's configs written out as a MaxText checkout (`root/src/maxtext/configs/...`); its configs dir."""
    configs = root / "src" / "maxtext" / "configs"
    for key, text in configs_catalog().configs.items():
        if keys is None or key in keys:
            p = configs / key
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text, encoding="utf-8")
    return configs


def checkout(root: Path, files: dict[str, str]) -> Path:
    """A small MaxText checkout: base.yml (a value ASAP's defaults do not have), models/, and `files`."""
    configs = root / "src" / "maxtext" / "configs"
    (configs / "models").mkdir(parents=True)
    (configs / "base.yml").write_text("per_device_batch_size: 99\nsteps: 7\n", encoding="utf-8")
    for rel, text in files.items():
        (configs / rel).parent.mkdir(parents=True, exist_ok=True)
        (configs / rel).write_text(text, encoding="utf-8")
    return configs


def codes(cfg_or_findings) -> list[str]:
    findings = cfg_or_findings.findings if hasattr(cfg_or_findings, "findings") else cfg_or_findings
    return [f.code for f in findings]


# -- every config of MaxText's configs directory -----------------------------------------------------------------
def test_every_maxtext_config_checks_without_a_missing_base_config_or_an_ignored_key(tmp_path, capsys):
    """`asap check` over every config of the catalog laid out as MaxText's tree: no ASAP002 (9 of them before the
    fallback), no ASAP111 (base.yml sets the removed axes to 1), no error at all (the issue's target), and the 9 find
    their parent in the checkout they lie in."""
    configs = materialise(tmp_path / "maxtext")
    files = sorted(str(p) for p in configs.rglob("*.yml"))
    assert len(files) == len(configs_catalog().configs) == 42
    cli(["check", *files, "--json"])
    reports = json.loads(capsys.readouterr().out)
    assert len(reports) == len(files)
    found = [
        (Path(r["file"]).relative_to(configs).as_posix(), f["code"], f["severity"], f["message"][:120])
        for r in reports
        for f in r.get("findings", [])
        if f["code"] in (DiagCode.BASE_CONFIG_NOT_FOUND, DiagCode.IGNORED_KEY) or f["severity"] == "error"
    ]
    assert found == []
    assert not any(r.get("errors") for r in reports)
    for key in ELSEWHERE:
        cfg = config.load(configs / key)
        (parent,) = cfg.parents
        assert parent.origin == ORIGIN_CHECKOUT and parent.path is not None
        assert parent.key in (JETSTREAM, "post_train/distillation.yml")
        assert parent.path == (configs / parent.key).resolve()
        assert cfg.chain == [parent.path]


@pytest.mark.parametrize("key", ELSEWHERE)
def test_a_maxtext_config_copied_out_of_the_checkout_reads_its_parent_from_the_catalog(write, key):
    cfg = config.load(write("run.yml", configs_catalog().configs[key]))
    assert DiagCode.BASE_CONFIG_NOT_FOUND not in codes(cfg)
    assert cfg.chain == [] and [p.origin for p in cfg.parents] == [ORIGIN_CATALOG]
    parent = cfg.parents[0]
    assert parent.where == f"MaxText's src/maxtext/configs/{parent.key} (at e591f30cb, ASAP's catalog)"


def test_maxtext_base_yml_itself_has_no_ignored_key_warning(write):
    an = analyze(write("base.yml", configs_catalog().configs["base.yml"]), None)
    lines = configs_catalog().configs["base.yml"].splitlines()
    assert "ici_sequence_parallelism: 1" in lines and "dcn_sequence_parallelism: 1  # never recommended" in lines
    assert [f for f in an.diagnostics if f.severity <= Severity.WARNING] == []


# -- the fallbacks, in MaxText's order ------------------------------------------------------------------------------
def test_next_to_the_config_wins_over_the_configs_directory(tmp_path):
    configs = checkout(
        tmp_path / "mx",
        {
            JETSTREAM: "base_config: base.yml\nsteps: 1\n",
            f"tpu/v5e/{JETSTREAM}": "steps: 2\n",
            "tpu/v5e/run.yml": f"base_config: {JETSTREAM}\nmodel_name: llama2-7b\n",
        },
    )
    cfg = config.load(configs / "tpu/v5e/run.yml")
    assert cfg.get("steps") == 2 and [p.origin for p in cfg.parents] == [ORIGIN_CONFIG]
    assert cfg.chain == [(configs / "tpu/v5e" / JETSTREAM).resolve()]
    (configs / "tpu/v5e" / JETSTREAM).unlink()
    cfg = config.load(configs / "tpu/v5e/run.yml")
    assert cfg.get("steps") == 1 and [p.origin for p in cfg.parents] == [ORIGIN_CHECKOUT]
    assert cfg.chain == [(configs / JETSTREAM).resolve()] and not cfg.findings


def test_the_checkout_the_config_lies_in_wins_over_maxtext_path_and_the_catalog(tmp_path):
    here = checkout(tmp_path / "here", {JETSTREAM: "steps: 3\n", "tpu/run.yml": f"base_config: {JETSTREAM}\n"})
    checkout(tmp_path / "other", {JETSTREAM: "steps: 4\n"})
    cfg = config.load(here / "tpu/run.yml", maxtext_path=tmp_path / "other")
    assert cfg.get("steps") == 3 and cfg.chain == [(here / JETSTREAM).resolve()]


@pytest.mark.parametrize("how", ["argument", "setting", "environment"])
def test_maxtext_path_checkout_wins_over_the_catalog(tmp_path, write, monkeypatch, how):
    checkout(tmp_path / "mx", {JETSTREAM: "steps: 5\n", "tomorrow/new.yml": "steps: 6\n"})
    path = write("run.yml", f"base_config: {JETSTREAM}\nmodel_name: llama2-7b\n")
    new = write("new.yml", "base_config: tomorrow/new.yml\nmodel_name: llama2-7b\n")
    if how == "setting":
        models.set_default_maxtext_path(tmp_path / "mx")
    elif how == "environment":
        monkeypatch.setenv(models.MAXTEXT_PATH_ENV, str(tmp_path / "mx"))
    kw = {"maxtext_path": tmp_path / "mx"} if how == "argument" else {}
    cfg = config.load(path, **kw)
    assert cfg.get("steps") == 5 and [p.origin for p in cfg.parents] == [ORIGIN_CHECKOUT] and not cfg.findings
    cfg = config.load(new, **kw)  # a config MaxText added after the catalog's commit
    assert cfg.get("steps") == 6 and not cfg.findings


def test_catalog_parent_values_say_where_they_are_written(write):
    """A parent from the catalog: its values are MaxText's config's, and a finding about one names the file, line
    and commit (it has no file on disk to link to); its own base_config is looked for in the catalog."""
    cfg = config.load(write("run.yml", "base_config: post_train/distillation.yml\nmodel_name: gpt3-6b\n"))
    assert (cfg.values["max_target_length"].origin, cfg.get("max_target_length")) == ("model", 1024)
    v = cfg.chain_values["max_target_length"]  # the parent's, which the model file replaces
    assert (v.origin, v.entry, v.value) == ("parent", None, 2048)
    (f,) = [f for f in cfg.findings if f.code == DiagCode.MODEL_FILE_OVERRIDE]
    assert f.span.line == 0 and f.key == "max_target_length" and f.related == []  # at base_config, nothing to link
    assert "max_target_length: 2048 (in MaxText's src/maxtext/configs/post_train/distillation.yml:40 " in f.message
    assert "(at e591f30cb, ASAP's catalog))" in f.message
    pdbs = cfg.values["per_device_batch_size"]
    assert pdbs.value == 2 and pdbs.where == (
        "MaxText's src/maxtext/configs/post_train/distillation.yml:51 (at e591f30cb, ASAP's catalog)"
    )

    an = analyze(write("mesh.yml", "base_config: post_train/distillation_gpt_oss_20b.yml\ncompile_topology: v5e-16\n"))
    (mesh,) = [f for f in an.findings if f.code == DiagCode.ICI_PRODUCT_MISMATCH]
    assert mesh.span.line == 0 and mesh.severity == Severity.ERROR
    assert "product of the ICI parallelism 128" in mesh.message
    assert all(r.file is not None for f in an.diagnostics for r in f.related)  # no link into a file that is not there
    f = _finding(an.config, DiagCode.INVALID_DEGREE, Severity.ERROR, "ici_fsdp_parallelism: 64", "ici_fsdp_parallelism")
    assert (f.file, f.span.line, f.related) == (an.config.path, 0, [])
    where = "MaxText's src/maxtext/configs/post_train/distillation_gpt_oss_20b.yml:35 (at e591f30cb, ASAP's catalog)"
    assert f.message.endswith(f" (set in {where})")

    chained = config.load(write("sft.yml", "base_config: post_train/distillation-sft.yml\nsteps: 1\n"))
    assert [p.key for p in chained.parents] == ["post_train/distillation-sft.yml", "post_train/distillation.yml"]
    assert chained.chain == [] and not chained.findings


def test_maxtext_base_yml_from_the_configs_directory_ends_the_chain_as_before(tmp_path, write):
    """`base_config: base.yml` not next to the config is MaxText's base.yml, whose values ASAP's defaults hold: a
    checkout's base.yml found there is not read over them (the result is what it was before the fallback)."""
    checkout(tmp_path / "mx", {})
    for kw in ({}, {"maxtext_path": tmp_path / "mx"}):
        cfg = config.load(write("c.yml", "base_config: base.yml\nici_fsdp_parallelism: 8\n"), **kw)
        assert not cfg.findings and cfg.parents == [] and cfg.chain == []
        assert cfg.values["per_device_batch_size"].origin == "default" and cfg.get("steps") != 7
    # one next to the config is read as any parent (it may be the user's own)
    write("base.yml", "steps: 9\n")
    cfg = config.load(write("c.yml", "base_config: base.yml\n"))
    assert cfg.get("steps") == 9 and [p.origin for p in cfg.parents] == [ORIGIN_CONFIG]


def test_missing_base_config_lists_every_place_looked_in(tmp_path):
    here = checkout(tmp_path / "here", {"tpu/run.yml": "base_config: inference/nowhere.yml\nsteps: 1\n"})
    other = checkout(tmp_path / "other", {})
    cfg = config.load(here / "tpu/run.yml", maxtext_path=tmp_path / "other")
    (f,) = cfg.findings
    assert (f.code, f.severity, f.key, f.span.line) == (NOT_FOUND, Severity.ERROR, "base_config", 0)
    places = [
        str(here / "tpu/inference/nowhere.yml"),
        str(here / "inference/nowhere.yml"),
        str(other / "inference/nowhere.yml"),
        "ASAP's catalog of MaxText's configs at e591f30cb (src/maxtext/configs/inference/nowhere.yml)",
    ]
    assert f"looked in {', '.join(places[:-1])} and {places[-1]})" in f.message
    assert [f.message.index(p) for p in places] == sorted(f.message.index(p) for p in places)


def test_a_missing_grandparent_is_reported_with_the_parent_that_names_it(write):
    mid = write("mid.yml", "base_config: nowhere/else.yml\n")
    cfg = config.load(write("c.yml", "steps: 1\nbase_config: mid.yml\n"))
    (f,) = cfg.findings
    assert f.code == DiagCode.BASE_CONFIG_NOT_FOUND and f.span.line == 1
    assert f"(in {mid.resolve()})" in f.message


# -- a command line's config path ------------------------------------------------------------------------------
def test_command_line_paths_lead_to_maxtexts_base_yml(tmp_path):
    """The names a launch command gives its config, resolved as resolve_config_path then _load_config do."""
    empty = tmp_path / "empty"
    empty.mkdir()
    for name in (
        "MaxText/configs/base.yml",
        "src/maxtext/configs/base.yml",
        "maxtext/configs/base.yml",
        "src/MaxText/configs/base.yml",
        "/deps/src/maxtext/configs/base.yml",
    ):
        found, looked = find_config(name, empty, None, command_line=True)
        assert found is not None and found.is_maxtext_base and found.origin == ORIGIN_CATALOG, name
        assert found.text == configs_catalog().configs["base.yml"] and found.read() == found.text
        assert looked[-1] == "ASAP's catalog of MaxText's configs at e591f30cb (src/maxtext/configs/base.yml)"
    found, looked = find_config("MaxText/configs/base.yml", empty, None, command_line=True)
    assert looked[:2] == [str(empty / "MaxText/configs/base.yml"), str(empty / "src/MaxText/configs/base.yml")]


def test_command_line_path_in_the_working_directorys_checkout(tmp_path):
    configs = checkout(tmp_path / "mx", {JETSTREAM: "steps: 1\n"})
    root = tmp_path / "mx"
    found, _ = find_config("src/maxtext/configs/base.yml", root, None, command_line=True)
    assert found is not None and found.origin == ORIGIN_CONFIG and found.path == (configs / "base.yml").resolve()
    assert found.is_maxtext_base is False  # named as given: the caller reads it as the run's config
    found, _ = find_config("MaxText/configs/" + JETSTREAM, root / "benchmarks", None, command_line=True)
    assert found is not None and found.origin == ORIGIN_CHECKOUT and found.path == (configs / JETSTREAM).resolve()
    found, _ = find_config("maxtext/configs/" + JETSTREAM, tmp_path, root, command_line=True)
    assert found is not None and found.origin == ORIGIN_CHECKOUT and found.key == JETSTREAM
    # the 2025 layout: MaxText rewrites MaxText/configs/... to src/MaxText/configs/... under the working directory
    old = tmp_path / "old"
    (old / "src/MaxText/configs").mkdir(parents=True)
    (old / "src/MaxText/configs/base.yml").write_text("steps: 1\n", encoding="utf-8")
    found, _ = find_config("MaxText/configs/base.yml", old, None, command_line=True)
    assert found is not None and found.origin == ORIGIN_CONFIG and found.path == (old / "src/MaxText/configs/base.yml")


def test_command_line_name_maxtext_cannot_find_is_none_with_the_places(tmp_path):
    found, looked = find_config("base.yml", tmp_path, None, command_line=True)
    assert found is None and looked == [str(tmp_path / "base.yml"), str(tmp_path / "src/base.yml")]
    found, looked = find_config("src/maxtext/configs/nope.yml", tmp_path, None, command_line=True)
    assert found is None and looked[-1].endswith("(src/maxtext/configs/nope.yml)")


@pytest.mark.parametrize("name", ["", "  ", "a\x00b.yml"])
def test_find_config_refuses_a_name_no_file_system_holds(name):
    with pytest.raises(ValueError):
        find_config(name)


def test_find_config_on_a_base_config_of_a_catalog_entry_stays_in_the_catalog(tmp_path):
    checkout(tmp_path / "mx", {"post_train/distillation.yml": "steps: 1\n"})
    sft, _ = find_config("post_train/distillation-sft.yml", tmp_path, None)
    assert isinstance(sft, ConfigFile) and sft.origin == ORIGIN_CATALOG
    parent, looked = find_config("post_train/distillation.yml", sft, tmp_path / "mx")
    assert parent is not None and parent.origin == ORIGIN_CATALOG and parent.key == "post_train/distillation.yml"
    assert looked == [
        "ASAP's catalog of MaxText's configs at e591f30cb (src/maxtext/configs/post_train/post_train/distillation.yml)",
        "ASAP's catalog of MaxText's configs at e591f30cb (src/maxtext/configs/post_train/distillation.yml)",
    ]


# -- the catalog: its script and the committed data ------------------------------------------------------------
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
def test_configs_script_output_round_trips_through_the_loader(tmp_path):
    repo = tmp_path / "maxtext"
    checkout(repo, {JETSTREAM: "base_config: base.yml\nsteps: 1\n", "deep/er/x.yaml": "steps: 2\n", "a.sh": "x\n"})
    (repo / "src/maxtext/configs/models/m.yml").write_text("base_emb_dim: 1\n", encoding="utf-8")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "configs")
    sha = git(repo, "rev-parse", "HEAD")
    (repo / "src/maxtext/configs/base.yml").write_text("steps: 0\n", encoding="utf-8")  # the work tree: not read
    script = load_script()
    out, again = tmp_path / "c.json", tmp_path / "again.json"
    assert script.main(["--maxtext", str(repo), "--out", str(out)]) == 0
    assert script.main(["--maxtext", str(repo / ".git"), "--commit", sha, "--out", str(again)]) == 0
    assert again.read_bytes() == out.read_bytes()
    data = json.loads(out.read_text(encoding="utf-8"))
    assert (data["repository"], data["commit"], data["configs_dir"]) == (
        "AI-Hypercomputer/maxtext",
        sha,
        "src/maxtext/configs",
    )
    cat = configs_catalog_from_json(data)
    assert sorted(cat.configs) == ["base.yml", "deep/er/x.yaml", JETSTREAM]  # no model file, no script
    assert cat.configs["base.yml"] == "per_device_batch_size: 99\nsteps: 7\n" and cat.file(JETSTREAM).startswith("src/")
    shutil.rmtree(repo / ".git")
    plain = script.build_catalog(script.open_source(repo, "abc123"))  # a plain tree: read from disk
    assert plain["commit"] == "abc123" and plain["configs"]["base.yml"] == "steps: 0\n"


def test_committed_configs_catalog_is_maxtext_at_the_issue_commit():
    text = COMMITTED.read_text(encoding="utf-8")
    assert load_script().dumps(json.loads(text)) == text  # the script's stable formatting
    cat = configs_catalog()
    assert cat.commit == models.catalog().commit and cat.configs_dir == "src/maxtext/configs"
    assert len(cat.configs) == 42 and not any(k.startswith("models/") for k in cat.configs)
    assert set(ELSEWHERE) <= set(cat.configs) and "base_config:" not in cat.configs["base.yml"]


@pytest.mark.skipif(not os.environ.get("ASAP_MAXTEXT_GIT"), reason="set ASAP_MAXTEXT_GIT to a MaxText git dir")
def test_committed_configs_catalog_is_what_the_script_writes_from_maxtext(tmp_path):
    out = tmp_path / "c.json"
    commit = configs_catalog().commit
    assert load_script().main(["--maxtext", os.environ["ASAP_MAXTEXT_GIT"], "--commit", commit, "--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == COMMITTED.read_text(encoding="utf-8")
