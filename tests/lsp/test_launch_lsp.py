"""Launch files through the real server over stdio (issue 28 item 3): a shell script's MaxText run gets its
diagnostics on the `key=value` token, a hover naming the run and explaining the key, a quick fix that edits the
token in place (the script's quoting and every other line kept) and clears the finding, and a code lens on the
command's first line; a Kubernetes manifest's run likewise; a YAML file with no MaxText run stays silent."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types as lsp

from .conftest import AsapClient, Doc, apply_edits, initialize

SCRIPT = """#!/bin/bash
# train on a v5e-256 slice
export LIBTPU_INIT_ARGS="--xla_tpu_enable_data_parallel_all_reduce_opt=true"
ARGS="model_name=llama2-7b per_device_batch_size=4"
python3 -m MaxText.train MaxText/configs/base.yml ${ARGS} \\
    ici_fsdp_parallelism=8 ici_tensor_parallelism="16" compile_topology=v5e-256
"""


def _edits_of(action: lsp.CodeAction, uri: str) -> list[lsp.TextEdit]:
    """The edits a code action makes to `uri` (as `changes` or as `documentChanges`)."""
    edit = action.edit
    assert edit is not None
    changes = edit.changes or {c.text_document.uri: c.edits for c in edit.document_changes or []}  # type: ignore[union-attr]
    return list(changes[uri])


async def test_shell_script_run_diagnostics_hover_fix_and_lens(fresh: AsapClient, tmp_path: Path) -> None:
    await initialize(fresh)
    path = tmp_path / "train.sh"
    path.write_text(SCRIPT, encoding="utf-8")
    doc = Doc(fresh, path, language_id="shellscript").open()
    diags = await doc.diagnostics(version=1, where=lambda ds: any(d.code == "ASAP101" for d in ds))
    bad = next(d for d in diags if d.code == "ASAP101")
    line = SCRIPT.splitlines()[bad.range.start.line]
    token = line[bad.range.start.character : bad.range.end.character]
    assert bad.range.start.line == 5 and token.endswith("_parallelism"), token

    hover = await doc.hover(5, line.index("ici_fsdp_parallelism") + 3)
    assert hover is not None and isinstance(hover.contents, lsp.MarkupContent)
    md = hover.contents.value
    assert "run 1" in md and "ASAP101" in md and "LIBTPU_INIT_ARGS at line 3" in md, md
    # a token that comes from a variable: its hover is where the variable is written
    batch = SCRIPT.splitlines()[3].index("per_device_batch_size")
    hover = await doc.hover(3, batch + 2)
    assert hover is not None and "per_device_batch_size" in hover.contents.value  # type: ignore[union-attr]

    actions = await doc.code_actions([bad])
    fixes = [a for a in actions if a.edit is not None and a.diagnostics and a.diagnostics[0].code == "ASAP101"]
    assert fixes, [a.title for a in actions]
    edits = _edits_of(fixes[0], doc.uri)
    fixed = apply_edits(SCRIPT, edits)
    assert fixed.splitlines()[:5] == SCRIPT.splitlines()[:5]  # comments, the export and the variable kept
    doc.edit(edits)
    after = await doc.diagnostics(version=2)
    assert not any(d.code == "ASAP101" for d in after), [d.message for d in after]

    lenses = await fresh.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(doc.uri)))
    assert lenses and all(lens.range.start.line == 4 for lens in lenses)
    assert lenses[0].command is not None and "MFU" in lenses[0].command.title


async def test_manifest_run_and_plain_yaml(fresh: AsapClient, tmp_path: Path) -> None:
    await initialize(fresh)
    manifest = tmp_path / "job.yaml"
    manifest.write_text(
        """apiVersion: v1
kind: Pod
spec:
  nodeSelector:
    cloud.google.com/gke-tpu-accelerator: tpu-v5-lite-podslice
    cloud.google.com/gke-tpu-topology: 16x16
  containers:
  - name: train
    command: ["bash", "-c", "python3 -m MaxText.train MaxText/configs/base.yml RUN_ARGS"]
""".replace("RUN_ARGS", "model_name=llama2-7b ici_fsdp_parallelism=3"),
        encoding="utf-8",
    )
    doc = Doc(fresh, manifest).open()
    diags = await doc.diagnostics(version=1, where=lambda ds: any(d.code == "ASAP101" for d in ds))
    bad = next(d for d in diags if d.code == "ASAP101")
    line = doc.text.splitlines()[bad.range.start.line]
    assert line[bad.range.start.character : bad.range.end.character] == "ici_fsdp_parallelism"

    plain = tmp_path / "service.yaml"
    plain.write_text("apiVersion: v1\nkind: Service\nmetadata:\n  name: x\n", encoding="utf-8")
    other = Doc(fresh, plain).open()
    assert await other.diagnostics(version=1) == []


async def test_definition_of_a_run_token(fresh: AsapClient, tmp_path: Path) -> None:
    """F12 on the config argument opens the config; on model_name's value, the model file (a checkout's)."""
    await initialize(fresh)
    (tmp_path / "models").mkdir()
    model = tmp_path / "models" / "tiny-test.yml"
    model.write_text("base_emb_dim: 512\nbase_num_query_heads: 8\nbase_num_kv_heads: 8\nbase_mlp_dim: 1024\n")
    config = tmp_path / "my.yml"
    config.write_text("per_device_batch_size: 2\n")
    script = tmp_path / "go.sh"
    text = "python3 -m MaxText.train my.yml model_name=tiny-test compile_topology=v5e-16\n"
    script.write_text(text, encoding="utf-8")
    doc = Doc(fresh, script, language_id="shellscript").open()
    await doc.diagnostics(version=1)
    for col, want in ((text.index("my.yml") + 1, config), (text.index("tiny-test") + 2, model)):
        found = await fresh.text_document_definition_async(
            lsp.DefinitionParams(lsp.TextDocumentIdentifier(doc.uri), lsp.Position(0, col))
        )
        assert isinstance(found, lsp.Location) and found.uri == want.as_uri(), (col, found)


async def test_agents_on_a_run_propose_meshes_applied_as_token_edits(fresh: AsapClient, tmp_path: Path) -> None:
    """On open the agents analyse each run; the run's code lens gives their verdict and Proposals, and at the
    command "Apply proposal N" edits the tokens of the launch file (its other lines kept), which then reads as the
    proposed mesh."""
    from .conftest import wait_for_log

    await initialize(fresh)
    path = tmp_path / "llama.sh"
    text = (
        "# llama2-7b on one v5e-256 slice\n"
        'export LIBTPU_INIT_ARGS=""\n'
        "python3 -m MaxText.train MaxText/configs/base.yml model_name=llama2-7b per_device_batch_size=4 \\\n"
        "    ici_fsdp_parallelism=16 ici_tensor_parallelism=16 compile_topology=v5e-256\n"
    )
    path.write_text(text, encoding="utf-8")
    logs = len(fresh.log_messages)
    doc = Doc(fresh, path, language_id="shellscript").open()
    await doc.diagnostics(version=1)
    await wait_for_log(fresh, f"agents, {path.name} run 1 (version 1)", start=logs, timeout=90)
    lenses = await fresh.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(doc.uri)))
    titles = [lens.command.title for lens in lenses if lens.command is not None]
    assert all(lens.range.start.line == 2 for lens in lenses), titles
    assert "Analyze" not in titles and titles[0].startswith("ASAP:"), titles
    assert "Proposals" in titles, titles  # tensor=16 on a 7B model: the engine proposes fsdp meshes
    rng = lsp.Range(lsp.Position(2, 0), lsp.Position(2, 0))
    res = await fresh.text_document_code_action_async(
        lsp.CodeActionParams(lsp.TextDocumentIdentifier(doc.uri), rng, lsp.CodeActionContext(diagnostics=[]))
    )
    applies = [a for a in res or [] if isinstance(a, lsp.CodeAction) and a.edit is not None]
    assert applies, [getattr(a, "title", a) for a in res or []]
    edits = _edits_of(applies[0], doc.uri)
    fixed = apply_edits(text, edits)
    assert fixed.splitlines()[:2] == text.splitlines()[:2]
    doc.edit(edits)
    after = await doc.diagnostics(version=2)
    assert not [d for d in after if d.severity == lsp.DiagnosticSeverity.Error], [d.message for d in after]


async def test_roofline_of_each_run(fresh: AsapClient, tmp_path: Path) -> None:
    """Each run's code lens opens its own roofline (`#run=N` when the file has several)."""
    await initialize(fresh)
    path = tmp_path / "two.sh"
    path.write_text(
        "python3 -m MaxText.train base.yml model_name=llama2-7b ici_fsdp_parallelism=256 compile_topology=v5e-256\n"
        "python3 -m MaxText.train base.yml model_name=llama2-13b ici_fsdp_parallelism=256 compile_topology=v5e-256\n",
        encoding="utf-8",
    )
    doc = Doc(fresh, path, language_id="shellscript").open()
    await doc.diagnostics(version=1)
    lenses = await fresh.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(doc.uri)))
    targets = [lens.command.arguments[0] for lens in lenses if lens.command and lens.command.title == "Roofline"]
    assert targets == [f"{doc.uri}#run=1", f"{doc.uri}#run=2"]
    titles = []
    for target in targets:
        reply = await fresh.workspace_execute_command_async(
            lsp.ExecuteCommandParams(command="asap.server.roofline", arguments=[target, "light"])
        )
        titles.append(reply["title"])
        assert reply["spec"]["$schema"].startswith("https://vega.github.io/schema/vega-lite/")
    assert titles == ["ASAP roofline: two.sh, run 1", "ASAP roofline: two.sh, run 2"]


async def test_verify_a_run_in_the_editor(fresh: AsapClient, tmp_path: Path) -> None:
    """The run's Verify compiles the command as it runs (MaxText's train_compile given the config it names and its
    key=value overrides: tests/support/fake_maxtext.py records them) and its code lens then gives the verdict."""
    import sys

    from .conftest import wait_for_log

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from support import fake_maxtext

    exe = fake_maxtext.write(tmp_path / "maxtext-env")
    (exe.parent / "release").touch()  # command-line meshes compile at once
    await initialize(fresh, {"settings": {"maxtextPython": str(exe)}}, configuration=False)
    path = tmp_path / "v6e.sh"
    path.write_text(
        "python3 -m MaxText.train MaxText/configs/base.yml model_name=llama2-7b per_device_batch_size=1 \\\n"
        "  ici_fsdp_parallelism=256 compile_topology=v6e-256\n",
        encoding="utf-8",
    )
    doc = Doc(fresh, path, language_id="shellscript").open()
    await doc.diagnostics(version=1)
    mark = len(fresh.log_messages)
    await fresh.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="asap.server.verify", arguments=[doc.uri])
    )
    await wait_for_log(fresh, f"TPU compiler, current mesh of {path.name} run 1: ", start=mark, timeout=60)
    first = (exe.parent / "args").read_text().splitlines()[0].split()
    assert first[2] == "src/maxtext/configs/base.yml" and "ici_fsdp_parallelism=256" in first
    lenses = await fresh.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(doc.uri)))
    titles = [lens.command.title for lens in lenses if lens.command is not None]
    assert any(t.startswith("TPU compiler: fits") for t in titles), titles


async def test_analyze_command_on_a_launch_file(fresh: AsapClient, tmp_path: Path) -> None:
    """`asap.server.analyze` (ASAP: Analyze) on a launch file: the analyze document of its run."""
    await initialize(fresh)
    path = tmp_path / "one.sh"
    path.write_text(
        "python3 -m MaxText.train base.yml model_name=llama2-7b ici_fsdp_parallelism=256 compile_topology=v5e-256\n",
        encoding="utf-8",
    )
    doc = Doc(fresh, path, language_id="shellscript").open()
    await doc.diagnostics(version=1)
    result = await fresh.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="asap.server.analyze", arguments=[doc.uri])
    )
    assert result["slice"]["name"] == "v5e-256" and result["mesh"]["ici"]["fsdp"] == 256, result["mesh"]


async def test_benchmark_recipe_hover_and_definition(fresh: AsapClient, tmp_path: Path) -> None:
    """`--model_name=RECIPE`: the hover says what the recipe sets and where MaxText defines it; F12 opens it in
    the user's checkout (asap.maxtextPath), at its MaxTextModel( line."""
    await initialize(fresh)
    checkout = tmp_path / "maxtext"
    bench = checkout / "benchmarks"
    bench.mkdir(parents=True)
    # MaxText's layout as benchmark_runner reads it: its dictionaries' `.get(options.model_name)`, the recipes
    # registered with _add_to_model_dictionary
    (bench / "benchmark_runner.py").write_text(
        "from benchmarks.maxtext_trillium_model_configs import trillium_model_dict\n"
        "def main():\n"
        "  model = trillium_model_dict.get(options.model_name)\n"
    )
    (bench / "benchmark_utils.py").write_text("class MaxTextModel: ...\n")
    (bench / "maxtext_trillium_model_configs.py").write_text(
        "from benchmarks.benchmark_utils import MaxTextModel, _add_to_model_dictionary\n"
        "trillium_model_dict = {}\n"
        "tiny = _add_to_model_dictionary(\n"
        "    trillium_model_dict,\n"
        "    MaxTextModel(\n"
        '        model_name="tiny-recipe",\n'
        '        model_type="llama2-7b",\n'
        '        tuning_params={"per_device_batch_size": 2, "ici_fsdp_parallelism": -1},\n'
        '        xla_flags="",\n'
        "    ),\n"
        ")\n"
    )
    fresh.workspace_did_change_configuration(
        lsp.DidChangeConfigurationParams(settings={"asap": {"maxtextPath": str(checkout)}})
    )
    script = tmp_path / "bench.sh"
    text = "python3 -m benchmarks.benchmark_runner xpk --device_type=v5e-256 --model_name=tiny_recipe\n"
    script.write_text(text, encoding="utf-8")
    doc = Doc(fresh, script, language_id="shellscript").open()
    await doc.diagnostics(version=1)
    col = text.index("tiny_recipe") + 2
    hover = await doc.hover(0, col)
    assert hover is not None and isinstance(hover.contents, lsp.MarkupContent)
    assert "benchmark recipe `tiny_recipe`" in hover.contents.value and "your checkout" in hover.contents.value
    found = await fresh.text_document_definition_async(
        lsp.DefinitionParams(lsp.TextDocumentIdentifier(doc.uri), lsp.Position(0, col))
    )
    assert isinstance(found, lsp.Location) and found.uri.endswith("maxtext_trillium_model_configs.py")
    assert found.range.start.line == 4  # MaxTextModel(
