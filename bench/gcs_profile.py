"""A gs:// profile, cold open vs warm open (issue 19, item 1), from a local GCS-API server.

    .venv/bin/python bench/gcs_profile.py [--mb 100] [--hosts 4]

Starts gcp-storage-emulator on 127.0.0.1 (objects on disk in a temp directory; stopped by PID at the end), uploads
a synthetic MaxText-shaped profile of about --mb MB (tests/profiles/synth.py, --hosts `.xplane.pb` files) to
`gs://bench/<run>/tensorboard/plugins/profile/<ts>/`, and opens it as ASAP does (profile_convert.find_profile +
load_tools) with an empty cache directory:
  - cold: list the newest run, download every file, convert through XProf;
  - warm: a new listing (the listing memo is cleared) and the same call: nothing is downloaded, the converted
    tools come from ASAP's cache.
The download alone (cold) and a warm download check are printed too. The emulator is a local Python server, so the
cold download time is this machine's loopback and the emulator's speed, not Google's. A benchmark: exits 0.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from profiles.synth import write_profile  # noqa: E402
from support.gcs_server import gcs_server  # noqa: E402

BYTES_PER_SCALE = 6_800  # synth.write_profile grows by about this per `scale` unit and host (5 steps)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=100.0, help="profile size in MB (all hosts)")
    ap.add_argument("--hosts", type=int, default=4)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="asap-bench-gcs-"))
    os.environ["ASAP_CACHE_DIR"] = str(tmp / "cache")
    from server.profiles import gcs, profile_convert

    scale = max(1, int(args.mb * 1e6 / args.hosts / BYTES_PER_SCALE))
    t = time.perf_counter()
    files = write_profile(tmp / "src", "compute", hosts=args.hosts, scale=scale)
    size = sum(f.stat().st_size for f in files)
    print(f"synthetic profile: {len(files)} files, {size / 1e6:.1f} MB (written in {time.perf_counter() - t:.1f} s)")
    with gcs_server(tmp) as srv:
        os.environ[gcs.EMULATOR_ENV] = srv.url
        from gcsfs.core import GCSFileSystem

        fs = GCSFileSystem(token="anon", skip_instance_cache=True, use_listings_cache=False)
        fs.mkdir("bench")
        ts = "2026_12_01_12_00_00"
        for f in files:
            fs.put_file(str(f), f"bench/run/tensorboard/plugins/profile/{ts}/{f.name}")
        url = "gs://bench/run"

        t = time.perf_counter()
        pf = profile_convert.find_profile(url)
        assert pf.remote is not None
        listed = time.perf_counter() - t
        t = time.perf_counter()
        got = gcs.download(pf.remote)
        download = time.perf_counter() - t
        t = time.perf_counter()
        _, cached = profile_convert.load_tools(pf)
        convert = time.perf_counter() - t
        cold = listed + download + convert
        print(
            f"cold open: {cold:.2f} s (list {listed * 1000:.0f} ms, download {got / 1e6:.1f} MB in {download:.2f} s "
            f"= {got / 1e6 / max(download, 1e-9):.0f} MB/s, XProf conversion {convert:.2f} s, from cache: {cached})"
        )

        gcs.forget_listings()
        profile_convert._MEMO.clear()  # as a new process would start: only the on-disk caches
        t = time.perf_counter()
        pf = profile_convert.find_profile(url)
        assert pf.remote is not None
        again = gcs.download(pf.remote)
        check = time.perf_counter() - t
        _, cached = profile_convert.load_tools(pf)
        warm = time.perf_counter() - t
        print(
            f"warm open: {warm:.3f} s (list + generation check {check * 1000:.0f} ms, downloaded {again} bytes, "
            f"from cache: {cached})"
        )
        print(
            f"cold / warm: x{cold / warm:.0f}; download alone: cold {download:.2f} s vs warm check {check:.3f} s "
            f"(x{download / check:.0f})"
        )


if __name__ == "__main__":
    main()
