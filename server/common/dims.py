"""The decoder's dimensions a train step is built from, shared by the cost model's shape (server/perf/arith.py
Shape), the compiler's reference model (server/compile/ref_model.py RefSpec) and the CPU train step
(server/lab/cpu_train.py TrainSpec).

Standard library only: the reference model and the CPU step run in child processes that stay light.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class DecoderDims:
    """Widths and counts of a dense decoder: the first fields of each class that inherits it."""

    emb: int
    q_heads: int
    kv_heads: int
    head_dim: int
    mlp: int
    layers: int
    vocab: int

    def dims(self) -> dict[str, Any]:
        """These dimensions alone, by field name (what a subclass is built from)."""
        return {f.name: getattr(self, f.name) for f in fields(DecoderDims)}
