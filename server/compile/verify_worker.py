"""Compiles the reference train step for a TPU topology in a child process:
`python -m server.compile.verify_worker JOB.json [HLO_DIR]`.

A child, not a thread: a compile takes seconds to minutes and gigabytes, must be cancellable (kill),
bounded in memory (RLIMIT_AS from ASAP_WORKER_MAX_MEMORY, set by the parent) and must not take the
editor's server down if libtpu aborts. Progress and results go to stdout as one JSON object per line:

  {"event": "start", "jax": ..., "libtpu": ...}
  {"event": "progress", "message": ..., "fraction": ...}
  {"event": "compiled", "layers": L, "memory": {...}, "collectives": [...], "lower_s": ..., "compile_s": ...,
   "unknown_trip_counts": [...]}
  {"event": "error", "kind": "no-libtpu" | "topology" | "placement" | "oom" | "compile", "message": ..., ...}
  {"event": "done"}

The job (written by server/compile/verify.py): {"topology": {"name", "chip_config_name", "num_slices"},
"mesh": {"axes", "ici", "dcn", "allow_split_physical_axes"}, "model": RefSpec JSON, "layers": [L, ...]}.
The mesh is built as MaxText's maxtext_utils.create_device_mesh builds it: create_hybrid_device_mesh for
several slices, else create_device_mesh (contiguous_submeshes=False when splitting physical axes).
"""

from __future__ import annotations

import json
import re
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from server.common.childproc import cap_memory, emit, max_rss_mb

# "the total memory required for HLO temporaries (48.83G) exceeds available HBM (15.75G)";
# "Used 20.50G of 15.75G hbm. Exceeded hbm capacity by 4.75G." Sizes are binary (G = GiB).
_OOM_PATTERNS = (
    re.compile(
        r"required for ([^(]*?)\s*\(([\d.]+)\s*([KMGT]?)i?B?\)\s*exceeds available HBM\s*\(([\d.]+)\s*([KMGT]?)"
    ),
    re.compile(r"Used\s+([\d.]+)\s*([KMGT]?)i?B?\s+of\s+([\d.]+)\s*([KMGT]?)i?B?\s+hbm", re.I),
)
_UNIT = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


# A kernel's scoped VMEM exhausted (the splash kernels' blocks over `xla_tpu_scoped_vmem_limit_kib` or the core's VMEM:
# "CompileTimeScopedVmemOom", "Ran out of memory in memory space vmem") is a compile failure, not the HBM verdict.
_VMEM_OOM = re.compile(r"ScopedVmemOom|memory space vmem", re.IGNORECASE)


def parse_oom(message: str) -> dict[str, Any] | None:
    """(needed, available) bytes from libtpu's out-of-memory message; None if it is not one (a kernel's VMEM running
    out is not: the program's HBM was never decided)."""
    if "RESOURCE_EXHAUSTED" not in message and "Ran out of memory" not in message:
        return None
    if _VMEM_OOM.search(message) and not any(pat.search(message) for pat in _OOM_PATTERNS):
        return None
    m = _OOM_PATTERNS[0].search(message)
    if m:
        return {
            "needed_bytes": float(m.group(2)) * _UNIT[m.group(3)],
            "available_bytes": float(m.group(4)) * _UNIT[m.group(5)],
            "what": m.group(1).strip() or "HLO temporaries",
        }
    m = _OOM_PATTERNS[1].search(message)
    if m:
        return {
            "needed_bytes": float(m.group(1)) * _UNIT[m.group(2)],
            "available_bytes": float(m.group(3)) * _UNIT[m.group(4)],
            "what": "total",
        }
    return {"needed_bytes": None, "available_bytes": None, "what": ""}


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"[:2000]


def build_mesh(job: dict[str, Any], devices: Any) -> Any:
    """The jax Mesh MaxText would build for this job's mesh on these devices."""
    import numpy as np
    from jax.experimental import mesh_utils
    from jax.sharding import Mesh

    m = job["mesh"]
    ici, dcn, split = list(m["ici"]), list(m["dcn"]), bool(m.get("allow_split_physical_axes"))
    if job["topology"].get("num_slices", 1) > 1:
        array = mesh_utils.create_hybrid_device_mesh(ici, dcn, devices, allow_split_physical_axes=split)
    elif split:
        array = mesh_utils.create_device_mesh(ici, devices, contiguous_submeshes=False, allow_split_physical_axes=True)
    else:
        array = mesh_utils.create_device_mesh(ici, devices)
    return Mesh(np.asarray(array), tuple(m["axes"]))


def _schedule(job: dict[str, Any], text: str) -> dict[str, Any] | None:
    """The compiled program's step simulated on the job's slice (server/compile/schedule_sim.py); None for a job
    that names no slice, {"error": ...} when the simulation fails (it never costs the compiler's verdict)."""
    if "slice" not in job:
        return None
    try:
        from server.compile import schedule_sim
        from server.config.axes import AXES
        from server.config.slices import parse_slice
        from server.perf.layout import build

        sl = parse_slice(str(job["slice"]), int(job["topology"].get("num_slices", 1)))
        names = [a.name for a in AXES]  # mesh_job lists the degrees in AXES order
        lay = build(
            sl, dict(zip(names, job["mesh"]["ici"], strict=True)), dict(zip(names, job["mesh"]["dcn"], strict=True))
        )
        t0 = time.perf_counter()
        out = schedule_sim.simulate(text, lay).to_json()
        out["simulate_s"] = time.perf_counter() - t0  # what the simulation adds to verify (bench/verify_time.py)
        return out
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"[:300]}


def main(argv: list[str]) -> int:
    cap_memory()
    job = json.loads(Path(argv[0]).read_text())
    hlo_dir = Path(argv[1]) if len(argv) > 1 else None
    emit(event="start", jax=_version("jax"), libtpu=_version("libtpu"))
    if _version("libtpu") is None:
        emit(event="error", kind="no-libtpu", message="libtpu is not installed")
        return 2

    emit(event="progress", message="loading libtpu and the topology", fraction=0.0)
    import jax
    from jax.experimental import topologies

    from server.compile.ref_model import RefSpec, build
    from server.profiles import hlo_program

    topo = job["topology"]
    kw: dict[str, Any] = {}
    if topo.get("chip_config_name"):
        kw["chip_config_name"] = topo["chip_config_name"]
    if topo.get("num_slices", 1) > 1:
        kw["num_slices"] = topo["num_slices"]
    try:
        devices = topologies.get_topology_desc(platform="tpu", topology_name=topo["name"], **kw).devices
    except Exception as e:
        emit(event="error", kind="topology", message=_first_line(e))
        return 3
    try:
        mesh = build_mesh(job, devices)
    except NotImplementedError as e:
        emit(event="error", kind="placement", message=_first_line(e))
        return 3
    except (ValueError, AssertionError) as e:
        emit(event="error", kind="placement", message=_first_line(e))
        return 3
    mesh_axes = [(str(n), int(s)) for n, s in zip(mesh.axis_names, mesh.devices.shape, strict=True)]

    spec = RefSpec.from_json(job["model"])
    plan = list(job["layers"])
    for i, layers in enumerate(plan):
        emit(event="progress", message=f"compiling {layers} layer(s) ({i + 1} of {len(plan)})", fraction=i / len(plan))
        t0 = time.perf_counter()
        try:
            step, args = build(spec.with_layers(layers), mesh)
            lowered = step.lower(*args)
            t1 = time.perf_counter()
            compiled = lowered.compile()
        except Exception as e:
            oom = parse_oom(str(e))
            if oom is not None:
                emit(event="error", kind="oom", layers=layers, message=_first_line(e), **oom)
            else:
                emit(event="error", kind="compile", layers=layers, message=_first_line(e))
            return 3
        t2 = time.perf_counter()
        ma = compiled.memory_analysis()
        memory = {
            "argument": ma.argument_size_in_bytes,
            "output": ma.output_size_in_bytes,
            "alias": ma.alias_size_in_bytes,
            "temp": ma.temp_size_in_bytes,
            "generated_code": ma.generated_code_size_in_bytes,
            "host_temp": ma.host_temp_size_in_bytes,
            "host_argument": ma.host_argument_size_in_bytes,
        }
        text = compiled.as_text()
        if hlo_dir is not None:
            hlo_dir.mkdir(parents=True, exist_ok=True)
            (hlo_dir / f"layers{layers}.hlo.txt").write_text(text)
        w = hlo_program.walk(text)
        emit(
            event="compiled",
            layers=layers,
            memory=memory,
            collectives=[s.to_json() for s in hlo_program.summarize(w, mesh_axes)],
            schedule=_schedule(job, text),
            unknown_trip_counts=w.unknown_trip_counts,
            lower_s=t1 - t0,
            compile_s=t2 - t1,
            mesh=mesh_axes,
        )
    emit(event="done", max_rss_mb=max_rss_mb(), jax=jax.__version__)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
