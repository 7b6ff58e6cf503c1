"""Run `make` targets as the stages of `make test` and print each stage's wall time at the end.

    python3 tools/stages.py lint typecheck pytest vitest+e2e

Each argument is a stage; `a+b` runs targets a and b at the same time (two `make` processes) and the stage ends
when both have. Stages run in order and the first that fails stops the run: its status is the script's, so `make
test` fails as before. The table is printed either way, with the failed target named.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time


def run_stage(targets: list[str], make: str) -> tuple[float, dict[str, int]]:
    """Start one `make TARGET` per target, wait for all; the wall time and each target's exit status."""
    start = time.monotonic()
    procs = {t: subprocess.Popen([make, "--no-print-directory", t]) for t in targets}
    codes = {t: p.wait() for t, p in procs.items()}
    return time.monotonic() - start, codes


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__, file=sys.stderr)
        return 2
    make = os.environ.get("MAKE", "make")
    rows: list[tuple[str, float, str]] = []
    status = 0
    start = time.monotonic()
    for stage in argv:
        took, codes = run_stage(stage.split("+"), make)
        failed = [t for t, c in codes.items() if c != 0]
        rows.append((stage, took, f"FAILED ({', '.join(failed)})" if failed else "ok"))
        if failed:
            status = codes[failed[0]]
            break
    width = max(len("total"), *(len(s) for s, _, _ in rows))
    print("\n== stage times (wall)")
    for stage, took, verdict in rows:
        print(f"   {stage:<{width}}  {took:7.1f} s  {verdict}")
    print(f"   {'total':<{width}}  {time.monotonic() - start:7.1f} s")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
