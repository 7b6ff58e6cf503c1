"""How much of each collective the TPU compiler hides, measured from MaxText's own train step (issue 26 item 2):
writes the committed table server/perf/data/overlap.json that server/perf/overlap.py reads.

    .venv/bin/python bench/overlap_table.py [--maxtext-python PY] [--filter TEXT] [--only-cached] [--no-write]
                                            [--details]

Each case is a reduced-depth MaxText config compiled ahead of time for a TPU slice by MaxText's `train_compile`
(server/compile/verify_maxtext.py) with libtpu's defaults and, where it matters, with a flag variant in
`LIBTPU_INIT_ARGS`. The optimized, scheduled HLO of each compile is kept gzipped under .tmp/overlap-dumps/<case>/
(a rerun reads it instead of compiling; a change of the case, the flags or the MaxText environment's versions
compiles again) and read by server/profiles/hlo_schedule.py: every collective, whether it is asynchronous, the
compute the schedule puts between its start and done, its seconds by ASAP's ring formulas, its hidden share and
window.

The table: per generation, mesh-axis group and collective kind, the time-weighted hidden share over the cases'
collectives compiled with libtpu's defaults (`on`/`off` empty), plus a row per flag variant for each (group, kind)
whose share the variant changes (`on`/`off`: the flag groups server/config/xla_flags.py names whose key flag the
variant turns on or off). `flag_effects` says for each variant and case whether the compiled program changed (the
module text with instruction names, ids and metadata stripped, compared with the defaults'), and how the
collectives changed. A benchmark: always exits 0. MaxText's environment: --maxtext-python, else
$ASAP_MAXTEXT_PYTHON, else .tmp/maxtext-venv/bin/python.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from server.compile import verify_maxtext  # noqa: E402
from server.config.slices import parse_slice  # noqa: E402
from server.config.xla_flags import parse_xla_flags  # noqa: E402
from server.perf.layout import build  # noqa: E402
from server.profiles import hlo_schedule  # noqa: E402

CACHE = ROOT / ".tmp" / "overlap-dumps"
TABLE = ROOT / "server" / "perf" / "data" / "overlap.json"
RECIPES = ROOT / "tests" / "data" / "xla_flags"
DEFAULT_MAXTEXT_PYTHON = ROOT / ".tmp" / "maxtext-venv" / "bin" / "python"
TIMEOUT_S = 900.0


def _recipe_groups(recipe: str, groups: tuple[str, ...]) -> str:
    """The flags of `groups` a tpu-recipes launch string sets, as it sets them (server/config/xla_flags.py groups)."""
    flags = parse_xla_flags((RECIPES / recipe).read_text())
    out: list[str] = []
    for name, group in flags.groups().items():
        if name in groups:
            out += [f"--{s.name}={s.text}" for s in group.settings if f"--{s.name}=" not in " ".join(out)]
    return " ".join(out)


_TPU7X = "tpu7x_deepseek3-671b.txt"
# the recipe's SparseCore collective offload groups, and its layer scheduler's
_SC_GROUPS = (
    "sparsecore_offload_base",
    "sparsecore_offload_all_gather",
    "sparsecore_offload_reduce_scatter",
    "sparsecore_offload_all_reduce",
    "sparsecore_offload_tuning",
)
_SCHED_GROUPS = ("layer_scheduler", "latency_hiding_scheduler")
# Flag variants: LIBTPU_INIT_ARGS of the compile. "" is libtpu's defaults.
VARIANTS: dict[str, str] = {
    "defaults": "",
    # MaxText's DATA_PARALLEL_OVERLAP (benchmarks/xla_flags_library.py), as 128b.sh sets it
    "dp_opt": "--xla_tpu_enable_data_parallel_all_reduce_opt=true --xla_tpu_data_parallel_opt_different_sized_ops=true",
    # async collective fusion off for the three collectives (its groups' key flags)
    "no_acf": (
        "--xla_tpu_enable_async_collective_fusion_fuse_all_gather=false "
        "--xla_tpu_enable_async_collective_fusion_fuse_all_reduce=false "
        "--xla_tpu_enable_async_collective_fusion_fuse_reduce_scatter=false"
    ),
    # continuation (async collective) fusion for all-gathers, as MaxText's 128b.sh sets it (CF_FOR_ALL_GATHER)
    "cf_all_gather": _recipe_groups("maxtext_v5e_128b.txt", ("cf_for_all_gather",)),
    # MaxText's DISABLE_COLLECTIVE_MATMUL
    "no_cm": "--xla_jf_spmd_threshold_for_windowed_einsum_mib=1000000",
    # tpu-recipes' tpu7x launches (deepseek3-671b): SparseCore collective offload, its group's flags as set there
    "sc_offload": _recipe_groups(
        _TPU7X,
        _SC_GROUPS,
    ),
    "layer_sched": _recipe_groups(_TPU7X, _SCHED_GROUPS),
    # the layer scheduler needs the SparseCore collective aggregator: the recipe's offload and scheduler groups together
    "sc_layer_sched": _recipe_groups(
        _TPU7X,
        _SC_GROUPS + _SCHED_GROUPS,
    ),
    "host_offload_pcie": _recipe_groups(_TPU7X, ("host_offload", "pcie_bandwidth")),
}


@dataclass(frozen=True)
class Case:
    """One reduced-depth config on one slice. `mesh`: ICI degrees; `dcn`: DCN degrees (several slices)."""

    name: str
    slice: str
    model: str
    layers: int
    mesh: dict[str, int]
    dcn: dict[str, int] = field(default_factory=dict)
    keys: dict[str, Any] = field(default_factory=dict)
    variants: tuple[str, ...] = ("defaults",)
    pdbs: float = 1
    seq: int = 2048

    @property
    def generation(self) -> str:
        return parse_slice(self.slice).chip.generation

    @property
    def num_slices(self) -> int:
        n = 1
        for d in self.dcn.values():
            n *= d
        return n

    def yaml(self) -> str:
        lines = [
            f"# {self.name}",
            "base_config: base.yml  # MaxText's own",
            f"model_name: {self.model}",
            f"per_device_batch_size: {self.pdbs}",
            f"max_target_length: {self.seq}",
            f"remat_policy: {self.keys.get('remat_policy', 'full')}",
            "dataset_type: synthetic",
        ]
        lines += [f"ici_{a}_parallelism: {d}" for a, d in {"fsdp": 1, **self.mesh}.items()]
        lines += [f"dcn_{a}_parallelism: {d}" for a, d in self.dcn.items()]
        lines += [f"{k}: {_yaml(v)}" for k, v in self.keys.items() if k != "remat_policy"]
        return "\n".join(lines) + "\n"

    def overrides(self) -> dict[str, Any]:
        return {"override_model_config": True, "base_num_decoder_layers": self.layers}

    @property
    def slug(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.name.lower()).strip("-")


def _yaml(v: Any) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


DENSE = "llama2-7b"
MOE = "mixtral-8x7b"
DROPLESS = {"sparse_matmul": True, "megablox": True}
# 16 JAX devices a slice: v5e-16 and v6e-16 are 16 chips, v5p-32 16 chips (names count cores), tpu7x-16 8 chips of two
# devices. Two decoder layers (the scan's loop and its body are there at any depth); 2048 tokens a device.
_SLICES = {"v5e": "v5e-16", "v5p": "v5p-32", "v6e": "v6e-16", "tpu7x": "tpu7x-16"}


_MHA70B = {
    "base_emb_dim": 8192,
    "base_num_query_heads": 64,
    "base_num_kv_heads": 64,
    "base_mlp_dim": 28672,
    "head_dim": 128,
}


def _cases() -> tuple[Case, ...]:
    out: list[Case] = []
    for gen, sl in _SLICES.items():
        fsdp_variants: tuple[str, ...] = ("defaults", "cf_all_gather")
        if gen == "v5e":
            fsdp_variants += ("no_acf", "no_cm")
        if gen == "tpu7x":
            fsdp_variants += ("sc_offload", "layer_sched", "sc_layer_sched", "no_cm")
        out.append(Case(f"{gen} {DENSE} 2L fsdp16", sl, DENSE, 2, {"fsdp": 16}, variants=fsdp_variants))
        tp_variants: tuple[str, ...] = ("defaults", "no_cm", "no_acf") if gen in ("v5e", "tpu7x") else ("defaults",)
        out.append(
            Case(f"{gen} {DENSE} 2L fsdp4 x tensor4", sl, DENSE, 2, {"fsdp": 4, "tensor": 4}, variants=tp_variants)
        )
        # Two slices: eight layers and 4 sequences a device. The cross-slice gradient all-reduce is a Megascale
        # transfer per gradient shard issued in the backward loop's body (hlo_schedule._megascale_half); at two
        # layers XLA unrolls that loop, and at one sequence a layer's backward (6 ms on v5p) is shorter than its
        # shards' DCN time (9 ms), so the share hidden would be the case's compute, not the schedule's. At 4 it is
        # the schedule's, and the step model caps it by the run's own window.
        out.append(
            Case(
                f"{gen} {DENSE} 8L 2 slices x fsdp16",
                sl,
                DENSE,
                8,
                {"fsdp": 16},
                {"data": 2},
                variants=("defaults", "dp_opt"),
                pdbs=4,
            )
        )
        moe_variants: tuple[str, ...] = ("defaults", "sc_offload") if gen == "tpu7x" else ("defaults",)
        out.append(
            Case(
                f"{gen} {MOE} 2L fsdp4 x expert4",
                sl,
                MOE,
                2,
                {"fsdp": 4, "expert": 4},
                keys=DROPLESS,
                variants=moe_variants,
            )
        )
    out.append(
        Case(
            f"tpu7x {DENSE} 2L fsdp16 offload decoder_layer_input",
            _SLICES["tpu7x"],
            DENSE,
            2,
            {"fsdp": 16},
            keys={"remat_policy": "custom", "decoder_layer_input": "offload"},
            variants=("defaults", "host_offload_pcie"),
        )
    )
    # Degree: the tensor-parallel share hidden depends on the axis' degree (each collective-matmul step moves a 1/degree
    # slice against a 1/degree matmul, with a hop's latency each): the tensor degrees of published v5e and v5p runs,
    # on a larger model at full-slice size (MaxText's 128b.sh: fsdp 16 x tensor 16 on v5e-256; the v5p README tables:
    # tensor 8 on v5p-256).
    # (llama2-70b's 8 kv heads do not split 16 ways: a 70B-size model with 64 kv heads, MaxText's default model's keys)
    out.append(
        Case("v5e 70b-mha 2L fsdp16 x tensor16", "v5e-256", "default", 2, {"fsdp": 16, "tensor": 16}, keys=_MHA70B)
    )
    out.append(Case("v5p llama2-70b 2L fsdp16 x tensor8", "v5p-256", "llama2-70b", 2, {"fsdp": 16, "tensor": 8}))
    return tuple(out)


CASES = _cases()


# -- compiling, cached -----------------------------------------------------------------------------------------------
def _fingerprint(case: Case, variant: str, vers: dict[str, Any]) -> str:
    data = [case.yaml(), sorted(case.overrides().items()), case.slice, case.num_slices, VARIANTS[variant], vers]
    return hashlib.sha256(json.dumps(data, default=str).encode()).hexdigest()[:16]


def _paths(case: Case, variant: str, vers: dict[str, Any]) -> tuple[Path, Path]:
    base = CACHE / case.slug / f"{variant}-{_fingerprint(case, variant, vers)}"
    return base.with_suffix(".hlo.txt.gz"), base.with_suffix(".json")


def compile_case(case: Case, variant: str, python: str | None, only_cached: bool) -> tuple[str | None, dict[str, Any]]:
    """The optimized HLO text of the case under the variant's flags and what the compile said (time, memory)."""
    vers = verify_maxtext.versions(python) if python else _cached_versions()
    hlo_path, meta_path = _paths(case, variant, vers)
    if hlo_path.exists() and meta_path.exists():
        with gzip.open(hlo_path, "rt") as f:
            return f.read(), {**json.loads(meta_path.read_text()), "cached": True}
    if meta_path.exists():  # libtpu refused the flags: that is the measurement
        return None, {**json.loads(meta_path.read_text()), "cached": True}
    if only_cached or python is None:
        return None, {"error": "not compiled (no MaxText environment, or --only-cached)"}
    cfg_dir = CACHE / "configs"
    cfg_dir.mkdir(parents=True, exist_ok=True)
    cfg = cfg_dir / f"{case.slug}.yml"
    if not cfg.exists() or cfg.read_text() != case.yaml():
        cfg.write_text(case.yaml())
    sl = parse_slice(case.slice, case.num_slices)
    raw = CACHE / case.slug / f"{variant}.tmp.txt"
    env = {"LIBTPU_INIT_ARGS": VARIANTS[variant]} if VARIANTS[variant] else {}
    t0 = time.perf_counter()
    out = verify_maxtext.run(python, cfg, sl, case.overrides(), [], TIMEOUT_S, extra_env=env, keep_hlo=raw)
    seconds = time.perf_counter() - t0
    if "run" not in out or not raw.exists():
        err = out.get("error") or {"kind": "timeout" if out.get("timed_out") else "compile", "message": out.get("tail")}
        meta = {"error": err, "compile_s": round(seconds, 1), "versions": vers, "flags": VARIANTS[variant]}
        refusal = ("FAILED_PRECONDITION", "INVALID_ARGUMENT")
        if any(r in str(err.get("message")) for r in refusal):  # libtpu refuses these flags here: keep the answer
            meta["refused"] = True
            meta_path.parent.mkdir(parents=True, exist_ok=True)
            meta_path.write_text(json.dumps(meta, indent=1))
        return None, meta
    text = raw.read_text()
    with gzip.open(hlo_path, "wt") as f:
        f.write(text)
    raw.unlink()
    meta = {
        "compile_s": round(seconds, 1),
        "memory": out["run"]["memory"],
        "versions": vers,
        "flags": VARIANTS[variant],
    }
    meta_path.write_text(json.dumps(meta, indent=1))
    return text, {**meta, "cached": False}


def _cached_versions() -> dict[str, Any]:
    for meta in sorted(CACHE.glob("*/*.json")):
        vers = json.loads(meta.read_text()).get("versions")
        if vers:
            return dict(vers)
    return {}


# -- reading the schedule --------------------------------------------------------------------------------------------
def analyse(case: Case, text: str) -> hlo_schedule.Schedule:
    lay = build(parse_slice(case.slice, case.num_slices), case.mesh, case.dcn)
    return hlo_schedule.schedule(text, lay)


_STRIP = (
    (re.compile(r", metadata=\{[^{}]*\}"), ""),
    (re.compile(r"%[\w.\-]+"), "%"),
    (re.compile(r"channel_id=\d+"), "channel_id"),
    (re.compile(r"stack_frame_id=\d+"), ""),
    (re.compile(r"^HloModule [^,]*", re.M), "HloModule"),
    (re.compile(r"^(FileNames|FunctionNames|FileLocations|StackFrames)\n(.+\n)*", re.M), ""),
)


_SC_SIZE = re.compile(r'"program_size":"\d+"')


def program_digest(text: str, sparsecore: bool = True) -> str:
    """The module text's hash with names, ids and metadata stripped: equal for programs that differ only there.
    `sparsecore=False` also strips the size of each SparseCore offload's program (flags that tune the offloaded
    collectives' SparseCore code change only that in the TensorCore's module)."""
    for rx, repl in _STRIP:
        text = rx.sub(repl, text)
    if not sparsecore:
        text = _SC_SIZE.sub("", text)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def counts(sch: hlo_schedule.Schedule) -> dict[str, int]:
    """Collective instructions by kind, asynchronous and offloaded ones apart."""
    out: dict[str, int] = {}
    for c in sch.collectives:
        key = c.kind + (" (sparsecore)" if c.sparsecore else " (async)" if c.asynchronous else " (sync)")
        out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))


def groups_of(variant: str) -> tuple[list[str], list[str]]:
    """The flag groups whose key flag the variant turns on, and those it turns off (boolean keys only)."""
    enabled = parse_xla_flags(VARIANTS[variant]).enabled()
    return sorted(g for g, v in enabled.items() if v is True), sorted(g for g, v in enabled.items() if v is False)


def _row(gen: str, row: hlo_schedule.Row, on: list[str], off: list[str], configs: list[str]) -> dict[str, Any]:
    return {
        "generation": gen,
        "axis": row.group,
        "kind": row.kind,
        "on": on,
        "off": off,
        "hidden": round(row.hidden, 3),
        "behind": row.behind,
        "collectives": row.collectives,
        # the row's collective seconds per step in the compiled config (ring formulas x executions): what the step
        # model mixes the rows of one modelled collective's compiled forms by (server/perf/steptime.py)
        "seconds": row.seconds,
        "configs": configs,
    }


def build_table(results: dict[tuple[str, str], tuple[Case, hlo_schedule.Schedule, dict[str, Any]]]) -> dict[str, Any]:
    """The table's rows and flag effects from every compiled (case, variant)."""
    rows: list[dict[str, Any]] = []
    effects: list[dict[str, Any]] = []
    gens = sorted({case.generation for case, _, _ in results.values()})
    for gen in gens:
        base = {n: r for (n, v), r in results.items() if v == "defaults" and r[0].generation == gen}
        colls = [c for _, sch, _ in base.values() for c in sch.collectives]
        for row in hlo_schedule.aggregate(colls):
            configs = sorted(n for n, (_, sch, _) in base.items() if _has(sch, row))
            rows.append(_row(gen, row, [], [], configs))
        for variant in VARIANTS:
            if variant == "defaults":
                continue
            runs = {n: r for (n, v), r in results.items() if v == variant and r[0].generation == gen and n in base}
            if not runs:
                continue
            on, off = groups_of(variant)
            for name, (_, sch, meta) in sorted(runs.items()):
                _, dsch, dmeta = base[name]
                changed = meta["digest"] != dmeta["digest"]
                before, after = counts(dsch), counts(sch)
                what = _what(before, after, dsch, sch) if changed else "the same program as libtpu's defaults"
                if changed and meta["tc_digest"] == dmeta["tc_digest"]:
                    n = sum(1 for c in sch.collectives if c.sparsecore)
                    what = (
                        f"only the SparseCore programs of its {n} offloaded collectives differ (their program_size); "
                        "the TensorCore schedule and every collective are as with libtpu's defaults"
                    )
                effects.append(
                    {
                        "generation": gen,
                        "flags": variant,
                        "groups_on": on,
                        "groups_off": off,
                        "config": name,
                        "changes_program": changed,
                        "what": what,
                    }
                )
            if not (on or off):
                continue  # a row needs a flag group the run can state
            vcolls = [c for _, sch, _ in runs.values() for c in sch.collectives]
            dcolls = [c for n in runs for c in base[n][1].collectives]
            drows = {(r.group, r.kind): r for r in hlo_schedule.aggregate(dcolls)}
            for row in hlo_schedule.aggregate(vcolls):
                d = drows.get((row.group, row.kind))
                if d is not None and abs(d.hidden - row.hidden) < 0.01 and d.behind == row.behind:
                    continue
                configs = sorted(n for n, (_, sch, _) in runs.items() if _has(sch, row))
                rows.append(_row(gen, row, on, off, configs))
    return {"rows": rows, "flag_effects": effects}


def _has(sch: hlo_schedule.Schedule, row: hlo_schedule.Row) -> bool:
    return any(c.group == row.group and c.kind == row.kind and c.seconds > 0 for c in sch.collectives)


def _what(
    before: dict[str, int], after: dict[str, int], dsch: hlo_schedule.Schedule, sch: hlo_schedule.Schedule
) -> str:
    diffs = [f"{k} {before.get(k, 0)} -> {after.get(k, 0)}" for k in sorted(set(before) | set(after))]
    diffs = [d for d in diffs if d.split(" ")[-3] != d.split(" ")[-1]]
    drows = {(r.group, r.kind): r.hidden for r in hlo_schedule.aggregate(dsch.collectives)}
    shares = [
        f"{r.group} {r.kind} hidden {drows.get((r.group, r.kind), 0.0):.2f} -> {r.hidden:.2f}"
        for r in hlo_schedule.aggregate(sch.collectives)
        if abs(drows.get((r.group, r.kind), 0.0) - r.hidden) >= 0.01
    ]
    return "; ".join(diffs + shares) or "the schedule changed, not its collectives or their hidden shares"


# -- printing --------------------------------------------------------------------------------------------------------
def print_case(case: Case, variant: str, sch: hlo_schedule.Schedule, meta: dict[str, Any], details: bool) -> None:
    how = "cached" if meta.get("cached") else "compiled"
    print(f"\n== {case.name} [{variant}] ({how}, compile {meta.get('compile_s', 0):.0f} s, program {meta['digest']})")
    print(f"   {'axis':12} {'kind':19} {'hidden':>6} {'behind':8} {'instr':>5} {'async':>5} {'sc':>3} {'ms/step':>8}")
    for r in hlo_schedule.aggregate(sch.collectives):
        print(
            f"   {r.group:12} {r.kind:19} {r.hidden:6.2f} {r.behind:8} {r.collectives:5d} {r.asynchronous:5d} "
            f"{r.sparsecore:3d} {r.seconds * 1e3:8.2f}"
        )
    if details:
        for c in sch.collectives:
            print(
                f"     {c.name[:40]:40} {c.kind:18} {c.group:8} x{c.count:<3} {'async' if c.asynchronous else 'sync '} "
                f"{c.seconds * 1e6:9.1f} us, compute between {c.compute_s * 1e6:9.1f} us -> {c.hidden:.2f} {c.window}"
            )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--maxtext-python", default=os.environ.get("ASAP_MAXTEXT_PYTHON") or str(DEFAULT_MAXTEXT_PYTHON))
    ap.add_argument("--filter", default="", help="only cases whose name contains this text")
    ap.add_argument("--variant", default="", help="only this flag variant (and the defaults)")
    ap.add_argument("--only-cached", action="store_true", help="never compile: read the cached dumps only")
    ap.add_argument("--no-write", action="store_true", help="print, but leave server/perf/data/overlap.json alone")
    ap.add_argument("--details", action="store_true", help="every collective of every case")
    args = ap.parse_args()
    python = args.maxtext_python if Path(args.maxtext_python).exists() else None
    vers = verify_maxtext.versions(python) if python else _cached_versions()
    print(f"MaxText environment: {python or 'none (cached dumps only)'}; versions {vers}")
    results: dict[tuple[str, str], tuple[Case, hlo_schedule.Schedule, dict[str, Any]]] = {}
    compile_times: list[float] = []
    refused: list[tuple[Case, str, str]] = []
    for case in CASES:
        if args.filter and args.filter not in case.name:
            continue
        for variant in case.variants:
            if args.variant and variant not in ("defaults", args.variant):
                continue
            text, meta = compile_case(case, variant, python, args.only_cached)
            if text is None:
                print(f"\n== {case.name} [{variant}]: {meta.get('error')}")
                if meta.get("refused"):
                    refused.append((case, variant, str(meta["error"].get("message", ""))))
                continue
            if not meta.get("cached"):
                compile_times.append(meta["compile_s"])
            meta["digest"] = program_digest(text)
            meta["tc_digest"] = program_digest(text, sparsecore=False)
            sch = analyse(case, text)
            results[(case.name, variant)] = (case, sch, meta)
            print_case(case, variant, sch, meta, args.details)
    table = build_table(results)
    for case, variant, message in refused:
        on, off = groups_of(variant)
        reason = re.split(r"(?:FAILED_PRECONDITION|INVALID_ARGUMENT): ", message, maxsplit=1)[-1].split(". Please")[0]
        what = "libtpu refuses to compile it: " + reason
        table["flag_effects"].append(
            {
                "generation": case.generation,
                "flags": variant,
                "groups_on": on,
                "groups_off": off,
                "config": case.name,
                "changes_program": False,
                "refused": True,
                "what": what,
            }
        )
    print("\n== table rows")
    for r in table["rows"]:
        flags = "+".join(r["on"]) + ("" if not r["off"] else " without " + "+".join(r["off"]))
        print(
            f"   {r['generation']:6} {r['axis']:12} {r['kind']:19} {r['hidden']:5.2f} {r['behind']:8} "
            f"{r['collectives']:4d}  {flags or 'libtpu defaults'}"
        )
    print("\n== flag effects")
    for e in table["flag_effects"]:
        print(
            f"   {e['generation']:6} {e['flags']:18} {e['config'][:44]:44} changes={e['changes_program']}: {e['what']}"
        )
    if compile_times:
        ts = sorted(compile_times)
        print(f"\ncompiles: {len(ts)}, median {ts[len(ts) // 2]:.0f} s, max {ts[-1]:.0f} s")
    if not args.no_write and not args.filter and not args.variant and results:
        out = {
            "versions": {k: vers.get(k) for k in ("maxtext", "jax", "libtpu")},
            "method": (
                "MaxText's train_compile (ahead of time, libtpu) of reduced-depth configs on 16-device slices; the "
                "optimized scheduled HLO read by server/profiles/hlo_schedule.py: per collective, compute between "
                "its start and done (dot/convolution FLOPs at peak x MXU efficiency, else HBM bytes, loops x trip "
                "count) over its seconds by ASAP's ring formulas, at most 1, 0 when synchronous; rows weight it by "
                "seconds x executions (bench/overlap_table.py)"
            ),
            "cases": [
                {
                    "config": case.name,
                    "slice": case.slice,
                    "num_slices": case.num_slices,
                    "model": case.model,
                    "layers": case.layers,
                    "ici": case.mesh,
                    "dcn": case.dcn,
                    "keys": case.keys,
                    "flags": variant,
                    "compile_s": meta.get("compile_s"),
                    "program": meta["digest"],
                    "collectives": counts(sch),
                }
                for (_, variant), (case, sch, meta) in results.items()
            ],
            **table,
        }
        TABLE.parent.mkdir(parents=True, exist_ok=True)
        TABLE.write_text(json.dumps(out, indent=1) + "\n")
        print(f"\nwrote {TABLE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
