"""The `asap.store` setting over stdio: the server reads it as it reads the other asap.* settings (the extension
also hands it to the server process as ASAP_STORE, extension/src/store.ts) and never writes its password to the
client's log: not in the settings it logs, not in the warning about a value of the wrong type."""

from __future__ import annotations

from lsprotocol import types as lsp

from server.editor.settings import Settings

from .conftest import AsapClient, initialize, wait_for_log

PASSWORD = "s3cret-Pw9"
URL = f"postgresql://asap:{PASSWORD}@db.team.example:5432/asap"


def test_the_settings_never_show_the_store_password() -> None:
    s = Settings.from_client({"store": f" {URL} ", "verifyCluster": " head:6379 "})
    assert s.store == URL and s.verify_cluster == "head:6379"
    assert "store='postgresql://asap:***@db.team.example:5432/asap'" in repr(s)
    assert PASSWORD not in repr(s) and PASSWORD not in str(s)
    assert Settings.from_client({"store": "", "verifyCluster": "  "}) == Settings()


async def test_the_server_logs_the_store_setting_without_its_password(fresh: AsapClient) -> None:
    fresh.set_configuration({"store": URL, "verifyCluster": "127.0.0.1:6379"}, section="asap")
    await initialize(fresh, {"settings": {"store": URL}})
    logged = await wait_for_log(fresh, "settings: Settings(")
    assert "store='postgresql://asap:***@db.team.example:5432/asap'" in logged
    assert "verify_cluster='127.0.0.1:6379'" in logged
    mark = len(fresh.log_messages)
    fresh.workspace_did_change_configuration(
        lsp.DidChangeConfigurationParams(settings={"asap": {"store": [URL], "verifyCluster": 6379}})
    )
    await wait_for_log(fresh, "asap.verifyCluster: 6379 is not a valid value", start=mark)
    warned = await wait_for_log(fresh, "asap.store: ", start=mark)
    assert (
        warned
        == "asap.store: ['postgresql://asap:***@db.team.example:5432/asap'] is not a valid value; using the default"
    )
    assert not any(PASSWORD in m.message for m in fresh.log_messages)
