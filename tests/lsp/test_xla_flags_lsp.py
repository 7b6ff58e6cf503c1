"""The run's XLA flags through the real server over stdio (issue 26 item 1): asap.xlaFlags from initializationOptions
and from a didChangeConfiguration reaching the estimate's hover, a config's own `# LIBTPU_INIT_ARGS=...` comment
taking precedence over it, and a bad flag in that comment published as an ASAP011 warning at the token (UTF-16
columns), explained by the hover, gone once fixed; nothing logged as an error, the server answering throughout."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types as lsp

from server.editor.features.hover import ANALYSING

from .conftest import AsapClient, Doc, has, initialize, lacks, utf16_len, wait_for_log, wait_for_publish

CONFIG = "compile_topology: v5e-256\nmodel_name: llama2-7b\nper_device_batch_size: 4\nici_fsdp_parallelism: -1\n"
AG = "--xla_tpu_enable_async_collective_fusion_fuse_all_gather=true"
DP = "--xla_tpu_enable_data_parallel_all_reduce_opt=true"


async def _hover(doc: Doc, line: int, character: int) -> str:
    found = await doc.hover(line, character)
    assert found is not None and isinstance(found.contents, lsp.MarkupContent)
    return found.contents.value


async def _ready_hover(doc: Doc, line: int, character: int) -> str:
    """The hover once the analysis of the document as it is now is ready. After a settings change the publish a test
    waits for can be the agents' (started by the change, on the analysis before it) while the new analysis still
    runs; the hover then says ANALYSING (seen in CI): hover again after the next publish of the document."""
    for _ in range(5):
        mark = len(doc.client.publishes)
        md = await _hover(doc, line, character)
        if md != ANALYSING:
            return md
        await wait_for_publish(doc.client, doc.uri, lambda p: p.version == doc.version, start=mark)
    raise AssertionError(f"the hover at {line}:{character} still says {ANALYSING!r} after 5 publishes")


async def test_xla_flags_setting_reaches_the_hover_and_the_comment_wins(fresh: AsapClient, tmp_path: Path) -> None:
    await initialize(fresh, {"settings": {"xlaFlags": AG}}, configuration=False)
    path = tmp_path / "c.yml"
    path.write_text(CONFIG, encoding="utf-8")
    logs = len(fresh.log_messages)
    doc = Doc(fresh, path).open()
    await doc.diagnostics(version=1)
    md = await _hover(doc, 0, 3)  # compile_topology: the estimate, and the flags it assumed
    assert "- XLA flags: from the asap.xlaFlags setting: cf_for_all_gather\n" in md + "\n", md
    # the agents price under the setting too: ASAP: Analyze's document says which flags
    result = await fresh.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="asap.server.analyze", arguments=[doc.uri])
    )
    assert result is not None and result["xla_flags"]["source"] == "setting" and result["xla_flags"]["text"] == AG

    commented = tmp_path / "commented.yml"
    commented.write_text(f"# XLA_FLAGS={DP}\n" + CONFIG, encoding="utf-8")
    other = Doc(fresh, commented).open()
    await other.diagnostics(version=1)
    md = await _hover(other, 1, 3)
    assert "- XLA flags: from the comment on line 1: data_parallel_overlap" in md, md

    # the setting changes (pushed in the notification): the next analysis prices under the new flags, and the agents
    # run again under them. The agents started on open publish version 1 too when they finish: wait for them, so
    # that the next publish is of the new analysis.
    await wait_for_log(fresh, f"agents, {path.name} (version 1)", start=logs, timeout=60)
    await wait_for_log(fresh, f"agents, {commented.name} (version 1)", start=logs, timeout=60)
    changed = len(fresh.log_messages)
    doc.mark = len(fresh.publishes)
    fresh.workspace_did_change_configuration(
        lsp.DidChangeConfigurationParams(settings={"asap": {"showInformationDiagnostics": True, "xlaFlags": DP}})
    )
    await doc.diagnostics(version=1)
    md = await _ready_hover(doc, 0, 3)
    assert "- XLA flags: from the asap.xlaFlags setting: data_parallel_overlap" in md, md
    await wait_for_log(fresh, f"agents, {path.name} (version 1)", start=changed, timeout=60)  # run again
    await wait_for_log(fresh, f"agents, {commented.name} (version 1)", start=changed, timeout=60)

    doc.mark = len(fresh.publishes)
    fresh.workspace_did_change_configuration(
        lsp.DidChangeConfigurationParams(settings={"asap": {"showInformationDiagnostics": True, "xlaFlags": "  "}})
    )
    await doc.diagnostics(version=1)
    md = await _ready_hover(doc, 0, 3)
    assert "- XLA flags: libtpu defaults assumed — state yours in a `# LIBTPU_INIT_ARGS=" in md, md
    errors = [m.message for m in fresh.log_messages[logs:] if m.type == lsp.MessageType.Error]
    assert errors == []


async def test_xla_flags_bad_flag_is_a_warning_at_the_token(fresh: AsapClient, tmp_path: Path) -> None:
    await initialize(fresh)
    # a character outside the BMP before the bad token: two UTF-16 units, one code point
    comment = f'# LIBTPU_INIT_ARGS="{AG} --xla_note=\U0001f600 --xla_tpu_enable_data_parallel_all_reduce_opt=maybe"'
    path = tmp_path / "flags.yml"
    path.write_text(comment + "\n" + CONFIG, encoding="utf-8")
    logs = len(fresh.log_messages)
    doc = Doc(fresh, path).open()
    diags = await doc.diagnostics(version=1, where=has("ASAP011"))
    (bad,) = [d for d in diags if d.code == "ASAP011"]
    token = "--xla_tpu_enable_data_parallel_all_reduce_opt=maybe"
    start = utf16_len(comment[: comment.index(token)])
    assert bad.severity == lsp.DiagnosticSeverity.Warning
    assert (bad.range.start, bad.range.end) == (lsp.Position(0, start), lsp.Position(0, start + len(token)))
    assert "expects true or false, got 'maybe'" in bad.message
    md = await _hover(doc, 0, start + 2)
    assert md.startswith("**ASAP011** XLA flags not read as written")
    assert "**LIBTPU_INIT_ARGS** — XLA flags: from the comment on line 1: cf_for_all_gather" in md
    assert "`--xla_note`" in md  # the unknown flag, kept and listed
    assert await doc.code_actions([bad]) == []  # nothing to apply: the message says what to write

    fixed = doc.replace_all(doc.text.replace("=maybe", "=true"))
    diags = await doc.diagnostics(version=fixed, where=lacks("ASAP011"))
    assert "ASAP011" not in [d.code for d in diags]
    md = await _hover(doc, 0, 5)
    assert "cf_for_all_gather, data_parallel_overlap (1 unknown kept: xla_note)" in md, md
    errors = [m.message for m in fresh.log_messages[logs:] if m.type == lsp.MessageType.Error]
    assert errors == []
