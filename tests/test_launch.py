"""Launch files (server/launch/): MaxText runs found in shell scripts, Makefiles, Markdown and Kubernetes manifests,
read statically, resolved as MaxText resolves them, analysed as YAML configs are, and reported where they are
written. Real files from tpu-recipes are in tests/data/launch/ (provenance in its README)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from server.config.apply import apply_text
from server.launch.analysis import analyze_launch, is_launch_file
from server.launch.located import Located
from server.launch.runs import runs_in
from server.launch.shell import commands

DATA = Path(__file__).parent / "data" / "launch"
XPK = DATA / "ironwood_deepseek3_xpk_run_recipe.sh"
K8S = DATA / "ironwood_deepseek3_k8s_manifest.yaml"


def _at(text: str, loc: Located) -> str:
    """The file's text where `loc` is written (its extent)."""
    ext = loc.extent()
    assert ext is not None
    return text[ext[0] : ext[1]]


def _line_of(text: str, needle: str) -> int:
    """The 0-based line of the first line holding `needle`."""
    return next(i for i, line in enumerate(text.splitlines()) if needle in line)


# -- reading shell ---------------------------------------------------------------------------------------------
def test_expansion_keeps_each_token_where_it_is_written():
    text = (
        'ARGS="model_name=llama2-7b \\\n  ici_fsdp_parallelism=4"\n'
        "export X=1 && python3 -m MaxText.train base.yml ${ARGS} steps=5\n"
    )
    (cmd,) = commands(Located.of(text, 0))
    words = [w.text for w in cmd.words]
    assert words == [
        "python3",
        "-m",
        "MaxText.train",
        "base.yml",
        "model_name=llama2-7b",
        "ici_fsdp_parallelism=4",
        "steps=5",
    ]
    fsdp = cmd.words[5]
    assert fsdp.source_range() is not None and _at(text, fsdp) == "ici_fsdp_parallelism=4"
    assert cmd.env["X"].text == "1"


def test_quoted_expansion_is_one_word_and_unknown_values_stay_symbolic():
    text = 'EMPTY=""\npython3 -m MaxText.train base.yml "run_name=$USER-x" out=${EMPTY} d=$(date) k="a b"\n'
    (cmd,) = commands(Located.of(text, 0))
    words = {w.text.split("=", 1)[0]: w for w in cmd.words[4:]}
    assert words["run_name"].is_symbolic and words["run_name"].text == "run_name=$USER-x"
    assert words["out"].is_symbolic  # an empty placeholder is filled in before the run
    assert words["d"].is_symbolic
    assert words["k"].text == "k=a b" and not words["k"].is_symbolic


def test_unclosed_quote_and_garbage_do_not_raise():
    for text in ['python3 -m MaxText.train base.yml "ici_fsdp_parallelism=4', "\x00\xff$((", "(" * 500, ""]:
        runs_in(Path("x.sh"), text)


def test_command_substitution_is_one_field_when_expanded_unquoted():
    """`idx=$(date +%Y-%m-%d)` then `run_name=r_${idx}`: the substitution's source text has a blank that its value
    (unknown statically) does not; it separates nothing (MaxText's end_to_end scripts)."""
    text = "idx=$(date +%Y-%m-%d-%H-%M)\npython3 -m MaxText.train base.yml run_name=r_${idx} steps=5\n"
    (cmd,) = commands(Located.of(text, 0))
    assert [w.text for w in cmd.words[4:]] == ["run_name=r_$(date +%Y-%m-%d-%H-%M)", "steps=5"]
    assert cmd.words[4].is_symbolic and not cmd.words[5].is_symbolic


def test_append_assignment_adds_to_the_value():
    """`CMD+=...` appends (MaxText's test_checkpointing.sh builds its command so, then runs `$CMD`)."""
    text = 'CMD="python3 -m MaxText.train base.yml steps=5"\nCMD+=" model_name=llama2-7b"\nX+=1\n$CMD\n'
    (run,) = runs_in(Path("t.sh"), text)
    assert [(o.key, o.value) for o in run.overrides] == [("steps", "5"), ("model_name", "llama2-7b")]
    assert _at(text, run.overrides[1].token) == "model_name=llama2-7b"


def test_documentation_placeholder_is_symbolic():
    """`export TPU_TYPE="your-tpu-type"` (MaxText's docs) is filled in before the run, as an empty value is."""
    text = 'export TPU_TYPE="your-tpu-type"\nN="<num-slices>"\npython3 -m MaxText.train base.yml a=${TPU_TYPE} b=$N\n'
    (cmd,) = commands(Located.of(text, 0))
    assert cmd.words[4].is_symbolic and cmd.words[4].text == "a=${TPU_TYPE}"
    assert cmd.words[5].is_symbolic and cmd.words[5].text == "b=${N}"
    assert not commands(Located.of('X="yours"\necho $X\n', 0))[0].words[1].is_symbolic


# -- finding the runs --------------------------------------------------------------------------------------------
def test_xpk_recipe_run_with_slice_flags_and_overrides_from_variables():
    text = XPK.read_text()
    (run,) = runs_in(XPK, text)
    assert run.kind == "xpk" and run.module == "MaxText.train"
    assert run.config is not None and run.config.text == "MaxText/configs/base.yml"
    assert run.device is not None and run.device.value == "tpu7x:4x4x8" and _at(text, run.device.loc) == "tpu7x-4x4x8"
    assert run.num_slices is not None and run.num_slices.value == "1"
    overrides = {o.key: o for o in run.overrides}
    # every override of MAXTEXT_ARGS, read independently from the file
    block = text.split('MAXTEXT_ARGS="', 1)[1].split('"', 1)[0]
    written = [line.strip().rstrip("\\").strip() for line in block.splitlines() if "=" in line]
    assert [f"{o.key}={o.value}" for o in run.overrides if not o.symbolic] == [w for w in written if "${" not in w]
    fsdp = overrides["ici_fsdp_parallelism"]
    assert _at(text, fsdp.token) == "ici_fsdp_parallelism=-1"
    assert _line_of(text, "ici_fsdp_parallelism=-1") == text[: fsdp.token.extent()[0]].count("\n")  # type: ignore[index]
    assert overrides["base_output_directory"].symbolic  # export BASE_OUTPUT_DIR="" : filled in before the run
    assert run.flags is not None and "--xla_tpu_scoped_vmem_limit_kib=65536" in run.flags.value


def test_kubernetes_manifest_run_slice_from_node_selector():
    text = K8S.read_text()
    (run,) = runs_in(K8S, text)
    assert run.kind == "train"
    assert run.device is not None and run.device.value == "tpu7x:4x4x8"
    assert _at(text, run.device.loc) == "4x4x8"
    assert run.num_slices is not None and run.num_slices.value == "1"  # the JobSet's replicas
    assert run.flags is not None and run.flags.value.startswith("--xla_tpu_scoped_vmem_limit_kib=65536")
    o = next(o for o in run.overrides if o.key == "per_device_batch_size")
    assert _at(text, o.token) == "per_device_batch_size=8.0"


def test_kubernetes_argv_env_and_replicas(tmp_path: Path):
    manifest = tmp_path / "job.yaml"
    manifest.write_text(
        """apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: t}
spec:
  replicatedJobs:
  - name: slice
    replicas: 2
    template:
      spec:
        template:
          spec:
            nodeSelector:
              cloud.google.com/gke-tpu-accelerator: tpu-v6e-slice
              cloud.google.com/gke-tpu-topology: 16x16
            containers:
            - name: c
              env:
              - name: LIBTPU_INIT_ARGS
                value: "--xla_tpu_enable_data_parallel_all_reduce_opt=true"
              command: ["python3", "-m", "MaxText.train", "MaxText/configs/base.yml"]
              args:
              - model_name=llama2-7b
              - ici_fsdp_parallelism=256
"""
    )
    (run,) = runs_in(manifest, manifest.read_text())
    assert run.device is not None and run.device.value == "v6e:16x16"
    assert run.num_slices is not None and run.num_slices.value == "2"
    assert run.flags is not None and "data_parallel_all_reduce_opt" in run.flags.value
    assert not run.shell  # a list of arguments: a new key is a new item, not appended text
    assert [o.key for o in run.overrides] == ["model_name", "ici_fsdp_parallelism"]


def test_makefile_and_markdown_runs(tmp_path: Path):
    mk = tmp_path / "Makefile"
    mk.write_text(
        "MODEL := llama2-7b\ntrain:\n\t@python3 -m MaxText.train base.yml model_name=$(MODEL) "
        "run_name=$$USER ici_fsdp_parallelism=8\n"
    )
    (run,) = runs_in(mk, mk.read_text())
    got = {o.key: o for o in run.overrides}
    assert got["model_name"].value == "llama2-7b" and _at(mk.read_text(), got["model_name"].value_loc) == "llama2-7b"
    assert got["run_name"].symbolic and got["ici_fsdp_parallelism"].value == "8"
    md = tmp_path / "README.md"
    md.write_text(
        "# t\n\n```python\npython3 -m MaxText.train base.yml steps=1\n```\n\n"
        "```bash\npython3 -m MaxText.train base.yml steps=2\n```\n\n"
        "```console\n$ python3 -m maxtext.trainers.pre_train.train_compile base.yml steps=3\n```\n"
    )
    runs = runs_in(md, md.read_text())
    assert [r.overrides[0].value for r in runs] == ["2", "3"]
    assert _line_of(md.read_text(), "steps=3") == md.read_text()[: runs[1].overrides[0].token.extent()[0]].count("\n")  # type: ignore[index]


def test_which_files_are_launch_files(tmp_path: Path):
    config = tmp_path / "c.yml"
    config.write_text("model_name: llama2-7b\nici_fsdp_parallelism: 4\n")
    assert not is_launch_file(config, config.read_text())
    other = tmp_path / "deploy.yaml"
    other.write_text("apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: x\n    command: [echo, hi]\n")
    assert not is_launch_file(other, other.read_text())  # YAML with no MaxText run stays silent
    assert is_launch_file(K8S, K8S.read_text())
    assert is_launch_file(tmp_path / "run.sh", "")


@pytest.mark.parametrize(
    "text",
    [
        # run from the checkout's root without installing (tpu-recipes' Ironwood DeepSeek GCS/Lustre recipes)
        "python3 -m src.maxtext.trainers.pre_train.train maxtext/configs/base.yml steps=5\n",
        # MaxText's PREFLIGHT.md: NUMA binding before python
        "numactl --membind 0 --cpunodebind=0 python3 -m MaxText.train base.yml steps=5\n",
        # a prefix unknown statically (MaxText's test_generate_param_only_checkpoint.sh: `echo` in a dry run)
        "if $dry; then cmd=echo; else cmd=''; fi\n$cmd python3 -m MaxText.train base.yml steps=5\n",
        # XPK run from its checkout (MaxText's emergency checkpointing guide)
        'python3 xpk/xpk.py workload create --tpu-type=v5p-8 --command "python3 -m MaxText.train base.yml steps=5"\n',
    ],
)
def test_launch_forms_found(text: str):
    (run,) = runs_in(Path("t.sh"), text)
    assert [(o.key, o.value) for o in run.overrides] == [("steps", "5")]


def test_help_is_not_a_run():
    """MaxText's trainers run under absl's app.run: `--help` prints the flags and exits (install_maxtext.md)."""
    assert runs_in(Path("t.sh"), "python3 -m maxtext.trainers.pre_train.train --help\n") == []


def test_kubernetes_slice_topology_from_pod_annotation(tmp_path: Path):
    """The Ironwood Gemma 4 manifests (tpu-recipes c8cfe2f) name the topology in the pod template's annotation
    cloud.google.com/gke-tpu-slice-topology, the node selector only the accelerator."""
    manifest = tmp_path / "job.yaml"
    manifest.write_text(
        """apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
spec:
  replicatedJobs:
  - name: slice
    replicas: 1
    template:
      spec:
        template:
          metadata:
            annotations:
              cloud.google.com/gke-tpu-slice-topology: 4x4x4
          spec:
            nodeSelector:
              cloud.google.com/gke-tpu-accelerator: tpu7x
            containers:
            - name: c
              command: ["python3", "-m", "MaxText.train", "MaxText/configs/base.yml", "model_name=llama2-7b"]
"""
    )
    text = manifest.read_text()
    (run,) = runs_in(manifest, text)
    assert run.device is not None and run.device.value == "tpu7x:4x4x4" and _at(text, run.device.loc) == "4x4x4"


# -- analysis -------------------------------------------------------------------------------------------------
BAD = """#!/bin/bash
# a run whose ICI product does not match its slice
export LIBTPU_INIT_ARGS="--xla_tpu_enable_data_parallel_all_reduce_opt=true"
python3 -m MaxText.train MaxText/configs/base.yml model_name=llama2-7b per_device_batch_size=4 \\
    ici_fsdp_parallelism=8 ici_tensor_parallelism="2" compile_topology=v5e-256
"""


def test_analysis_locates_findings_on_tokens_and_fixes_edit_them_in_place(tmp_path: Path):
    script = tmp_path / "train.sh"
    script.write_text(BAD)
    la = analyze_launch(script, BAD)
    (ra,) = la.runs
    assert ra.line == 3 and ra.run.kind == "train"
    assert ra.analysis.check.slice is not None and ra.analysis.check.slice.name == "v5e-256"
    f = next(f for f in ra.findings if f.code == "ASAP101")
    lines = BAD.splitlines()
    assert f.file == script and f.span.line in (3, 4)
    assert "parallelism" in lines[f.span.line][f.span.column : f.span.end_column]
    assert f.fixes, "the ICI product fix is offered as a launch-file edit"
    for fx in f.fixes:
        fixed = apply_text(BAD, list(fx.edits))
        assert fixed.count("\n") == BAD.count("\n") and "# a run whose" in fixed  # nothing else lost
        (again,) = analyze_launch(script, fixed).runs
        assert not any(x.code == "ASAP101" for x in again.findings), fx.title
    # the flags are the script's, named where they are written
    assert ra.analysis.config.run_flags.source is not None
    assert ra.analysis.config.run_flags.describe() == "LIBTPU_INIT_ARGS at line 3"


def test_quoted_value_keeps_its_quotes_when_fixed(tmp_path: Path):
    text = 'python3 -m MaxText.train base.yml model_name=llama2-7b ici_fsdp_parallelism="3" compile_topology=v5e-16\n'
    la = analyze_launch(tmp_path / "q.sh", text)
    fixes = [fx for f in la.runs[0].findings for fx in f.fixes]
    assert fixes
    edited = apply_text(text, list(fixes[0].edits))
    assert 'ici_fsdp_parallelism="' in edited or "ici_fsdp_parallelism=3" not in edited


def test_symbolic_priced_key_is_information_not_error(tmp_path: Path):
    text = "python3 -m MaxText.train base.yml model_name=llama2-7b ici_fsdp_parallelism=$FSDP compile_topology=v5e-16\n"
    (ra,) = analyze_launch(tmp_path / "s.sh", text).runs
    sym = [f for f in ra.findings if f.code == "ASAP012"]
    assert sym and all(f.severity.label == "information" for f in sym)
    assert "known only when the command runs" in sym[0].message


def test_command_line_override_of_model_key_is_refused_as_maxtext_does(tmp_path: Path):
    text = "python3 -m MaxText.train base.yml model_name=llama2-7b base_emb_dim=1024 compile_topology=v5e-16\n"
    (ra,) = analyze_launch(tmp_path / "m.sh", text).runs
    f = next(f for f in ra.findings if f.code == "ASAP006")
    assert "override_model_config=true" in f.message  # MaxText refuses it on the command line
    text2 = text.replace("base_emb_dim=1024", "base_emb_dim=1024 override_model_config=true")
    (ra2,) = analyze_launch(tmp_path / "m.sh", text2).runs
    assert ra2.analysis.config.model is not None and ra2.analysis.config.model.emb_dim == 1024


def test_several_runs_each_analysed_on_its_own(tmp_path: Path):
    text = (
        "python3 -m MaxText.train base.yml model_name=llama2-7b compile_topology=v5e-16 ici_fsdp_parallelism=16\n"
        "python3 -m MaxText.train base.yml model_name=llama2-7b compile_topology=v5e-16 ici_fsdp_parallelism=3\n"
    )
    runs = analyze_launch(tmp_path / "two.sh", text).runs
    assert [r.line for r in runs] == [0, 1]
    assert not any(f.code == "ASAP101" for f in runs[0].findings)
    assert any(f.code == "ASAP101" and f.span.line == 1 for f in runs[1].findings)


def test_argument_that_is_not_key_value(tmp_path: Path):
    text = "python3 -m MaxText.train base.yml model_name=llama2-7b --steps 5\n"
    (ra,) = analyze_launch(tmp_path / "a.sh", text).runs
    bad = [f for f in ra.findings if f.code == "ASAP012" and f.severity.label == "error"]
    assert {text[f.span.column : f.span.end_column] for f in bad} == {"--steps", "5"}


def _errors(ra) -> list[str]:  # type: ignore[no-untyped-def]
    return [f"{f.code}: {f.message}" for f in ra.findings if f.severity.label == "error"]


def test_config_argument_may_be_omitted_as_maxtext_allows(tmp_path: Path):
    """MaxText's package takes its first argument as the config only when it ends in .yml, else trains with
    base.yml (pyconfig._resolve_or_infer_config @e591f30cb); the older MaxText.train always wanted one."""
    text = "python3 -m maxtext.trainers.pre_train.train model_name=llama2-7b compile_topology=v5e-256\n"
    (ra,) = analyze_launch(tmp_path / "t.sh", text).runs
    assert ra.run.config is None and not _errors(ra)
    assert [o.key for o in ra.run.overrides] == ["model_name", "compile_topology"]
    assert ra.analysis.config.model is not None and ra.analysis.config.model.name == "llama2-7b"
    (old,) = analyze_launch(tmp_path / "t.sh", text.replace("maxtext.trainers.pre_train", "MaxText")).runs
    assert any("first argument is its config" in e for e in _errors(old))
    (yaml,) = analyze_launch(tmp_path / "t.sh", text.replace(" model_name", " c.yaml model_name")).runs
    assert any("'c.yaml' does not end in .yml" in e for e in _errors(yaml))


def test_benchmark_runner_without_model_name_runs_the_default_recipe(tmp_path: Path):
    """--model_name defaults to trillium_model_dict's first recipe (benchmark_runner.py:135 @e591f30cb)."""
    from server.launch import recipes

    text = "python3 -m benchmarks.benchmark_runner on-device --base_output_directory gs://b/ --num_steps=5\n"
    (ra,) = analyze_launch(tmp_path / "t.sh", text).runs
    default = recipes.catalog().default_name
    assert default and ra.run.recipe is not None and ra.run.recipe.value == default
    assert not _errors(ra)
    assert any(f.severity.label == "information" and default in f.message for f in ra.findings)
    assert {o.key: o.value for o in ra.run.overrides}["steps"] == "5"


def test_xpk_gpu_device_type_is_not_a_slice_error(tmp_path: Path):
    """XPK's --device-type also names GPUs (MaxText's XPK guide: h100-80gb-8): no slice, said, not an error."""
    text = (
        "xpk workload create --device-type h100-80gb-8 "
        '--command "python3 -m MaxText.train MaxText/configs/base.yml steps=5"\n'
    )
    (ra,) = analyze_launch(tmp_path / "t.sh", text).runs
    assert not _errors(ra) and ra.analysis.check.slice is None
    note = next(f for f in ra.findings if "not a TPU" in f.message)
    assert note.severity.label == "information" and text[note.span.column : note.span.end_column] == "h100-80gb-8"
    typo = text.replace("--device-type h100-80gb-8", "--tpu-type h100-80gb-8")  # --tpu-type is a TPU's, always
    assert any(f.code == "ASAP005" for f in analyze_launch(tmp_path / "t.sh", typo).runs[0].findings)


def test_documentation_placeholders_are_not_errors(tmp_path: Path):
    """MaxText's AOT guide: `export TPU_TYPE="your-tpu-type"` then compile_topology=${TPU_TYPE}."""
    text = (
        'export TPU_TYPE="your-tpu-type"\nexport PER_DEVICE_BATCH_SIZE=your-batch-size\n'
        "python3 -m maxtext.trainers.pre_train.train_compile compile_topology=${TPU_TYPE} "
        "per_device_batch_size=${PER_DEVICE_BATCH_SIZE}\n"
    )
    (ra,) = analyze_launch(tmp_path / "t.sh", text).runs
    assert not _errors(ra)
    assert {f.key for f in ra.findings if "known only when the command runs" in f.message} == {
        "compile_topology",
        "per_device_batch_size",
    }


# -- the command line --------------------------------------------------------------------------------------------
def _asap(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "server.cli.main", *args], capture_output=True, text=True, cwd=cwd, check=False
    )


def test_cli_check_json_runs(tmp_path: Path):
    script = tmp_path / "train.sh"
    script.write_text(BAD)
    done = _asap("check", str(script), "--json")
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    (run,) = doc["runs"]
    assert run["line"] == 4 and run["kind"] == "train" and run["slice"]["name"] == "v5e-256"
    assert run["mesh"]["ici"]["fsdp"] == 8 and run["model"] == "llama2-7b"
    assert run["xla_flags"]["source"] == "launch" and run["xla_flags"]["lines"] == [3]
    assert any(f["code"] == "ASAP101" for f in run["findings"])


def test_cli_run_selection_and_empty_files(tmp_path: Path):
    two = tmp_path / "two.sh"
    two.write_text(
        "python3 -m MaxText.train base.yml model_name=llama2-7b compile_topology=v5e-256 ici_fsdp_parallelism=256 "
        "per_device_batch_size=2\n"
        "python3 -m MaxText.train base.yml model_name=llama2-7b compile_topology=v5e-16 ici_fsdp_parallelism=3\n"
    )
    one = json.loads(_asap("check", str(two), "--json", "--run", "1").stdout)
    assert [r["index"] for r in one["runs"]] == [1]
    bad = _asap("check", str(two), "--run", "3")
    assert bad.returncode == 2 and "has 2 runs" in bad.stderr
    empty = tmp_path / "none.sh"
    empty.write_text("echo nothing here\n")
    done = _asap("check", str(empty))
    assert done.returncode == 0 and "nothing to check" in done.stdout
    est = _asap("estimate", str(two), "--run", "1", "--json")
    assert est.returncode == 0, est.stderr
    assert json.loads(est.stdout)["runs"][0]["estimate"]["mfu"] > 0
    wrong = _asap("estimate", str(two), "--run", "2", "--json")  # ICI product 3 on 16 chips: the errors, no estimate
    assert wrong.returncode == 1
    (run,) = json.loads(wrong.stdout)["runs"]
    assert run["estimate"] is None and any(f["code"] == "ASAP101" and f["line"] == 2 for f in run["findings"])


def test_cli_on_real_recipes():
    done = _asap("check", str(XPK), "--json")
    doc = json.loads(done.stdout)
    (run,) = doc["runs"]
    assert run["kind"] == "xpk" and run["slice"]["name"] == "tpu7x-256" and run["model"] == "deepseek3-671b"
    assert run["slice"]["source"] == "--device-type"
    assert not [f for f in run["findings"] if f["severity"] == "error"]
    k8s = json.loads(_asap("check", str(K8S), "--json").stdout)
    assert k8s["runs"][0]["slice"]["source"].startswith("node selector")


@pytest.mark.parametrize("text", ["\x00garbage", "python3 -m MaxText.train", 'python3 -m MaxText.train base.yml "k=v'])
def test_cli_bad_launch_input_is_not_a_crash(tmp_path: Path, text: str):
    p = tmp_path / "bad.sh"
    p.write_text(text)
    done = _asap("check", str(p))
    assert done.returncode in (0, 1), done.stderr


def test_cli_analyze_a_run(tmp_path: Path):
    """The agents' report of one run: its proposals, and its findings at their lines in the launch file."""
    script = tmp_path / "a.sh"
    script.write_text(
        "# comment\n"
        "python3 -m MaxText.train base.yml model_name=llama2-7b compile_topology=v5e-256 \\\n"
        "  ici_fsdp_parallelism=16 ici_tensor_parallelism=16 per_device_batch_size=4\n"
    )
    done = _asap("analyze", str(script), "--json", "--run", "1")
    assert done.returncode in (0, 1), done.stderr
    (run,) = json.loads(done.stdout)["runs"]
    report = run["report"]
    assert run["line"] == 2 and report["proposals"], report.keys()
    lines = {f["line"] for f in report["findings"]}
    assert lines and lines <= {2, 3}, lines  # the command's lines, not the run document's


def test_cli_verify_a_run_compiles_the_command_as_it_runs(tmp_path: Path):
    """`asap verify FILE --run N` hands MaxText's train_compile what the command runs: the config it names
    (MaxText's own base.yml as MaxText finds it in its package) and the command's key=value overrides."""
    import os

    sys.path.insert(0, str(Path(__file__).parent))
    from support import fake_maxtext

    exe = fake_maxtext.write(tmp_path / "maxtext-env")
    (exe.parent / "release").touch()  # a command-line mesh compiles at once
    script = tmp_path / "go.sh"
    script.write_text(
        "echo first\n"
        "python3 -m MaxText.train MaxText/configs/base.yml model_name=llama2-7b per_device_batch_size=1 \\\n"
        "  ici_fsdp_parallelism=256 compile_topology=v6e-256\n"
    )
    env = {**os.environ, "ASAP_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("ASAP_MAXTEXT_PYTHON", None)
    done = subprocess.run(
        [sys.executable, "-m", "server.cli.main", "verify", str(script), "--maxtext-python", str(exe), "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "ok"
    (args,) = (exe.parent / "args").read_text().splitlines()
    words = args.split()
    assert words[2] == "src/maxtext/configs/base.yml"  # resolve_config_path finds it in MaxText's package
    assert {"model_name=llama2-7b", "per_device_batch_size=1", "ici_fsdp_parallelism=256"} <= set(words)
    assert "compile_topology=v6e-256" in words


@pytest.mark.parametrize(
    "text",
    [
        "l0: &l0 [1, *l0]\n",  # a recursive alias
        "a: &a [x, x]\nb: &b [*a, *a]\nc: &c [*b, *b]\nd: &d [*c, *c]\ne: [*d, *d]\n",  # aliases of aliases
        "k: " + "[" * 300 + "]" * 300 + "\n",  # nested past the parser's recursion
    ],
)
def test_yaml_that_is_no_manifest_is_read_once(tmp_path: Path, text: str):
    p = tmp_path / "x.yaml"
    p.write_text(text)
    assert runs_in(p, text) == []
    assert not is_launch_file(p, text)


def test_a_fix_that_would_change_another_run_is_not_offered(tmp_path: Path):
    """A value two runs share through a variable: rewriting it for one run would change the other, so the read-back
    refuses that fix (the others, written in the run's own tokens, are offered)."""
    text = (
        "FSDP=8\n"
        "python3 -m MaxText.train base.yml model_name=llama2-7b ici_fsdp_parallelism=$FSDP compile_topology=v5e-16\n"
        "python3 -m MaxText.train base.yml model_name=llama2-7b ici_fsdp_parallelism=$FSDP compile_topology=v5e-8\n"
    )
    first, second = analyze_launch(tmp_path / "shared.sh", text).runs
    assert not any(f.code == "ASAP101" for f in second.findings)
    f = next(f for f in first.findings if f.code == "ASAP101")
    assert f.fixes, "a fix written in run 1's own tokens is offered"
    for fx in f.fixes:
        assert all(e.span.line == 1 for e in fx.edits), fx  # never the shared assignment on line 0
        again = analyze_launch(tmp_path / "shared.sh", apply_text(text, list(fx.edits))).runs
        assert not any(x.code == "ASAP101" for x in again[0].findings)
        assert again[1].document.text == second.document.text  # run 2 reads as before
