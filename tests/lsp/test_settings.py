"""Settings: `asap.defaultSlice` from initializationOptions, from workspace/configuration,
and a re-publish on workspace/didChangeConfiguration. Each test has a server of its own."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types as lsp

from .conftest import AsapClient, Doc, by_code, codes, has, initialize, wait_for_log

# No compile_topology, no `# asap:` comment: the slice can only come from the setting.
NO_SLICE = """\
model_name: llama2-7b
per_device_batch_size: 4
ici_fsdp_parallelism: 8
"""


def no_slice(tmp_path: Path) -> Path:
    path = tmp_path / "no-slice.yml"
    path.write_text(NO_SLICE)
    return path


async def test_settings_without_default_slice_asks_for_one(fresh: AsapClient, tmp_path: Path):
    await initialize(fresh)
    doc = Doc(fresh, no_slice(tmp_path)).open()
    diags = await doc.diagnostics(version=1)
    assert codes(diags) == ["ASAP010"]
    assert by_code(diags, "ASAP010").severity == lsp.DiagnosticSeverity.Information


async def test_settings_default_slice_from_initialization_options(fresh: AsapClient, tmp_path: Path):
    await initialize(fresh, options={"settings": {"defaultSlice": "v5e-16"}}, configuration=False)
    doc = Doc(fresh, no_slice(tmp_path)).open()
    diags = await doc.diagnostics(version=1)
    product = by_code(diags, "ASAP101")
    assert "16" in product.message and product.range.start.line == 2


async def test_settings_initialization_options_survive_empty_configuration(fresh: AsapClient, tmp_path: Path):
    """A client that supports workspace/configuration but has no `asap` section (returns
    null) must not wipe the initialization options."""
    await initialize(fresh, options={"settings": {"defaultSlice": "v5e-16"}}, configuration=True)
    doc = Doc(fresh, no_slice(tmp_path)).open()
    await wait_for_log(fresh, "settings:")  # the pull in `initialized` is done
    v2 = doc.replace_all(doc.text + "# edited\n")  # a new version: analysed with the settings as they are now
    diags = await doc.diagnostics(version=v2)
    assert "ASAP101" in codes(diags), codes(diags)


async def test_settings_default_slice_from_workspace_configuration(fresh: AsapClient, tmp_path: Path):
    fresh.set_configuration({"defaultSlice": "v5e-16"}, section="asap")
    await initialize(fresh)
    doc = Doc(fresh, no_slice(tmp_path)).open()
    # The pull happens in `initialized`, racing with didOpen: once it is done (logged), a publish of version 1 with
    # the pulled setting follows, whichever came first (the open's analysis, or the re-analysis after the pull).
    await wait_for_log(fresh, "settings:")
    diags = await doc.diagnostics(version=1, where=has("ASAP101"))
    assert codes(diags) == ["ASAP101"]


async def test_settings_change_configuration_pull_republishes(fresh: AsapClient, tmp_path: Path):
    fresh.set_configuration({"defaultSlice": "v5e-16"}, section="asap")
    await initialize(fresh)
    await wait_for_log(fresh, "settings:")  # the pull in `initialized` is done
    doc = Doc(fresh, no_slice(tmp_path)).open()
    diags = await doc.diagnostics(version=1)  # analysed with the pulled setting: it came before the open
    assert codes(diags) == ["ASAP101"] and "16" in by_code(diags, "ASAP101").message

    # Each change below waits for the publish that reflects it: the agents started on open publish version 1
    # again when they finish (with the settings of then), which may fall after a change is sent.

    # The user changes the setting; VS Code sends didChangeConfiguration with null settings
    # and the server pulls.
    fresh.set_configuration({"defaultSlice": "v5e-8"}, section="asap")
    doc.mark = len(fresh.publishes)
    fresh.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings=None))
    diags = await doc.diagnostics(version=1, where=lambda ds: "ASAP101" not in codes(ds))  # 8 devices, fsdp=8
    assert {"ASAP121", "ASAP122"} & set(codes(diags)), "but 7B params x 16 bytes over 8 chips of 16 GB is over HBM"

    # Settings pushed in the notification itself are taken as they are.
    doc.mark = len(fresh.publishes)
    fresh.workspace_did_change_configuration(
        lsp.DidChangeConfigurationParams(settings={"asap": {"defaultSlice": "v5e-32"}})
    )
    diags = await doc.diagnostics(
        version=1, where=lambda ds: any(d.code == "ASAP101" and "32" in d.message for d in ds)
    )
    assert codes(diags) == ["ASAP101"] and "32" in by_code(diags, "ASAP101").message

    # A bad slice name in the setting is reported, not crashed on.
    doc.mark = len(fresh.publishes)
    fresh.workspace_did_change_configuration(
        lsp.DidChangeConfigurationParams(settings={"asap": {"defaultSlice": "v5e-7"}})
    )
    diags = await doc.diagnostics(version=1, where=has("ASAP005"))
    assert codes(diags) == ["ASAP005"] and "defaultSlice" in diags[0].message


async def test_settings_show_estimate_false_hides_the_information_line_only(fresh: AsapClient, tmp_path: Path):
    fit = tmp_path / "fit.yml"
    fit.write_text("model_name: llama2-7b\ncompile_topology: v5e-256\nper_device_batch_size: 4\n")
    info = {"showInformationDiagnostics": True}
    await initialize(fresh, options={"settings": {**info, "showEstimate": False}})
    doc = Doc(fresh, fit).open()
    diags = await doc.diagnostics(version=1)
    assert diags == [], [d.code for d in diags]  # a clean config: nothing at all
    # turning it back on (pushed in the notification) brings the estimate back
    doc.mark = len(fresh.publishes)
    fresh.workspace_did_change_configuration(
        lsp.DidChangeConfigurationParams(settings={"asap": {**info, "showEstimate": True}})
    )
    diags = await doc.diagnostics(version=1, where=has("ASAP120"))  # the re-analysis with the pushed setting
    assert [d.code for d in diags] == ["ASAP120"]


async def test_settings_healthy_file_is_quiet_until_information_is_asked_for(fresh: AsapClient, tmp_path: Path):
    """By default a config that works publishes nothing (the estimate lives in the hover and the code lens);
    asap.showInformationDiagnostics brings the estimate's information entry back, and turning it off again
    empties Problems. An error is published either way."""
    from server.editor.settings import Settings

    assert Settings().show_information_diagnostics is False  # the default (package.json's: tests/test_contract.py)
    fit = tmp_path / "fit.yml"
    fit.write_text("model_name: llama2-7b\ncompile_topology: v5e-256\nper_device_batch_size: 4\n")
    await initialize(fresh, {"settings": {"showInformationDiagnostics": False}})
    doc = Doc(fresh, fit).open()
    assert await doc.diagnostics(version=1) == []
    hover = await doc.hover(1, 3)  # compile_topology: the estimate is still there
    assert hover is not None and "MFU" in hover.contents.value
    doc.mark = len(fresh.publishes)
    fresh.workspace_did_change_configuration(
        lsp.DidChangeConfigurationParams(settings={"asap": {"showInformationDiagnostics": True}})
    )
    diags = await doc.diagnostics(version=1, where=has("ASAP120"))
    assert [(d.code, d.severity) for d in diags] == [("ASAP120", lsp.DiagnosticSeverity.Information)]
    doc.mark = len(fresh.publishes)
    fresh.workspace_did_change_configuration(
        lsp.DidChangeConfigurationParams(settings={"asap": {"showInformationDiagnostics": False}})
    )
    assert await doc.diagnostics(version=1, where=lambda ds: not has("ASAP120")(ds)) == []
    v2 = doc.replace_all(doc.text + "ici_fsdp_parallelism: 3\n")  # a broken product: an error, shown
    assert [d.code for d in await doc.diagnostics(version=v2)] == ["ASAP101"]


async def test_analyze_command_runs_the_coordinator_with_progress(fresh: AsapClient, tmp_path: Path):
    """asap.server.analyze returns the `asap analyze --json` document for the buffer as it is now, reporting
    progress, and uses asap.kbPath for the knowledge index."""
    kb_index = tmp_path / "kb-index" / "kb.sqlite"
    await initialize(fresh, {"settings": {"kbPath": str(kb_index)}})
    cfg = tmp_path / "c.yml"
    cfg.write_text(
        "compile_topology: v5e-256\nmodel_name: llama2-7b\nper_device_batch_size: 4\n"
        "ici_fsdp_parallelism: 16\nici_tensor_parallelism: 16\n"
    )
    doc = Doc(fresh, cfg).open()
    await doc.diagnostics(version=1)
    doc.replace_all(doc.text.replace("per_device_batch_size: 4", "per_device_batch_size: 2"))  # unsaved edit
    before = set(fresh.progress_reports)
    result = await fresh.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="asap.server.analyze", arguments=[doc.uri])
    )
    assert result["diagnosis"]["bottleneck"] == "communication"
    assert result["estimate"]["mesh"]["ici"]["tensor"] == 16
    assert result["proposals"][0]["ici"].get("tensor", 1) < 16
    assert "per_device_batch_size: 2" in doc.text and result["estimate"]["tokens_per_step"] == 2 * 2048 * 256
    assert kb_index.exists()  # the index went where asap.kbPath says
    # the command's own progress (the background agents started on open may report theirs meanwhile)
    (token,) = [
        t
        for t in set(fresh.progress_reports) - before
        if getattr(fresh.progress_reports[t][0], "title", "") == "ASAP: analyzing"
    ]
    kinds = [type(v).__name__ for v in fresh.progress_reports[token]]
    assert kinds[0] == "WorkDoneProgressBegin" and kinds[-1] == "WorkDoneProgressEnd"


async def test_profile_search_paths_setting(fresh: AsapClient, tmp_path: Path):
    """asap.profileSearchPaths: a run found by its run_name in a listed directory is read like a linked one."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from profiles.synth import write_profile

    mirror = tmp_path / "mirror"
    write_profile(mirror / "r7" / "tensorboard" / "plugins" / "profile" / "2026_03_01_00_00_00", "hbm")
    await initialize(fresh, {"settings": {"profileSearchPaths": [str(mirror)], "showInformationDiagnostics": True}})
    cfg = tmp_path / "c.yml"
    cfg.write_text(
        "base_output_directory: gs://bucket/runs\nrun_name: r7\ncompile_topology: v5e-4\nmodel_name: llama2-7b\n"
        "per_device_batch_size: 1\nici_fsdp_parallelism: 4\n"
    )
    doc = Doc(fresh, cfg).open()
    diags = await doc.diagnostics(version=1, where=lambda ds: any(d.code == "ASAP200" for d in ds), timeout=60)
    summary = by_code(diags, "ASAP200")
    assert summary.range.start.line == 1 and "hbm-bound" in summary.message
