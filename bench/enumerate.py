"""Mesh enumeration speed: all valid candidates for a slice, priced and ranked.

    .venv/bin/python bench/enumerate.py [--repeat N]

Prints, per case, the assignments considered, how many are valid and fit, how many are valid but
over HBM, the wall time of the first run (placement caches cleared before it) and the median / p95
of the runs after it. Target (issues 3 and 16): every candidate of a 256-chip slice and of a
2 x 256 job ranked in under 100 ms each, first run and p95, with allow_split_physical_axes too.
A benchmark: always exits 0.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from server.config.slices import parse_slice  # noqa: E402
from server.perf.enumeration import clear_caches, enumerate_meshes  # noqa: E402
from server.perf.estimate import inputs  # noqa: E402
from server.services.analysis import analyze  # noqa: E402

TARGET_MS = 100.0
CASES = [
    # (label, model, pdbs, seq, slice, slices, allow_split, counts toward the target)
    ("llama2-7b on v5e-256", "llama2-7b", 4, 4096, "v5e-256", 1, False, True),
    ("llama2-7b on 2 x v5e-256", "llama2-7b", 4, 4096, "v5e-256", 2, False, True),
    ("llama3.1-70b on v6e-256", "llama3.1-70b", 4, 8192, "v6e-256", 1, False, True),
    ("llama3.1-70b on 2 x v6e-256", "llama3.1-70b", 2, 8192, "v6e-256", 2, False, True),
    ("llama3.1-70b on v5p-512 (4x8x8)", "llama3.1-70b", 4, 8192, "v5p-512", 1, False, True),
    ("mixtral-8x7b on v6e-256", "mixtral-8x7b", 4, 4096, "v6e-256", 1, False, True),
    ("llama2-7b on v5e-256, split", "llama2-7b", 4, 4096, "v5e-256", 1, True, True),
    ("llama3.1-405b on 2 x v6e-256, split", "llama3.1-405b", 1, 8192, "v6e-256", 2, True, True),
    ("mixtral-8x7b on v6e-256, split", "mixtral-8x7b", 4, 4096, "v6e-256", 1, True, True),
    ("llama3.1-70b on v5p-512 (4x8x8), split", "llama3.1-70b", 4, 8192, "v5p-512", 1, True, True),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    # Wall times on a small shared machine move with what else runs: the load average says how busy it was.
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print(f"{'case':<52} {'considered':>10} {'ranked':>7} {'over HBM':>8} {'first ms':>9} {'p50 ms':>8} {'p95 ms':>8}")
    worst = 0.0
    for label, model, pdbs, seq, sl_name, n, split, counts in CASES:
        text = f"model_name: {model}\nper_device_batch_size: {pdbs}\nmax_target_length: {seq}\n"
        inp = inputs(analyze(None, text).config)
        sl = parse_slice(sl_name, n)
        clear_caches()
        times = []
        for _ in range(args.repeat + 1):
            t = time.perf_counter()
            e = enumerate_meshes(inp, sl, split)
            times.append((time.perf_counter() - t) * 1000)
        first, rest = times[0], sorted(times[1:])
        p50 = statistics.median(rest)
        p95 = rest[min(len(rest) - 1, int(0.95 * len(rest)))]
        if counts:
            worst = max(worst, p95, first)
        print(
            f"{label:<52} {e.generated:>10} {len(e.ranked):>7} {len(e.too_big):>8} {first:>9.1f} {p50:>8.1f} "
            f"{p95:>8.1f}"
        )
        if e.ranked:
            best = e.ranked[0].estimate
            print(f"{'':<4}best: {best.layout.label()}  MFU {best.mfu:.1%}  step {best.time.step_s:.2f} s")
    print(f"\nload average {os.getloadavg()[0]:.2f}")
    print(
        f"slowest enumeration among the target cases (first run or p95): {worst:.1f} ms "
        f"(target < {TARGET_MS:.0f} ms): {'PASS' if worst < TARGET_MS else 'MISS'}"
    )


if __name__ == "__main__":
    main()
