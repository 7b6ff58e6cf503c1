"""How well does the model predict what a change buys? Per kind of change, out of sample, and is the stated
confidence reliable? (issue 16, item 2; the method is in server/perf/model_error.py)

    .venv/bin/python bench/change_errors.py [--write]

Pairs: two published MaxText results of the same model, chip generation, sequence length and numerics whose
configs differ only by their mesh (ICI and DCN), slice count, per_device_batch_size or remat/offload policy.
The published throughput per device is the MFU (dense rows: the same FLOP count for both, so throughput is in
proportion) or per_device_batch_size x sequence / step time (MoE rows); the predicted one is ASAP's estimate.
A pair's error is log(predicted ratio) - log(published ratio).

Development pairs (the DOMAIN.md §4 references: v6e tuned configs and tiering rows, the v4 runs, the MoE
development rows) build the table; held-out pairs (v5e, v5p, Ironwood, the held-out MoE rows) only judge it.
Printed:
  - every pair, its kinds and errors;
  - per kind: pairs, the table's sigma, and the leave-one-out error (each development pair predicted by a table
    fitted without it; its priors recomputed without its two rows);
  - a reliability table: each pair read as a proposal from the config the model prices slower to the one it
    prices faster, at the confidence the engine would state (development pairs leave-one-out; held-out pairs
    with the full table), against how often the published results agree; next to two baselines: a constant
    confidence (the development agreement rate, leave-one-out) and the engine's former rule (0.45 + 0.45 x
    min(1, gain / 30%), x0.85 without a profile, x0.9 for a tensor change, x0.85 for a DCN change).
`--write` stores the table fitted on every development pair in server/perf/data/change_errors.json.
A benchmark: always exits 0.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import references as R  # noqa: E402
from mfu_references import predict, predicted_mfu, published_step  # noqa: E402

from server.config.slices import parse_slice  # noqa: E402
from server.perf import model_error as me  # noqa: E402
from server.perf.estimate import Estimate  # noqa: E402

DEV_REFS = (*R._V6E, *R._V4, *R._V5P_NAMED, *R._MOE_DEV)
HELD_OUT_REFS = (*R._V5P, *R._V5E, *R.IRONWOOD_DENSE_REFERENCES, *R._MOE_HELD_OUT)
POLICY_VALUES = {"offload", "remat", "device"}


def _mesh(cfg: dict[str, object], part: str, sl_devices: int, n_slices: int) -> dict[str, int]:
    """The config's written degrees of one part (ici/dcn); -1 resolved against the part's device count."""
    out = {}
    for k, v in cfg.items():
        if k.startswith(f"{part}_") and k.endswith("_parallelism") and isinstance(v, int):
            out[k[len(part) + 1 : -len("_parallelism")]] = v
    total = sl_devices if part == "ici" else n_slices
    if any(v == -1 for v in out.values()):
        known = math.prod(v for v in out.values() if v != -1)
        out = {a: (total // known if v == -1 else v) for a, v in out.items()}
    elif part == "dcn" and n_slices > 1 and math.prod(out.values() or [1]) == 1:
        out["data"] = n_slices  # MaxText's default dcn_data_parallelism -1
    return {a: v for a, v in out.items() if v != 1}


@dataclass
class Row:
    ref: object
    est: Estimate
    dev: bool
    published: float  # throughput per device, in the row's own unit (MFU or tokens/s)
    predicted: float  # the same quantity as ASAP predicts it
    ici: dict[str, int]
    dcn: dict[str, int]
    other: dict[str, object]  # batch and remat keys
    group: tuple[object, ...]
    moe: bool


def row(ref: object, dev: bool) -> Row | None:
    est, _why = predict(ref)  # type: ignore[arg-type]
    if est is None:
        return None
    cfg = dict(ref.config)  # type: ignore[attr-defined]
    sl = parse_slice(ref.slice, ref.num_slices)  # type: ignore[attr-defined]
    moe = isinstance(ref, R.MoEReference)
    if moe:
        published = float(ref.pdbs) / published_step(ref)  # type: ignore[union-attr]
        predicted = est.pdbs / est.time.step_s
    else:
        published = float(ref.published_mfu)  # type: ignore[attr-defined]
        predicted = predicted_mfu(ref, est)  # type: ignore[arg-type]
    other = {
        k: v
        for k, v in cfg.items()
        if k in ("per_device_batch_size", "remat_policy", "gradient_accumulation_steps")
        or (isinstance(v, str) and v in POLICY_VALUES)
    }
    rest = {
        k: v
        for k, v in cfg.items()
        if k not in other and "parallelism" not in k and k not in ("allow_split_physical_axes", "custom_mesh")
    }
    group = (
        sl.chip.generation,
        moe,
        getattr(ref, "causal_halved", getattr(ref, "flop_count", None)),
        tuple(sorted((k, str(v)) for k, v in rest.items())),
    )
    return Row(
        ref,
        est,
        dev,
        published,
        predicted,
        _mesh(cfg, "ici", sl.devices_per_slice, sl.num_slices),
        _mesh(cfg, "dcn", sl.devices_per_slice, sl.num_slices) if sl.num_slices > 1 else {},
        other,
        group,
        moe,
    )


@dataclass
class Pair:
    a: Row
    b: Row
    kinds: frozenset[str]

    @property
    def dev(self) -> bool:
        return self.a.dev and self.b.dev

    @property
    def pred_ratio(self) -> float:
        return self.b.predicted / self.a.predicted

    @property
    def pub_ratio(self) -> float:
        return self.b.published / self.a.published

    @property
    def error(self) -> me.PairError:
        return me.PairError(self.kinds, math.log(self.pred_ratio) - math.log(self.pub_ratio), self.label)

    @property
    def label(self) -> str:
        return f"{self.a.ref.name[:44]} -> {self.b.ref.name[:44]}"  # type: ignore[attr-defined]


def pairs(rows: list[Row]) -> list[Pair]:
    out = []
    for a, b in itertools.combinations(rows, 2):
        if a.group != b.group:
            continue
        other_changed = {k: b.other.get(k) for k in {*a.other, *b.other} if a.other.get(k) != b.other.get(k)}
        kinds = me.change_kinds(a.ici, a.dcn, b.ici, b.dcn, other_changed)
        if not kinds:  # the same config published twice (e.g. two recipe versions): no change to score
            continue
        out.append(Pair(a, b, kinds))
    return out


def priors(rows: list[Row]) -> tuple[float, float]:
    """sqrt(2) x the root mean square single-config log error of the development rows (dense, MoE): the spread of a
    ratio of two predictions whose errors were independent."""

    def rms(xs: list[float]) -> float:
        return math.sqrt(sum(x * x for x in xs) / len(xs)) if xs else 0.1

    dense = [math.log(r.predicted / r.published) for r in rows if r.dev and not r.moe]
    moe = [math.log(r.predicted / r.published) for r in rows if r.dev and r.moe]
    return math.sqrt(2) * rms(dense), math.sqrt(2) * rms(moe)


def old_confidence(p: Pair) -> float:
    """The engine's former rule (before issue 16), for the baseline."""
    gain = max(p.pred_ratio, 1 / p.pred_ratio) - 1
    conf = (0.45 + 0.45 * min(1.0, gain / 0.3)) * 0.85
    if p.kinds & {"dcn", "slices"}:
        conf *= 0.85
    if "tensor" in p.kinds:
        conf *= 0.9
    if p.kinds & {"batch", "remat"}:
        conf *= 0.9
    return conf


def stated(p: Pair, tab: me.ErrorTable) -> tuple[float, bool]:
    """The confidence the engine would state for proposing the faster-priced config of the pair from the other,
    and whether the published results agree that it is faster."""
    up = p.pred_ratio >= 1
    speedup = p.pred_ratio if up else 1 / p.pred_ratio
    conf = me.confidence(speedup, p.kinds, p.a.moe, tab=tab).value
    return conf, (p.pub_ratio > 1) == up


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", action="store_true", help="store the development table in server/perf/data")
    args = ap.parse_args()
    rows = [r for ref in DEV_REFS if (r := row(ref, True))] + [r for ref in HELD_OUT_REFS if (r := row(ref, False))]
    ps = pairs(rows)
    dev, held = [p for p in ps if p.dev], [p for p in ps if not p.dev]
    print(f"{len(rows)} priced rows; {len(dev)} development pairs, {len(held)} held-out pairs\n")
    print(f"{'pair':<92} {'kinds':<20} {'pred':>7} {'pub':>7} {'err':>7}")
    for p in ps:
        if p in dev or p in held:
            tag = "dev " if p.dev else "held"
            print(
                f"{tag} {p.label:<87} {','.join(sorted(p.kinds)):<20} {p.pred_ratio:7.3f} {p.pub_ratio:7.3f} "
                f"{p.error.log_error:+7.1%}"
            )
    pd, pm = priors(rows)
    full = me.fit([p.error for p in dev], pd, pm, source="bench/change_errors.py over the development pairs")
    # leave-one-out: each development pair against a table fitted without it (priors without its two rows)
    loo: list[tuple[Pair, me.ErrorTable]] = []
    for p in dev:
        rest_rows = [r for r in rows if r is not p.a and r is not p.b]
        pd_i, pm_i = priors(rest_rows)
        loo.append((p, me.fit([q.error for q in dev if q is not p], pd_i, pm_i)))
    print(f"\npriors (sqrt 2 x single-config RMS log error, development rows): dense {pd:.1%}, MoE {pm:.1%}")
    print(
        f"{'kind':<10} {'dev pairs':>9} {'sigma':>7} {'LOO median |err|':>17} {'held pairs':>10} {'held |err| med':>15}"
    )
    for kind in me.KINDS:
        ke = full.kinds[kind]
        loo_errs = [abs(p.error.log_error) for p, _ in loo if kind in p.kinds]
        held_errs = [abs(p.error.log_error) for p in held if kind in p.kinds]
        med = lambda xs: f"{statistics.median(xs):.1%}" if xs else "-"  # noqa: E731
        print(
            f"{kind:<10} {ke.pairs:>9} {ke.sigma:>7.1%} {med(loo_errs):>17} {len(held_errs):>10} {med(held_errs):>15}"
        )
    print(
        "(a pair's error does not depend on the table; LOO matters for the confidence, whose sigma is refitted "
        "without the pair)"
    )
    # -- reliability ----------------------------------------------------------------------------------------
    scored: dict[str, list[tuple[float, bool, float]]] = {"development (leave-one-out)": [], "held-out": []}
    for p, tab in loo:
        c, ok = stated(p, tab)
        scored["development (leave-one-out)"].append((c, ok, old_confidence(p)))
    for p in held:
        c, ok = stated(p, full)
        scored["held-out"].append((c, ok, old_confidence(p)))
    dev_rate = [ok for _, ok, _ in scored["development (leave-one-out)"]]
    buckets = [(0.0, 0.6), (0.6, 0.7), (0.7, 0.8), (0.8, 0.9), (0.9, 1.01)]
    for name, items in scored.items():
        if not items:
            continue
        print(f"\nreliability, {name}: {len(items)} proposals (the faster-priced config of each pair)")
        print(f"  {'stated':<12} {'n':>4} {'mean stated':>12} {'published agrees':>17}")
        for lo, hi in buckets:
            sel = [(c, ok) for c, ok, _ in items if lo <= c < hi]
            if sel:
                agree = sum(ok for _, ok in sel) / len(sel)
                mean = statistics.mean(c for c, _ in sel)
                print(f"  {lo:.0%}-{min(hi, 1):.0%}{'':<5} {len(sel):>4} {mean:>12.0%} {agree:>17.0%}")

        outcomes = [ok for _, ok, _ in items]

        def brier(confs: list[float], outcomes: list[bool] = outcomes) -> float:
            return statistics.mean((c - ok) ** 2 for c, ok in zip(confs, outcomes, strict=True))

        if name.startswith("development"):  # constant fitted leave-one-out on the development proposals
            const = [(sum(dev_rate) - ok) / (len(dev_rate) - 1) if len(dev_rate) > 1 else 0.5 for _, ok, _ in items]
        else:
            const = [sum(dev_rate) / len(dev_rate)] * len(items)
        spread = statistics.pstdev(c for c, _, _ in items)
        print(
            f"  Brier score (lower is better): ASAP {brier([c for c, _, _ in items]):.3f}, "
            f"B1 constant {const[0]:.0%} {brier(const):.3f}, B2 former rule {brier([o for _, _, o in items]):.3f}; "
            f"spread of stated confidence {spread:.1%} (former rule "
            f"{statistics.pstdev(o for _, _, o in items):.1%})"
        )
    if args.write:
        me.TABLE.parent.mkdir(parents=True, exist_ok=True)
        me.TABLE.write_text(json.dumps(full.to_json(), indent=2, sort_keys=True) + "\n")
        print(f"\nwrote {me.TABLE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
