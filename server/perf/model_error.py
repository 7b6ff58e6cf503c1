"""How far the performance model can be trusted for each kind of change, and the confidence that follows.

A proposal is a change of the current config (more tensor parallelism, a different DCN assignment, a bigger
batch, ...). What matters is not how well the model predicts one config's step time but how well it predicts
the *ratio* between two configs: the throughput a change buys. `bench/change_errors.py` measures that on pairs
of published MaxText results that differ only by such a change (same model, chip generation, sequence length
and numerics): the error of one pair is log(predicted throughput ratio) - log(published ratio). Per kind of
change the spread of those errors (root mean square) is shrunk towards a prior of PRIOR_WEIGHT pseudo-pairs,
so a kind resting on one pair is not trusted as if it rested on twenty, and a kind no published pair exercises
is priced at the prior and marked as not validated. The table the engine uses is
`server/perf/data/change_errors.json`, written by that bench (`--write`) from the development references; the
bench also scores it leave-one-out and on held-out pairs.

Confidence (`confidence`): the probability that the change is faster at all, if the model's log-ratio error is
normal with the kind's spread: Phi(log(predicted speedup) / sigma), then lowered when the mechanism has no
published pair behind it (x UNVALIDATED) and raised a little when a matching profile calibrated the model. It
is monotone in the predicted gain for one kind of change, and a change the model cannot separate from the
current config (gain within sigma) stays near 50-84% and is not proposed (`beats_error`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

# "dcn": the DCN assignment changes (degree moved between axes over the same slices), which is what a proposal
# changes; "slices": the slice count changes with the same assignment, which published multislice series measure
# (and which validates the DCN collective costs, not the choice of axis).
KINDS = ("tensor", "fsdp", "expert", "context", "pipeline", "dcn", "slices", "batch", "remat")
PRIOR_WEIGHT = 2.0  # pseudo-pairs of the prior in each kind's spread
UNVALIDATED = 0.85  # confidence factor for a kind no published pair exercises
PROFILE_BOOST = 1.05  # a profile of this config calibrated the model's parts
TABLE = Path(str(resources.files("server.perf") / "data" / "change_errors.json"))  # package data


@dataclass(frozen=True)
class PairError:
    """One published pair: which kinds of change separate its configs and the model's log-ratio error."""

    kinds: frozenset[str]
    log_error: float
    label: str = ""


@dataclass(frozen=True)
class KindError:
    kind: str
    sigma: float  # spread of the log throughput-ratio error for this kind of change
    pairs: int  # published pairs behind it (0: the prior alone)

    @property
    def validated(self) -> bool:
        return self.pairs > 0


@dataclass(frozen=True)
class ErrorTable:
    kinds: dict[str, KindError]
    prior_dense: float  # sigma of a change on a dense model no pair exercises
    prior_moe: float  # the same for a mixture-of-experts model
    source: str = ""

    def sigma(self, kinds: Iterable[str], moe: bool) -> tuple[float, bool]:
        """The spread for a change of these kinds (the least certain of them) and whether every kind has
        published pairs behind it. A change of no kind (a respelling) has the smallest spread."""
        sigmas, validated = [], True
        # MoE's prior is never below the dense one: its development rows are few and in-sample
        prior = max(self.prior_moe, self.prior_dense) if moe else self.prior_dense
        for k in kinds:
            ke = self.kinds.get(k)
            if ke is None or not ke.validated:
                validated = False
                sigmas.append(prior)
                if ke is not None:  # the shrunk prior of a kind with no pair is the prior itself
                    sigmas[-1] = max(sigmas[-1], ke.sigma)
            else:
                sigmas.append(ke.sigma)
        if not sigmas:
            return min((k.sigma for k in self.kinds.values()), default=self.prior_dense), True
        return max(sigmas), validated

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "prior_dense": self.prior_dense,
            "prior_moe": self.prior_moe,
            "prior_weight": PRIOR_WEIGHT,
            "kinds": {k: {"sigma": v.sigma, "pairs": v.pairs} for k, v in self.kinds.items()},
        }

    @staticmethod
    def from_json(doc: Mapping[str, Any]) -> ErrorTable:
        return ErrorTable(
            {k: KindError(k, float(v["sigma"]), int(v["pairs"])) for k, v in doc["kinds"].items()},
            float(doc["prior_dense"]),
            float(doc["prior_moe"]),
            str(doc.get("source", "")),
        )


def fit(pairs: Iterable[PairError], prior_dense: float, prior_moe: float, source: str = "") -> ErrorTable:
    """Per kind: sqrt((n x mean squared error + PRIOR_WEIGHT x prior^2) / (n + PRIOR_WEIGHT)) over the n pairs
    whose change includes that kind (a pair that changes two kinds counts for both). The prior is the dense one:
    the published pairs are mostly dense models."""
    pairs = list(pairs)
    out = {}
    for kind in KINDS:
        errs = [p.log_error for p in pairs if kind in p.kinds]
        n = len(errs)
        sq = sum(e * e for e in errs)
        out[kind] = KindError(kind, math.sqrt((sq + PRIOR_WEIGHT * prior_dense**2) / (n + PRIOR_WEIGHT)), n)
    return ErrorTable(out, prior_dense, prior_moe, source)


@cache
def table() -> ErrorTable:
    return ErrorTable.from_json(json.loads(TABLE.read_text()))


def change_kinds(
    before_ici: Mapping[str, int],
    before_dcn: Mapping[str, int],
    after_ici: Mapping[str, int],
    after_dcn: Mapping[str, int],
    other: Mapping[str, Any],
) -> frozenset[str]:
    """The kinds of change between two meshes (degrees per axis, missing = 1) plus `other` key changes.
    ICI data, fsdp and fsdp_transpose count as one kind (fsdp): all three shard the batch, and moving degree
    between them changes only how the weights are sharded."""

    def d(m: Mapping[str, int], *axes: str) -> int:
        return math.prod(int(m.get(a, 1)) for a in axes)

    kinds = set()
    for kind, axes in (
        ("tensor", ("tensor", "tensor_transpose", "tensor_sequence")),
        ("expert", ("expert",)),
        ("context", ("context", "context_autoregressive", "sequence")),
        ("pipeline", ("pipeline",)),
    ):
        if d(before_ici, *axes) * d(before_dcn, *axes) != d(after_ici, *axes) * d(after_dcn, *axes):
            kinds.add(kind)
    if {a: d(before_ici, a) for a in ("data", "fsdp", "fsdp_transpose")} != {
        a: d(after_ici, a) for a in ("data", "fsdp", "fsdp_transpose")
    }:
        kinds.add("fsdp")
    norm = lambda m: {a: int(v) for a, v in m.items() if int(v) != 1}  # noqa: E731
    b, a = norm(before_dcn), norm(after_dcn)
    if math.prod(b.values()) != math.prod(a.values()):
        kinds.add("slices")
        if set(b) - {"data"} or set(a) - {"data"}:  # more slices, and not with the same data-parallel assignment
            kinds.add("dcn")
    elif b != a:
        kinds.add("dcn")
    if "per_device_batch_size" in other or "gradient_accumulation_steps" in other:
        kinds.add("batch")
    if any(k == "remat_policy" or k.endswith("_offload") or k == "decoder_layer_input" for k in other):
        kinds.add("remat")
    return frozenset(kinds)


def _phi(x: float) -> float:
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


@dataclass(frozen=True)
class Confidence:
    value: float
    sigma: float
    validated: bool
    basis: str


def confidence(
    speedup: float, kinds: frozenset[str], moe: bool, *, profile: bool = False, tab: ErrorTable | None = None
) -> Confidence:
    """The probability that a change predicted at `speedup` is faster at all (module docstring)."""
    tab = tab or table()
    sigma, validated = tab.sigma(kinds, moe)
    gain = math.log(speedup) if speedup > 0 else -math.inf
    p = _phi(gain / sigma) if sigma > 0 else float(gain > 0)
    named = ", ".join(sorted(kinds)) or "no change the model prices"
    basis = [
        f"predicted gain {speedup - 1:+.1%} against the model's error for a {named} change "
        f"(log-ratio sigma {sigma:.1%}): P(faster) {p:.0%}"
    ]
    if not validated:
        p *= UNVALIDATED
        missing = [k for k in sorted(kinds) if not (k in tab.kinds and tab.kinds[k].validated)]
        basis.append(f"no published pair validates a {', '.join(missing)} change (x{UNVALIDATED})")
    if profile:
        p = min(0.97, p * PROFILE_BOOST)
        basis.append("the model is calibrated on this config's profile")
    return Confidence(max(0.02, min(0.97, p)), sigma, validated, "; ".join(basis))


def beats_error(speedup: float, kinds: frozenset[str], moe: bool, tab: ErrorTable | None = None) -> bool:
    """Whether a change's predicted gain is larger than the model's error for that kind of change."""
    sigma, _ = (tab or table()).sigma(kinds, moe)
    return speedup > 0 and math.log(speedup) > sigma
