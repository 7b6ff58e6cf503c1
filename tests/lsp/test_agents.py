"""The agents in the editor: the diagnosis arrives in the background on the keys it implicates, proposals are
quick fixes that rewrite only the mesh, an edited config marks the diagnosis stale and withdraws them, and a
save refreshes it."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from lsprotocol import types as lsp

from .conftest import AGENTS, AsapClient, Doc, codes, wait_for_log, wait_for_progress

module_loop = pytest.mark.asyncio(loop_scope="module")  # tests on the module's `shared` server

TP_HEAVY = """\
# Llama 2 7B: tensor parallelism far above what its MLP needs
compile_topology: v5e-256
model_name: llama2-7b
per_device_batch_size: 4
ici_fsdp_parallelism: 16   # tuned by hand
ici_tensor_parallelism: 16
remat_policy: full
"""


def has_agents(diags: list[lsp.Diagnostic]) -> bool:
    return any(d.code == AGENTS for d in diags)


@module_loop
async def test_diagnosis_then_apply_proposal_one(shared: AsapClient, tmp_path: Path):
    cfg = tmp_path / "tp.yml"
    cfg.write_text(TP_HEAVY)
    doc = Doc(shared, cfg).open()
    diags = await doc.diagnostics(version=1, where=has_agents, timeout=60)
    (diag,) = [d for d in diags if d.code == AGENTS]
    assert diag.severity == lsp.DiagnosticSeverity.Warning
    assert diag.range.start.line == 5  # ici_tensor_parallelism: the key the tensor all-reduces implicate
    assert "communication-bound" in diag.message and "proposal 1:" in diag.message and "%" in diag.message

    hover = await doc.hover(5, 3)  # on ici_tensor_parallelism: the diagnosis, its numbers and sources, then the key
    assert hover is not None
    md = hover.contents.value
    assert md.startswith("**communication-bound**") and "confidence" in md and "| 1 |" in md
    assert "Confidence rests on:" in md and "Backend: offline" in md
    assert "ici_tensor_parallelism" in md and "Degree:" in md  # the key's own hover follows

    actions = await doc.code_actions([diag])
    proposals = [a for a in actions if a.title.startswith("Apply proposal")]
    assert proposals and proposals[0].title.startswith("Apply proposal 1: ") and "confidence" in proposals[0].title
    first = proposals[0]
    assert first.is_preferred and first.edit is not None
    (change,) = first.edit.document_changes or []
    assert isinstance(change, lsp.TextDocumentEdit) and change.text_document.version == 1
    v2 = doc.edit(change.edits)
    assert "# tuned by hand" in doc.text and "# Llama 2 7B" in doc.text and "remat_policy: full" in doc.text
    assert "ici_tensor_parallelism: 16" not in doc.text
    after = await doc.diagnostics(version=v2)
    assert codes(after) == []  # the applied proposal launches: no mesh errors

    # edited since the analysis: the diagnosis says it is stale and proposals are withdrawn
    stale = [d for d in after if d.code == AGENTS]
    assert stale and all(d.message.startswith("[stale") for d in stale)
    assert not [a for a in await doc.code_actions(stale) if a.title.startswith("Apply proposal")]

    # a save runs the agents again on the new text
    doc.save()
    fresh = await doc.diagnostics(
        version=v2,
        where=lambda ds: any(d.code == AGENTS and not d.message.startswith("[stale") for d in ds),
        timeout=60,
    )
    assert fresh
    doc.close()


async def test_proposal_edits_are_computed_on_resolve(fresh: AsapClient, tmp_path: Path):
    from .conftest import ROOT, capabilities

    caps = capabilities()
    assert caps.text_document is not None and caps.text_document.code_action is not None
    caps.text_document.code_action.resolve_support = lsp.ClientCodeActionResolveOptions(properties=["edit"])
    await asyncio.wait_for(
        fresh.initialize_session(
            lsp.InitializeParams(
                capabilities=caps,
                root_uri=ROOT.as_uri(),
                initialization_options={"settings": {"showInformationDiagnostics": True}},
            )
        ),
        30,
    )
    cfg = tmp_path / "tp.yml"
    cfg.write_text(TP_HEAVY)
    doc = Doc(fresh, cfg).open()
    diags = await doc.diagnostics(version=1, where=has_agents, timeout=60)
    actions = [a for a in await doc.code_actions(diags) if a.title.startswith("Apply proposal")]
    assert actions and all(a.edit is None and isinstance(a.data, dict) for a in actions)
    resolved = await asyncio.wait_for(fresh.code_action_resolve_async(actions[0]), 30)
    assert resolved.edit is not None and resolved.edit.document_changes
    (change,) = resolved.edit.document_changes
    assert isinstance(change, lsp.TextDocumentEdit) and change.text_document.version == 1
    doc.edit(change.edits)
    assert "ici_tensor_parallelism: 16" not in doc.text and "# tuned by hand" in doc.text


@module_loop
async def test_code_lens_above_the_mesh_block(shared: AsapClient, tmp_path: Path):
    cfg = tmp_path / "lens.yml"
    cfg.write_text(TP_HEAVY)
    doc = Doc(shared, cfg).open()
    await doc.diagnostics(version=1, where=has_agents, timeout=60)
    lenses = await shared.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(doc.uri)))
    assert lenses and {lens.range.start.line for lens in lenses} == {4}  # the first mesh key
    titles = [lens.command.title for lens in lenses if lens.command]
    # one short line, every number labelled, then the actions (Analyze only until the agents have answered)
    assert re.fullmatch(
        r"ASAP: communication-bound · MFU \d+% · 3 proposals \(best ×[\d.]+, confidence \d+%\)", titles[0]
    )
    assert titles[-3:] == ["Verify", "Roofline", "Proposals"] and "Analyze" not in titles
    by_title = {lens.command.title: lens.command for lens in lenses if lens.command}
    assert by_title["Roofline"].command == "asap.showRoofline" and list(by_title["Roofline"].arguments or []) == [
        doc.uri
    ]
    assert list(by_title["Proposals"].arguments or []) == [doc.uri, 4, 0]  # the client opens the quick fixes there
    mark = len(shared.publishes)
    await shared.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="asap.server.runAgents", arguments=[doc.uri])
    )
    doc.mark = mark
    assert await doc.diagnostics(version=1, where=has_agents, timeout=60)  # the agents ran again and published
    doc.close()


@module_loop
async def test_background_analysis_reports_cancellable_progress(shared: AsapClient, tmp_path: Path):
    cfg = tmp_path / "progress.yml"
    cfg.write_text(TP_HEAVY.replace("per_device_batch_size: 4", "per_device_batch_size: 2"))
    before = set(shared.progress_reports)
    doc = Doc(shared, cfg).open()
    await doc.diagnostics(version=1, where=has_agents, timeout=60)
    new = [t for t in set(shared.progress_reports) - before if "diagnosing" in str(t)]
    assert new, "the agents' background run reports progress"
    reports = shared.progress_reports[new[0]]
    begin = reports[0]
    assert isinstance(begin, lsp.WorkDoneProgressBegin) and begin.cancellable and "pricing meshes" in begin.title
    assert isinstance(reports[-1], lsp.WorkDoneProgressEnd)
    doc.close()


@module_loop
async def test_cancelling_the_background_analysis_drops_its_result(shared: AsapClient, tmp_path: Path):
    """A cancel from the progress bar (window/workDoneProgress/cancel) ends the run: no diagnosis is published
    for it, and the progress ends."""
    cfg = tmp_path / "cancel.yml"
    cfg.write_text(TP_HEAVY.replace("per_device_batch_size: 4", "per_device_batch_size: 8"))
    before = set(shared.progress_reports)
    doc = Doc(shared, cfg).open()

    token = await wait_for_progress(shared, lambda t, r: "diagnosing" in t and t not in before and bool(r), timeout=60)
    shared.protocol.notify(lsp.WINDOW_WORK_DONE_PROGRESS_CANCEL, lsp.WorkDoneProgressCancelParams(token=token))
    await wait_for_progress(shared, lambda t, r: t == token and isinstance(r[-1], lsp.WorkDoneProgressEnd), 60)
    await wait_for_log(shared, f"analysis of {cfg} cancelled")  # the run itself was cancelled, not just its bar
    assert not any(p.uri == doc.uri and any(d.code == AGENTS for d in p.diagnostics) for p in shared.publishes)
    doc.close()


@module_loop
async def test_roofline_command_plots_the_estimate_and_fresh_proposals(shared: AsapClient, tmp_path: Path):
    cfg = tmp_path / "roof.yml"
    cfg.write_text(TP_HEAVY)
    doc = Doc(shared, cfg).open()
    await doc.diagnostics(version=1, where=has_agents, timeout=60)

    async def roofline(theme: str) -> dict:
        return await shared.workspace_execute_command_async(
            lsp.ExecuteCommandParams(command="asap.server.roofline", arguments=[doc.uri, theme])
        )

    light, dark = await roofline("light"), await roofline("dark")
    assert light["fresh"] and light["title"] == "ASAP roofline: roof.yml"
    spec = light["spec"]
    assert spec["title"]["text"] == "Roofline of v5e-256 per device"
    names = {m["name"] for layer in spec["layer"] for m in layer["data"]["values"] if "name" in m}
    assert {"now", "P1"} <= names  # the current mesh and proposal 1, as whole-step points
    assert any(line.startswith("P1: fsdp=") for line in spec["title"]["subtitle"])
    assert light["spec"]["config"]["background"] != dark["spec"]["config"]["background"]
    assert light["spec"]["layer"][0]["data"] == dark["spec"]["layer"][0]["data"]  # same data, other colours

    v2 = doc.replace_all(
        doc.text.replace("v5e-256", "v5e-128").replace("fsdp_parallelism: 16", "fsdp_parallelism: 8")
    )  # unsaved edit: no fresh proposals
    await doc.diagnostics(version=v2)
    stale = await roofline("light")
    assert not stale["fresh"] and stale["spec"]["title"]["text"] == "Roofline of v5e-128 per device"
    assert "P1" not in {m.get("name") for layer in stale["spec"]["layer"] for m in layer["data"]["values"]}
    await doc.diagnostics(version=doc.replace_all(doc.text.replace("v5e-128", "nonsense-3")))
    with pytest.raises(Exception, match="no estimate"):
        await roofline("light")
    doc.close()
