"""The decoder's dimensions a train step is built from, shared by the cost model's shape (server/perf/arith.py
Shape), the compiler's reference model (server/compile/ref_model.py RefSpec) and the CPU train step
(server/lab/cpu_train.py TrainSpec).

Standard library only: the reference model and the CPU step run in child processes that stay light.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

# The largest width or count ASAP reads for a model (about 1.1e12): orders of magnitude beyond any model, and
# small enough that every parameter and FLOP count formed from a few of them stays a finite float.
MAX_DIM = 2**40
# The most decoder layers ASAP builds (each is built and priced on its own): far beyond any model.
MAX_LAYERS = 2**16


def whole_number(value: Any) -> int | None:
    """A config value read as a whole number, as MaxText's pydantic config coerces it: an int, a float with no
    fraction (4.0), or text of ASCII digits with an optional sign and underscores (a command-line override);
    None for anything else (a bool, inf, nan, 1.5, '²', '٣', a list). No range check: see MAX_DIM."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str):
        text = value.strip()
        digits = text.removeprefix("-").removeprefix("+").replace("_", "")
        if digits.isascii() and digits.isdecimal() and len(digits) <= 64:
            return int(text.replace("_", ""))
    return None


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
