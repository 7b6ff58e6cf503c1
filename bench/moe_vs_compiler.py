"""ASAP's MoE collectives and memory against the TPU compiler (issue 14): reduced-layer MoE configs (Mixtral,
Qwen3 MoE, DeepSeek-style MLA + MoE) compiled with MaxText's own `train_compile` through `asap verify
--maxtext-python` (server/compile/verify.py, server/compile/verify_maxtext.py), every collective of the optimized HLO
set beside ASAP's CommPlan (server/perf/steptime.py) per mesh-axis group and kind, and the compiler's per-chip memory
beside ASAP's estimate (server/perf/memory.py).

    .venv/bin/python bench/moe_vs_compiler.py [--maxtext-python PY] [--filter TEXT] [--details] [--write-golden]

MaxText's environment: --maxtext-python, else $ASAP_MAXTEXT_PYTHON, else /work/mt-venv/bin/python when it exists.
Compiles are cached twice under .tmp/moe_vs_compiler/: the verifier's result in a sqlite store (verify.sqlite) and
the optimized HLO with the compiler's memory-usage report (hlo/<case>/), so a rerun after an estimate change is
instant; a missing HLO recompiles that case. Without a MaxText environment the cached results are used, and a
case without one is skipped.

How the sides are compared:
- Bytes per step in ASAP's convention (server/perf/collectives.py: the V each cost formula takes): all-gather the
  gathered array, reduce-scatter and all-reduce the unscattered operand, all-to-all the array over the whole group
  (the local operand times the group size). A ragged all-to-all's operand is its send buffer: the dispatch sends
  the device's [tokens x top_k, emb] rows, the combine returns from the receive buffer MaxText sized for the worst
  case (moe.py get_ragged_buffer_size: local rows x min(expert, experts / top_k)), of which only the routed rows
  travel, so its row is also given at the routed rows ("ragged, routed rows").
- Axis groups as the estimate has them (fsdp = fsdp, fsdp_transpose; expert; data; ...); a collective over several
  groups (e.g. fsdp and expert together) is its own row.
- Memory: the compiler's argument (weights, optimizer state, the batch) against ASAP's weights + optimizer, its
  temp against the rest of ASAP's peak, and the total (argument + output - alias + temp + code, MaxText's formula).

--write-golden writes tests/data/verify/moe_compiled.json: per case the config, the versions, the compiled memory
and every collective (kind, axes, payload, count, the HLO op and its shape), which tests/test_moe_compiler.py checks
ASAP's plan against without compiling. A benchmark: always exits 0.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from server.common import store  # noqa: E402
from server.compile import verify_maxtext  # noqa: E402
from server.compile.verify import _GROUP_OF, VerifyResult, mesh_job, verify  # noqa: E402
from server.config import resolve as config_mod  # noqa: E402
from server.config.mesh import check  # noqa: E402
from server.perf.estimate import Estimate, EstimateError, estimate  # noqa: E402
from server.profiles import hlo_program  # noqa: E402
from server.profiles.hlo import collective_mesh_axes  # noqa: E402

GiB = 2**30
MiB = 2**20
CACHE = ROOT / ".tmp" / "moe_vs_compiler"
GOLDEN = ROOT / "tests" / "data" / "verify" / "moe_compiled.json"
DEFAULT_MAXTEXT_PYTHON = "/work/mt-venv/bin/python"


@dataclass(frozen=True)
class Case:
    """One reduced-layer MoE config. `keys` go in the YAML file; `overrides` on MaxText's command line (keys the
    model file sets, e.g. the layer count, need `override_model_config=true` and the command line)."""

    name: str
    slice: str
    model: str
    layers: int
    mesh: dict[str, int]  # ici_<axis>_parallelism without prefix and suffix
    keys: dict[str, Any] = field(default_factory=dict)
    overrides: dict[str, Any] = field(default_factory=dict)
    pdbs: float = 1
    seq: int = 2048
    remat: str = "full"

    def yaml(self) -> str:
        lines = [
            f"# {self.name}",
            "base_config: base.yml  # MaxText's own",
            f"model_name: {self.model}",
            f"compile_topology: {self.slice}",
            "compile_topology_num_slices: 1",
            f"per_device_batch_size: {self.pdbs}",
            f"max_target_length: {self.seq}",
            f"remat_policy: {self.remat}",
            "dataset_type: synthetic",
        ]
        axes = {"data": 1, "fsdp": 1, "tensor": 1, "expert": 1, **self.mesh}
        lines += [f"ici_{a}_parallelism: {d}" for a, d in axes.items()]
        lines += [f"{k}: {_yaml(v)}" for k, v in self.keys.items()]
        return "\n".join(lines) + "\n"

    def cli(self) -> dict[str, Any]:
        return {"override_model_config": True, "base_num_decoder_layers": self.layers, **self.overrides}

    @property
    def slug(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.name.lower()).strip("-")


def _yaml(v: Any) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


DROPLESS: dict[str, Any] = {"sparse_matmul": True, "megablox": True}
CAPACITY: dict[str, Any] = {"sparse_matmul": False, "capacity_factor": 1.25}

_FSDP4_EP2 = {"fsdp": 4, "expert": 2}
# v5p-N has N/2 chips (DOMAIN.md §3): v5p-16 is 8 chips. Two or three layers, 2048 tokens a device: each compiles in
# one to three minutes on two cores.
CASES: tuple[Case, ...] = (
    Case("mixtral-8x7b 2L v5p-16 fsdp8 dropless", "v5p-16", "mixtral-8x7b", 2, {"fsdp": 8}, DROPLESS),
    Case("mixtral-8x7b 2L v5p-16 fsdp8 capacity1.25", "v5p-16", "mixtral-8x7b", 2, {"fsdp": 8}, CAPACITY),
    Case("mixtral-8x7b 2L v5p-16 fsdp4 x expert2 dropless", "v5p-16", "mixtral-8x7b", 2, _FSDP4_EP2, DROPLESS),
    Case("mixtral-8x7b 2L v5p-16 fsdp4 x expert2 capacity1.25", "v5p-16", "mixtral-8x7b", 2, _FSDP4_EP2, CAPACITY),
    Case(
        "mixtral-8x7b 2L v5p-16 fsdp8 shard_exp_on_fsdp",
        "v5p-16",
        "mixtral-8x7b",
        2,
        {"fsdp": 8},
        {**DROPLESS, "shard_exp_on_fsdp": True},
    ),
    Case("qwen3-30b-a3b 2L v5p-16 expert8 dropless", "v5p-16", "qwen3-30b-a3b", 2, {"expert": 8}, DROPLESS),
    Case("qwen3-30b-a3b 2L v5p-16 fsdp8 dropless", "v5p-16", "qwen3-30b-a3b", 2, {"fsdp": 8}, DROPLESS),
    Case(
        "deepseek3 MLA+MoE 3L (1 dense) 32 experts v5p-16 fsdp2 x expert4 dropless",
        "v5p-16",
        "deepseek3-671b",
        3,
        {"fsdp": 2, "expert": 4},
        DROPLESS,
        {"first_num_dense_layers": 1, "num_experts": 32},
    ),
)


# -- the compile, with its HLO kept ----------------------------------------------------------------------------------
def _case_dir(case: Case) -> Path:
    return CACHE / "hlo" / case.slug


def _fingerprint(case: Case, vers: dict[str, Any]) -> str:
    h = hashlib.sha256(json.dumps([case.yaml(), sorted(case.cli().items()), vers], default=str).encode())
    return h.hexdigest()[:16]


_KEEP = (
    "after_optimizations.txt",
    "after_optimizations-memory-usage-report.txt",
    "after_optimizations-live-range.txt",  # what is live at the compiler's memory peak
)


def _capture_into(dest: Path) -> Any:
    """A stand-in for verify_maxtext.train_step_hlo that also copies the dump's optimized HLO and memory report to
    `dest` (gzipped) before the verifier's temporary directory goes."""
    original = verify_maxtext.train_step_hlo

    def capture(dump_dir: Path) -> Path | None:
        found = original(dump_dir)
        if found is not None:
            dest.mkdir(parents=True, exist_ok=True)
            stem = found.name[: -len("after_optimizations.txt")]
            for suffix in _KEEP:
                src = found.with_name(stem + suffix)
                if src.exists():
                    with src.open("rb") as fi, gzip.open(dest / (suffix + ".gz"), "wb") as fo:
                        shutil.copyfileobj(fi, fo)
        return found

    return original, capture


def compile_case(case: Case, python: str | None, db: Any, timeout_s: float) -> tuple[VerifyResult | None, Path]:
    """The verifier's result for the case (compiling when the cache lacks it or its HLO) and where its HLO is."""
    cfg_dir = CACHE / "configs"
    cfg_dir.mkdir(parents=True, exist_ok=True)
    path = cfg_dir / f"{case.slug}.yml"
    if not path.exists() or path.read_text() != case.yaml():
        path.write_text(case.yaml())
    py = python or DEFAULT_MAXTEXT_PYTHON
    vers = verify_maxtext.versions(py) if Path(py).exists() else {}
    dest = _case_dir(case) / _fingerprint(case, vers)
    have_hlo = all((dest / (k + ".gz")).exists() for k in _KEEP)
    if not Path(py).exists():
        return None, dest
    original, capture = _capture_into(dest)
    verify_maxtext.train_step_hlo = capture
    try:
        r = verify(path, case.cli(), maxtext_python=py, db=db, use_cache=have_hlo, timeout_s=timeout_s)
    finally:
        verify_maxtext.train_step_hlo = original
    return r, dest


# -- reading the compiled program ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CompiledCollective:
    kind: str
    group: str  # the estimate's axis group(s), '+'-joined
    axes: tuple[str, ...]
    payload: float  # bytes, as server/profiles/hlo.py reads it
    group_size: int
    count: int
    op: str  # the HLO instruction
    shape: str  # its result shape
    computation: str
    ragged_in: float = 0.0  # ragged all-to-all: the send buffer's bytes
    ragged_out: float = 0.0  # ... and the receive buffer's

    @property
    def v_bytes(self) -> float:
        """V of ASAP's cost formulas for one execution. A ragged all-to-all moves the routed rows, the smaller of its
        two buffers (the other is MaxText's worst-case receive buffer, or the send buffer of a combine out of it)."""
        if self.kind == "ragged-all-to-all":
            return min(self.ragged_in, self.ragged_out) * max(1, self.group_size)
        if self.kind == "all-to-all":
            return self.payload * max(1, self.group_size)
        return self.payload

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind,
            "group": self.group,
            "axes": list(self.axes),
            "payload_bytes": round(self.payload),
            "group_size": self.group_size,
            "count": self.count,
            "op": self.op,
            "shape": self.shape,
        }
        if self.kind == "ragged-all-to-all":
            out["send_buffer_bytes"] = round(self.ragged_in)
            out["receive_buffer_bytes"] = round(self.ragged_out)
        if self.kind == "collective-permute":
            out["loop"] = self.computation[:60]  # a collective matmul's windowed_dot_general_body_ag/_rs, or not
        return out


_LINE_NAME = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")
_ARRAY = re.compile(r"\b(pred|s8|u8|s16|u16|s32|u32|s64|u64|bf16|f16|f32|f64)\[([\d,]*)\]")
_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "bf16": 2, "f16": 2, "s32": 4, "u32": 4, "f32": 4}


def _array_bytes(m: re.Match[str]) -> float:
    dims = [int(d) for d in m.group(2).split(",") if d]
    n = 1
    for d in dims:
        n *= d
    return float(n * _BYTES.get(m.group(1), 8))


def _lines(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = _LINE_NAME.match(line)
        if m and "=" in line:
            out[m.group(1)] = m.group(2)
    return out


def _shape(rhs: str) -> str:
    """The result type at the start of an instruction's right-hand side (a tuple kept whole, truncated)."""
    if rhs.startswith("("):
        depth = 0
        for i, ch in enumerate(rhs):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0:
                return rhs[: i + 1][:200]
    return rhs.split(" ", 1)[0][:200]


def _ragged_buffers(name: str, lines: dict[str, str]) -> tuple[float, float]:
    """(send, receive) buffer bytes of a ragged all-to-all: an async start's tuple holds both operands' types first;
    a synchronous one's result is the receive buffer and its first operand (typed elsewhere) the send buffer."""
    rhs = lines.get(name, "")
    if rhs.startswith("(("):
        arrays = list(_ARRAY.finditer(rhs))
        if len(arrays) >= 2:
            return _array_bytes(arrays[0]), _array_bytes(arrays[1])
    m = _ARRAY.match(rhs)
    out = _array_bytes(m) if m else 0.0
    call = re.search(r"ragged-all-to-all\(%?([\w.\-]+)", rhs)
    src = _ARRAY.match(lines.get(call.group(1), "")) if call else None
    return (_array_bytes(src) if src else 0.0), out


def mesh_axes(case: Case) -> list[tuple[str, int]]:
    _, chk = _config(case)
    job = mesh_job(chk, False)
    return [(a, i * d) for a, i, d in zip(job["axes"], job["ici"], job["dcn"], strict=True)]


def read_collectives(hlo_text: str, mesh: list[tuple[str, int]]) -> list[CompiledCollective]:
    w = hlo_program.walk(hlo_text)
    lines = _lines(hlo_text)
    expert = dict(mesh).get("expert", 1)
    out: list[CompiledCollective] = []
    for c in w.collectives:
        axes = tuple(collective_mesh_axes(c.op, mesh))
        size = c.op.group_size or 1
        r_in = r_out = 0.0
        if c.kind == "ragged-all-to-all":
            r_in, r_out = _ragged_buffers(c.op.name, lines)
            # An async start's replica groups are in its wrapped computation, which the walk does not read; MaxText
            # issues ragged all-to-alls over the expert axis only (moe.py ra2a_and_route, unsort_output_and_ra2a).
            if not axes or size <= 1:
                axes, size = ("expert",), expert
        if c.kind == "collective-permute":
            size = 1
        groups = [
            g
            for i, g in enumerate(_GROUP_OF.get(a, a) for a in axes)
            if g not in [_GROUP_OF.get(b, b) for b in axes[:i]]
        ]
        out.append(
            CompiledCollective(
                c.kind,
                "+".join(groups) or "?",
                axes,
                c.payload_bytes,
                size,
                c.count,
                c.op.name,
                _shape(lines.get(c.op.name, "")),
                c.computation,
                r_in,
                r_out,
            )
        )
    return out


_PEAK = re.compile(r"^\s+([\w.\-]+)(\{[\d,]*\})?: (\d+) bytes")
_OP_NAME = re.compile(r'op_name="([^"]*)"')


def peak_buffers(live: str, lines: dict[str, str]) -> list[tuple[str, float, str, str]]:
    """What the compiler's live-range dump lists as live at the memory peak: (buffer, bytes, shape, JAX op name)."""
    out: list[tuple[str, float, str, str]] = []
    section = False
    for line in live.splitlines():
        if "(peak):" in line:
            section = True
            continue
        if section:
            m = _PEAK.match(line)
            if m is None:
                break
            rhs = lines.get(m.group(1), "")
            op = _OP_NAME.search(rhs)
            name = m.group(1) + (m.group(2) or "")
            out.append((name, float(m.group(3)), _shape(rhs)[:70], op.group(1) if op else ""))
    return out


def load_hlo(dest: Path) -> tuple[str | None, str | None, str | None]:
    def read(name: str) -> str | None:
        p = dest / (name + ".gz")
        return gzip.open(p, "rt").read() if p.exists() else None

    return read(_KEEP[0]), read(_KEEP[1]), read(_KEEP[2])


# -- ASAP's side -----------------------------------------------------------------------------------------------------
def _config(case: Case) -> tuple[Any, Any]:
    path = CACHE / "configs" / f"{case.slug}.yml"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != case.yaml():
        path.write_text(case.yaml())
    cfg = config_mod.with_overrides(config_mod.load(path), case.cli())
    return cfg, check(cfg)


def asap_estimate(case: Case) -> Estimate | None:
    cfg, chk = _config(case)
    try:
        return estimate(cfg, chk)
    except EstimateError as e:
        print(f"   no estimate: {e}")
        return None


# -- the tables ------------------------------------------------------------------------------------------------------
def rel(e: float, c: float) -> str:
    return f"{(e - c) / c:+.0%}" if c else ("    -" if not e else "  new")


def by_group_kind(colls: list[CompiledCollective]) -> dict[tuple[str, str], tuple[float, int]]:
    out: dict[tuple[str, str], tuple[float, int]] = {}
    for c in colls:
        kind = "all-to-all" if c.kind == "ragged-all-to-all" else c.kind
        b, n = out.get((c.group, kind), (0.0, 0))
        out[(c.group, kind)] = (b + c.v_bytes * c.count, n + c.count)
    return out


def asap_group_kind(est: Estimate) -> dict[tuple[str, str], tuple[float, int]]:
    out: dict[tuple[str, str], tuple[float, int]] = {}
    for c in est.time.comm.collectives:
        b, n = out.get((c.axis, c.kind), (0.0, 0))
        out[(c.axis, c.kind)] = (b + c.bytes * c.count, n + round(c.count))
    return out


def report(case: Case, r: VerifyResult | None, dest: Path, details: bool) -> dict[str, Any] | None:
    hlo, mem_report, live = load_hlo(dest)
    how = "no MaxText environment" if r is None else ("cached" if r.cached else "compiled")
    print(f"\n== {case.name} [{how}]")
    if r is not None and r.status not in ("ok", "does-not-fit"):
        print(f"   {r.status}: {r.message}")
        return None
    if r is None or hlo is None:
        print("   no compiled result")
        return None
    est = asap_estimate(case)
    mesh = mesh_axes(case)
    colls = read_collectives(hlo, mesh)
    comp = by_group_kind(colls)
    asap = asap_group_kind(est) if est is not None else {}
    print("   collectives, bytes per step in ASAP's V convention (count per step):")
    print(f"   {'axis group':<14} {'kind':<19} {'compiled MiB':>14} {'(n)':>6} {'ASAP MiB':>12} {'(n)':>6} {'err':>6}")
    for key in sorted(set(comp) | set(asap), key=lambda k: -max(comp.get(k, (0, 0))[0], asap.get(k, (0, 0))[0])):
        cb, cn = comp.get(key, (0.0, 0))
        ab, an = asap.get(key, (0.0, 0))
        if max(cb, ab) < 1 * MiB:
            continue
        print(f"   {key[0]:<14} {key[1]:<19} {cb / MiB:14.1f} {cn:6d} {ab / MiB:12.1f} {an:6d} {rel(ab, cb):>6}")
    ragged = [c for c in colls if c.kind == "ragged-all-to-all"]
    if ragged:
        print("   ragged all-to-alls (dispatch and combine: send and receive buffers):")
        for c in sorted(ragged, key=lambda c: c.op):
            print(
                f"     {c.op:<28} {c.group:<8} x{c.count}  send {c.ragged_in / MiB:8.2f} MiB, receive "
                f"{c.ragged_out / MiB:8.2f} MiB  [{c.computation[:40]}]"
            )
    if details:
        print("   every collective above 1 MiB a step:")
        for c in sorted(colls, key=lambda c: -c.v_bytes * c.count):
            if c.v_bytes * c.count >= MiB:
                print(
                    f"     {c.kind:<18} {c.group:<12} {c.op:<34} x{c.count:<4} {c.payload / MiB:9.2f} MiB  "
                    f"{c.shape}  [{c.computation[:40]}]"
                )
    # memory
    assert r.compiled is not None or r.needs_bytes
    out: dict[str, Any] = {"case": case, "colls": colls, "est": est, "result": r}
    if r.compiled is not None and est is not None:
        cc = r.compiled.components
        ec = est.memory.components
        state = ec.get("weights", 0) + ec.get("optimizer", 0)
        rest = est.memory.total - state
        total_c = r.compiled.memory_per_chip_bytes
        print(
            f"   memory per chip: compiled {total_c / GiB:.2f} GiB, ASAP {est.memory.total / GiB:.2f} GiB "
            f"({rel(est.memory.total, total_c)}); fits: compiled {'yes' if r.compiled.fits else 'no'}, "
            f"ASAP {est.memory.verdict}"
        )
        print(
            f"     argument {cc['argument'] / GiB:.2f} vs weights+optimizer {state / GiB:.2f} "
            f"({rel(state, cc['argument'])}); temp {cc['temp'] / GiB:.2f} vs the rest {rest / GiB:.2f} "
            f"({rel(rest, cc['temp'])})"
        )
        print("     ASAP: " + ", ".join(f"{k} {v / GiB:.2f}" for k, v in ec.items() if v))
        out["mem"] = (est.memory.total, total_c)
        out["fits"] = (est.memory.fits, r.compiled.fits)
    if live and details:
        peak = peak_buffers(live, _lines(hlo))
        print(f"   live at the compiler's memory peak ({sum(b for _, b, _, _ in peak) / GiB:.2f} GiB, largest first):")
        for name, b, shape, op in sorted(peak, key=lambda t: -t[1])[:16]:
            print(f"     {b / MiB:9.1f} MiB  {name:<24} {shape:<40} {op[-90:]}")
    elif mem_report and details:
        print("   compiler's largest buffers (memory-usage report):")
        for line in mem_report.splitlines()[3:15]:
            print("     " + line.strip()[:150])
    return out


def _merged(colls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for c in colls:
        key = tuple((k, str(v)) for k, v in c.items() if k not in ("op", "count"))
        if key in out:
            out[key]["count"] += c["count"]
            out[key]["ops"] += 1
        else:
            out[key] = {**c, "ops": 1}
    return sorted(out.values(), key=lambda c: -c["payload_bytes"] * c["count"])


def golden(rows: list[dict[str, Any]], vers: dict[str, Any]) -> dict[str, Any]:
    cases = []
    for row in rows:
        case: Case = row["case"]
        r: VerifyResult = row["result"]
        assert r.compiled is not None
        cases.append(
            {
                "name": case.name,
                "yaml": case.yaml(),
                "cli": case.cli(),
                "memory": {k: round(v) for k, v in r.compiled.components.items()},
                "memory_per_chip_bytes": round(r.compiled.memory_per_chip_bytes),
                "fits": r.compiled.fits,
                # the step's collectives that move 1 MiB or more, alike ones merged (`ops`: how many, `op`: one)
                "collectives": _merged([c.to_json() for c in row["colls"] if c.v_bytes * c.count >= MiB]),
            }
        )
    return {"versions": {k: vers.get(k) for k in ("maxtext", "jax", "libtpu")}, "cases": cases}


def _golden_text(g: dict[str, Any]) -> str:
    """Indented JSON with one collective a line (diffs stay readable)."""
    cases = []
    for c in g["cases"]:
        head = {k: v for k, v in c.items() if k != "collectives"}
        lines = ",\n".join("    " + json.dumps(x, separators=(",", ":")) for x in c["collectives"])
        cases.append(json.dumps(head, indent=1)[:-2] + ',\n "collectives": [\n' + lines + "\n ]}")
    return '{"versions": ' + json.dumps(g["versions"]) + ',\n"cases": [\n' + ",\n".join(cases) + "\n]}\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--maxtext-python", default=os.environ.get("ASAP_MAXTEXT_PYTHON"), metavar="PY")
    ap.add_argument("--filter", default="")
    ap.add_argument("--details", action="store_true", help="every collective and the compiler's largest buffers")
    ap.add_argument("--timeout", type=float, default=1500.0)
    ap.add_argument("--write-golden", action="store_true", help=f"write {GOLDEN.relative_to(ROOT)}")
    args = ap.parse_args()
    os.nice(10)  # two cores shared with other compiles: MaxText's compile (a child) inherits this
    CACHE.mkdir(parents=True, exist_ok=True)
    db = store.connect(CACHE / "verify.sqlite")
    py = args.maxtext_python or DEFAULT_MAXTEXT_PYTHON
    vers = verify_maxtext.versions(py) if Path(py).exists() else {}
    print(f"MaxText {vers.get('maxtext')}, jax {vers.get('jax')}, libtpu {vers.get('libtpu')} ({py})")
    rows = []
    t_all = time.perf_counter()
    for case in CASES:
        if args.filter not in case.name:
            continue
        r, dest = compile_case(case, args.maxtext_python, db, args.timeout)
        row = report(case, r, dest, args.details)
        if row is not None:
            rows.append(row)
    print(f"\n== summary ({time.perf_counter() - t_all:.0f} s)")
    print(f"{'case':<76} {'memory err':>10} {'fits a/c':>9}")
    for row in rows:
        if "mem" in row:
            e, c = row["mem"]
            fa, fc = row["fits"]
            print(f"{row['case'].name[:76]:<76} {rel(e, c):>10} {('y' if fa else 'n') + '/' + ('y' if fc else 'n'):>9}")
    if args.write_golden and rows:
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(_golden_text(golden(rows, vers)))
        print(f"wrote {GOLDEN.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
