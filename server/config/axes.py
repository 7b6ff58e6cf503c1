"""MaxText's mesh axes: the `ici_*`/`dcn_*` keys, the mesh axis each one sizes, the order
of `mesh_axes` (least to most network-intense; JAX places the last ones on the fastest
links first) and what each axis shards. Source: MaxText src/maxtext/configs/base.yml
(`mesh_axes`, `logical_axis_rules`) and maxtext_utils.create_device_mesh.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Axis:
    name: str  # the key's middle part: ici_<name>_parallelism
    mesh_axis: str  # the name in mesh_axes
    meaning: str
    ici_default: int = 1
    dcn_default: int = 1
    shards_weights: bool = False
    shards_batch: bool = False
    shards_heads: bool = False

    @property
    def ici_key(self) -> str:
        return f"ici_{self.name}_parallelism"

    @property
    def dcn_key(self) -> str:
        return f"dcn_{self.name}_parallelism"


# In mesh_axes order (base.yml: diloco, data, stage, fsdp, fsdp_transpose, context, context_usp_ulysses,
# context_autoregressive, tensor, tensor_sequence, expert, autoregressive). What each shards follows
# logical_axis_rules: the batch over data/fsdp/fsdp_transpose/expert; heads over tensor/tensor_sequence/
# autoregressive; weights over everything but data (and diloco).
AXES: tuple[Axis, ...] = (
    Axis("diloco", "diloco", "DiLoCo replicas: independent model copies synchronised every few steps."),
    Axis(
        "data",
        "data",
        "Data parallelism: each group holds a full copy of the weights and a slice of the "
        "batch; gradients are all-reduced.",
        dcn_default=-1,
        shards_batch=True,
    ),
    Axis(
        "pipeline",
        "stage",
        "Pipeline parallelism: layers split into stages; microbatches flow through them.",
        shards_weights=True,
    ),
    Axis(
        "fsdp",
        "fsdp",
        "Fully sharded data parallelism (ZeRO-3): weights, gradients and optimizer state "
        "sharded; weights all-gathered per layer, gradients reduce-scattered.",
        ici_default=-1,
        shards_weights=True,
        shards_batch=True,
    ),
    Axis(
        "fsdp_transpose",
        "fsdp_transpose",
        "FSDP on the transposed weight dimension (a second FSDP axis).",
        shards_weights=True,
        shards_batch=True,
    ),
    Axis(
        "context",
        "context",
        "Context parallelism: the sequence is sharded; attention all-gathers keys and values.",
        shards_weights=True,
    ),
    Axis(
        "context_usp_ulysses",
        "context_usp_ulysses",
        "Context parallelism, Ulysses style: all-to-all exchanges sequence shards for head shards around attention.",
        shards_weights=True,
    ),
    Axis(
        "context_autoregressive",
        "context_autoregressive",
        "Context parallelism for autoregressive decoding (inference).",
    ),
    Axis(
        "tensor",
        "tensor",
        "Tensor (model) parallelism: heads and MLP columns sharded; activations "
        "all-reduced (or all-gathered/reduce-scattered) every layer.",
        shards_weights=True,
        shards_heads=True,
    ),
    Axis(
        "tensor_sequence",
        "tensor_sequence",
        "Tensor parallelism with sequence-sharded activations between layers.",
        shards_weights=True,
        shards_heads=True,
    ),
    Axis(
        "expert",
        "expert",
        "Expert parallelism (MoE): experts sharded; tokens routed with all-to-all.",
        shards_weights=True,
        shards_batch=True,
    ),
    Axis(
        "autoregressive",
        "autoregressive",
        "Autoregressive (decode) parallelism, for inference.",
        shards_weights=True,
        shards_heads=True,
    ),
)
KEY_TO_AXIS: dict[str, tuple[str, Axis]] = {
    **{a.ici_key: ("ici", a) for a in AXES},
    **{a.dcn_key: ("dcn", a) for a in AXES},
}

# Keys current MaxText parses but ignores, with what to use instead.
IGNORED_KEYS: dict[str, str] = {
    "ici_tensor_transpose_parallelism": "the 'tensor_transpose' mesh axis was removed from mesh_axes",
    "dcn_tensor_transpose_parallelism": "the 'tensor_transpose' mesh axis was removed from mesh_axes",
    "ici_sequence_parallelism": "the 'sequence' mesh axis was removed; shard the sequence with ici_context_parallelism",
    "dcn_sequence_parallelism": "the 'sequence' mesh axis was removed; shard the sequence with dcn_context_parallelism",
}


def degrees_label(degrees: Mapping[str, int], empty: str = "all 1") -> str:
    """'fsdp=16 x tensor=16': the axes that shard (degree != 1), in the order given; `empty` when none does."""
    return " x ".join(f"{a}={d}" for a, d in degrees.items() if d != 1) or empty


def mesh_label(ici: Mapping[str, int], dcn: Mapping[str, int] | None = None, ici_prefix: str = "") -> str:
    """How ASAP writes a mesh for people: 'fsdp=16 x tensor=16', then '; DCN data=2' when DCN shards;
    `ici_prefix` (e.g. 'ICI ') in front of the ICI part."""
    dcn_part = degrees_label(dcn or {}, empty="")
    return f"{ici_prefix}{degrees_label(ici)}" + (f"; DCN {dcn_part}" if dcn_part else "")
