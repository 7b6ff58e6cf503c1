"""How long ASAP: Verify takes (issue 18): the current mesh of a config (default: the demo,
examples/llama3-8b-v6e-16.yml) compiled cold (no cache) for its slice with libtpu, the two reduced depths one after the
other (as before issue 18) and side by side in two children (now, on a machine with two cores or more), each --runs
times; per mode the median wall time and each depth's own compile time, and the machine's load while it ran (the
compiles share two cores with whatever else runs).

    .venv/bin/python bench/verify_time.py [CONFIG] [--runs 1] [--modes sequential,parallel] [--advice]

--advice also times the whole verification of the config and its proposals (server/presentation/verification.py
verify_advice, parallel depths): the time to the first verdict (the current mesh's, published at once since issue 18)
against the time the same compiles took to end (before issue 18 the editor showed the first verdict only then: the
current mesh and every proposal compiled in turn, published together), and the compiles the withdrawn proposals'
replacements added. This takes every proposal's compile: minutes each.

Each run also prints what the compiled program's schedule simulation (issue 27, server/compile/schedule_sim.py) took
of it, timed in the compile's child, and the growth over verify without it (the same run less those seconds).

A benchmark: always exits 0. The targets: a 7-8B config's current mesh verified in under 2 minutes here (issue 18);
the simulation adds under 10% to verify's time for the demo config (issue 27).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from server.compile import verify as verify_mod  # noqa: E402

DEMO = ROOT / "examples" / "llama3-8b-v6e-16.yml"
TARGET_S = 120.0


def _load() -> str:
    try:
        return "load {:.1f} {:.1f} {:.1f}".format(*os.getloadavg())
    except OSError:
        return "load ?"


def current_mesh(config: Path, parallel: bool) -> tuple[float, verify_mod.VerifyResult]:
    """One cold verification of the config's own mesh; (wall seconds, result)."""
    os.environ[verify_mod.PARALLEL_ENV] = "1" if parallel else "0"
    t0 = time.perf_counter()
    res = verify_mod.verify(config, use_cache=False, timeout_s=3600)
    return time.perf_counter() - t0, res


def advice(config: Path) -> None:
    """The whole verification with the proposals: time to the first verdict, now and before."""
    from server.agents.coordinator import run_report
    from server.agents.types import Experiment
    from server.presentation import verification
    from server.services.analysis import analyze

    os.environ[verify_mod.PARALLEL_ENV] = "1"
    report, _ = run_report(Experiment(config))
    an = analyze(config)
    marks: list[tuple[float, int]] = []
    t0 = time.perf_counter()

    def heard(entries: list[verification.VerifiedTarget], _report: object) -> None:
        marks.append((time.perf_counter() - t0, len(entries)))

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["ASAP_CACHE_DIR"] = tmp  # cold: nothing compiled before
        out = verification.verify_advice(an, report, on_verdict=heard)
    total = time.perf_counter() - t0
    first, originals = marks[0][0], marks[-1][0]
    print(f"advice: {len(marks)} verdicts published while it ran, {out.compiles} compiles, ", end="")
    print(f"{len(out.withdrawn)} withdrawn")
    print(f"  time to the first verdict, now (current mesh first, published at once): {first:7.1f} s")
    print(f"  time to the first verdict, before (the same compiles, published together): {originals:7.1f} s")
    print(f"  whole verification with the replacements: {total:7.1f} s ({_load()})")
    for e in out.entries + out.withdrawn:
        print(f"  {e.label}: {e.result.message}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config", nargs="?", type=Path, default=DEMO)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--modes", default="sequential,parallel")
    ap.add_argument("--advice", action="store_true")
    args = ap.parse_args()
    if not verify_mod.libtpu_available():
        print(f"no libtpu: {verify_mod.ENABLE_HINT}")
        return 0
    print(f"{args.config.name}: current mesh, cold, {args.runs} run(s) per mode, {os.cpu_count()} cores, {_load()}")
    for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
        walls, per_depth, growth = [], [], []
        for _ in range(args.runs):
            wall, res = current_mesh(args.config, mode == "parallel")
            walls.append(wall)
            c = res.compiled
            print(f"  {mode}: {wall:6.1f} s wall, {res.status}: {res.message} ({_load()})")
            if c is not None:
                per_depth.append(c.compile_s / max(1, len(c.layers_compiled)))
                sim_s = float((c.schedule or {}).get("simulate_s", 0.0))
                if sim_s > 0:
                    # the schedule simulation (issue 27) runs in the compile's child after each depth; without it,
                    # verify would take wall - sim_s (both depths' simulations summed: an upper bound on what they
                    # add when the depths compile side by side)
                    growth.append(sim_s / (wall - sim_s))
                    print(
                        f"    schedule simulation: {sim_s:.2f} s of it (both depths); verify without it "
                        f"{wall - sim_s:.1f} s: +{growth[-1]:.1%}"
                    )
        med = statistics.median(walls)
        depth = f", {statistics.median(per_depth):.1f} s per depth's compile" if per_depth else ""
        verdict = "PASS" if med < TARGET_S else "over"
        print(f"{mode}: median {med:.1f} s to the current mesh's verdict{depth} (target {TARGET_S:.0f} s: {verdict})")
        if growth:
            g = statistics.median(growth)
            verdict = "PASS" if g < 0.10 else "over"
            print(
                f"{mode}: the schedule simulation adds a median {g:.1%} to verify's time (baseline: verify without it, "
                f"the same runs less the simulation's seconds; issue 27's target < 10%: {verdict})"
            )
    if args.advice:
        advice(args.config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
