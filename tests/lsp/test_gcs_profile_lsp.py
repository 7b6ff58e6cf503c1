"""A gs:// profile link in the editor, over stdio: the server (its environment pointing gcsfs at a
gcp-storage-emulator started here on 127.0.0.1, stopped by PID) downloads the newest run under `$/progress`,
converts it and shows the summary at the link; a missing bucket is a located warning at the link."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from support.gcs_server import GcsServer, free_port, gcs_server, put_profile_run

from .conftest import AsapClient, Doc, by_code, gcs_config, has, initialize

SUMMARY = "ASAP200"
UNREADABLE = "ASAP203"
BUCKET = "lsp-team-runs"
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
        yield srv


@pytest_lsp.fixture(config=GCS_CONFIG)
async def client(lsp_client: AsapClient, emulator: GcsServer):
    await initialize(lsp_client)
    yield
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
