"""Capture real XProf profiles of a small sharded JAX train step on 8 simulated CPU devices.

For each mesh in ``MESHES`` this runs a jitted 2-layer MLP train step (SGD) with
``NamedSharding`` over a ``Mesh`` whose axes carry MaxText's names (data, fsdp, tensor),
traces ``STEPS`` steps with ``jax.profiler.trace`` (each inside
``jax.profiler.StepTraceAnnotation("train", step_num=i)`` and blocking on the result, so a
step's span covers its device work), and writes

    tests/data/profiles/cpu/<mesh>/plugins/profile/<RUN>/<HOST>.xplane.pb
    tests/data/profiles/cpu/<mesh>/mesh.json

Regenerate with ``python tests/profiles/make_cpu_profiles.py`` (about 10 s). What stays the
same from run to run: the compiled program (HLO, op names, collectives and their
replica_groups), the number of steps and op executions per device, the file layout. Times,
thread ids and process ids differ. The run directory (JAX names it by wall-clock time) and
the host name (this machine's) are normalised to ``RUN`` and ``HOST`` so that a regenerated
profile replaces the committed one in place; the XSpace's ``hostnames`` field is rewritten
to match, nothing else in the XSpace is touched. JAX's ``*.trace.json.gz`` is not kept.
"""

from __future__ import annotations

import os

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"  # must precede the jax import
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

sys.path.insert(0, str(Path(__file__).resolve().parent))
from xspace import XSpace

OUT = Path(__file__).resolve().parents[1] / "data" / "profiles" / "cpu"
RUN = "2026_01_01_00_00_00"
HOST = "host0"
STEPS = 3
BATCH, D_MODEL, D_MLP = 64, 128, 512
AXES = ("data", "fsdp", "tensor")

# mesh name -> (axis sizes, PartitionSpec of w1 [D_MODEL, D_MLP], of w2 [D_MLP, D_MODEL], of the batch)
MESHES: dict[str, tuple[dict[str, int], P, P, P]] = {
    # Pure data parallelism: weights replicated, batch split 8 ways, gradients all-reduced.
    "data8": ({"data": 8, "fsdp": 1, "tensor": 1}, P(), P(), P("data", None)),
    # FSDP: weights sharded 8 ways on the embedding dimension (gathered for use), batch split 8 ways.
    "fsdp8": ({"data": 1, "fsdp": 8, "tensor": 1}, P("fsdp", None), P(None, "fsdp"), P(("data", "fsdp"), None)),
    # FSDP x tensor: weights sharded 4 x 2, the MLP hidden dimension over tensor, batch over fsdp.
    "fsdp4_tensor2": (
        {"data": 1, "fsdp": 4, "tensor": 2},
        P("fsdp", "tensor"),
        P("tensor", "fsdp"),
        P(("data", "fsdp"), None),
    ),
}


def _loss(params: dict[str, jax.Array], x: jax.Array, y: jax.Array) -> jax.Array:
    h = jax.nn.gelu(x @ params["w1"])
    return jnp.mean((h @ params["w2"] - y) ** 2)


def train_step(params: dict[str, jax.Array], x: jax.Array, y: jax.Array) -> tuple[dict[str, jax.Array], jax.Array]:
    loss, grads = jax.value_and_grad(_loss)(params, x, y)
    return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads), loss


def capture(name: str, out_root: Path = OUT) -> Path:
    """Trace STEPS train steps on mesh ``name``; return the written ``.xplane.pb``."""
    sizes, w1_spec, w2_spec, batch_spec = MESHES[name]
    devices = np.array(jax.devices()[:8]).reshape([sizes[a] for a in AXES])
    mesh = Mesh(devices, AXES)
    param_sh = {"w1": NamedSharding(mesh, w1_spec), "w2": NamedSharding(mesh, w2_spec)}
    batch_sh = NamedSharding(mesh, batch_spec)
    step = jax.jit(
        train_step, in_shardings=(param_sh, batch_sh, batch_sh), out_shardings=(param_sh, None), donate_argnums=0
    )

    k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
    params = {
        "w1": jax.device_put(jax.random.normal(k1, (D_MODEL, D_MLP)) * D_MODEL**-0.5, param_sh["w1"]),
        "w2": jax.device_put(jax.random.normal(k2, (D_MLP, D_MODEL)) * D_MLP**-0.5, param_sh["w2"]),
    }
    x = jax.device_put(jax.random.normal(k3, (BATCH, D_MODEL)), batch_sh)
    y = jax.device_put(jnp.zeros((BATCH, D_MODEL)), batch_sh)
    params, loss = step(params, x, y)  # compile outside the trace
    loss.block_until_ready()

    with tempfile.TemporaryDirectory() as tmp:
        with jax.profiler.trace(tmp):
            for i in range(STEPS):
                with jax.profiler.StepTraceAnnotation("train", step_num=i):
                    params, loss = step(params, x, y)
                    loss.block_until_ready()
        (src,) = Path(tmp).glob("plugins/profile/*/*.xplane.pb")
        space = XSpace()
        space.ParseFromString(src.read_bytes())
        del space.hostnames[:]
        space.hostnames.append(HOST)
        mesh_dir = out_root / name
        shutil.rmtree(mesh_dir, ignore_errors=True)
        run_dir = mesh_dir / "plugins" / "profile" / RUN
        run_dir.mkdir(parents=True)
        dst = run_dir / f"{HOST}.xplane.pb"
        dst.write_bytes(space.SerializeToString())
    meta = {
        "axes": sizes,
        "steps": STEPS,
        "devices": 8,
        "model": {"kind": "mlp2", "batch": BATCH, "d_model": D_MODEL, "d_mlp": D_MLP, "dtype": "float32"},
        "shardings": {"w1": list(w1_spec), "w2": list(w2_spec), "batch": list(batch_spec)},
        "step_annotation": "train",
        "jax_version": jax.__version__,
    }
    (mesh_dir / "mesh.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    return dst


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mesh", choices=list(MESHES), help="capture this mesh only, in this process")
    args = ap.parse_args()
    if args.mesh is None:
        # One process per mesh: the profile's /host:metadata lists every program the process
        # compiled, so sharing a process would leak the other meshes' train steps into it.
        for name in MESHES:
            subprocess.run([sys.executable, __file__, "--mesh", name], check=True)
        return
    if jax.device_count() < 8:
        raise SystemExit("needs 8 CPU devices: XLA_FLAGS must be set before jax is imported")
    path = capture(args.mesh)
    print(f"{path.relative_to(OUT.parents[2])}  {path.stat().st_size:,} bytes", flush=True)


if __name__ == "__main__":
    main()
