"""A sweep of tiny compiles, local and sequential vs on a Ray cluster (issue 19, item 3; server/compile/ray_sweep.py).

    .venv/bin/python bench/ray_sweep.py [--address HOST:PORT] [--n 6]

The config is tests/support/configs.py's SMALL (a 2-layer, 20M-parameter llama on v5e-16) under N meshes; each is
compiled by ASAP's reference program (libtpu, no TPU):
  - local: verify.verify(use_cache=False) one after the other, as `asap verify` does today;
  - Ray: the same N jobs as tasks (num_cpus=1 each) on the cluster at --address (default: a head node and one worker
    node of one CPU each, started here on 127.0.0.1 and stopped at the end), each kept in a fresh store as it
    returns; then every verdict is read back with verify.verify(cached_only=True), as a local verify would.
With --cli, also `asap verify A.yml B.yml --proposals --json` as a user runs it (two SMALL variants: the second with
base_mlp_dim 2048, so its compiles are its own; each config's current mesh and its proposals), locally (one
config after the other) and with `--ray ADDRESS` (one sweep: every (config, mesh) a task at once), each with a fresh
cache: wall times, and whether both give every target the same verdict and memory per chip.
Printed: wall times and their ratio; the per-task overhead of the cluster, (wall x slots - sum of the tasks' own
compile times) / N, i.e. slot time not spent compiling (scheduling, the worker's start and imports, shipping the
package, the result's return); and whether every verdict read back equals the local compile's (memory per chip,
its components, the collectives, the verdict). A benchmark: always exits 0.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from support.configs import SMALL  # noqa: E402

from server.common import store  # noqa: E402
from server.compile import ray_sweep  # noqa: E402
from server.compile import verify as verify_mod  # noqa: E402

MESHES = [  # each placeable on v5e-16's 4x4 chips (degrees 1, 4 or 16 on whole physical axes)
    {"ici_fsdp_parallelism": 16},
    {"ici_fsdp_parallelism": 4, "ici_tensor_parallelism": 4},
    {"ici_data_parallelism": 4, "ici_fsdp_parallelism": 4},
    {"ici_data_parallelism": 16, "ici_fsdp_parallelism": 1},
    {"ici_data_parallelism": 4, "ici_fsdp_parallelism": 1, "ici_tensor_parallelism": 4},
    {"ici_fsdp_parallelism": 4, "ici_context_parallelism": 4},
    {"ici_fsdp_parallelism": 1, "ici_tensor_parallelism": 4, "ici_context_parallelism": 4},
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_cluster(tmp: Path) -> tuple[str, list[subprocess.Popen[bytes]]]:
    ray = str(Path(sys.executable).parent / "ray")
    port = _free_port()
    common = ["--num-cpus", "1", "--node-ip-address", "127.0.0.1", "--temp-dir", str(tmp / "r"), "--block"]
    procs = []
    for i, args in enumerate(
        [["--head", "--port", str(port), "--include-dashboard=false"], ["--address", f"127.0.0.1:{port}"]]
    ):
        log = tmp / f"node{i}.log"
        p = subprocess.Popen(
            [ray, "start", *args, *common],
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"},
            start_new_session=True,
        )
        procs.append(p)
        end = time.monotonic() + 120
        while b"block forever" not in log.read_bytes():
            if p.poll() is not None or time.monotonic() > end:
                raise SystemExit(f"ray start failed: {log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.1)
    return f"127.0.0.1:{port}", procs


def _figures(r: verify_mod.VerifyResult) -> object:
    c = r.compiled
    return (str(r.status), c and (c.memory_per_chip_bytes, c.components, c.collectives, c.fits, c.layers_compiled))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--address", help="a running cluster (default: start a head and a worker node here)")
    ap.add_argument("--n", type=int, default=6, help=f"compiles in the sweep (at most {len(MESHES)})")
    ap.add_argument("--slots", type=int, default=2, help="CPUs of the cluster, for the overhead (default 2)")
    ap.add_argument("--cli", action="store_true", help="also time `asap verify A B --proposals` locally and on Ray")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="raybench", dir="/tmp"))
    os.environ["ASAP_CACHE_DIR"] = str(tmp / "cache")
    cfg = tmp / "small.yml"
    cfg.write_text(SMALL)
    meshes = MESHES[: args.n]

    t0 = time.monotonic()
    local = [verify_mod.verify(cfg, m, use_cache=False) for m in meshes]
    local_s = time.monotonic() - t0
    print(f"local, sequential: {len(meshes)} compiles in {local_s:.1f} s wall "
          f"(compiler's own time {sum(r.compiled.compile_s for r in local if r.compiled):.1f} s)")  # fmt: skip
    for m, r in zip(meshes, local, strict=True):
        print(f"  {m}: {r.status} {r.message[:90]}")

    procs: list[subprocess.Popen[bytes]] = []
    address = args.address
    if address is None:
        address, procs = _start_cluster(tmp)
    try:
        with ray_sweep.connected(address) as ray:
            db = store.connect()
            units = [u for i, m in enumerate(meshes) if (u := ray_sweep.plan(cfg, f"mesh {i}", m, None, 4, 900, None))]
            warm = ray_sweep.SweepReport()
            t0 = time.monotonic()
            ray_sweep.run_units(ray, units[:1], store.connect(tmp / "warm.db"), warm)
            warm_s = time.monotonic() - t0
            rep = ray_sweep.SweepReport()
            t0 = time.monotonic()
            ray_sweep.run_units(ray, units, db, rep, progress=lambda msg, f: print(f"  {msg}"))
            ray_s = time.monotonic() - t0
        cli = _cli_sweep(tmp, address) if args.cli else None
    finally:
        for p in procs:
            os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            p.wait()
    remote = [verify_mod.verify(cfg, m, cached_only=True) for m in meshes]
    same = [_figures(a) == _figures(b) for a, b in zip(local, remote, strict=True)]
    overhead = (ray_s * args.slots - sum(rep.task_s)) / max(1, len(rep.task_s))
    print(f"first task on a fresh cluster (worker start, package shipped): {warm_s:.1f} s wall")
    print(f"Ray, {args.slots} slots: {len(units)} compiles in {ray_s:.1f} s wall; tasks' own time "
          f"{sum(rep.task_s):.1f} s; failed {len(rep.failed)}")  # fmt: skip
    print(f"ratio local / Ray (wall): {local_s / ray_s:.2f}x")
    print(f"cluster overhead per task (slot time not compiling): {overhead:.2f} s")
    print(f"verdicts read back from the cache equal the local compiles: {sum(same)} of {len(same)}"
          f"; all cached: {all(r.cached for r in remote)}")  # fmt: skip

    if cli is not None:
        print(cli)


def _cli_sweep(tmp: Path, address: str) -> str:
    """`asap verify A B --proposals --json`, locally then on the cluster, each with a fresh cache."""
    import json

    a, b = tmp / "a.yml", tmp / "b.yml"
    a.write_text(SMALL)
    b.write_text(SMALL.replace("base_mlp_dim: 1024", "base_mlp_dim: 2048"))
    out = []
    figures = []
    for name, extra in (("local, one config after the other", []), ("Ray, one sweep", ["--ray", address])):
        env = {**os.environ, "ASAP_CACHE_DIR": str(tmp / f"cli-cache-{len(out)}"), "RAY_USAGE_STATS_ENABLED": "0"}
        env.pop("ASAP_MAXTEXT_PYTHON", None)
        cmd = [sys.executable, "-m", "server.cli.main", "verify", str(a), str(b), "--proposals", "--json", *extra]
        t0 = time.monotonic()
        r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.monotonic() - t0
        doc = json.loads(r.stdout)
        entries = [(c["file"], e) for c in doc["configs"] for e in [*c["report"]["results"], *c["report"]["withdrawn"]]]
        figures.append(
            [(f, e["label"], e["result"]["status"], (e["result"]["compiled"] or {}).get("memory_per_chip_bytes"))
             for f, e in entries]
        )  # fmt: skip
        out.append(f"asap verify a.yml b.yml --proposals, {name}: {len(entries)} targets in {wall:.1f} s wall (exit "
                   f"{r.returncode})")  # fmt: skip
    out.append(f"same verdict and memory per chip for every target: {figures[0] == figures[1]}")
    return "\n".join(out)


if __name__ == "__main__":
    main()
