"""MaxText's `remat_policy`: which per-layer tensors each policy keeps for the backward pass
(costing activation memory) and which it recomputes (costing forward FLOPs again).

Tensors of one decoder layer, after MaxText's layer code and its `checkpoint_name`s:
  decoder_layer_input (D), query_proj (H*hd), key_proj/value_proj (K*hd each), context
  (the attention output, H*hd), out_proj (D), mlpwi (n_in*F: the input projections), mlpwo (D).
Source: MaxText src/maxtext/layers/decoders.py (get_remat_policy) and base.yml's list of
policies, "from most memory / least recompute to least memory / most recompute".
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RematPolicy:
    name: str
    saved: frozenset[str]  # tensors kept in HBM for the backward pass
    offloaded: frozenset[str] = frozenset()  # kept, but in host memory
    note: str = ""

    def recomputed(self) -> frozenset[str]:
        """Matmuls whose forward runs again in the backward pass."""
        kept = self.saved | self.offloaded
        out = set()
        if not {"query_proj", "key_proj", "value_proj"} <= kept:
            out.add("qkv")
        if "context" not in kept:
            out.add("attention")
        if "out_proj" not in kept:
            out.add("out_proj")
        if "mlpwi" not in kept:
            out.add("mlpwi")
        # mlpwo never runs again: its output only feeds the residual sum that becomes the next layer's
        # input, which the scan keeps, so no gradient needs it (JAX's remat recomputes only residuals).
        return frozenset(out)


_QKV = frozenset({"query_proj", "key_proj", "value_proj"})
_ALL_DOTS = _QKV | {"out_proj", "mlpwi", "mlpwo"}
_IN = frozenset({"decoder_layer_input"})

POLICIES: dict[str, RematPolicy] = {
    p.name: p
    for p in (
        RematPolicy("minimal_with_context", _IN | _ALL_DOTS | {"context"}, note="keeps every matmul output"),
        RematPolicy("minimal", _IN | _ALL_DOTS, note="keeps matmul outputs; recomputes the attention core"),
        RematPolicy("save_dot_with_context_except_mlp", _IN | _QKV | {"context", "out_proj"}),
        RematPolicy("save_dot_except_mlpwi", _IN | _QKV | {"out_proj", "mlpwo"}),
        RematPolicy("save_dot_except_mlp", _IN | _QKV | {"out_proj"}),
        RematPolicy("save_qkv_proj", _IN | _QKV),
        RematPolicy("qkv_proj_offloaded", _IN, offloaded=_QKV),
        RematPolicy("minimal_offloaded", _IN, offloaded=_ALL_DOTS),
        RematPolicy("save_out_proj", _IN | {"out_proj"}),
        RematPolicy("full", _IN, note="keeps only each layer's input; recomputes the whole forward"),
    )
}

# MaxText's `custom` policy reads one key per tensor: 'remat', 'device' (keep) or 'offload'.
CUSTOM_KEYS = {
    "decoder_layer_input": ("decoder_layer_input",),
    "query_proj": ("query_proj",),
    "key_proj": ("key_proj",),
    "value_proj": ("value_proj",),
    "context": ("context",),
    "out_proj": ("out_proj",),
    "mlpwi": ("mlpwi", "mlpwi_0", "mlpwi_1"),
    "mlpwo": ("mlpwo",),
}


def resolve(name: object, get: dict[str, object] | None = None) -> RematPolicy | None:
    """The policy a config names; `custom` is assembled from its per-tensor keys."""
    if not isinstance(name, str):
        return None
    if name != "custom":
        return POLICIES.get(name)
    get = get or {}
    saved, off = set(), set()
    for tensor, keys in CUSTOM_KEYS.items():
        values = [get.get(k) for k in keys if get.get(k) is not None]
        v = values[0] if values else "remat"
        if v == "device":
            saved.add(tensor)
        elif v == "offload":
            off.add(tensor)
    if "decoder_layer_input" not in off:  # the scan carries each layer's input in any case
        saved.add("decoder_layer_input")
    return RematPolicy("custom", frozenset(saved), frozenset(off), note="from the config's per-tensor keys")
