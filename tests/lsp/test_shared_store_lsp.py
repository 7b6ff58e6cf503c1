"""The editor on the team's shared store, over stdio: the language server started as the extension starts it with
`asap.store` set (extension/src/store.ts): ASAP_STORE a postgresql:// URL WITHOUT a password, the password (from VS
Code's secret storage) in PGPASSWORD. The background analysis of an opened config lands in a real PostgreSQL
(tests/support/postgres.py: initdb in a temp dir, 127.0.0.1, scram password, stopped by PID) with the writer's user,
and no log line the client receives holds the password."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator

import psycopg
import pytest
import pytest_lsp
from pytest_lsp import ClientServerConfig

from server.common import pg_store
from tests.support import postgres, servers

from .conftest import CONFIG, EXAMPLES, AsapClient, Doc, initialize, wait_for_log

TIMEOUT_S = 60.0
# the server's environment, completed by the `pg` fixture before the server starts (pytest-lsp reads it then)
ENV: dict[str, str] = {k: v for k, v in os.environ.items() if k not in (pg_store.ENV, "PGPASSWORD")}
STORE_CONFIG = ClientServerConfig(
    server_command=CONFIG.server_command, client_factory=CONFIG.client_factory, server_env=ENV
)
# a client that sends the setting and no environment (Neovim, Emacs...): only the password is in the environment
SETTING_ENV: dict[str, str] = dict(ENV)
SETTING_CONFIG = ClientServerConfig(
    server_command=CONFIG.server_command, client_factory=CONFIG.client_factory, server_env=SETTING_ENV
)


@pytest.fixture(scope="module")
def pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[postgres.Postgres]:
    try:
        server = postgres.start(tmp_path_factory.mktemp("pg-lsp"), password="team-Secret-42")
    except postgres.Unavailable as e:
        servers.unavailable(str(e))
    name = f"t_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server.url(), autocommit=True) as c:
        c.execute(f"CREATE DATABASE {name}")
    ENV[pg_store.ENV] = f"postgresql://{postgres.USER}@127.0.0.1:{server.port}/{name}"  # no password in the URL
    ENV["PGPASSWORD"] = server.password  # as the extension passes the one from SecretStorage
    SETTING_ENV["PGPASSWORD"] = server.password
    try:
        yield server
    finally:
        server.stop()
        assert server.pid() is None


@pytest_lsp.fixture(config=STORE_CONFIG)
async def client(lsp_client: AsapClient, pg: postgres.Postgres):
    await initialize(lsp_client)
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=SETTING_CONFIG)
async def setting_client(lsp_client: AsapClient, pg: postgres.Postgres):
    await initialize(lsp_client, {"settings": {"store": ENV[pg_store.ENV]}})
    yield
    await lsp_client.shutdown_session()


@pytest.mark.asyncio
async def test_the_editors_analysis_goes_to_the_shared_store_with_the_password_from_pgpassword(
    client: AsapClient, pg: postgres.Postgres, tmp_path
) -> None:
    cfg = tmp_path / "llama.yml"
    shutil.copy(EXAMPLES / "llama3-8b-v6e-16.yml", cfg)
    cfg.write_text(cfg.read_text() + f"\n# run {uuid.uuid4().hex}\n")  # not an analysis another test cached
    doc = Doc(client, cfg).open()
    await wait_for_log(client, "agents, llama.yml (version 1): 3 proposal(s)", timeout=TIMEOUT_S)
    with psycopg.connect(f"{ENV[pg_store.ENV]}", password=pg.password) as c:
        rows = c.execute("SELECT user_name, config_path FROM experiments").fetchall()
    assert len(rows) == 1 and rows[0][0] == pg_store.user(), rows
    assert rows[0][1].endswith("llama.yml"), rows
    assert not any(pg.password in m.message for m in client.log_messages)
    doc.close()


@pytest.mark.asyncio
async def test_the_store_setting_alone_reaches_the_shared_store(
    setting_client: AsapClient, pg: postgres.Postgres, tmp_path
) -> None:
    """A client that sends `asap.store` as a setting, with no ASAP_STORE in the server's environment: the
    analysis lands in PostgreSQL as well (the server points itself, and the agents' worker, at the setting)."""
    assert pg_store.ENV not in SETTING_ENV
    cfg = tmp_path / "setting.yml"
    shutil.copy(EXAMPLES / "llama3-8b-v6e-16.yml", cfg)
    cfg.write_text(cfg.read_text() + f"\n# run {uuid.uuid4().hex}\n")
    doc = Doc(setting_client, cfg).open()
    await wait_for_log(setting_client, "agents, setting.yml (version 1): 3 proposal(s)", timeout=TIMEOUT_S)
    with psycopg.connect(f"{ENV[pg_store.ENV]}", password=pg.password) as c:
        rows = c.execute("SELECT config_path FROM experiments WHERE config_path LIKE '%setting.yml'").fetchall()
    assert len(rows) == 1, rows
    doc.close()
