"""The e2e's Cloud Storage: a real GCS JSON-API server (`gcp-storage-emulator`) on 127.0.0.1 with a free port, in a
session of its own, holding one bucket laid out as MaxText writes a run with two profiled sessions (an older and a
newer one, tests/profiles/synth.py's synthetic 2-host profile). Prints "<port> <pid>" and exits, leaving the server
running: run.sh passes http://127.0.0.1:<port> to the language server as STORAGE_EMULATOR_HOST and stops the server
by its PID (the leader of its process group).

Usage: python tests/e2e/gcs_bucket.py <dir for the server's data and log> <bucket> <older ts> <newer ts>
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: support.*, profiles.*

from profiles.synth import write_profile
from support import gcs_server


def main(tmp: Path, bucket: str, older: str, newer: str) -> int:
    srv = gcs_server.start(tmp)
    try:
        fs = gcs_server.put_profile_run(srv, tmp / "src-older", bucket, older, seed=1900)  # makes the bucket
        for f in write_profile(tmp / "src-newer", "comm", hosts=2, step_jitter=0.02, seed=1901):
            fs.put_file(str(f), f"{bucket}/run/tensorboard/plugins/profile/{newer}/{f.name}")
    except BaseException:
        gcs_server.stop(srv.proc)
        raise
    print(srv.url.rsplit(":", 1)[1], srv.proc.pid, flush=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    sys.exit(main(Path(sys.argv[1]), *sys.argv[2:]))
