"""A real GCS JSON-API server for tests: `gcp-storage-emulator` started on 127.0.0.1 with a free port, its
objects on disk under a temp directory (so a test can truncate one behind the server's back), stopped by PID.
gcsfs is pointed at it with STORAGE_EMULATOR_HOST (gcsfs's own variable; it then connects anonymously)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class GcsServer:
    url: str
    data_dir: Path
    proc: subprocess.Popen[bytes]

    def object_file(self, bucket: str, key: str) -> Path:
        """Where the server keeps the object's bytes on disk."""
        return self.data_dir.joinpath(".cloudstorage", bucket, *key.split("/"))


def _emulator() -> list[str]:
    exe = shutil.which("gcp-storage-emulator", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-m", "gcp_storage_emulator"]


def start(tmp: Path, port: int | None = None) -> GcsServer:
    """gcp-storage-emulator on 127.0.0.1:`port` (a free one by default), in a process group of its own, its objects
    under `tmp`/gcs-data and its log in `tmp`/gcs-server.log; returns once it answers (killed if it never does)."""
    port = port or free_port()
    data = tmp / "gcs-data"
    data.mkdir(parents=True, exist_ok=True)
    with (tmp / "gcs-server.log").open("wb") as log:
        proc = subprocess.Popen(
            [*_emulator(), "--data-dir", str(data), "start", "--host", "127.0.0.1", "--port", str(port)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:  # wait until it answers (polling a readiness condition, not a fixed sleep)
            if proc.poll() is not None:
                raise RuntimeError(f"gcp-storage-emulator exited: {(tmp / 'gcs-server.log').read_text()[-2000:]}")
            try:
                urllib.request.urlopen(f"{url}/storage/v1/b?project=test", timeout=1).read()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
    except BaseException:
        stop(proc)
        raise
    return GcsServer(url, data, proc)


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop the server by its PID (the leader of its process group): SIGTERM, then SIGKILL after 10 s."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@contextmanager
def gcs_server(tmp: Path, port: int | None = None) -> Iterator[GcsServer]:
    srv = start(tmp, port)
    try:
        yield srv
    finally:
        stop(srv.proc)


REFUSAL = (
    "ci-reader@example-project.iam.gserviceaccount.com does not have storage.objects.list access to the Google "
    "Cloud Storage bucket. Permission 'storage.objects.list' denied on resource (or it may not exist)."
)


@contextmanager
def refusing_server() -> Iterator[str]:
    """An HTTP server on 127.0.0.1 answering every request as GCS answers a principal without access (403 and
    GCS's JSON error body, which names the principal): the emulator does not enforce IAM. Yields its URL."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    body = json.dumps({"error": {"code": 403, "message": REFUSAL, "errors": [{"reason": "forbidden"}]}}).encode()

    class Refuse(BaseHTTPRequestHandler):
        def _refuse(self) -> None:
            self.send_response(403)
            self.send_header("Content-Type", "application/json; charset=UTF-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _refuse

        def log_message(self, *args: object) -> None:
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()
        t.join()


def put_profile_run(srv: GcsServer, src: Path, bucket: str, ts: str, seed: int) -> Any:
    """Bucket `bucket` holding a synthetic 2-host profile (tests/profiles/synth.py, written under `src`) as MaxText
    lays out a run: gs://<bucket>/run/tensorboard/plugins/profile/<ts>/*.xplane.pb. Returns the gcsfs file system."""
    from gcsfs.core import GCSFileSystem
    from profiles.synth import write_profile

    fs = GCSFileSystem(token="anon", skip_instance_cache=True, use_listings_cache=False, endpoint_url=srv.url)
    fs.mkdir(bucket)
    for f in write_profile(src, "comm", hosts=2, step_jitter=0.02, seed=seed):
        fs.put_file(str(f), f"{bucket}/run/tensorboard/plugins/profile/{ts}/{f.name}")
    return fs
