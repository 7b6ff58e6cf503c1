"""Closing the loop in the editor: "Apply proposal 1" carries a command that records which proposal was
applied; a profile of the changed config, linked afterwards, becomes its outcome by itself (announced), and
"asap.server.recordOutcome" records one on request or says why it cannot."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types as lsp
from profiles.synth import write_profile
from pygls.exceptions import JsonRpcException
from support.configs import LOOP_CONFIG as CONFIG

from server.editor.contract import COMMAND_ERROR

from .conftest import AGENTS, AsapClient, Doc, wait_for_log

module_loop = pytest.mark.asyncio(loop_scope="module")


async def command(client: AsapClient, name: str, *args: object) -> object:
    return await client.workspace_execute_command_async(lsp.ExecuteCommandParams(command=name, arguments=list(args)))


@module_loop
async def test_apply_record_then_the_new_profile_is_the_outcome(shared: AsapClient, tmp_path: Path):
    cfg = tmp_path / "c.yml"
    cfg.write_text(CONFIG)
    write_profile(tmp_path / "runs" / "before", "comm")
    doc = Doc(shared, cfg).open()
    diags = await doc.diagnostics(version=1, where=lambda ds: any(d.code == AGENTS for d in ds), timeout=90)
    (diag,) = [d for d in diags if d.code == AGENTS]
    assert "communication-bound (profile" in diag.message

    # nothing applied yet: an explicit outcome request says so, with the code the extension branches on
    with pytest.raises(JsonRpcException, match="no proposal was applied") as refused:
        await command(shared, "asap.server.recordOutcome", doc.uri, None)
    assert refused.value.code == COMMAND_ERROR and refused.value.data == {"code": "outcomeRefused"}

    actions = await doc.code_actions([diag])
    titles = [a.title for a in actions]
    first = next((a for a in actions if a.title.startswith("Apply proposal 1")), None)
    assert first is not None, (titles, diag.message)
    assert first.command is not None and first.command.command == "asap.server.recordApplied"
    experiment, rank, uri = first.command.arguments or []
    assert rank == 1 and uri == doc.uri and isinstance(experiment, str)
    assert first.edit is not None and first.edit.document_changes
    doc.edit(first.edit.document_changes[0].edits)  # as VS Code does: the edit, then the command
    row = await command(shared, first.command.command, *first.command.arguments)
    assert isinstance(row, dict) and row["rank"] == 1 and row["experiment_id"] == experiment
    doc.save()

    # the run with the new mesh: its profile is linked, read in the background, and recorded by itself
    write_profile(tmp_path / "runs" / "after", "compute")
    mark = len(shared.log_messages)
    doc.replace_all(doc.text.replace("runs/before", "runs/after"))
    doc.save()
    logged = await wait_for_log(shared, "outcome of proposal 1 recorded", start=mark, timeout=60)
    assert "bottleneck communication -> compute" in logged
    assert any("outcome of proposal 1 recorded" in m.message for m in shared.messages)  # shown to the user

    # on request, with a profile of another slice size: refused with the reason
    other = tmp_path / "runs" / "eight"
    write_profile(other, "comm", hosts=2)
    with pytest.raises(Exception, match="another run"):
        await command(shared, "asap.server.recordOutcome", doc.uri, str(other))
    doc.close()


@module_loop
async def test_outcome_without_a_profile_says_which_error(shared: AsapClient, tmp_path: Path):
    """No profile linked and none given: the error's code is noProfileLinked, which the extension answers by asking
    for one (extension/src/outcome.ts); a profile that does not exist is badProfile or outcomeRefused, not that."""
    cfg = tmp_path / "nolink.yml"
    cfg.write_text(CONFIG.replace("# asap: profile=runs/before\n", ""))
    doc = Doc(shared, cfg).open()
    await doc.diagnostics(version=1)
    with pytest.raises(JsonRpcException) as none_linked:
        await command(shared, "asap.server.recordOutcome", doc.uri, None)
    assert none_linked.value.code == COMMAND_ERROR and none_linked.value.data == {"code": "noProfileLinked"}
    with pytest.raises(JsonRpcException) as missing:
        await command(shared, "asap.server.recordOutcome", doc.uri, str(tmp_path / "no-such-run"))
    assert missing.value.data["code"] in ("badProfile", "outcomeRefused"), missing.value.data
    doc.close()
