"""Verification of the real program: MaxText's own `train_compile` for the config, run as a subprocess in the
user's MaxText environment (setting `asap.maxtextPython`, CLI `--maxtext-python`; MaxText needs Python >= 3.12
and its own ~2.8 GB environment, so it is never a dependency of ASAP).

MaxText compiles the whole model for the slice with libtpu and prints `Memory analysis: CompiledMemoryStats(...)`
(exact byte counts) when it succeeds; XLA dumps the optimized HLO (`--xla_dump_to` in XLA_FLAGS, which libtpu's
compiler honours), whose collectives ASAP counts with the same loop-aware walk as for its reference program.
A compiler out-of-memory, or a mesh JAX cannot place, comes back as the reference verifier's errors do.

MaxText reads the config file from disk: the verification is of the saved file, with the mesh (or a
proposal's changes) passed as `key=value` overrides, as on MaxText's command line.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from server.common import childproc
from server.common.progress import CancelToken, Progress
from server.compile import schedule_sim
from server.compile.verify_worker import parse_oom
from server.config.slices import Slice
from server.perf.layout import Layout
from server.profiles import hlo_program

MODULE = "maxtext.trainers.pre_train.train_compile"
_MEMORY = re.compile(r"CompiledMemoryStats\(([^)]*)\)")
_FIELD = re.compile(r"(\w+)_size_in_bytes=(\d+)")
# train_compile's own milestones, as progress
_MILESTONES = (
    ("Starting train_compile.py", "MaxText: loading the config and the topology", 0.05),
    ("Jitting and compiling train step", "MaxText: compiling the train step", 0.2),
    ("Jitting and compilation complete", "MaxText: reading the compiled program", 0.9),
)


def parse_memory(text: str) -> dict[str, float] | None:
    """The last `CompiledMemoryStats(...)` MaxText printed, as ASAP's component names."""
    found = _MEMORY.findall(text)
    if not found:
        return None
    fields = {k: float(v) for k, v in _FIELD.findall(found[-1])}
    names = {
        "argument": "argument",
        "output": "output",
        "alias": "alias",
        "temp": "temp",
        "generated_code": "generated_code",
        "host_temp": "host_temp",
        "host_argument": "host_argument",
    }
    return {ours: fields.get(theirs, 0.0) for ours, theirs in names.items()}


def train_step_hlo(dump_dir: Path) -> Path | None:
    """The optimized HLO of MaxText's train step in an XLA dump directory (the last module compiled)."""
    found = sorted(dump_dir.glob("module_*train_step*.after_optimizations.txt"))
    return found[-1] if found else None


@functools.cache
def versions(python: str) -> dict[str, str | None]:
    """MaxText's, jax's and libtpu's versions in the MaxText environment (part of the cache key)."""
    code = (
        "import importlib.metadata as m, json\n"
        "def v(n):\n"
        "    try:\n        return m.version(n)\n"
        "    except m.PackageNotFoundError:\n        return None\n"
        "print(json.dumps({n: v(n) for n in ('maxtext', 'jax', 'libtpu')}))\n"
    )
    try:
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
        return dict(json.loads(out.strip().splitlines()[-1]))
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return {"maxtext": None, "jax": None, "libtpu": None}


def command(
    python: str, config_path: Path, sl: Slice, overrides: dict[str, Any], jax_cache: Path | None = None
) -> list[str]:
    """MaxText's train_compile for this config and slice, with `overrides` as command-line keys. `jax_cache`:
    JAX's persistent compilation cache for this run (MaxText's default, ~/jax_cache, is shared by every
    MaxText run on the machine: an entry another libtpu wrote there fails to load, and a cached executable
    would skip the compile being verified)."""
    cache = [f"jax_cache_dir={jax_cache}"] if jax_cache is not None else []
    return [
        python,
        "-m",
        MODULE,
        str(config_path),
        f"compile_topology={sl.name}",
        f"compile_topology_num_slices={sl.num_slices}",
        *cache,
        *(f"{k}={v}" for k, v in overrides.items()),
    ]


def cache_key(config_path: Path, sl: Slice, overrides: dict[str, Any], vers: dict[str, str | None]) -> str:
    """The saved config (and every parent it names, by content), the overrides, the slice and the versions."""
    h = hashlib.sha256(b"maxtext-train-compile-1")
    h.update(json.dumps([sl.name, sl.num_slices, sorted(overrides.items()), vers], default=str).encode())
    h.update(_chain_bytes(config_path))
    return h.hexdigest()


def _chain_bytes(path: Path, depth: int = 0) -> bytes:
    try:
        data = path.read_bytes()
    except OSError:
        return b""
    m = re.search(rb"^base_config:\s*['\"]?([^'\"\s#]+)", data, re.M)
    if m and depth < 10:
        data += _chain_bytes(path.parent / m.group(1).decode(errors="replace"), depth + 1)
    return data


def run(
    python: str,
    config_path: Path,
    sl: Slice,
    overrides: dict[str, Any],
    mesh_axes: list[tuple[str, int]],
    timeout_s: float,
    progress: Progress | None = None,
    cancel: CancelToken | None = None,
    extra_env: dict[str, str] | None = None,
    keep_hlo: Path | None = None,
    layout: Layout | None = None,
) -> dict[str, Any]:
    """Run train_compile; {"run": <compiled event like the reference worker's>} or {"error": {...}}, plus
    "timed_out"/"cancelled" flags and the tail of its output. `extra_env`: variables set in the compile's environment
    on top of this process' (a run's `LIBTPU_INIT_ARGS`: libtpu's compiler reads its flags there); `keep_hlo`: a file
    the optimized train-step HLO is copied to before the dump directory goes (bench/overlap_table.py reads its
    schedule)."""
    with tempfile.TemporaryDirectory(prefix="asap-maxtext-") as tmp:
        dump = Path(tmp) / "hlo"
        env = {
            **os.environ,
            **(extra_env or {}),
            "JAX_PLATFORMS": "cpu",
            "ALLOW_MULTIPLE_LIBTPU_LOAD": "1",
            # jax 0.12 writes Mosaic kernels' debug locations into a backend-config field an older libtpu cannot
            # parse ("no such field: 'debug_locations'", seen while ASAP's libtpu leaked in through
            # TPU_LIBRARY_PATH, below); the locations only serve Mosaic's error messages
            "JAX_MOSAIC_UNZIP_DEBUG_LOCATIONS": os.environ.get("JAX_MOSAIC_UNZIP_DEBUG_LOCATIONS", "false"),
            "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"),
            "XLA_FLAGS": (
                (extra_env or {}).get("XLA_FLAGS", os.environ.get("XLA_FLAGS", ""))
                + f" --xla_dump_to={dump} --xla_dump_hlo_as_text --xla_dump_hlo_module_re=.*train_step.*"
            ).strip(),
        }
        env.pop("PYTHONPATH", None)  # MaxText's environment, not ASAP's
        # jax sets TPU_LIBRARY_PATH in a process that loads libtpu (ASAP's own, for placement): inherited, it
        # made MaxText's jax load ASAP's libtpu instead of its own (MLIR bytecode errors after the first compile)
        env.pop("TPU_LIBRARY_PATH", None)
        out: dict[str, Any] = {"timed_out": False, "cancelled": False}
        lines: list[str] = []
        t0 = time.perf_counter()

        def on_line(line: str) -> None:
            lines.append(line)
            for marker, message, frac in _MILESTONES:
                if marker in line and progress is not None:
                    progress(message, frac)

        try:
            child = childproc.run(
                command(python, config_path, sl, overrides, Path(tmp) / "jax_cache"),
                env=env,
                # a relative path (a launch command's `src/maxtext/configs/base.yml`) is MaxText's to resolve from
                # where the server runs, as the command would from where it is launched
                cwd=config_path.parent if config_path.is_absolute() else None,
                on_line=on_line,
                timeout_s=timeout_s,
                cancel=cancel,
                merge_stderr=True,  # MaxText logs to stderr: its milestones and its errors
            )
        except OSError as e:
            return {**out, "error": {"kind": "no-maxtext", "message": f"cannot run {python}: {e}"}}
        rc = child.returncode
        out["timed_out"] = child.timed_out
        out["cancelled"] = bool(cancel is not None and cancel.cancelled)
        text = "".join(lines)
        out["tail"] = text[-4000:]
        if out["timed_out"] or out["cancelled"]:
            return out
        memory = parse_memory(text)
        if rc != 0 or memory is None:
            return {**out, "error": _error(text, rc)}
        hlo = train_step_hlo(dump)
        if hlo is not None and keep_hlo is not None:
            keep_hlo.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(hlo, keep_hlo)
        collectives: list[dict[str, Any]] = []
        unknown: list[str] = []
        schedule: dict[str, Any] | None = None
        if hlo is not None:
            hlo_text = hlo.read_text()
            w = hlo_program.walk(hlo_text)
            collectives = [s.to_json() for s in hlo_program.summarize(w, mesh_axes)]
            unknown = w.unknown_trip_counts
            if layout is not None:  # the compiled step simulated on the slice (issue 27); never costs the verdict
                try:
                    t0 = time.perf_counter()
                    schedule = schedule_sim.simulate(hlo_text, layout).to_json()
                    schedule["simulate_s"] = time.perf_counter() - t0  # what it adds to verify
                except Exception as e:
                    schedule = {"error": f"{type(e).__name__}: {e}"[:300]}
        out["run"] = {
            "layers": None,
            "memory": memory,
            "collectives": collectives,
            "schedule": schedule,
            "unknown_trip_counts": unknown,
            "hlo_found": hlo is not None,
            "lower_s": 0.0,
            "compile_s": time.perf_counter() - t0,
        }
        return out


def _error(text: str, rc: int) -> dict[str, Any]:
    oom = parse_oom(text)
    if oom is not None:
        line = next((ln for ln in text.splitlines() if "RESOURCE_EXHAUSTED" in ln), "RESOURCE_EXHAUSTED")
        return {"kind": "oom", "message": line.strip()[:500], **oom}
    if "No module named" in text and "maxtext" in text:
        return {
            "kind": "no-maxtext",
            "message": "MaxText is not installed in that environment (pip install maxtext[tpu])",
        }
    last = [ln.strip() for ln in text.splitlines() if ln.strip()]
    tail = last[-1][:500] if last else f"exit {rc}"
    if "NotImplementedError" in text or "Failed to find assignment" in text:
        return {"kind": "placement", "message": tail}
    return {"kind": "compile", "message": tail}
