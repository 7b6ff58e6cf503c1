"""The agents' worker process, as the real server over stdio starts it (issue 25 item 7): it loads what the agents
need and not the language server (pygls, lsprotocol, the editor's modules) nor JAX. The server sends it
server/agents/worker.py `run_report`, whose module imports only the standard library; a function of a module that
imports the editor would bring the whole server into the worker. The worker says what it imported in its memory
report (ASAP_WORKER_REPORT, off by default), written from inside it after each run.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import pytest_lsp
from pytest_lsp import ClientServerConfig

from server.agents.worker import REPORT_ENV

from .conftest import CONFIG, EXAMPLES, AsapClient, Doc, initialize, wait_for_log

TIMEOUT_S = 60.0  # the worker's first run imports the agents and the knowledge store
# the server's environment, completed by the `report` fixture before the server starts (pytest-lsp reads it then:
# the fixture that starts the server asks for no other)
ENV: dict[str, str] = {k: v for k, v in os.environ.items() if k != REPORT_ENV}
WORKER_CONFIG = ClientServerConfig(
    server_command=CONFIG.server_command, client_factory=CONFIG.client_factory, server_env=ENV
)


@pytest.fixture
def report(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "worker.json"
    ENV[REPORT_ENV] = str(path)
    try:
        yield path
    finally:
        ENV.pop(REPORT_ENV, None)


@pytest_lsp.fixture(config=WORKER_CONFIG)
async def client(lsp_client: AsapClient):
    await initialize(lsp_client)
    yield
    await lsp_client.shutdown_session()


async def test_the_agents_worker_loads_neither_the_language_server_nor_jax(
    report: Path, client: AsapClient, tmp_path: Path
) -> None:  # `report` first: its variable is in the environment the server starts with
    for f in ("common.yml", "llama2-7b-v5e-256.yml"):
        shutil.copy(EXAMPLES / f, tmp_path / f)
    Doc(client, tmp_path / "llama2-7b-v5e-256.yml").open()
    await wait_for_log(client, "agents, llama2-7b-v5e-256.yml (version 1)", timeout=TIMEOUT_S)
    rep = json.loads(report.read_text(encoding="utf-8"))
    modules = set(rep["modules"])
    assert rep["runs"] == 1 and "server.agents.coordinator" in modules  # the process that ran the agents
    assert rep["rss_mb"] > rep["start_mb"] > 0
    unwanted = ("pygls", "lsprotocol", "cattrs", "jax", "ray", "server.lsp", "server.editor")
    assert sorted(m for m in modules if m.startswith(unwanted)) == []
    assert rep["imported_mb"]  # the imports were metered, by package
