"""HBM per chip: weights, gradients and optimizer state divided by the axes that shard them,
activations kept for the backward pass under the remat policy, and a stated allowance for
XLA's temporaries; compared with the slice's HBM.

Formulas: DOMAIN.md §4 (state bytes = params x bytes/param / S_w, S_w = product of the axes
that shard weights, `data` excluded; activations = layers x local tokens x kept bytes).
"""

from __future__ import annotations

from dataclasses import dataclass

from server.perf.arith import BytesPerParam, Params, Shape
from server.perf.layout import TENSOR, WEIGHT_SHARDING, Layout
from server.perf.remat import RematPolicy

ACT_BYTES = 2  # bf16 activations (`dtype`)
# XLA's temporaries beyond what the model keeps: the working set of one layer's backward pass
# (each of its tensors once more) and one layer's gathered bf16 weights (XLA gathers them matrix
# by matrix, prefetching the next). A stated allowance, not a measurement: compile for the slice
# (issue 8) for the exact figure; `Memory.verdict` leaves a band for it (TIGHT_BAND).
TEMP_LAYERS = 1.0
# bf16 [tokens, vocab] buffers the loss keeps. The TPU compiler keeps two for server/perf/ref_model.py with
# MaxText's loss (float32 cast, cross_entropy_with_logits' custom VJP): the logits and their gradient; the
# casts and exponentials are recomputed inside the fused gradient kernel (libtpu 0.0.42.1 buffer assignment,
# bench/memory_vs_compiler.py). Kept at one: with two, tuned MaxText configs that ran (llama3-8b seq 8192
# pdbs 8 on v6e-256, bench/references.py) would not fit, so at that size MaxText's program keeps less than
# the reference's unconstrained compile (XLA rematerialises under memory pressure). Open: issue 8.
LOGITS_BUFFERS = 1
# The band around the usable HBM where the estimate cannot decide ('tight', a warning): from 10% under
# to 15% over. Published runs that did run (bench/references.py) come out up to 13% over the usable
# HBM in this model (v5p 32B, `minimal` remat), so an error needs more than that.
TIGHT_BAND = (0.90, 1.15)
# HBM the runtime keeps for itself (program, XLA's reserved scratch), as a fraction of capacity.
RUNTIME_RESERVE = 0.04


def tensor_dims(s: Shape, tensors: frozenset[str]) -> float:
    """Elements per token of the named per-layer tensors (see server/perf/remat.py)."""
    q, kv = s.q_heads * s.head_dim, s.kv_heads * s.head_dim
    mlp = (s.experts_per_tok + s.shared_experts) * s.moe_mlp if s.moe else s.mlp
    dims = {
        "decoder_layer_input": s.emb,
        "query_proj": q,
        "key_proj": kv,
        "value_proj": kv,
        "context": q,
        "out_proj": s.emb,
        "mlpwi": s.n_mlp_in * mlp,
        "mlpwo": s.emb,
    }
    return float(sum(v for k, v in dims.items() if k in tensors))


def kept_dims(s: Shape, remat: RematPolicy) -> float:
    """Elements per token kept per layer in HBM for the backward pass (offloaded ones excluded)."""
    return tensor_dims(s, remat.saved - remat.offloaded)


def all_dims(s: Shape) -> float:
    """Elements per token of every tensor of a layer (the backward working set)."""
    q, kv = s.q_heads * s.head_dim, s.kv_heads * s.head_dim
    mlp = (s.experts_per_tok + s.shared_experts) * s.moe_mlp if s.moe else s.mlp
    return float(3 * s.emb + 2 * q + 2 * kv + s.n_mlp_in * mlp + mlp)


@dataclass(frozen=True)
class Memory:
    components: dict[str, float]  # bytes per chip
    hbm_bytes: float

    @property
    def total(self) -> float:
        """Peak bytes: the model state and kept activations are live throughout; the logits (live
        around the loss, between the forward and backward passes) and one layer's backward working
        set (live inside the backward scan) are not live at once, so the larger of the two counts."""
        c = self.components
        transient = max(c.get("logits", 0.0), c.get("temporaries", 0.0))
        return sum(v for k, v in c.items() if k not in ("logits", "temporaries")) + transient

    @property
    def usable(self) -> float:
        return self.hbm_bytes * (1 - RUNTIME_RESERVE)

    @property
    def fits(self) -> bool:
        return self.total <= self.usable

    @property
    def verdict(self) -> str:
        """'fits', 'tight' (within TIGHT_BAND of the usable HBM) or 'does not fit'."""
        low, high = TIGHT_BAND
        if self.total <= low * self.usable:
            return "fits"
        return "tight" if self.total <= high * self.usable else "does not fit"

    @property
    def headroom(self) -> float:
        return self.usable - self.total

    def to_json(self) -> dict[str, object]:
        return {
            "components": {k: round(v) for k, v in self.components.items()},
            "total_bytes": round(self.total),
            "hbm_bytes": round(self.hbm_bytes),
            "usable_bytes": round(self.usable),
            "headroom_bytes": round(self.headroom),
            "fits": self.fits,
            "verdict": self.verdict,
        }


def memory(
    s: Shape,
    p: Params,
    bpp: BytesPerParam,
    lay: Layout,
    pdbs: float,
    seq: int,
    remat: RematPolicy,
    vocab_tiles: int = 1,
) -> Memory:
    """Bytes per chip (per JAX device; a tpu7x chip holds two) for one microbatch."""
    chip = lay.slice.chip
    hbm = chip.hbm_bytes / chip.devices_per_chip
    shards = lay.degree(*WEIGHT_SHARDING)
    total_params = p.total(s.layers)
    tp = lay.degree(*TENSOR)
    # Local tokens of a device: its batch shard's sequences, split over the non-batch axes that split
    # tokens or hidden dims (tensor, context, pipeline): pdbs x seq in every case.
    tokens = pdbs * seq
    acts = s.layers * tokens * kept_dims(s, remat) * ACT_BYTES
    gathered = p.per_layer() * ACT_BYTES / max(1, lay.degree("tensor", "expert") if s.moe else tp)
    working = TEMP_LAYERS * tokens * all_dims(s) * ACT_BYTES + gathered
    # bf16 logits (`LOGITS_BUFFERS` of them); XLA fuses MaxText's float32 cast and softmax cross-entropy and
    # its gradient around them. Tensor parallelism splits the vocabulary, not the batch: a device holds the
    # logits of its tensor group's pdbs x tp sequences over vocab / tp columns, pdbs x seq x vocab in all
    # (MaxText's activation_embed_and_logits_batch rule has no tensor axis; the TPU compiler's buffer
    # assignment of MaxText's own llama3-8b step on v6e-16 with tensor 4: bf16[8, 2048, 32064] for pdbs 2).
    logits = LOGITS_BUFFERS * tokens * s.vocab * ACT_BYTES / max(1, vocab_tiles)
    # A bf16 copy of the scanned layers' weights, sharded like them: each layer casts its (float32) weights to
    # the activation dtype, and XLA converts the whole stack once, before the forward scan, for the forward,
    # the rematerialised forward and the backward scans to slice from (buffer assignment of the same compile:
    # bf16[layers, ...] beside every float32 weight stack). None when the weights already are bf16.
    casts = s.layers * p.per_layer() * ACT_BYTES / shards if bpp.weights > ACT_BYTES else 0.0
    return Memory(
        {
            "weights": total_params * bpp.weights / shards,
            "weight_casts": casts,
            "gradients": total_params * bpp.grads / shards,
            "optimizer": total_params * bpp.optimizer / shards,
            "activations": acts,
            "logits": logits,
            "temporaries": working,
        },
        hbm,
    )
