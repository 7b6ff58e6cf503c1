"""A gs:// profile link in the editor, over stdio: the server (its environment pointing gcsfs at a
gcp-storage-emulator started here on 127.0.0.1, stopped by PID) downloads the newest run under `$/progress`,
converts it and shows the summary at the link; a missing bucket is a located warning at the link. ASAP: Link Profile
with a gs:// URL lists the newest run under it, stores the URL as it is in the workspace's links file, then
downloads and summarises the run; a missing bucket or a URL without a profile is refused with Cloud Storage's reason
in ASAP's words (badProfile), and the links file is left as it was."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from support.gcs_server import GcsServer, free_port, gcs_server, put_profile_run

from .conftest import AsapClient, Doc, by_code, gcs_config, has, initialize
from .test_profile import link, open_in_workspace

SUMMARY = "ASAP200"
UNREADABLE = "ASAP203"
BUCKET = "lsp-team-runs"  # linked by a comment
LINKED = "lsp-link-runs"  # linked with ASAP: Link Profile (its own run: its download is not the other's cache)
NEW = "2026_12_01_09_30_00"
MESH = "model_name: llama2-7b\ncompile_topology: v5e-4\nper_device_batch_size: 1\nici_fsdp_parallelism: 4\n"
CONVERSION_S = 90.0
PORT = free_port()  # known before the language server starts: its environment points gcsfs here
GCS_CONFIG = gcs_config(PORT)


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GcsServer]:
    tmp = tmp_path_factory.mktemp("gcs-lsp")
    with gcs_server(tmp, PORT) as srv:
        put_profile_run(srv, tmp / "src", BUCKET, NEW, seed=190001)
        fs = put_profile_run(srv, tmp / "linked", LINKED, NEW, seed=190019)
        fs.pipe_file(f"{LINKED}/checkpoints/README", b"not a profile")
        yield srv


@pytest_lsp.fixture(config=GCS_CONFIG)
async def client(lsp_client: AsapClient, emulator: GcsServer):
    await initialize(lsp_client)
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=GCS_CONFIG)
async def bare(lsp_client: AsapClient, emulator: GcsServer):
    """A server the test initializes itself (open_in_workspace, with a workspace folder for the links file)."""
    yield
    if lsp_client.capabilities is not None:
        await lsp_client.shutdown_session()


@pytest.mark.asyncio
async def test_gs_link_downloads_with_progress_and_summarises(client: AsapClient, tmp_path: Path) -> None:
    url = f"gs://{BUCKET}/run"
    cfg = tmp_path / "linked.yml"
    cfg.write_text(f"# asap: profile={url}\n{MESH}", encoding="utf-8")
    doc = Doc(client, cfg).open()
    diags = await doc.diagnostics(
        version=1, where=lambda p: has(SUMMARY)(p) or has(UNREADABLE)(p), timeout=CONVERSION_S
    )
    assert has(SUMMARY)(diags), [d.message for d in diags]
    summary = by_code(diags, SUMMARY)
    col = len("# asap: profile=")
    assert summary.range == lsp.Range(lsp.Position(0, col), lsp.Position(0, col + len(url)))
    assert summary.message.startswith("Profile: communication-bound"), summary.message

    run_url = f"{url}/tensorboard/plugins/profile/{NEW}"
    messages = [
        r.message or ""
        for reports in client.progress_reports.values()
        for r in reports
        if isinstance(r, (lsp.WorkDoneProgressBegin, lsp.WorkDoneProgressReport))
    ]
    assert any(m.startswith(run_url) for m in messages), messages  # the begin names the gs:// run
    assert any(m.startswith(f"downloading {run_url}: file 1/2") for m in messages), messages
    assert any(m.startswith("downloaded 2 file(s)") for m in messages), messages
    doc.close()


@pytest.mark.asyncio
async def test_missing_bucket_is_a_located_warning(client: AsapClient, tmp_path: Path) -> None:
    cfg = tmp_path / "missing.yml"
    cfg.write_text(f"# asap: profile=gs://no-such-bucket/run\n{MESH}", encoding="utf-8")
    doc = Doc(client, cfg).open()
    diags = await doc.diagnostics(version=1, where=has(UNREADABLE), timeout=CONVERSION_S)
    d = by_code(diags, UNREADABLE)
    assert d.severity == lsp.DiagnosticSeverity.Warning
    assert "bucket 'no-such-bucket' not found" in d.message, d.message
    assert d.range.start == lsp.Position(0, len("# asap: profile="))
    doc.close()


@pytest.mark.asyncio
async def test_link_a_gs_url_stores_it_and_summarises_the_newest_run(bare: AsapClient, tmp_path: Path) -> None:
    await open_in_workspace(bare, tmp_path)
    cfg = tmp_path / "train.yml"
    cfg.write_text(MESH, encoding="utf-8")
    doc = Doc(bare, cfg).open()
    await doc.diagnostics(version=1)
    url = f"gs://{LINKED}/run"
    doc.mark = len(bare.publishes)
    reply = await link(bare, doc.uri, f" {url} ")
    assert reply == {"links_file": str(tmp_path / ".asap" / "links.json"), "profile": url}
    links = json.loads((tmp_path / ".asap" / "links.json").read_text())
    assert links["links"] == {"train.yml": url}  # the URL as it is, not a path made of it
    diags = await doc.diagnostics(version=1, where=has(SUMMARY), timeout=CONVERSION_S)
    assert by_code(diags, SUMMARY).message.startswith("Profile: communication-bound")
    begins = [
        r.message or ""
        for reports in bare.progress_reports.values()
        for r in reports
        if isinstance(r, lsp.WorkDoneProgressBegin) and r.title == "ASAP: reading profile"
    ]
    assert any(m.startswith(f"{url}/tensorboard/plugins/profile/{NEW}") for m in begins), begins
    doc.close()


@pytest.mark.asyncio
async def test_a_missing_bucket_or_a_url_without_a_profile_is_refused(bare: AsapClient, tmp_path: Path) -> None:
    await open_in_workspace(bare, tmp_path)
    cfg = tmp_path / "train.yml"
    cfg.write_text(MESH, encoding="utf-8")
    doc = Doc(bare, cfg).open()
    await doc.diagnostics(version=1)
    with pytest.raises(JsonRpcException) as refused:
        await link(bare, doc.uri, "gs://no-such-bucket/run")
    assert str(refused.value) == "gs://no-such-bucket/run: bucket 'no-such-bucket' not found"
    assert refused.value.data == {"code": "badProfile"}
    with pytest.raises(JsonRpcException) as refused:
        await link(bare, doc.uri, f"gs://{LINKED}/checkpoints")
    assert str(refused.value).startswith(f"no profile under gs://{LINKED}/checkpoints: expected *.xplane.pb objects")
    assert not (tmp_path / ".asap" / "links.json").exists()  # nothing stored
    assert not any("Traceback" in m.message for m in bare.log_messages)
    doc.close()
