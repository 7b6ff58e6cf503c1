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


@contextmanager
def gcs_server(tmp: Path) -> Iterator[GcsServer]:
    port = free_port()
    data = tmp / "gcs-data"
    data.mkdir(parents=True, exist_ok=True)
    log = (tmp / "gcs-server.log").open("wb")
    proc = subprocess.Popen(
        [*_emulator(), "--data-dir", str(data), "start", "--host", "127.0.0.1", "--port", str(port)],
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
        yield GcsServer(url, data, proc)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.close()
