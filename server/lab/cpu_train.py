"""A MaxText-shaped training step on JAX's simulated CPU devices, profiled: the "run" of the closed loop.

`TrainSpec.from_config` reads what to run from a MaxText YAML through ASAP's own config and mesh
check (so the JAX mesh of a run is the one the YAML resolves to, `-1` filled): the model dims
(`base_emb_dim`, `base_num_query_heads`, `base_num_kv_heads`, `head_dim`, `base_mlp_dim`,
`base_num_decoder_layers`, `vocab_size`), `per_device_batch_size`, `max_target_length`,
`remat_policy` and every `ici_*_parallelism`. `run(spec, out_dir)` executes it in a child process
with that many CPU devices and returns the measured step times; the XProf profile lands under
`out_dir/plugins/profile/<timestamp>/`.

The model follows MaxText's llama2 decoder as ASAP's cost model counts it (server/perf/arith.py):
token embedding, per layer RMSNorm, q/k/v/out projections with causal dot-product attention,
RMSNorm and a gated SiLU MLP (wi_0, wi_1, wo), a final norm and an untied logits projection;
layers scanned (`scan_layers`), float32 weights cast to bfloat16 for the matmuls (`weight_dtype`,
`dtype`), cross-entropy loss, AdamW with float32 moments (`opt_type: adamw`). `remat_policy: full`
rematerialises each layer (`jax.checkpoint`, nothing saved); `minimal` saves the weight matmuls'
outputs; `none` saves everything. There is no rotary embedding (elementwise work the model counts
among its norms and residuals).

Sharding follows MaxText's logical axis rules (base.yml) on a mesh with its axis names and order:
the batch over data x fsdp x fsdp_transpose, the sequence over context, heads / MLP columns /
vocabulary over tensor, the embedding dimension of every weight over fsdp x fsdp_transpose x
context. Pipeline, expert and the other axes are not implemented: a config that sets them above 1
is refused with a message rather than run as something else.

Each traced step is wrapped in `jax.profiler.StepTraceAnnotation("train", step_num=i)` and blocks
on its result inside the annotation (as tests/profiles/make_cpu_profiles.py), so XProf's step table
holds the step times.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from server.common.dims import DecoderDims

# The mesh the step builds: MaxText's mesh_axes order (base.yml) for the axes this model implements.
MESH_AXES = ("data", "fsdp", "fsdp_transpose", "context", "tensor")
UNSUPPORTED_AXES = ("diloco", "pipeline", "context_usp_ulysses", "tensor_sequence", "expert", "autoregressive")
REMAT = ("full", "minimal", "none")


class SpecError(ValueError):
    """The config cannot be run by this step (the message says which key)."""


@dataclass(frozen=True)
class TrainSpec(DecoderDims):
    pdbs: int
    seq: int
    remat: str
    mesh: dict[str, int]  # MESH_AXES -> degree
    devices: int
    steps: int = 10
    warmup: int = 2
    source: str = ""  # the YAML this was read from
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def global_batch(self) -> int:
        return self.pdbs * self.devices

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch * self.seq

    def mesh_label(self) -> str:
        from server.config.axes import degrees_label

        return degrees_label(self.mesh)

    @classmethod
    def from_config(cls, path: Path, text: str | None = None, steps: int = 10, warmup: int = 2) -> TrainSpec:
        """What to run for a MaxText YAML, resolved by ASAP (its slice must be declared and registered)."""
        from server.common.findings import Severity
        from server.perf import arith
        from server.services.analysis import analyze

        text = text if text is not None else path.read_text(encoding="utf-8")
        an = analyze(path, text)
        chk, cfg = an.check, an.config
        errors = [f for f in an.diagnostics if f.severity == Severity.ERROR]
        if errors:
            raise SpecError(f"{path}: {errors[0].code} {errors[0].message}")
        if chk.slice is None or not chk.consistent:
            raise SpecError(f"{path}: no slice declared or the mesh does not resolve on it")
        if chk.slice.chip.generation != "cpu":
            raise SpecError(f"{path}: declares {chk.slice.name}; this step runs on the CPU slice (cpu-N)")
        degrees = {d.axis.name: int(chk.degree(d.axis.name) or 1) for d in chk.ici}
        for a in UNSUPPORTED_AXES:
            if degrees.get(a, 1) != 1:
                raise SpecError(f"{path}: ici_{a}_parallelism={degrees[a]} is not implemented by the CPU train step")
        s = arith.shape(cfg)
        if s.moe or s.n_mlp_in != 2 or s.tied_embedding:
            raise SpecError(f"{path}: the CPU train step is a dense gated-MLP decoder with untied logits")
        pdbs = cfg.get("per_device_batch_size")
        if not isinstance(pdbs, (int, float)) or isinstance(pdbs, bool) or pdbs < 1 or pdbs != int(pdbs):
            raise SpecError(f"{path}: per_device_batch_size must be a whole number >= 1 here, got {pdbs!r}")
        remat = str(cfg.get("remat_policy", "full"))
        if remat not in REMAT:
            raise SpecError(f"{path}: remat_policy {remat!r} is not implemented here (one of {', '.join(REMAT)})")
        return cls(
            **s.dims(),
            pdbs=int(pdbs),
            seq=int(cfg.get("max_target_length", 2048)),
            remat=remat,
            mesh={a: degrees.get(a, 1) for a in MESH_AXES},
            devices=chk.slice.devices,
            steps=steps,
            warmup=warmup,
            source=str(path),
        )


@dataclass
class RunResult:
    """What one run measured (wall clock; the profile holds the rest)."""

    profile_dir: str
    wall_step_s: list[float]
    compile_s: float
    loss: list[float]

    @property
    def wall_median_s(self) -> float:
        return statistics.median(self.wall_step_s)


def run(spec: TrainSpec, out_dir: Path, timeout: float = 600.0) -> RunResult:
    """Run and profile `spec` in a child process with `spec.devices` CPU devices."""
    from server.lab.cpu_slice import ROOT, child_env

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "spec.json").write_text(json.dumps(asdict(spec), indent=1) + "\n", encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "server.lab.cpu_train", str(out_dir / "spec.json"), str(out_dir)],
        capture_output=True,
        text=True,
        env=child_env(spec.devices),
        timeout=timeout,
        cwd=ROOT,
    )
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-8:])
        raise RuntimeError(f"CPU train step failed (exit {proc.returncode}): {tail}")
    res = json.loads((out_dir / "result.json").read_text(encoding="utf-8"))
    return RunResult(**res)


# -- the step itself (child process) ----------------------------------------------------------------------
def _train(spec: TrainSpec, out_dir: Path) -> RunResult:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    if jax.device_count() != spec.devices:
        raise SystemExit(f"expected {spec.devices} devices, JAX sees {jax.device_count()}")
    shape = [spec.mesh[a] for a in MESH_AXES]
    mesh = Mesh(np.array(jax.devices()).reshape(shape), MESH_AXES)
    batch = ("data", "fsdp", "fsdp_transpose")
    embed = ("fsdp", "fsdp_transpose", "context")
    f32, bf16 = jnp.float32, jnp.bfloat16
    d, h, k, hd, m, v, t = spec.emb, spec.q_heads, spec.kv_heads, spec.head_dim, spec.mlp, spec.vocab, spec.seq

    # Logical -> mesh, as MaxText's rules: weights [layers, ...] keep the layer dimension unsharded.
    wspec = {
        "embedding": P("tensor", embed),
        "final_norm": P(None),
        "logits": P(embed, "tensor"),
        "layers": {
            "pre_norm": P(None, None),
            "post_norm": P(None, None),
            "wq": P(None, embed, "tensor", None),
            "wk": P(None, embed, "tensor", None),
            "wv": P(None, embed, "tensor", None),
            "wo": P(None, "tensor", None, embed),
            "wi_0": P(None, embed, "tensor"),
            "wi_1": P(None, embed, "tensor"),
            "wo_mlp": P(None, "tensor", embed),
        },
    }
    shapes = {
        "embedding": (v, d),
        "final_norm": (d,),
        "logits": (d, v),
        "layers": {
            "pre_norm": (spec.layers, d),
            "post_norm": (spec.layers, d),
            "wq": (spec.layers, d, h, hd),
            "wk": (spec.layers, d, k, hd),
            "wv": (spec.layers, d, k, hd),
            "wo": (spec.layers, h, hd, d),
            "wi_0": (spec.layers, d, m),
            "wi_1": (spec.layers, d, m),
            "wo_mlp": (spec.layers, m, d),
        },
    }
    p_sh = jax.tree.map(lambda s: NamedSharding(mesh, s), wspec, is_leaf=lambda x: isinstance(x, P))
    act = NamedSharding(mesh, P(batch, "context", None))
    act_heads = NamedSharding(mesh, P(batch, "context", "tensor", None))
    act_mlp = NamedSharding(mesh, P(batch, "context", "tensor"))
    tok_sh = NamedSharding(mesh, P(batch, "context"))
    logits_sh = NamedSharding(mesh, P(batch, "context", "tensor"))

    def c(x: jax.Array, sh: NamedSharding) -> jax.Array:
        return jax.lax.with_sharding_constraint(x, sh)

    def rms(x: jax.Array, scale: jax.Array) -> jax.Array:
        x32 = x.astype(f32)
        y = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + 1e-6)
        return (y * scale).astype(bf16)

    mask = jnp.tril(jnp.ones((t, t), bool))

    def layer(x: jax.Array, w: dict[str, jax.Array]) -> tuple[jax.Array, None]:
        y = rms(x, w["pre_norm"])
        q = c(jnp.einsum("btd,dhk->bthk", y, w["wq"].astype(bf16)), act_heads)
        kk = c(jnp.einsum("btd,dhk->bthk", y, w["wk"].astype(bf16)), act_heads)
        vv = c(jnp.einsum("btd,dhk->bthk", y, w["wv"].astype(bf16)), act_heads)
        if h != k:
            kk, vv = jnp.repeat(kk, h // k, axis=2), jnp.repeat(vv, h // k, axis=2)
        s = jnp.einsum("bthk,bshk->bhts", q, kk).astype(f32) / math.sqrt(hd)
        p = jax.nn.softmax(jnp.where(mask, s, -1e30), axis=-1).astype(bf16)
        o = c(jnp.einsum("bhts,bshk->bthk", p, vv), act_heads)
        x = c(x + jnp.einsum("bthk,hkd->btd", o, w["wo"].astype(bf16)), act)
        y = rms(x, w["post_norm"])
        a = jax.nn.silu(c(y @ w["wi_0"].astype(bf16), act_mlp)) * c(y @ w["wi_1"].astype(bf16), act_mlp)
        return c(x + a @ w["wo_mlp"].astype(bf16), act), None

    if spec.remat == "full":
        layer = jax.checkpoint(layer, policy=jax.checkpoint_policies.nothing_saveable)
    elif spec.remat == "minimal":
        layer = jax.checkpoint(layer, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)

    def loss_fn(params: dict[str, Any], tokens: jax.Array, targets: jax.Array) -> jax.Array:
        x = c(params["embedding"].astype(bf16)[tokens], act)
        x, _ = jax.lax.scan(layer, x, params["layers"])
        x = rms(x, params["final_norm"])
        logits = c(x @ params["logits"].astype(bf16), logits_sh).astype(f32)
        logp = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.mean(jnp.take_along_axis(logp, targets[..., None], axis=-1))

    b1, b2, lr, eps, wd = 0.9, 0.95, 1e-3, 1e-8, 0.1

    def train_step(state: dict[str, Any], tokens: jax.Array, targets: jax.Array) -> tuple[dict[str, Any], jax.Array]:
        loss, g = jax.value_and_grad(loss_fn)(state["params"], tokens, targets)
        n = state["count"] + 1
        mu = jax.tree.map(lambda a, b: b1 * a + (1 - b1) * b, state["mu"], g)
        nu = jax.tree.map(lambda a, b: b2 * a + (1 - b2) * b * b, state["nu"], g)
        c1, c2 = 1 - b1**n, 1 - b2**n
        params = jax.tree.map(
            lambda p, a, b: p - lr * ((a / c1) / (jnp.sqrt(b / c2) + eps) + wd * p), state["params"], mu, nu
        )
        return {"params": params, "mu": mu, "nu": nu, "count": n}, loss

    keys = iter(jax.random.split(jax.random.key(0), 64))

    def init(path: Any, s: tuple[int, ...], sh: NamedSharding) -> jax.Array:
        if "norm" in jax.tree_util.keystr(path):
            return jax.device_put(jnp.ones(s, f32), sh)
        return jax.device_put(jax.random.normal(next(keys), s, f32) * 0.02, sh)

    params = jax.tree_util.tree_map_with_path(init, shapes, p_sh, is_leaf=lambda x: isinstance(x, tuple))
    zeros = jax.tree.map(lambda p: jnp.zeros_like(p), params)
    state = {"params": params, "mu": zeros, "nu": jax.tree.map(lambda p: jnp.zeros_like(p), params), "count": 0}
    state_sh = {"params": p_sh, "mu": p_sh, "nu": p_sh, "count": NamedSharding(mesh, P())}
    state = jax.device_put(state, state_sh)
    gb = spec.global_batch
    tokens = jax.device_put(jax.random.randint(next(keys), (gb, t), 0, v), tok_sh)
    targets = jax.device_put(jnp.roll(tokens, -1, axis=1), tok_sh)
    step = jax.jit(
        train_step,
        in_shardings=(state_sh, tok_sh, tok_sh),
        out_shardings=(state_sh, NamedSharding(mesh, P())),
        donate_argnums=0,
    )
    t0 = time.perf_counter()
    compiled = step.lower(state, tokens, targets).compile()
    compile_s = time.perf_counter() - t0
    losses = []
    for _ in range(spec.warmup):
        state, loss = compiled(state, tokens, targets)
        losses.append(float(loss))
    wall = []
    with jax.profiler.trace(str(out_dir)):
        for i in range(spec.steps):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                t1 = time.perf_counter()
                state, loss = compiled(state, tokens, targets)
                loss.block_until_ready()
                wall.append(time.perf_counter() - t1)
            losses.append(float(loss))
    return RunResult(str(out_dir), wall, compile_s, losses)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Run and profile a TrainSpec on simulated CPU devices")
    ap.add_argument("spec", type=Path)
    ap.add_argument("out", type=Path)
    args = ap.parse_args(argv)
    raw = json.loads(args.spec.read_text(encoding="utf-8"))
    res = _train(TrainSpec(**raw), args.out)
    (args.out / "result.json").write_text(json.dumps(asdict(res)) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
