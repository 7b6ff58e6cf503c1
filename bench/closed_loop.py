"""The closed loop on this machine: a sharded train step on 8 simulated CPU devices with a deliberately poor
mesh, profiled, analysed by ASAP, proposal 1 applied to the YAML, run and profiled again; predicted against
measured, over several repetitions.

    .venv/bin/python bench/closed_loop.py [--reps 3] [--steps 10] [--workdir DIR] [--tiny] [--json FILE]

At start a micro-benchmark measures the CPU devices (bf16 matmul, elementwise copy, all-gather, tiny
all-reduce, all 8 at once) and registers the `cpu-8` slice with those numbers (server/lab/cpu_slice.py). Each
repetition (server/lab/closed_loop.py) then:
1. writes config.yml (BENCH_MODEL, `ici_data_parallelism: 8`), runs it (server/lab/cpu_train.py: the JAX mesh
   from the YAML through ASAP's mesh check) and profiles --steps steps with jax.profiler;
2. runs ASAP's analysis with that profile linked (the Coordinator's offline engine: diagnosis, calibration
   on the profile, proposals);
3. applies proposal 1 to the YAML text (server/config/apply.py) -> config.proposed.yml;
4. runs and profiles the new YAML, and analyses it with its profile.

Printed per repetition and as medians: ASAP's model estimate of each config (uncalibrated), proposal 1's
expected step (calibrated on the first profile), the measured median step from each profile (XProf's step
table) and from the wall clock, and the throughput speedups (tokens/s; proposal 1 may change the batch).
Load averages are printed with each run: other processes on the machine's cores slow runs unevenly.
A benchmark: exits 0 whatever the numbers say, 1 only when the loop cannot run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from server.lab.closed_loop import (  # noqa: E402
    BENCH_MODEL,
    POOR_MESH,
    TINY_MODEL,
    Leg,
    Loop,
    LoopError,
    Repetition,
    measure_slice,
    repetition,
)

MS = 1e3


def _diag(leg: Leg) -> str:
    d = leg.diagnosis
    est = leg.result["estimate"]
    return (
        f"profile: {d.get('bottleneck')}-bound (confidence {d.get('confidence', 0):.2f}; {d.get('summary')}); "
        f"model: {est['bottleneck']}-bound"
    )


def _leg_line(name: str, leg: Leg, load: float) -> str:
    return (
        f"    {name:<8} {leg.spec.mesh_label():<22} pdbs {leg.spec.pdbs}  model {leg.model_step_s * MS:7.1f} ms  "
        f"measured {leg.measured_step_s * MS:7.1f} ms (profile)  {leg.run.wall_median_s * MS:7.1f} ms (wall)  "
        f"compile {leg.run.compile_s:4.1f} s  load {load:.1f}"
    )


def _print_rep(i: int, r: Repetition, loads: tuple[float, float]) -> None:
    p = r.proposal
    what = "its mesh only" if r.mesh_only else "applied"
    print(f"repetition {i}: proposal 1 = ICI {p['ici']} {p['other_changes'] or ''} ({what}, {r.edits} edits)")
    print(_leg_line("before", r.before, loads[0]))
    print(_leg_line("after", r.after, loads[1]))
    print(
        f"    step:    predicted {r.predicted_step_s * MS:7.1f} ms (calibrated on the first profile)  "
        f"measured {r.after.measured_step_s * MS:7.1f} ms  ({r.after.measured_step_s / r.predicted_step_s - 1:+.0%})"
    )
    print(
        f"    speedup: predicted x{r.predicted_speedup:.2f}  model x{r.model_speedup:.2f}  "
        f"measured x{r.measured_speedup:.2f} (profile)  x{r.wall_speedup:.2f} (wall)  [tokens/s]"
    )
    print(f"    diagnosis before: {_diag(r.before)}")
    print(f"    diagnosis after:  {_diag(r.after)}")
    print(f"    calibration: {r.before.result.get('calibration')}")


def _json(loop: Loop) -> dict[str, Any]:
    def leg(x: Leg) -> dict[str, Any]:
        return {
            "config": str(x.config),
            "mesh": x.spec.mesh,
            "pdbs": x.spec.pdbs,
            "model_step_s": x.model_step_s,
            "measured_step_s": x.measured_step_s,
            "wall_steps_s": x.run.wall_step_s,
            "compile_s": x.run.compile_s,
            "diagnosis": x.diagnosis,
            "profile": x.run.profile_dir,
        }

    return {
        "peaks": loop.peaks.__dict__,
        "slice": loop.slice.name,
        "repetitions": [
            {
                "mesh_only": r.mesh_only,
                "proposal": r.proposal,
                "before": leg(r.before),
                "after": leg(r.after),
                "predicted_step_s": r.predicted_step_s,
                "predicted_speedup": r.predicted_speedup,
                "model_speedup": r.model_speedup,
                "measured_speedup": r.measured_speedup,
                "wall_speedup": r.wall_speedup,
            }
            for r in loop.reps
        ],
        "medians": loop.medians(),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10, help="profiled steps per run (after --warmup)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--devices", type=int, default=8)
    ap.add_argument("--workdir", type=Path, help="where configs and profiles go (default: a temporary directory)")
    ap.add_argument("--tiny", action="store_true", help="the CI test's tiny model")
    ap.add_argument("--no-kb", action="store_true", help="analyse without the knowledge store")
    ap.add_argument(
        "--mesh-only", action="store_true", help="apply only proposal 1's mesh, not its batch or remat changes"
    )
    ap.add_argument("--json", type=Path, help="also write the numbers as JSON")
    args = ap.parse_args()
    model = TINY_MODEL if args.tiny else BENCH_MODEL
    work = args.workdir or Path(tempfile.mkdtemp(prefix="asap-closed-loop-"))
    if args.mesh_only:
        work = work / "mesh-only"
    print(f"work directory: {work}")
    t0 = time.perf_counter()
    peaks, sl = measure_slice(args.devices, by="bench/closed_loop.py")
    c = sl.chip
    print(
        f"{sl.name} measured at {peaks.measured_at} (load {os.getloadavg()[0]:.1f}): bf16 matmul "
        f"{c.peak_bf16_flops / 1e9:.1f} GFLOP/s, copy {c.hbm_bw / 1e9:.2f} GB/s, collectives "
        f"{2 * c.ici_link_bw / 1e9:.2f} GB/s (both directions), hop {c.hop_latency * 1e6:.0f} us, memory "
        f"{c.hbm_bytes / 2**30:.1f} GiB, each per device with all {peaks.devices} running"
    )
    print(f"model: {model}; starting mesh {POOR_MESH}; {args.steps} profiled steps per run")
    if args.mesh_only:
        print("applying proposal 1's mesh only: the prediction is the calibrated model of what ran")
    print()
    loop = Loop(peaks, sl)
    for i in range(1, args.reps + 1):
        load_before = os.getloadavg()[0]
        try:
            r = repetition(
                work / f"rep{i}",
                sl,
                model,
                steps=args.steps,
                warmup=args.warmup,
                use_kb=not args.no_kb,
                mesh_only=args.mesh_only,
            )
        except LoopError as e:
            print(f"repetition {i}: the loop stopped: {e}")
            return 1
        loop.reps.append(r)
        _print_rep(i, r, (load_before, os.getloadavg()[0]))
    m = loop.medians()
    print(f"\nmedians over {len(loop.reps)} repetitions:")
    print(
        f"  before: model {m['model_before_s'] * MS:.1f} ms, measured {m['measured_before_s'] * MS:.1f} ms "
        f"(profile), {m['wall_before_s'] * MS:.1f} ms (wall)"
    )
    print(
        f"  after:  predicted {m['predicted_after_s'] * MS:.1f} ms (calibrated), model {m['model_after_s'] * MS:.1f} "
        f"ms, measured {m['measured_after_s'] * MS:.1f} ms (profile), {m['wall_after_s'] * MS:.1f} ms (wall)"
    )
    print(
        f"  speedup (tokens/s): predicted x{m['predicted_speedup']:.2f}, model x{m['model_speedup']:.2f}, "
        f"measured x{m['measured_speedup']:.2f} (profile), x{m['wall_speedup']:.2f} (wall)"
    )
    better = m["measured_after_s"] < m["measured_before_s"]
    print(
        f"  the measured step time {'improved' if better else 'did NOT improve'}: "
        f"{m['measured_before_s'] * MS:.1f} -> {m['measured_after_s'] * MS:.1f} ms; "
        f"total {time.perf_counter() - t0:.0f} s"
    )
    if args.json:
        args.json.write_text(json.dumps(_json(loop), indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
