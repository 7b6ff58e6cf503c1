"""ASAP's memory and collective estimate against the TPU compiler (issue 8): for a set of (model, slice, mesh)
cases, compile ASAP's reference train step (server/compile/ref_model.py) for the slice with libtpu on this machine
(server/compile/verify.py) and print, per case, the estimate's per-chip bytes beside the compiler's, the
components of each, whether each says it fits, and the collective bytes per step of every mesh-axis group.

    .venv/bin/python bench/memory_vs_compiler.py [--max-layers 3] [--db PATH] [--filter TEXT]

Each case is written as a small MaxText YAML config (model_name or base_* dims, compile_topology,
per_device_batch_size, max_target_length, ici_* keys, remat_policy) and verified like `asap verify` does it:
a model deeper than --max-layers is compiled at two reduced depths and extrapolated linearly. Compiles are
cached in ASAP's store (--db for another sqlite file; a fresh file gives a cold run), so a rerun after an
estimate change only re-prices the estimate.

Component names differ: the estimate has weights, gradients, optimizer (the state), weight_casts (the bf16 copy
of the layer weights), activations (kept for the backward pass), embedding_one_hot (use_iota_embed), the loss'
logits and output_head, and the backward's temporaries (server/perf/memory.py: the loss and the backward pass are
not live at once, the larger phase counts); the compiler has argument (the state and the tokens), output (the new
state, aliased to the donated argument), temp (gradients, kept activations and every other temporary) and
generated code. The table sets the estimate's weights+optimizer beside argument and the rest of its peak beside temp.

Cases since issue 14: large vocabularies at 8k tokens (the demo's fsdp 16 proposal, fsdp 64, llama3.1-8b on v5e-256
where the head's gradient is all-reduced, num_vocab_tiling, use_iota_embed) and the published 128k llama3.1-70b
recipe on Ironwood (tpu7x-512, context parallelism; a whole-model compile of about 1.5-2.5 minutes here); Gemma 2
(merged local/global layers, a tied 256k vocabulary: 2b, 9b and 27b on v5e and v5p, 35-70 s a compile here).

Targets (issue 8): per-chip memory within 10% of the compiler on every case that fits; fit/does-not-fit agreement
on every case. Collective bytes per axis group are reported (median and max error) without a target.
A benchmark: always exits 0.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from server.common import store  # noqa: E402
from server.compile import verify_maxtext  # noqa: E402
from server.compile.verify import VerifyResult, libtpu_available, verify, versions  # noqa: E402

GiB = 2**30
MEMORY_TARGET = 0.10
GOLDEN = ROOT / "tests" / "data" / "verify" / "memory_compiled.json"


@dataclass(frozen=True)
class Case:
    name: str
    slice: str
    model: str | dict[str, Any]  # a model_name, or explicit base_* keys
    mesh: dict[str, int]  # ici_*_parallelism keys without the prefix and suffix
    pdbs: float = 1
    seq: int = 2048
    remat: str = "full"
    extra: dict[str, Any] = field(default_factory=dict)
    # compared with MaxText's program only (--maxtext-python): ASAP's reference program has plain dot-product
    # attention, whose [heads, seq, seq] scores at 8k-128k tokens say nothing about MaxText's flash kernel
    maxtext_only: bool = False
    slices: int = 1  # compile_topology_num_slices
    dcn: dict[str, int] = field(default_factory=dict)  # dcn_*_parallelism keys without the prefix and suffix

    def yaml(self) -> str:
        lines = [f"# {self.name}", "base_config: base.yml  # MaxText's own, for --maxtext-python"]
        if isinstance(self.model, str):
            lines.append(f"model_name: {self.model}")
        else:
            lines += [f"{k}: {v}" for k, v in self.model.items()]
        lines += [
            f"compile_topology: {self.slice}",
            f"compile_topology_num_slices: {self.slices}",
            f"per_device_batch_size: {self.pdbs}",
            f"max_target_length: {self.seq}",
            f"remat_policy: {self.remat}",
        ]
        axes = {"data": 1, "fsdp": 1, "tensor": 1, **self.mesh}
        lines += [f"ici_{a}_parallelism: {d}" for a, d in axes.items()]
        lines += [f"dcn_{a}_parallelism: {d}" for a, d in self.dcn.items()]
        lines += [f"{k}: {v}" for k, v in self.extra.items()]
        return "\n".join(lines) + "\n"


# v5e-N / v6e-N: N chips; v5p-N: N/2 chips (DOMAIN.md §3). Sizes chosen so that a cold run stays under about
# 25 minutes on two cores: a few 7-8B models (about 2.5 min a case at 2 and 3 layers), the rest 1-4B models
# (MaxText's `default` model is 1.2B), short sequences, small per-device batches.
CASES: tuple[Case, ...] = (
    Case("llama2-7b v5e-16 fsdp16 full", "v5e-16", "llama2-7b", {"fsdp": 16}),
    Case(
        "llama3-8b v6e-16 fsdp4 x tensor4 pdbs2 save_dot_except_mlp",
        "v6e-16",
        "llama3-8b",
        {"fsdp": 4, "tensor": 4},
        2,
        2048,
        "save_dot_except_mlp",
    ),
    Case("default v5e-4 fsdp4 pdbs2 full", "v5e-4", "default", {"fsdp": 4}, 2),
    Case(
        "default v5e-8 data2 x fsdp4 pdbs2 save_qkv_proj",
        "v5e-8",
        "default",
        {"data": 2, "fsdp": 4},
        2,
        2048,
        "save_qkv_proj",
    ),
    Case(
        "default v6e-8 fsdp4 x tensor2 pdbs2 minimal", "v6e-8", "default", {"fsdp": 4, "tensor": 2}, 2, 2048, "minimal"
    ),
    Case(
        "default v5p-16 fsdp8 pdbs4 minimal_with_context",
        "v5p-16",
        "default",
        {"fsdp": 8},
        4,
        2048,
        "minimal_with_context",
    ),
    Case(
        "default v5p-32 data2 x fsdp8 pdbs2 seq4096 save_out_proj",
        "v5p-32",
        "default",
        {"data": 2, "fsdp": 8},
        2,
        4096,
        "save_out_proj",
    ),
    Case("gemma-2b v5e-4 fsdp4 full", "v5e-4", "gemma-2b", {"fsdp": 4}),
    Case("qwen3-4b v6e-4 fsdp4 seq4096 full", "v6e-4", "qwen3-4b", {"fsdp": 4}, 1, 4096),
    # do not fit: the state alone (16 B/param over 4 shards), the kept activations
    Case("llama2-7b v5e-16 data4 x fsdp4 full (state 27 GB a chip)", "v5e-16", "llama2-7b", {"data": 4, "fsdp": 4}),
    Case("llama3-8b v6e-4 fsdp4 full (state 32 GB a chip)", "v6e-4", "llama3-8b", {"fsdp": 4}),
    Case("default v5e-4 fsdp4 pdbs16 minimal (activations)", "v5e-4", "default", {"fsdp": 4}, 16, 2048, "minimal"),
    # Large vocabularies at long sequences (issue 14): 128k-vocabulary logits, the gathered output head and its
    # gradient, num_vocab_tiling, use_iota_embed. The demo's proposal (examples/llama3-8b-v6e-16.yml with fsdp 16);
    # llama3.1-8b at 8k tokens on v5e-256, where the head's gradient takes the all-reduce path (16 rows a device).
    Case(
        "llama3-8b v6e-16 fsdp16 pdbs2 seq8192 full (the demo's fsdp proposal)",
        "v6e-16",
        "llama3-8b",
        {"fsdp": 16},
        2,
        8192,
        maxtext_only=True,
    ),
    Case(
        "llama3-8b v6e-16 fsdp16 pdbs2 seq8192 full num_vocab_tiling 4",
        "v6e-16",
        "llama3-8b",
        {"fsdp": 16},
        2,
        8192,
        extra={"num_vocab_tiling": 4},
        maxtext_only=True,
    ),
    Case("llama3-8b v6e-64 fsdp64 pdbs1 seq8192 full", "v6e-64", "llama3-8b", {"fsdp": 64}, 1, 8192, maxtext_only=True),
    Case(
        "llama3.1-8b v5e-256 fsdp256 pdbs1 seq8192 full",
        "v5e-256",
        "llama3.1-8b",
        {"fsdp": 256},
        1,
        8192,
        maxtext_only=True,
    ),
    Case(
        "llama3.1-8b v5e-256 fsdp256 pdbs2 seq8192 full",
        "v5e-256",
        "llama3.1-8b",
        {"fsdp": 256},
        2,
        8192,
        maxtext_only=True,
    ),
    Case(
        "llama3.1-8b v5e-256 fsdp256 pdbs1 seq8192 full use_iota_embed",
        "v5e-256",
        "llama3.1-8b",
        {"fsdp": 256},
        1,
        8192,
        extra={"use_iota_embed": True},
        maxtext_only=True,
    ),
    # A tuned config that ran (MaxText benchmarks, llama3_8b_8192 on v6e-256: bench/references.py) and that
    # today's MaxText and libtpu reject: the test of published runs (tests/test_estimate.py) takes the compiler's
    # verdict on today's stack from this case.
    Case(
        "llama3-8b v6e-256 fsdp256 pdbs8 seq8192 full iota (the tuned llama3_8b_8192)",
        "v6e-256",
        "llama3-8b",
        {"fsdp": -1},
        8,
        8192,
        extra={
            "attention": "flash",
            "use_iota_embed": True,
            "dataset_type": "synthetic",
            "sa_block_q": 1024,
            "sa_block_q_dkv": 2048,
            "sa_block_q_dq": 2048,
        },
        maxtext_only=True,
    ),
    # Long context: the published 128k llama3.1-70b recipe on Ironwood, its memory keys as run_recipe.sh sets them
    # (AI-Hypercomputer/tpu-recipes@c8cfe2f, training/ironwood/llama3.1-70b/128k-bf16-tpu7x-4x8x8/xpk/run_recipe.sh;
    # tpu7x-4x8x8 is 512 devices): fsdp 64 x context 8, pdbs 0.125, custom remat keeping five tensors, vocab tiling 4.
    Case(
        "llama3.1-70b tpu7x-512 fsdp64 x context8 seq131072 (tpu-recipes 128k)",
        "tpu7x-512",
        "llama3.1-70b",
        {"fsdp": -1, "context": 8},
        0.125,
        131072,
        "custom",
        extra={
            "dtype": "bfloat16",
            "decoder_layer_input": "device",
            "context": "device",
            "query_proj": "device",
            "key_proj": "device",
            "value_proj": "device",
            "mlpwo": "device",
            "num_vocab_tiling": 4,
            "opt_type": "adam_pax",
            "use_iota_embed": True,
            "attention": "flash",
            "sa_block_q": 2048,
            "sa_block_kv": 2048,
            "sa_block_kv_compute": 512,
            "sa_block_q_dkv": 1024,
            "sa_block_kv_dkv": 4096,
            "sa_block_kv_dkv_compute": 256,
            "sa_q_layout": "SEQ_MINOR",
            "sa_k_layout": "HEAD_DIM_MINOR",
            "sa_v_layout": "SEQ_MINOR",
            "sa_use_fused_bwd_kernel": True,
            "dq_reduction_steps": 3,
            "use_tokamax_splash": True,
            "use_max_logit_estimate": 30,
        },
        maxtext_only=True,
    ),
    # Gemma 2 (issue 14): each MaxText layer a local and a global attention layer (the scan keeps one input a pair, its
    # backward holds both layers' working sets), a tied 256k vocabulary with the final logits soft-capped. The table's
    # head gradient is reduce-scattered in a loop right after the loss over more than 4 devices (unrolled over 4, the
    # logits then carried into the backward), all-reduced below 64 rows a device (v5e-64), and the Adam update copies
    # the float32 table and its moments row-major where those tiles are nearly full (224, 112 and 576 rows, not 144 or
    # 288). The config is the first. Left out: pdbs 2 and 3 on v5e-16, which the compiler fits (14.55 and 14.53
    # of 15.75 GiB; at pdbs 3 only by computing the logits' dot without gathering the table) where the estimate's usable
    # HBM of a v5e chip (16 GB less the runtime's share, 14.31 GiB; server/config/slices.py) says they do not.
    Case("gemma2-9b v5e-16 fsdp16 full (issue 14)", "v5e-16", "gemma2-9b", {"fsdp": 16}, maxtext_only=True),
    Case("gemma2-9b v5e-16 fsdp16 pdbs4 full (logits)", "v5e-16", "gemma2-9b", {"fsdp": 16}, 4, maxtext_only=True),
    Case("gemma2-9b v5e-32 fsdp32 full", "v5e-32", "gemma2-9b", {"fsdp": 32}, maxtext_only=True),
    Case("gemma2-9b v5e-32 fsdp32 pdbs2 full", "v5e-32", "gemma2-9b", {"fsdp": 32}, 2, maxtext_only=True),
    Case(
        "gemma2-9b v5e-64 fsdp64 full (tied head all-reduced)", "v5e-64", "gemma2-9b", {"fsdp": 64}, maxtext_only=True
    ),
    Case("gemma2-2b v5e-4 fsdp4 full", "v5e-4", "gemma2-2b", {"fsdp": 4}, maxtext_only=True),
    Case("gemma2-2b v5e-8 fsdp8 full", "v5e-8", "gemma2-2b", {"fsdp": 8}, maxtext_only=True),
    Case("gemma2-2b v5e-16 fsdp16 full", "v5e-16", "gemma2-2b", {"fsdp": 16}, maxtext_only=True),
    Case("gemma2-27b v5p-16 fsdp8 full", "v5p-16", "gemma2-27b", {"fsdp": 8}, maxtext_only=True),
    # MoE on MaxText's capacity (dense) path at scale: the tuned DeepSeek-V3 config of bench/references.py
    # (maxtext benchmarks/maxtext_trillium_model_configs.py@bfd388fd deepseek_v3_ep16), whole model (about 4 minutes
    # here). The compiler gathers all 256 experts of a matrix (bf16[256,7168,2048], 7 GiB) and, rematerialising
    # under memory pressure, still needs 31.41 of 31.24 GiB: it does not fit.
    Case(
        "deepseek3-671b 2x v6e-256 fsdp16 x expert16 dcn_fsdp2 capacity1.0 (tuned, 61 layers)",
        "v6e-256",
        "deepseek3-671b",
        {"fsdp": 16, "expert": 16},
        1,
        8192,
        "custom",
        extra={
            "decoder_layer_input": "offload",
            "use_iota_embed": True,
            "dataset_type": "synthetic",
            "sa_block_q": 2048,
            "sa_block_q_dkv": 2048,
            "sa_block_q_dq": 2048,
            "megablox": False,
            "sparse_matmul": False,
            "capacity_factor": 1.0,
            "dtype": "bfloat16",
            "opt_type": "sgd",
            "weight_dtype": "bfloat16",
            "attention": "flash",
        },
        maxtext_only=True,
        slices=2,
        dcn={"fsdp": 2},
    ),
)


def rel(e: float, c: float) -> float:
    return (e - c) / c if c else float("inf")


def gib(n: float | None) -> str:
    return "-" if n is None else f"{n / GiB:6.2f}"


def est_parts(est: dict[str, Any]) -> tuple[float, float]:
    """The estimate grouped as the compiler groups memory: (the state in the arguments, the rest of its peak, which
    the compiler has in temp)."""
    c = est["components"]
    state = c.get("weights", 0) + c.get("optimizer", 0)
    return state, float(est.get("memory_per_chip_bytes", 0.0)) - state


def collectives(r: VerifyResult) -> dict[str, tuple[float, float]]:
    """(estimate, compiler) bytes per step of every axis group either side has."""
    est = {a: float(sum(d.values())) for a, d in (r.estimate or {}).get("collectives_by_axis", {}).items()}
    comp = {a: float(sum(d.values())) for a, d in (r.compiled.collectives_by_axis() if r.compiled else {}).items()}
    return {a: (est.get(a, 0.0), comp.get(a, 0.0)) for a in sorted(set(est) | set(comp))}


def report(case: Case, r: VerifyResult, wall: float) -> dict[str, Any]:
    est = r.estimate or {}
    c = r.compiled
    e_total = float(est.get("memory_per_chip_bytes", 0.0))
    c_total = c.memory_per_chip_bytes if c is not None else r.needs_bytes
    c_fits = r.fits
    e_fits = est.get("fits")
    how = "cached" if r.cached else f"compiled in {wall:.0f} s"
    if c is not None:
        how += f" ({'+'.join(map(str, c.layers_compiled))} of {c.layers} layers)"
    print(f"\n== {case.name}: {r.status} [{how}]")
    if r.status not in ("ok", "does-not-fit"):
        print(f"   {r.message}")
        return {"case": case, "status": r.status}
    err = rel(e_total, c_total) if c_total else None
    at_least = " (at least: the compiler stopped at its first OOM)" if c is None else ""
    print(
        f"   per chip: estimate {gib(e_total)} GiB, compiler {gib(c_total)} GiB{at_least}"
        + (f", error {err:+.1%}" if err is not None and c is not None else "")
    )
    if c is not None:
        cc = c.components
        state, temp = est_parts(est)
        ec = est["components"]
        print("   estimate: " + ", ".join(f"{k} {v / GiB:.2f}" for k, v in ec.items() if v) + " GiB")
        print(
            "   compiler: "
            + ", ".join(f"{k} {cc[k] / GiB:.2f}" for k in ("argument", "output", "alias", "temp"))
            + f", code {cc['generated_code'] / 2**20:.1f} MiB"
        )
        print(
            f"   state: estimate weights+optimizer {gib(state)} vs argument {gib(cc['argument'])} GiB "
            f"({rel(state, cc['argument']):+.1%}); rest: estimate {gib(temp)} vs "
            f"temp {gib(cc['temp'])} GiB ({rel(temp, cc['temp']):+.1%})"
        )
    agree = e_fits == c_fits
    print(
        f"   fits: estimate {'yes' if e_fits else 'no'}, compiler "
        f"{'yes' if c_fits else 'no'}: {'agree' if agree else 'DISAGREE'}"
    )
    colls = collectives(r) if c is not None else {}
    for axis, (e, cb) in colls.items():
        print(
            f"   collectives {axis:<14} estimate {e / 2**20:10.1f} MiB, compiler {cb / 2**20:10.1f} MiB"
            + (f" ({rel(e, cb):+.0%})" if cb else "")
        )
    return {
        "case": case,
        "status": r.status,
        "fits_compiler": c_fits,
        "fits_estimate": e_fits,
        "mem_err": err if (c is not None and c_fits) else None,
        "colls": colls,
        "wall": wall,
        "cached": r.cached,
    }


def golden_row(case: Case, r: VerifyResult) -> dict[str, Any] | None:
    """What the compiler said about a case, for tests/test_memory.py: per-chip bytes (at least that much when it
    stopped at an out-of-memory), its components, the HBM it allows and whether it fits."""
    if r.status not in ("ok", "does-not-fit"):
        return None
    c = r.compiled
    return {
        "name": case.name,
        "yaml": case.yaml(),
        "fits": r.fits,
        "memory_per_chip_bytes": c.memory_per_chip_bytes if c is not None else r.needs_bytes,
        "components": c.components if c is not None else {},
        "hbm_limit_bytes": c.hbm_limit_bytes if c is not None else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-layers", type=int, default=3, help="compile 2 and this many layers, extrapolate")
    ap.add_argument("--db", type=Path, help="sqlite file for the compile cache (default: ASAP's store)")
    ap.add_argument("--filter", default="", help="only the cases whose name contains this")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per case")
    ap.add_argument(
        "--maxtext-python",
        metavar="PY",
        help="compare with MaxText's own train step compiled by MaxText's train_compile in this environment "
        "(whole model, no layer extrapolation) instead of ASAP's reference program",
    )
    ap.add_argument(
        "--write-golden",
        action="store_true",
        help=f"with --maxtext-python: write every compared case's compiled memory to {GOLDEN.relative_to(ROOT)} "
        "(tests/test_memory.py checks the estimate against it without compiling)",
    )
    args = ap.parse_args()
    if not libtpu_available():
        print("libtpu is not installed (pip install '.[compile]'): nothing to compare with")
        return
    db = store.connect(args.db) if args.db else store.connect()
    v = versions()
    program = f"MaxText's train_compile ({args.maxtext_python})" if args.maxtext_python else "ASAP's reference program"
    print(f"jax {v['jax']}, libtpu {v['libtpu']}; max_layers {args.max_layers}; compiled: {program}")
    cases = [c for c in CASES if args.filter in c.name and (args.maxtext_python or not c.maxtext_only)]
    rows = []
    golden: list[dict[str, Any] | None] = []
    t_all = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="asap-mem-bench-") as tmp:
        for i, case in enumerate(cases):
            p = Path(tmp) / f"case{i}.yml"
            p.write_text(case.yaml())
            t0 = time.perf_counter()
            res = verify(
                p, db=db, max_layers=args.max_layers, timeout_s=args.timeout, maxtext_python=args.maxtext_python
            )
            rows.append(report(case, res, time.perf_counter() - t0))
            golden.append(golden_row(case, res))
    total = time.perf_counter() - t_all
    if args.write_golden and args.maxtext_python:
        done_golden = [g for g in golden if g is not None]
        vm = verify_maxtext.versions(args.maxtext_python)
        GOLDEN.write_text(json.dumps({"program": "maxtext", "versions": vm, "cases": done_golden}, indent=1) + "\n")
        print(f"wrote {len(done_golden)} cases to {GOLDEN.relative_to(ROOT)}")

    print("\n== summary")
    done = [r for r in rows if r["status"] in ("ok", "does-not-fit")]
    errs = [abs(r["mem_err"]) for r in done if r["mem_err"] is not None]
    print(f"{'case':<72} {'mem err':>8} {'fits e/c':>9}")
    for r in done:
        e = f"{r['mem_err']:+.1%}" if r["mem_err"] is not None else "-"
        fe, fc = ("y" if r["fits_estimate"] else "n"), ("y" if r["fits_compiler"] else "n")
        print(f"{r['case'].name[:72]:<72} {e:>8} {fe + '/' + fc:>9}")
    if errs:
        med, mx = statistics.median(errs), max(errs)
        print(
            f"per-chip memory, {len(errs)} fitting cases: median |error| {med:.1%}, max {mx:.1%} "
            f"(target <= {MEMORY_TARGET:.0%} on every one) {'PASS' if mx <= MEMORY_TARGET else 'MISS'}"
        )
    agree = sum(r["fits_estimate"] == r["fits_compiler"] for r in done)
    print(
        f"fit / does-not-fit agreement: {agree}/{len(done)} "
        f"({sum(not r['fits_compiler'] for r in done)} do not fit by the compiler) "
        f"{'PASS' if done and agree == len(done) else 'MISS'}"
    )
    by_axis: dict[str, list[float]] = {}
    for r in done:
        for axis, (e, c) in r.get("colls", {}).items():
            if c > 0:
                by_axis.setdefault(axis, []).append(abs(rel(e, c)))
    for axis, es in sorted(by_axis.items()):
        print(
            f"collective bytes on {axis:<14} {len(es):2d} cases: median |error| {statistics.median(es):.0%}, "
            f"max {max(es):.0%} (no target)"
        )
    bad = [r for r in rows if r["status"] not in ("ok", "does-not-fit")]
    if bad:
        print(f"not compared: {', '.join(r['case'].name + ' (' + r['status'] + ')' for r in bad)}")
    cold = [r["wall"] for r in done if not r["cached"]]
    print(
        f"wall time {total:.0f} s for {len(rows)} cases"
        + (f"; compiles: median {statistics.median(cold):.0f} s, max {max(cold):.0f} s per case" if cold else "")
        + f"; {sum(r.get('cached', False) for r in done)} from the cache"
    )


if __name__ == "__main__":
    main()
