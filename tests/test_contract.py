"""The server-extension contract (server/editor/contract.py): the generated TypeScript is current, both sides use
it instead of spelling command ids, the server registers every command it declares, the extension contributes
every command the server invokes, and the settings the server reads are the ones the extension declares."""

from __future__ import annotations

import json
import re
from pathlib import Path

from server.editor import contract
from server.editor.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = json.loads((ROOT / "extension" / "package.json").read_text(encoding="utf-8"))
GENERATED = ROOT / "extension" / "src" / "contract.ts"


def test_generated_typescript_is_current():
    assert GENERATED.read_text(encoding="utf-8") == contract.typescript(), "run tools/write_generated.py"


def test_server_registers_every_server_command_and_no_other():
    from server.lsp import server

    assert set(server.protocol.fm.commands) == {c.value for c in contract.ServerCommand}


def test_extension_contributes_every_client_command():
    contributed = {c["command"] for c in PACKAGE["contributes"]["commands"]}
    assert {c.value for c in contract.ClientCommand} <= contributed


def test_no_command_id_is_spelt_outside_the_contract():
    ids = [c.value for c in (*contract.ServerCommand, *contract.ClientCommand)]
    pattern = re.compile("|".join(re.escape(f"'{i}'") + "|" + re.escape(f'"{i}"') for i in ids))
    spelt = []
    for f in [*(ROOT / "server").rglob("*.py"), *(ROOT / "extension" / "src").rglob("*.ts")]:
        if f in (ROOT / "server" / "editor" / "contract.py", GENERATED):
            continue
        spelt += [f"{f.relative_to(ROOT)}: {m.group(0)}" for m in pattern.finditer(f.read_text(encoding="utf-8"))]
    assert spelt == []


def test_command_error_carries_its_code():
    err = contract.CommandError(contract.ErrorCode.NO_PROFILE_LINKED, "no profile is linked to this config")
    response = err.to_response_error()
    assert response.code == contract.COMMAND_ERROR
    assert response.data == {"code": "noProfileLinked"} and response.message == "no profile is linked to this config"


def test_settings_are_the_ones_the_extension_declares():
    declared = {k.removeprefix("asap.") for k in PACKAGE["contributes"]["configuration"]["properties"]}
    # `trusted` is VS Code's workspace trust, which the extension sends with the settings (no asap.* setting)
    fields = {name: info for name, info in Settings.model_fields.items() if name != "trusted"}
    read = {info.alias for info in fields.values()}
    # asap.python starts the server, asap.trace.server is the client's protocol trace and asap.mcp.enabled offers the
    # MCP server to the editor (extension/src/mcp.ts): the extension's own
    assert read == declared - {"python", "trace.server", "mcp.enabled"}

    def same(v: object) -> object:  # "" / [] in package.json are the server's None / ()
        return (tuple(v) if isinstance(v, (list, tuple)) else v) or None

    defaults = Settings().model_dump()
    for name, info in fields.items():
        prop = PACKAGE["contributes"]["configuration"]["properties"][f"asap.{info.alias}"]
        assert same(prop.get("default")) == same(defaults[name]), name
        if "enum" in prop:
            assert set(prop["enum"]) == set(info.annotation.__args__), name  # Literal choices


def test_settings_that_reach_other_machines_are_set_by_the_user_only() -> None:
    """asap.store gets the password kept in SecretStorage (as PGPASSWORD) and asap.verifyCluster makes the server a
    Ray driver, which unpickles what the cluster sends: a workspace's committed .vscode/settings.json must not be able
    to point either at another server. Scope "machine": user settings only, not a workspace's, not synced."""
    props = PACKAGE["contributes"]["configuration"]["properties"]
    assert {k: props[k].get("scope") for k in ("asap.store", "asap.verifyCluster")} == {
        "asap.store": "machine",
        "asap.verifyCluster": "machine",
    }
