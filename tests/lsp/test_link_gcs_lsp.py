"""ASAP: Link Profile with a gs:// URL, over stdio: the server (its environment pointing gcsfs at a
gcp-storage-emulator started here on 127.0.0.1, stopped by PID) lists the newest run under the URL, stores the URL
as it is in the workspace's links file, then downloads and summarises the run at the link; a missing bucket or a
URL without a profile is refused with Cloud Storage's reason in ASAP's words (badProfile), and the links file is
left as it was."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from support.gcs_server import GcsServer, free_port, gcs_server, put_profile_run

from .conftest import AsapClient, Doc, by_code, gcs_config, has
from .test_profile import link, open_in_workspace

SUMMARY = "ASAP200"
BUCKET = "lsp-link-runs"
NEW = "2026_12_01_10_00_00"
MESH = "model_name: llama2-7b\ncompile_topology: v5e-4\nper_device_batch_size: 1\nici_fsdp_parallelism: 4\n"
CONVERSION_S = 90.0
PORT = free_port()  # known before the language server starts: its environment points gcsfs here
GCS_CONFIG = gcs_config(PORT)


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GcsServer]:
    tmp = tmp_path_factory.mktemp("gcs-link")
    with gcs_server(tmp, PORT) as srv:
        fs = put_profile_run(srv, tmp / "src", BUCKET, NEW, seed=190019)
        fs.pipe_file(f"{BUCKET}/checkpoints/README", b"not a profile")
        yield srv


@pytest_lsp.fixture(config=GCS_CONFIG)
async def client(lsp_client: AsapClient, emulator: GcsServer):
    yield
    if lsp_client.capabilities is not None:
        await lsp_client.shutdown_session()


@pytest.mark.asyncio
async def test_link_a_gs_url_stores_it_and_summarises_the_newest_run(client: AsapClient, tmp_path: Path) -> None:
    await open_in_workspace(client, tmp_path)
    cfg = tmp_path / "train.yml"
    cfg.write_text(MESH, encoding="utf-8")
    doc = Doc(client, cfg).open()
    await doc.diagnostics(version=1)
    url = f"gs://{BUCKET}/run"
    doc.mark = len(client.publishes)
    reply = await link(client, doc.uri, f" {url} ")
    assert reply == {"links_file": str(tmp_path / ".asap" / "links.json"), "profile": url}
    links = json.loads((tmp_path / ".asap" / "links.json").read_text())
    assert links["links"] == {"train.yml": url}  # the URL as it is, not a path made of it
    diags = await doc.diagnostics(version=1, where=has(SUMMARY), timeout=CONVERSION_S)
    assert by_code(diags, SUMMARY).message.startswith("Profile: communication-bound")
    begins = [
        r.message or ""
        for reports in client.progress_reports.values()
        for r in reports
        if isinstance(r, lsp.WorkDoneProgressBegin) and r.title == "ASAP: reading profile"
    ]
    assert any(m.startswith(f"{url}/tensorboard/plugins/profile/{NEW}") for m in begins), begins
    doc.close()


@pytest.mark.asyncio
async def test_a_missing_bucket_or_a_url_without_a_profile_is_refused(client: AsapClient, tmp_path: Path) -> None:
    await open_in_workspace(client, tmp_path)
    cfg = tmp_path / "train.yml"
    cfg.write_text(MESH, encoding="utf-8")
    doc = Doc(client, cfg).open()
    await doc.diagnostics(version=1)
    with pytest.raises(JsonRpcException) as refused:
        await link(client, doc.uri, "gs://no-such-bucket/run")
    assert str(refused.value) == "gs://no-such-bucket/run: bucket 'no-such-bucket' not found"
    assert refused.value.data == {"code": "badProfile"}
    with pytest.raises(JsonRpcException) as refused:
        await link(client, doc.uri, f"gs://{BUCKET}/checkpoints")
    assert str(refused.value).startswith(f"no profile under gs://{BUCKET}/checkpoints: expected *.xplane.pb objects")
    assert not (tmp_path / ".asap" / "links.json").exists()  # nothing stored
    assert not any("Traceback" in m.message for m in client.log_messages)
    doc.close()
