"""A reference decoder-only transformer in plain JAX, sharded the way MaxText shards its llama2-style
decoder, for compiling a train step ahead of time when MaxText itself is not at hand (issue 8).

It is an APPROXIMATION of MaxText's program, not MaxText:
- the same parameters (embedding, per layer RMSNorm x2, q/k/v/out projections with grouped kv heads,
  a gated or plain MLP, the final norm and an untied or tied logits projection), in `weight_dtype`,
  cast to `dtype` (bf16) for the matmuls; AdamW with two moments in `mu_dtype`, state donated;
- the same logical axis names on every weight and on the activations at layer boundaries, turned into
  mesh axes by MaxText's `logical_axis_rules` (base.yml) with flax's first-free-rule resolution;
- the layers scanned (`scan_layers`) or unrolled, each under `jax.checkpoint` with the remat policy's
  saved names (MaxText's `checkpoint_name`s: query_proj, key_proj, value_proj, context, out_proj,
  mlpwi_0/mlpwi_1, mlpwo), offloaded names to pinned host memory;
- attention as MaxText runs it on TPU: the Pallas splash attention kernel (jax.experimental.pallas), causal,
  under shard_map over the batch and head shards; plain dot-product attention (T x T scores kept) only when
  the mesh splits the sequence (context parallelism) or the shapes do not divide;
- the loss as MaxText's: float32 logits (cast_logits_to_fp32), one-hot targets, cross_entropy_with_logits'
  custom VJP (it keeps the float32 logits and their exponentials for the backward pass);
- what it leaves out: rotary embeddings, dropout, segment ids, MoE, pipeline stages, gradient accumulation
  (one microbatch is compiled) and the layer axis of stacked weights (here axis 0; MaxText's param_scan_axis
  is 1).

Source for the rules: MaxText src/maxtext/configs/base.yml (`logical_axis_rules`, `mesh_axes`) at
commit 000b810b; weight annotations from src/maxtext/layers/{attentions,linears,embeddings}.py.
Nothing here imports jax at module import: `build` does, so the editor's process never pays for it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from server.common.dims import DecoderDims

# MaxText base.yml logical_axis_rules (training part), in order: flax takes, for each array dimension,
# the first rule naming it whose mesh axes are not yet used by another dimension of the same array.
LOGICAL_AXIS_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("activation_embed_and_logits_batch", ("data", "stage", "fsdp", "fsdp_transpose", "expert")),
    ("activation_vocab", ("tensor", "tensor_sequence")),
    ("activation_vocab", ("tensor",)),
    ("activation_vocab", ("tensor_sequence",)),
    ("vocab", ("tensor", "tensor_sequence", "autoregressive")),
    ("embed_vocab", ("fsdp", "fsdp_transpose", "context", "context_usp_ulysses", "expert")),
    ("activation_batch_attn", ("data", "fsdp", "fsdp_transpose", "expert")),
    ("activation_heads", ("tensor", "tensor_sequence", "autoregressive")),
    ("activation_kv_heads", ("tensor", "tensor_sequence")),
    ("activation_length_attn", ("context", "context_usp_ulysses")),
    ("activation_kv", ("tensor", "tensor_sequence")),
    ("heads", ("tensor", "tensor_sequence", "autoregressive")),
    ("q_heads", ("tensor", "tensor_sequence", "autoregressive")),
    ("kv_heads", ("tensor", "tensor_sequence", "autoregressive")),
    ("qkv", ()),
    ("kv", ()),
    ("kv_head_dim", ()),
    ("activation_mlp", ("tensor", "tensor_sequence")),
    ("activation_batch", ("data", "fsdp", "fsdp_transpose", "expert")),
    ("activation_length", ("context", "context_usp_ulysses")),
    ("activation_norm_length", ("tensor_sequence", "context", "context_usp_ulysses")),
    ("activation_embed", ("tensor",)),
    ("activation_stage", ("stage",)),
    ("mlp", ("fsdp_transpose", "tensor", "tensor_sequence", "autoregressive")),
    ("embed", ("fsdp", "fsdp_transpose", "context", "context_usp_ulysses", "expert")),
    ("embed", ("fsdp", "context", "context_usp_ulysses", "expert")),
    ("norm", ("tensor",)),
    ("layers", ("stage",)),
)

# Logical axes of each weight (MaxText's llama2 decoder block); the layer axis is added when stacked.
WEIGHT_AXES: dict[str, tuple[str, ...]] = {
    "embedding": ("vocab", "embed"),
    "logits": ("embed", "vocab"),
    "final_norm": ("norm",),
    "attn_norm": ("norm",),
    "mlp_norm": ("norm",),
    "query": ("embed", "q_heads", "kv"),
    "key": ("embed", "kv_heads", "kv_head_dim"),
    "value": ("embed", "kv_heads", "kv_head_dim"),
    "out": ("heads", "kv", "embed"),
    "wi_0": ("embed", "mlp"),
    "wi_1": ("embed", "mlp"),
    "wo": ("mlp", "embed"),
}
LAYER_WEIGHTS = ("attn_norm", "mlp_norm", "query", "key", "value", "out", "wi_0", "wi_1", "wo")

# The remat policy's tensor names (server/perf/remat.py) -> MaxText's checkpoint_name tags.
CHECKPOINT_NAMES: dict[str, tuple[str, ...]] = {
    "query_proj": ("query_proj",),
    "key_proj": ("key_proj",),
    "value_proj": ("value_proj",),
    "context": ("context",),
    "out_proj": ("out_proj",),
    "mlpwi": ("mlpwi_0", "mlpwi_1"),
    "mlpwo": ("mlpwo",),
}

JNP_DTYPES = {
    "float32": "float32",
    "fp32": "float32",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
}


def logical_to_mesh(
    names: tuple[str | None, ...], rules: tuple[tuple[str, tuple[str, ...]], ...] = LOGICAL_AXIS_RULES
) -> tuple[tuple[str, ...] | None, ...]:
    """Mesh axes per array dimension, as flax's `logical_to_mesh_axes` resolves MaxText's rules."""
    result: list[tuple[str, ...] | None] = [None] * len(names)
    assigned = [False] * len(names)
    for logical, mesh_axes in rules:
        if logical not in names:
            continue
        pos = names.index(logical)
        used = {a for r in result if r for a in r}
        if not assigned[pos] and not (set(mesh_axes) & used):
            result[pos] = mesh_axes or None
            assigned[pos] = True
    return tuple(result)


@dataclass(frozen=True)
class RefSpec(DecoderDims):
    """Everything the reference train step depends on (plain data: it crosses to the worker as JSON)."""

    n_mlp_in: int  # 2: gated (silu x linear), 1: a single input matrix
    tied_embedding: bool
    batch: int  # global batch (sequences) of one microbatch
    seq: int
    dtype: str  # activations
    weight_dtype: str
    mu_dtype: str
    opt_type: str  # adamw | sgd (anything else is compiled as adamw)
    remat_saved: tuple[str, ...]  # remat.py tensor names kept in HBM
    remat_offloaded: tuple[str, ...]
    remat_policy: str
    scan_layers: bool

    def with_layers(self, layers: int) -> RefSpec:
        return RefSpec(**{**asdict(self), "layers": layers})

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["remat_saved"] = list(self.remat_saved)
        d["remat_offloaded"] = list(self.remat_offloaded)
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> RefSpec:
        return RefSpec(**{**d, "remat_saved": tuple(d["remat_saved"]), "remat_offloaded": tuple(d["remat_offloaded"])})


def _weight_shapes(s: RefSpec) -> dict[str, tuple[int, ...]]:
    shapes = {
        "embedding": (s.vocab, s.emb),
        "final_norm": (s.emb,),
        "attn_norm": (s.emb,),
        "mlp_norm": (s.emb,),
        "query": (s.emb, s.q_heads, s.head_dim),
        "key": (s.emb, s.kv_heads, s.head_dim),
        "value": (s.emb, s.kv_heads, s.head_dim),
        "out": (s.q_heads, s.head_dim, s.emb),
        "wi_0": (s.emb, s.mlp),
        "wo": (s.mlp, s.emb),
    }
    if s.n_mlp_in > 1:
        shapes["wi_1"] = (s.emb, s.mlp)
    if not s.tied_embedding:
        shapes["logits"] = (s.emb, s.vocab)
    return shapes


def param_count(s: RefSpec) -> int:
    """Parameters of the reference model (matches server/perf/arith.py params() for dense models)."""
    import math

    total = 0
    for name, shape in _weight_shapes(s).items():
        n = math.prod(shape)
        total += n * s.layers if name in LAYER_WEIGHTS else n
    return total


def build(s: RefSpec, mesh: Any) -> tuple[Any, tuple[Any, ...]]:
    """(jitted train step, abstract arguments with their NamedShardings) for `mesh` (a jax Mesh whose
    axis names are MaxText's mesh_axes). `step.lower(*args).compile()` compiles it; nothing is allocated."""
    import math

    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    act = jnp.dtype(JNP_DTYPES.get(s.dtype, "bfloat16"))
    wdt = jnp.dtype(JNP_DTYPES.get(s.weight_dtype, "float32"))
    mudt = jnp.dtype(JNP_DTYPES.get(s.mu_dtype, "float32"))
    mesh_names = set(mesh.axis_names)
    rules = tuple((k, tuple(a for a in v if a in mesh_names)) for k, v in LOGICAL_AXIS_RULES)

    def spec(names: tuple[str | None, ...]) -> Any:
        return P(*logical_to_mesh(names, rules))

    def sharding(names: tuple[str | None, ...]) -> Any:
        return NamedSharding(mesh, spec(names))

    def constrain(x: Any, names: tuple[str | None, ...]) -> Any:
        return jax.lax.with_sharding_constraint(x, sharding(names))

    shapes = _weight_shapes(s)
    stacked = s.scan_layers

    def weight_axes(name: str) -> tuple[str | None, ...]:
        axes = WEIGHT_AXES[name]
        if name in LAYER_WEIGHTS and stacked:
            return ("layers", *axes)
        return axes

    def abstract(name: str, dtype: Any) -> Any:
        shape = shapes[name]
        if name in LAYER_WEIGHTS and stacked:
            shape = (s.layers, *shape)
        return jax.ShapeDtypeStruct(shape, dtype, sharding=sharding(weight_axes(name)))

    def tree(dtype: Any) -> dict[str, Any]:
        top = {k: abstract(k, dtype) for k in shapes if k not in LAYER_WEIGHTS}
        per_layer = [k for k in LAYER_WEIGHTS if k in shapes]
        if stacked:
            top["layers"] = {k: abstract(k, dtype) for k in per_layer}
        else:
            top["layers"] = [{k: abstract(k, dtype) for k in per_layer} for _ in range(s.layers)]
        return top

    params = tree(wdt)
    state: dict[str, Any] = {"params": params, "step": jax.ShapeDtypeStruct((), jnp.int32, sharding=sharding(()))}
    if s.opt_type != "sgd":
        state["mu"] = tree(mudt)
        state["nu"] = tree(mudt)
    tokens = jax.ShapeDtypeStruct(
        (s.batch, s.seq), jnp.int32, sharding=sharding(("activation_embed_and_logits_batch", "activation_length"))
    )

    from jax.ad_checkpoint import checkpoint_name

    def rms(x: Any, scale: Any) -> Any:
        xf = x.astype(jnp.float32)
        y = xf * jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + 1e-6)
        return (y * scale.astype(jnp.float32)).astype(act)

    layer_io = ("activation_batch", "activation_norm_length", "activation_embed")
    heads = ("activation_batch", "activation_length", "activation_heads", "activation_kv")
    kv_heads = ("activation_batch", "activation_length", "activation_kv_heads", "activation_kv")

    def plain_attention(q: Any, k: Any, v: Any) -> Any:
        """Causal dot-product attention that materialises the T x T scores (MaxText's `dot_product`)."""
        g = s.q_heads // s.kv_heads
        b, t = q.shape[0], q.shape[1]
        qg = q.reshape(b, t, s.kv_heads, g, s.head_dim)
        scores = jnp.einsum("bqhgk,bshk->bhgqs", qg, k).astype(jnp.float32) / (s.head_dim**0.5)
        causal = jnp.tril(jnp.ones((t, t), dtype=bool))
        scores = jnp.where(causal, scores, jnp.finfo(jnp.float32).min)
        probs = jax.nn.softmax(scores, axis=-1).astype(act)
        return jnp.einsum("bhgqs,bshk->bqhgk", probs, v).reshape(b, t, s.q_heads, s.head_dim)

    # MaxText's TPU default (attention: autoselected -> flash): the Pallas splash attention kernel, one per
    # batch/head shard under shard_map, q, k, v transposed to [batch, heads, length, head_dim], causal mask,
    # 512-blocks (base.yml sa_block_*), the query scaled before the kernel. Source: MaxText
    # src/maxtext/layers/attention_op.py (tpu_flash_attention) at commit 000b810b. It keeps no T x T scores.
    # A mesh that splits the sequence (context parallelism) compiles the plain attention instead.
    batch_axes = logical_to_mesh(("activation_batch_attn",), rules)[0] or ()
    head_axes = logical_to_mesh(("activation_heads",), rules)[0] or ()
    length_axes = logical_to_mesh(("activation_length_attn",), rules)[0] or ()
    sizes = dict(zip(mesh.axis_names, mesh.devices.shape, strict=True))
    head_shards = math.prod(sizes[a] for a in head_axes)
    use_splash = (
        math.prod(sizes[a] for a in length_axes) == 1
        and s.batch % math.prod(sizes[a] for a in batch_axes) == 0
        and s.kv_heads % head_shards == 0
        and s.seq % 128 == 0
    )

    def splash_attention(q: Any, k: Any, v: Any) -> Any:
        from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as sk
        from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as sm

        t = q.shape[1]
        blk = min(512, t)
        sizes_kw = dict.fromkeys(
            ("block_q", "block_kv", "block_kv_compute", "block_q_dkv", "block_kv_dkv", "block_kv_dkv_compute"), blk
        )
        blocks = sk.BlockSizes(**sizes_kw, block_q_dq=blk, block_kv_dq=blk)
        local_heads = s.q_heads // head_shards
        mask = sm.MultiHeadMask(tuple(sm.CausalMask((t, t)) for _ in range(local_heads)))
        kernel = sk.make_splash_mha(mask=mask, head_shards=1, q_seq_shards=1, block_sizes=blocks)
        spec = P(batch_axes or None, head_axes or None, None, None)

        def local(q: Any, k: Any, v: Any) -> Any:
            return jax.vmap(kernel)(q, k, v)

        sharded = jax.shard_map(local, mesh=mesh, in_specs=(spec, spec, spec), out_specs=spec, check_vma=False)
        q = (q / (s.head_dim**0.5)).astype(act)
        out = sharded(*(x.transpose(0, 2, 1, 3) for x in (q, k, v)))
        return out.transpose(0, 2, 1, 3)

    attention = splash_attention if use_splash else plain_attention

    def layer(x: Any, w: dict[str, Any]) -> Any:
        x = constrain(x, layer_io)
        h = rms(x, w["attn_norm"])
        q = checkpoint_name(constrain(jnp.einsum("btd,dhk->bthk", h, w["query"].astype(act)), heads), "query_proj")
        k = checkpoint_name(constrain(jnp.einsum("btd,dhk->bthk", h, w["key"].astype(act)), kv_heads), "key_proj")
        v = checkpoint_name(constrain(jnp.einsum("btd,dhk->bthk", h, w["value"].astype(act)), kv_heads), "value_proj")
        ctx = attention(q, k, v)
        ctx = checkpoint_name(constrain(ctx, heads), "context")
        o = checkpoint_name(jnp.einsum("bthk,hkd->btd", ctx, w["out"].astype(act)), "out_proj")
        x = constrain(x + o, layer_io)
        h = rms(x, w["mlp_norm"])
        mlp_axes = ("activation_batch", "activation_length", "activation_mlp")
        a = checkpoint_name(constrain(jnp.einsum("btd,df->btf", h, w["wi_0"].astype(act)), mlp_axes), "mlpwi_0")
        if s.n_mlp_in > 1:
            lin = jnp.einsum("btd,df->btf", h, w["wi_1"].astype(act))
            lin = checkpoint_name(constrain(lin, mlp_axes), "mlpwi_1")
            a = jax.nn.silu(a) * lin
        else:
            a = jax.nn.gelu(a)
        y = checkpoint_name(jnp.einsum("btf,fd->btd", a, w["wo"].astype(act)), "mlpwo")
        return constrain(x + y, layer_io)

    saved = tuple(n for t in s.remat_saved for n in CHECKPOINT_NAMES.get(t, ()))
    offloaded = tuple(n for t in s.remat_offloaded for n in CHECKPOINT_NAMES.get(t, ()))
    cp = jax.checkpoint_policies
    if offloaded:
        policy = cp.save_and_offload_only_these_names(
            names_which_can_be_saved=list(saved),
            names_which_can_be_offloaded=list(offloaded),
            offload_src="device",
            offload_dst="pinned_host",
        )
    elif saved:
        policy = cp.save_only_these_names(*saved)
    else:
        policy = cp.nothing_saveable
    remat_layer = jax.checkpoint(layer, policy=policy, prevent_cse=not stacked)

    @jax.custom_vjp
    def cross_entropy(logits: Any, targets: Any) -> Any:
        return ce_fwd(logits, targets)[0]

    def ce_fwd(logits: Any, targets: Any) -> tuple[Any, tuple[Any, ...]]:
        shifted = logits - logits.max(axis=-1, keepdims=True)
        exp_shifted = jnp.exp(shifted)
        sum_exp = jnp.sum(exp_shifted, axis=-1, keepdims=True)
        loss = -jnp.sum(targets * (shifted - jnp.log(sum_exp)), axis=-1)
        return loss, (logits, targets, exp_shifted, sum_exp)

    def ce_bwd(res: tuple[Any, ...], g: Any) -> tuple[Any, Any]:
        logits, targets, exp_shifted, sum_exp = res
        g_logits = g[..., None] * (exp_shifted / sum_exp - targets)
        return g_logits.astype(logits.dtype), jnp.zeros_like(targets)

    cross_entropy.defvjp(ce_fwd, ce_bwd)

    def loss_fn(p: dict[str, Any], tok: Any) -> Any:
        x = p["embedding"].astype(act)[tok]
        x = constrain(x, layer_io)
        if stacked:
            x, _ = jax.lax.scan(lambda c, w: (remat_layer(c, w), None), x, p["layers"])
        else:
            for w in p["layers"]:
                x = remat_layer(x, w)
        x = rms(x, p["final_norm"])
        out_w = p["embedding"].T if s.tied_embedding else p["logits"]
        logits = jnp.einsum("btd,dv->btv", x, out_w.astype(act))
        logits = constrain(logits, ("activation_embed_and_logits_batch", "activation_length", "activation_vocab"))
        # MaxText: logits cast to float32 (base.yml cast_logits_to_fp32: True; layers/decoders.py), one-hot
        # float32 targets and max_utils.cross_entropy_with_logits, whose custom VJP keeps the logits and
        # exp(logits - max) for the backward pass (train.py loss_fn; z_loss 0).
        targets = jax.nn.one_hot(jnp.roll(tok, -1, axis=1), s.vocab, dtype=jnp.float32)
        return jnp.mean(cross_entropy(logits.astype(jnp.float32), targets))

    def step(st: dict[str, Any], tok: Any) -> tuple[dict[str, Any], Any]:
        loss, grads = jax.value_and_grad(loss_fn)(st["params"], tok)
        lr, b1, b2, eps, wd = 1e-4, 0.9, 0.95, 1e-8, 0.1
        count = st["step"] + 1
        if s.opt_type == "sgd":
            new_params = jax.tree.map(lambda p, g: p - lr * g.astype(p.dtype), st["params"], grads)
            return {"params": new_params, "step": count}, loss
        mu = jax.tree.map(lambda m, g: (b1 * m + (1 - b1) * g).astype(m.dtype), st["mu"], grads)
        nu = jax.tree.map(lambda n, g: (b2 * n + (1 - b2) * g * g).astype(n.dtype), st["nu"], grads)
        c1 = 1 - b1 ** count.astype(jnp.float32)
        c2 = 1 - b2 ** count.astype(jnp.float32)

        def update(p: Any, m: Any, n: Any) -> Any:
            u = (m.astype(jnp.float32) / c1) / (jnp.sqrt(n.astype(jnp.float32) / c2) + eps)
            return (p - lr * (u + wd * p)).astype(p.dtype)

        new_params = jax.tree.map(update, st["params"], mu, nu)
        return {"params": new_params, "mu": mu, "nu": nu, "step": count}, loss

    state_shardings = jax.tree.map(lambda a: a.sharding, state)
    jitted = jax.jit(
        step,
        in_shardings=(state_shardings, tokens.sharding),
        out_shardings=(state_shardings, NamedSharding(mesh, P())),
        donate_argnums=(0,),
    )
    return jitted, (state, tokens)
