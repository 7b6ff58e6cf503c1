"""The Ray cluster's head node lost while ASAP: Verify's compiles run on it (asap.verifyCluster), over stdio: Ray ends
its driver's process once the head has been unreachable for a while (60 s by default; 5 s here through Ray's own
RAY_gcs_rpc_server_reconnect_timeout_s). The driver is a child process of the language server, so the user reads
what happened and the server goes on answering. A cluster of its own (tests/support/ray_cluster.py): its head is
killed."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig
from support import fake_maxtext
from support.ray_cluster import needs_ray, ray_cluster, until_async

from .conftest import CONFIG, AsapClient, wait_for_log, wait_for_progress
from .test_verify_advice import lens_titles, messages, verify
from .test_verify_on_ray_lsp import TIMEOUT_S, pids, start

pytestmark = needs_ray


@pytest.fixture
def maxtext(tmp_path: Path) -> Path:
    return fake_maxtext.write(tmp_path / "maxtext-env")


# Ray ends a driver's process once the cluster's head has been unreachable this long (60 s by default): 5 s here
LOST_HEAD_CONFIG = ClientServerConfig(
    server_command=CONFIG.server_command,
    client_factory=CONFIG.client_factory,
    server_env={**os.environ, "RAY_gcs_rpc_server_reconnect_timeout_s": "5"},
)


@pytest_lsp.fixture(config=LOST_HEAD_CONFIG)
async def lost_head_client(lsp_client: AsapClient):
    yield
    if lsp_client.capabilities is not None:
        await lsp_client.shutdown_session()


async def test_a_head_node_lost_mid_verify_is_an_error_message_and_the_server_goes_on(
    lost_head_client: AsapClient, tmp_path: Path, maxtext: Path
) -> None:
    """The cluster's head node dies while Verify's compiles run on it: Ray ends its driver's process, which is a
    child of the language server (not the server itself): the user reads what happened, the server answers."""
    client = lost_head_client
    nodes: list[subprocess.Popen[bytes]] = []
    with ray_cluster(nodes) as address:
        (maxtext.parent / "hold").touch()  # every compile waits
        doc = await start(client, tmp_path, maxtext, address)
        mark = await verify(client, doc)
        await wait_for_progress(
            client, lambda _t, rs: any(m.startswith("compiling on the Ray cluster: 0 of") for m in messages(rs))
        )
        await until_async(lambda: len(pids(maxtext)) >= 1, "a compile running on the cluster")
        os.killpg(nodes[0].pid, signal.SIGKILL)  # the head node: its GCS server, its raylet, its `ray start`
        await wait_for_log(client, "verification of llama.yml not run: the Ray driver stopped", start=mark,
                           timeout=TIMEOUT_S)  # fmt: skip
        (maxtext.parent / "hold").unlink()
        os.killpg(nodes[1].pid, signal.SIGKILL)  # the worker node, headless (a SIGTERM would wait for its head)
    shown = client.messages[-1]
    assert shown.type == lsp.MessageType.Error
    assert re.fullmatch(
        rf"ASAP: Verify on the Ray cluster: the Ray driver stopped \(exit -?\d+\) before the verification ended: "
        rf"is the cluster at {re.escape(address)} still up\?",
        shown.message,
    ), shown.message
    assert "Verify" in await lens_titles(client, doc)  # the server answers, and offers Verify again
    doc.close()
