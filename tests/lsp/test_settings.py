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
    # The pull happens in `initialized`, racing with didOpen: the published result must
    # end up reflecting the pulled setting.
    diags = await doc.diagnostics(version=1, where=has("ASAP101"), timeout=5)
    assert codes(diags) == ["ASAP101"]


async def test_settings_change_configuration_pull_republishes(fresh: AsapClient, tmp_path: Path):
    fresh.set_configuration({"defaultSlice": "v5e-16"}, section="asap")
    await initialize(fresh)
    await wait_for_log(fresh, "settings:")  # the pull in `initialized` is done
    doc = Doc(fresh, no_slice(tmp_path)).open()
    await doc.diagnostics(version=1, where=has("ASAP101"), timeout=5)

    # The user changes the setting; VS Code sends didChangeConfiguration with null settings
    # and the server pulls.
    fresh.set_configuration({"defaultSlice": "v5e-8"}, section="asap")
    doc.mark = len(fresh.publishes)
    fresh.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings=None))
    diags = await doc.diagnostics(version=1)
    assert "ASAP101" not in codes(diags), "8 devices, fsdp=8: the mesh matches the slice"
    assert {"ASAP121", "ASAP122"} & set(codes(diags)), "but 7B params x 16 bytes over 8 chips of 16 GB is over HBM"

    # Settings pushed in the notification itself are taken as they are.
    doc.mark = len(fresh.publishes)
    fresh.workspace_did_change_configuration(
        lsp.DidChangeConfigurationParams(settings={"asap": {"defaultSlice": "v5e-32"}})
    )
    diags = await doc.diagnostics(version=1)
    assert codes(diags) == ["ASAP101"] and "32" in by_code(diags, "ASAP101").message

    # A bad slice name in the setting is reported, not crashed on.
    doc.mark = len(fresh.publishes)
    fresh.workspace_did_change_configuration(
        lsp.DidChangeConfigurationParams(settings={"asap": {"defaultSlice": "v5e-7"}})
    )
    diags = await doc.diagnostics(version=1)
    assert codes(diags) == ["ASAP005"] and "defaultSlice" in diags[0].message


async def test_settings_show_estimate_false_hides_the_information_line_only(fresh: AsapClient, tmp_path: Path):
    fit = tmp_path / "fit.yml"
    fit.write_text("model_name: llama2-7b\ncompile_topology: v5e-256\nper_device_batch_size: 4\n")
    await initialize(fresh, options={"settings": {"showEstimate": False}})
    doc = Doc(fresh, fit).open()
    diags = await doc.diagnostics(version=1)
    assert diags == [], [d.code for d in diags]  # a clean config: nothing at all
    # turning it back on (pushed in the notification) brings the estimate back
    doc.mark = len(fresh.publishes)
    fresh.workspace_did_change_configuration(
        lsp.DidChangeConfigurationParams(settings={"asap": {"showEstimate": True}})
    )
    diags = await doc.diagnostics(version=1, where=lambda ds: any(d.code == "ASAP120" for d in ds), timeout=5)
    assert [d.code for d in diags] == ["ASAP120"]
