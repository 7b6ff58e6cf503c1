"""The e2e's Cloud Storage: a real GCS JSON-API server (`gcp-storage-emulator`) on 127.0.0.1 with a free port, in a
session of its own, holding one bucket laid out as MaxText writes a run with two profiled sessions (an older and a
newer one, tests/profiles/synth.py's synthetic 2-host profile). Prints "<port> <pid>" and exits, leaving the server
running: run.sh passes http://127.0.0.1:<port> to the language server as STORAGE_EMULATOR_HOST and stops the server
by its PID (the leader of its process group).

Usage: python tests/e2e/gcs_bucket.py <dir for the server's data and log> <bucket> <older ts> <newer ts>
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: support.*, profiles.*

from profiles.synth import write_profile
from support.gcs_server import GcsServer, _emulator, free_port, put_profile_run

READY_S = 30.0


def main(tmp: Path, bucket: str, older: str, newer: str) -> int:
    data = tmp / "gcs-data"
    data.mkdir(parents=True, exist_ok=True)
    port = free_port()
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
        deadline = time.monotonic() + READY_S
        while True:  # until it answers (a readiness condition, not a fixed sleep)
            if proc.poll() is not None:
                raise RuntimeError(f"gcp-storage-emulator exited: {(tmp / 'gcs-server.log').read_text()[-2000:]}")
            try:
                urllib.request.urlopen(f"{url}/storage/v1/b?project=e2e", timeout=1).read()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        srv = GcsServer(url, data, proc)
        fs = put_profile_run(srv, tmp / "src-older", bucket, older, seed=1900)  # makes the bucket
        for f in write_profile(tmp / "src-newer", "comm", hosts=2, step_jitter=0.02, seed=1901):
            fs.put_file(str(f), f"{bucket}/run/tensorboard/plugins/profile/{newer}/{f.name}")
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    print(port, proc.pid, flush=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    sys.exit(main(Path(sys.argv[1]), *sys.argv[2:]))
