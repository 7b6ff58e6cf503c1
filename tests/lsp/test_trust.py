"""Workspace trust: a server the extension starts for a workspace VS Code runs in Restricted Mode (initialization
options `trusted: false`) reads and prices its configs, but runs nothing the workspace names: Verify is refused with
a clear error (the code lens offers none, asap.verify=auto compiles nothing), the agents never call Claude whatever
asap.llm says, and asap.maxtextPython/maxtextPath are ignored. A later settings message cannot raise the trust: the
extension restarts the server when the user grants it.

Claude is a real socket here: ANTHROPIC_BASE_URL points at a listener on 127.0.0.1 that counts its connections (and
closes them, so the agents fall back to the offline engine). The trusted server with asap.llm=auto connects to it;
the untrusted one must not."""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pytest_lsp import ClientServerConfig

from .conftest import CONFIG, AsapClient, Doc, initialize, wait_for_log

# Bound and listening before the language server starts (its environment points the Anthropic SDK here), for the
# module's life: a port looked up free and bound later could be taken meanwhile by another process.
SOCKET = socket.create_server(("127.0.0.1", 0))
PORT = int(SOCKET.getsockname()[1])
CLAUDE_CONFIG = ClientServerConfig(
    server_command=CONFIG.server_command,
    client_factory=CONFIG.client_factory,
    server_env={
        **os.environ,
        "ANTHROPIC_API_KEY": "sk-ant-test-trust",
        "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{PORT}",
        "NO_PROXY": "127.0.0.1",
    },
)
# what a cloned repository's .vscode/settings.json could say
WORKSPACE_SETTINGS = {"llm": "auto", "verify": "auto", "maxtextPython": "/opt/evil/bin/python", "maxtextPath": "/opt"}


class Listener:
    """The listener on 127.0.0.1:PORT, counting the connections it accepts (closing each at once) from its start."""

    def __init__(self) -> None:
        self.sock = SOCKET
        self.connections = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # closed
                return
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept (a close alone does not, on Linux)
        self.sock.close()
        self.thread.join(timeout=5)


@pytest.fixture(scope="module")
def _listening() -> Iterator[Listener]:
    listener = Listener()
    yield listener
    listener.close()


@pytest.fixture
def claude(_listening: Listener) -> Listener:
    _listening.connections = 0  # each test counts its own
    return _listening


@pytest_lsp.fixture(config=CLAUDE_CONFIG)
async def bare(lsp_client: AsapClient):
    yield
    if lsp_client.capabilities is not None:
        await lsp_client.shutdown_session()


def config(tmp_path: Path) -> Path:
    # a run_name of its own: the agents' cache (keyed by the config) never answers for Claude
    path = tmp_path / "trust.yml"
    path.write_text(
        f"model_name: llama2-7b\nrun_name: trust-{uuid.uuid4().hex[:12]}\ncompile_topology: v5e-4\n"
        "per_device_batch_size: 1\nici_fsdp_parallelism: 4\n"
    )
    return path


async def lens_titles(client: AsapClient, doc: Doc) -> list[str]:
    res = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(doc.uri)))
    return [lens.command.title for lens in res or [] if lens.command]


async def verify(client: AsapClient, doc: Doc) -> None:
    await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="asap.server.verify", arguments=[doc.uri])
    )


async def test_untrusted_workspace_prices_its_config_and_runs_nothing(
    bare: AsapClient, claude: Listener, tmp_path: Path
) -> None:
    # the workspace's settings reach the server both ways: the initialization options and the configuration pull
    # (with the information entries shown: the estimate's ASAP120 is one)
    bare.set_configuration({**WORKSPACE_SETTINGS, "showInformationDiagnostics": True}, section="asap")
    await initialize(bare, {"settings": {**WORKSPACE_SETTINGS, "trusted": False}}, configuration=True)
    settings = await wait_for_log(bare, "settings:")
    assert "trusted=False" in settings and "llm='off'" in settings and "verify='manual'" in settings, settings
    assert "maxtext_python=None" in settings and "maxtext_path=None" in settings, settings

    doc = Doc(bare, config(tmp_path)).open()
    diags = await doc.diagnostics(version=1, where=lambda ds: any(d.code == "ASAP120" for d in ds))
    assert any(d.code == "ASAP120" for d in diags)  # the estimate: a static reading works as in a trusted workspace
    await wait_for_log(bare, "agents, trust.yml")
    assert claude.connections == 0  # asap.llm=auto with a key, and still no call to Claude
    titles = await lens_titles(bare, doc)
    assert "Roofline" in titles and "Verify" not in titles, titles

    with pytest.raises(JsonRpcException) as refused:
        await verify(bare, doc)
    assert refused.value.data == {"code": "untrustedWorkspace"}
    assert "Restricted Mode" in refused.value.message and "Trust the workspace" in refused.value.message

    # a settings change (the `asap` section alone, as the client sends it) cannot raise the trust
    bare.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings={"asap": WORKSPACE_SETTINGS}))
    with pytest.raises(JsonRpcException) as again:
        await verify(bare, doc)
    assert again.value.data == {"code": "untrustedWorkspace"}
    assert claude.connections == 0
    assert not any("TPU compiler" in m.message and "compiling" in m.message for m in bare.log_messages)


async def test_trusted_workspace_with_llm_auto_calls_claude(bare: AsapClient, claude: Listener, tmp_path: Path) -> None:
    """The control: the same settings, trusted, and the agents do reach the (closed) Claude endpoint."""
    await initialize(bare, {"settings": {"llm": "auto"}}, configuration=False)
    doc = Doc(bare, config(tmp_path)).open()
    await doc.diagnostics(version=1)
    await wait_for_log(bare, "agents, trust.yml", timeout=120)
    assert claude.connections >= 1
    assert "Verify" in await lens_titles(bare, doc)


def test_trust_fails_closed_and_restricts_the_settings_that_run_code() -> None:
    """Settings.from_client: any `trusted` but true restricts (a malformed value never falls back to the default,
    trusted); no `trusted` at all is an editor without workspace trust (Neovim, the CLI's tests): trusted."""
    from server.editor.settings import Settings

    asked = {**WORKSPACE_SETTINGS, "verifyCluster": "10.0.0.1:6379", "defaultSlice": "v5e-256"}
    for trusted in (False, "false", None, 0, "yes"):
        s = Settings.from_client({**asked, "trusted": trusted})
        assert (s.trusted, s.llm, s.verify, s.maxtext_python, s.maxtext_path, s.verify_cluster) == (
            False, "off", "manual", None, None, None
        ), trusted  # fmt: skip
        assert s.default_slice == "v5e-256"  # what only prices the config is kept
    full = Settings.from_client(asked)
    assert (full.trusted, full.llm, full.verify, full.maxtext_python) == (True, "auto", "auto", "/opt/evil/bin/python")
    assert Settings.from_client({**asked, "trusted": True}) == full
