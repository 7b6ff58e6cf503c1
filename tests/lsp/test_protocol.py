"""The server as a process: what it announces, its startup log line, a stdout that holds
nothing but LSP frames, and the start-up window where JAX is still being imported."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO

import pytest
from lsprotocol import types as lsp

from .conftest import AGENTS, EXAMPLES, ROOT, SERVER_COMMAND, AsapClient, Doc, by_code, codes, initialize, wait_for_log


async def test_initialize_capabilities_and_startup_log(fresh: AsapClient):
    result = await initialize(fresh)
    assert result.server_info is not None and result.server_info.name == "asap"
    caps = result.capabilities
    assert caps.position_encoding in (None, lsp.PositionEncodingKind.Utf16)
    assert caps.hover_provider
    assert isinstance(caps.code_action_provider, lsp.CodeActionOptions)
    assert list(caps.code_action_provider.code_action_kinds or []) == [lsp.CodeActionKind.QuickFix]
    sync = caps.text_document_sync
    assert isinstance(sync, lsp.TextDocumentSyncOptions)
    assert sync.open_close and sync.change == lsp.TextDocumentSyncKind.Incremental and sync.save

    line = await wait_for_log(fresh, "ASAP language server")
    assert "started" in line
    started = next(m for m in fresh.log_messages if "ASAP language server" in m.message)
    assert started.type == lsp.MessageType.Info


def _frame(msg: dict) -> bytes:
    body = json.dumps(msg).encode()
    return f"Content-Length: {len(body)}\r\n\r\n".encode() + body


def _parse_frames(out: bytes) -> list[dict]:
    """Every byte of stdout must belong to a Content-Length frame holding JSON."""
    msgs, i = [], 0
    while i < len(out):
        end = out.index(b"\r\n\r\n", i)
        headers = dict(h.split(": ", 1) for h in out[i:end].decode("ascii").split("\r\n"))
        assert set(headers) <= {"Content-Length", "Content-Type"}, f"not a header: {out[i:end]!r}"
        n = int(headers["Content-Length"])
        msgs.append(json.loads(out[end + 4 : end + 4 + n]))
        i = end + 4 + n
    return msgs


def _read_frame(stream: IO[bytes]) -> dict:
    """One Content-Length frame from a pipe, as strictly as `_parse_frames` reads (EOF fails)."""
    headers: dict[str, str] = {}
    while (line := stream.readline()) != b"\r\n":
        assert line.endswith(b"\r\n"), f"not a header: {line!r}"
        key, value = line[:-2].decode("ascii").split(": ", 1)
        headers[key] = value
    assert set(headers) <= {"Content-Length", "Content-Type"}, f"not a header: {headers!r}"
    return json.loads(stream.read(int(headers["Content-Length"])))


def test_stdout_holds_only_protocol_frames(tmp_path: Path):
    """Nothing prints: stdout is the protocol. Exercise start-up, analysis (its diagnostics are
    published before the hover, which answers from the analysis it finds ready), a hover on a
    clean mesh, shutdown and exit, and parse every byte of stdout strictly."""
    shutil.copy(EXAMPLES / "common.yml", tmp_path)
    child = tmp_path / "llama2.yml"
    shutil.copy(EXAMPLES / "llama2-7b-v5e-256.yml", child)
    text = child.read_text()
    uri = child.as_uri()
    opening = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"processId": None, "capabilities": {}}},
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {
            "jsonrpc": "2.0",
            "method": "textDocument/didOpen",
            "params": {"textDocument": {"uri": uri, "languageId": "yaml", "version": 1, "text": text}},
        },
    ]
    closing = [
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "textDocument/hover",
            "params": {"textDocument": {"uri": uri}, "position": {"line": 8, "character": 3}},
        },
        {"jsonrpc": "2.0", "id": 3, "method": "shutdown"},
        {"jsonrpc": "2.0", "method": "exit"},
    ]
    with (tmp_path / "stderr").open("w+b") as err:
        proc = subprocess.Popen(SERVER_COMMAND, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
        assert proc.stdin is not None and proc.stdout is not None
        watchdog = threading.Timer(60, proc.kill)  # a hung server ends the reads below with EOF, not a hung test
        watchdog.start()
        try:
            proc.stdin.write(b"".join(map(_frame, opening)))
            proc.stdin.flush()
            msgs = []
            while not (msgs and msgs[-1].get("method") == "textDocument/publishDiagnostics"):
                msgs.append(_read_frame(proc.stdout))
            proc.stdin.write(b"".join(map(_frame, closing)))
            proc.stdin.close()
            msgs += _parse_frames(proc.stdout.read())
            returncode = proc.wait()
        finally:
            watchdog.cancel()
            proc.kill()
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    by_id = {m["id"]: m for m in msgs if "id" in m and "method" not in m}
    assert set(by_id) == {1, 2, 3}, msgs
    assert "result" in by_id[2], f"hover failed: {by_id[2].get('error')}"
    assert "Degree: **256**" in by_id[2]["result"]["contents"]["value"]
    assert returncode == 0, stderr[-2000:]


STRAY_WRITERS = """
import multiprocessing, os, subprocess, sys
from server.lsp import reserve_stdio

def child():
    print("stray from a spawned worker", flush=True)

proto_in, proto_out = reserve_stdio()
print("stray print", flush=True)
os.write(1, b"stray os.write\\n")
subprocess.run([sys.executable, "-c", "print('stray from a subprocess'); import sys; print(repr(sys.stdin.read()))"])
if __name__ == "__main__":
    p = multiprocessing.get_context("spawn").Process(target=child)
    p.start()
    p.join()
    proto_out.write(proto_in.read(5) + b"|frame")
    proto_out.flush()
"""


def test_reserved_stdio_keeps_stray_writes_off_the_protocol(tmp_path: Path):
    """Whatever writes to file descriptor 1 after the server reserved stdio (a print, a C-level write, a
    subprocess, the agents' spawned worker) lands on stderr; a child reading stdin sees nothing of the
    client's bytes. Only the protocol's own writer reaches stdout."""
    script = tmp_path / "stray.py"
    script.write_text(STRAY_WRITERS)
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=ROOT, input=b"hello", capture_output=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert proc.stdout == b"hello|frame"
    err = proc.stderr.decode()
    for line in ("stray print", "stray os.write", "stray from a subprocess", "''", "stray from a spawned worker"):
        assert line in err.splitlines(), err


async def test_first_open_during_jax_warm_up_is_clean(fresh: AsapClient, workdir: Path, capfd):
    """didOpen right after initialize: the analysis imports JAX while `initialized` is
    warming it up in another thread. Both must succeed; nothing may crash in the server."""
    await initialize(fresh)
    doc = Doc(fresh, workdir / "llama2-7b-v5e-256.yml").open()
    assert codes(await doc.diagnostics(version=1)) == []
    hover = await doc.hover(8, 2)
    assert hover is not None and "Physical axes: x (16, ring) × y (16, ring)" in hover.contents.value
    await fresh.shutdown_session()
    fresh.capabilities = None  # shut down here, so the fixture does not try again
    await asyncio.wait_for(fresh.stop(), 10)
    err = capfd.readouterr().err
    assert "Traceback" not in err and "exception was never retrieved" not in err, err[-3000:]
    problems = [m.message for m in fresh.log_messages if m.type in (lsp.MessageType.Error, lsp.MessageType.Warning)]
    assert codes(problems) == []


async def test_change_during_first_analysis_never_serves_old_text(fresh: AsapClient, workdir: Path):
    """The first analysis waits for JAX's import (about a second). A change that arrives
    meanwhile must not let that analysis be cached as the new version's: hovers, quick
    fixes and later publishes for the new version must describe the new text."""
    await initialize(fresh)
    doc = Doc(fresh, workdir / "llama2-7b-v5e-256.yml").open()  # a clean mesh: placement imports JAX
    # Answered from what is ready: the open's analysis has been started (the server handles messages in order)
    # and is still importing JAX when the change below arrives.
    await doc.hover(10, 2)
    v2 = doc.replace_all("# one\n# two\n" + doc.text.replace("ici_fsdp_parallelism: -1", "ici_fsdp_parallelism: 32"))
    product = by_code(await doc.diagnostics(version=v2), "ASAP101")
    assert product.range.start.line == 10
    # A document's analyses run one at a time (AsapServer.analysis): the second version's was published, so the
    # first version's has finished too, and had it been cached for the new text it would be served now.
    hover = await doc.hover(10, 2)
    assert hover is not None and "Degree: **32**" in hover.contents.value, "hover served from the old text"
    actions = await doc.code_actions([product])
    assert actions, "the fix for the current diagnostic is missing"
    doc.save()
    diags = await doc.diagnostics(version=v2)
    assert [(d.code, d.range.start.line) for d in diags if d.code != AGENTS] == [("ASAP101", 10)], (
        "save republished old findings"
    )


@pytest.mark.parametrize("n", [1])
def test_server_module_does_not_print_on_import(n: int):
    """`import server.lsp` (as the bench and tests do) must be silent too."""
    out = subprocess.run(
        [SERVER_COMMAND[0], "-c", "import server.lsp"], cwd=ROOT, capture_output=True, timeout=60, check=True
    )
    assert out.stdout == b""
