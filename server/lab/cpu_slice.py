"""The `cpu-N` slice: JAX's N simulated CPU devices on this machine, with peaks measured here.

`measure(devices)` runs a micro-benchmark in a child process (the device count must be set
before JAX is imported, and the caller's JAX may already be initialised with one device) and
returns `CpuPeaks`; `server.config.slices.register_cpu_slice(peaks)` turns them into the catalog
entry. Every number is a rate per device while all N devices run at once, because that is how
a sharded training step uses them (N device threads share the machine's cores):

- peak FLOP/s: a bf16 matmul [n, n] x [n, n] on every device (shard_map), 2n^3 / time;
- memory bandwidth: an elementwise kernel over a float32 array on every device, read + written
  bytes / time;
- collective bandwidth: an all-gather of V bytes over the N devices, V(N-1)/N / time: the
  bidirectional bandwidth the cost model prices collectives with (server/perf/collectives.py);
- hop latency: a one-element all-reduce, time / (ring steps x 2), the cost model's latency floor
  read backwards (ring steps = N/2, an all-reduce is two passes).

Each figure is the fastest of repeated timings after a warm-up run: a peak, and other processes on
the machine's cores only ever slow a timing down (their load moved the median copy rate by 2x
between runs here, the fastest much less). The medians are kept in `CpuPeaks.details` with the
spread (slowest / fastest). Run alone: `python -m server.lab.cpu_slice --devices 8` prints the JSON.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from server.config.slices import CpuPeaks

ROOT = Path(__file__).resolve().parents[2]
MATMUL_N = 1024
COPY_ELEMS = 4 * 1024 * 1024  # float32 elements per device: 16 MiB read and 16 MiB written
GATHER_BYTES = 8 * 1024 * 1024  # the gathered array V
REPS = 7


def child_env(devices: int) -> dict[str, str]:
    """Environment of a child process that sees `devices` simulated CPU devices and only the CPU backend."""
    return {
        **os.environ,
        "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}",
        "JAX_PLATFORMS": "cpu",
        "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"),
    }


def measure(devices: int = 8, by: str = "server/lab/cpu_slice.py", timeout: float = 300.0) -> CpuPeaks:
    """Measure the CPU devices' peaks in a child process. Raises RuntimeError with the child's error."""
    proc = subprocess.run(
        [sys.executable, "-m", "server.lab.cpu_slice", "--devices", str(devices), "--by", by],
        capture_output=True,
        text=True,
        env=child_env(devices),
        timeout=timeout,
        cwd=ROOT,
    )
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
        raise RuntimeError(f"CPU micro-benchmark failed (exit {proc.returncode}): {tail}")
    return CpuPeaks(**json.loads(proc.stdout.strip().splitlines()[-1]))


def _best_seconds(fn: Any, *args: Any, reps: int = REPS) -> tuple[float, list[float]]:
    """The fastest of `reps` timings after a warm-up call, and all of them."""
    import jax

    jax.block_until_ready(fn(*args))  # compile and warm up
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return min(times), times


def _measure_here(devices: int, by: str) -> CpuPeaks:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    if jax.device_count() != devices or jax.devices()[0].platform != "cpu":
        raise SystemExit(f"expected {devices} CPU devices, JAX sees {jax.devices()}")
    mesh = Mesh(np.array(jax.devices()), ("d",))
    row = NamedSharding(mesh, P("d"))

    def per_device(f: Any) -> Any:
        return jax.jit(jax.shard_map(f, mesh=mesh, in_specs=P("d"), out_specs=P("d")))

    n = MATMUL_N
    a = jax.device_put(jnp.ones((devices * n, n), jnp.bfloat16), row)
    t_mm, mm_times = _best_seconds(per_device(lambda x: x @ x), a)

    x = jax.device_put(jnp.ones((devices * COPY_ELEMS,), jnp.float32), row)
    t_copy, copy_times = _best_seconds(per_device(lambda v: v * 1.5 + 1.0), x)

    g = jax.device_put(jnp.ones((GATHER_BYTES // 4,), jnp.float32), row)
    gather = per_device(lambda v: jax.lax.all_gather(v, "d", tiled=True))
    t_gather, gather_times = _best_seconds(gather, g)

    tiny = jax.device_put(jnp.ones((devices,), jnp.float32), row)
    t_tiny, tiny_times = _best_seconds(per_device(lambda v: jax.lax.psum(v, "d")), tiny, reps=3 * REPS)

    ring_steps = max(1, devices // 2)  # as server/perf/collectives.py prices a ring over the devices
    total_memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return CpuPeaks(
        devices=devices,
        matmul_flops=2 * n**3 / t_mm,
        copy_bw=2 * COPY_ELEMS * 4 / t_copy,
        collective_bw=GATHER_BYTES * (devices - 1) / devices / t_gather,
        hop_latency=t_tiny / (ring_steps * 2),
        memory_bytes=total_memory // devices,
        measured_at=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        by=by,
        details={
            "matmul_n": n,
            "matmul_s": t_mm,
            "copy_bytes_per_device": 2 * COPY_ELEMS * 4,
            "copy_s": t_copy,
            "all_gather_bytes": GATHER_BYTES,
            "all_gather_s": t_gather,
            "tiny_all_reduce_s": t_tiny,
            **{
                f"{name}_median_s": statistics.median(ts)
                for name, ts in (
                    ("matmul", mm_times),
                    ("copy", copy_times),
                    ("all_gather", gather_times),
                    ("tiny_all_reduce", tiny_times),
                )
            },
            **{
                f"spread_{name}": max(ts) / min(ts)
                for name, ts in (
                    ("matmul", mm_times),
                    ("copy", copy_times),
                    ("all_gather", gather_times),
                    ("tiny_all_reduce", tiny_times),
                )
            },
        },
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Measure JAX's simulated CPU devices (run with XLA_FLAGS set)")
    ap.add_argument("--devices", type=int, default=8)
    ap.add_argument("--by", default="server/lab/cpu_slice.py")
    args = ap.parse_args(argv)
    print(json.dumps(asdict(_measure_here(args.devices, args.by))), flush=True)


if __name__ == "__main__":
    main()
