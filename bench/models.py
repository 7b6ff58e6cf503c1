"""Every model of the recorded MaxText commit, priced as MaxText builds it (issue 14): resolve each of the 78
model files, build its text decoder with server/perf/architecture.py and print total and active parameters,
beside the published figures where a model has them, and beside today's uniform dense-Llama formula
(server/perf/arith.py: params(shape(cfg)) as committed at 84e1920, re-stated in `baseline`) on the same keys.

    .venv/bin/python bench/models.py [--source auto|config|json|mirror] [--notes] [--flops SEQ]

Model keys come from the real user path (`server.config.resolve.load(None, text="model_name: NAME")`, then
`cfg.get`) when it resolves every model; otherwise from the committed catalog
(server/config/data/maxtext_models.json); otherwise from the MaxText mirror's model files at the recorded
commit (git show on /work/.mirror/AI-Hypercomputer+maxtext/repo) over base.yml's defaults.

Targets (issue 14): 78/78 resolve; totals within 3% and active parameters within 5% of the published figures.
Published figures count embeddings differently; each row says which convention it compares under:
  all       embedding, output projection (when untied) and every layer, as the publisher counts them;
  no-embed  the input embedding left out of the active count (gpt-oss's model card: active parameters
            count the unembedding but not the embedding).
A benchmark: always exits 0.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from server.perf import arith  # noqa: E402
from server.perf.architecture import COMMIT, Architecture, build  # noqa: E402

MIRROR = Path("/work/.mirror/AI-Hypercomputer+maxtext/repo")
MODELS_DIR = "src/maxtext/configs/models"
CATALOG = ROOT / "server/config/data/maxtext_models.json"
TOTAL_TARGET, ACTIVE_TARGET = 0.03, 0.05


@dataclass(frozen=True)
class Published:
    total: float  # parameters
    active: float | None
    convention: str  # "all" | "no-embed" (see the module docstring)
    source: str
    note: str = ""


B = 1e9
PUBLISHED: dict[str, Published] = {
    "deepseek3-671b": Published(
        671 * B,
        37 * B,
        "all",
        "DeepSeek-V3 technical report (arXiv 2412.19437): 671B total, 37B activated per token; the 14B MTP "
        "module is outside the 671B",
    ),
    "deepseek2-236b": Published(236 * B, 21 * B, "all", "DeepSeek-V2 report (arXiv 2405.04434): 236B, 21B activated"),
    "qwen3-235b-a22b": Published(
        235 * B, 22 * B, "all", "Qwen3 technical report / model card: 235B total, 22B activated"
    ),
    "qwen3-30b-a3b": Published(
        30.5 * B, 3.3 * B, "all", "Qwen3-30B-A3B model card: 30.5B total, 3.3B activated (29.9B non-embedding)"
    ),
    "gpt-oss-120b": Published(
        116.8 * B,
        5.1 * B,
        "no-embed",
        "gpt-oss model card: 116.83B total, 5.13B active (unembedding counted, embedding not)",
    ),
    "gpt-oss-20b": Published(20.9 * B, 3.6 * B, "no-embed", "gpt-oss model card: 20.91B total, 3.61B active"),
    "llama4-17b-16e": Published(
        109 * B,
        17 * B,
        "all",
        "Meta Llama 4 Scout model card: 17B active, 109B total",
        "published total includes the vision encoder; this counts the text decoder only",
    ),
    "llama4-17b-128e": Published(
        400 * B,
        17 * B,
        "all",
        "Meta Llama 4 Maverick model card: 17B active, 400B total",
        "published total includes the vision encoder; this counts the text decoder only",
    ),
    "mixtral-8x7b": Published(
        46.7 * B, 12.9 * B, "all", "Mixtral of Experts (arXiv 2401.04088): 47B / 13B; Mistral: 46.7B / 12.9B"
    ),
    "mixtral-8x22b": Published(140.6 * B, 39.1 * B, "all", "Mistral Mixtral 8x22B announcement: 141B / 39B"),
    "kimi-k2-1t": Published(
        1040 * B,
        32 * B,
        "all",
        "Kimi K2 model card / report: 1T (1.04T) total, 32B activated",
        "DeepSeek-V3 layout with 384 experts and 64 heads; the 1.3% under the published total is not located",
    ),
    "gemma2-27b": Published(27.2 * B, None, "all", "Gemma 2 report (arXiv 2408.00118), tied embedding counted once"),
    "gemma2-9b": Published(9.24 * B, None, "all", "Gemma 2 report"),
    "gemma2-2b": Published(2.61 * B, None, "all", "Gemma 2 report"),
    "llama3.1-405b": Published(405 * B, None, "all", "Llama 3 herd of models (arXiv 2407.21783)"),
    "llama3.1-70b": Published(70.6 * B, None, "all", "Llama 3.1 70B model card (70.6B)"),
    "llama3.1-8b": Published(8.03 * B, None, "all", "Llama 3.1 8B model card (8.03B)"),
    "qwen3-32b": Published(32.8 * B, None, "all", "Qwen3-32B model card: 32.8B (31.2B non-embedding)"),
}


# --------------------------------------------------------------------------------------------------
# Model keys
# --------------------------------------------------------------------------------------------------


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(MIRROR), *args], capture_output=True, text=True, check=True).stdout


def _mirror_models() -> dict[str, dict[str, Any]]:
    from ruamel.yaml import YAML

    yaml = YAML(typ="safe")
    base = yaml.load(_git("show", f"{COMMIT}:src/maxtext/configs/base.yml")) or {}
    out = {}
    for path in _git("ls-tree", "--name-only", f"{COMMIT}:{MODELS_DIR}").split():
        if path.endswith(".yml"):
            keys = yaml.load(_git("show", f"{COMMIT}:{MODELS_DIR}/{path}")) or {}
            out[path[:-4]] = {**base, **keys, "model_name": path[:-4]}
    return out


def _json_models() -> dict[str, dict[str, Any]]:
    data = json.loads(CATALOG.read_text(encoding="utf-8"))
    base = data.get("base", {}).get("keys", {})
    return {n: {**base, **m["keys"], "model_name": n} for n, m in data["models"].items()}


def _names() -> list[str]:
    if CATALOG.exists():
        return sorted(json.loads(CATALOG.read_text(encoding="utf-8"))["models"])
    return sorted(_mirror_models())


def _config_models(names: list[str]) -> dict[str, Any] | None:
    """The user path: a one-line config naming the model. None unless every model resolves."""
    try:
        from server.config import resolve as config
    except Exception:
        return None
    out = {}
    for n in names:
        try:
            cfg = config.load(None, text=f"model_name: {n}\n")
        except Exception:
            return None
        if cfg.get("base_emb_dim") is None or cfg.get("decoder_block") is None:
            return None
        out[n] = cfg
    return out


def load_models(source: str) -> tuple[str, dict[str, Any]]:
    """(source used, {name: getter-bearing object or dict})."""
    names = _names()
    if source in ("auto", "config"):
        cfgs = _config_models(names)
        if cfgs is not None:
            return "config.load (the user path)", cfgs
        if source == "config":
            raise SystemExit("config.load does not resolve every model; try --source json or mirror")
    if source in ("auto", "json") and CATALOG.exists():
        return f"catalog {CATALOG.relative_to(ROOT)}", _json_models()
    return f"mirror {MIRROR} @{COMMIT}", _mirror_models()


def _getter(obj: Any) -> Any:
    return obj.get


# --------------------------------------------------------------------------------------------------
# Today's formula
# --------------------------------------------------------------------------------------------------


def baseline(get: Any) -> tuple[float, float] | None:
    """Today's uniform dense-Llama count on the same keys: server/perf/arith.py's shape() and params() as
    committed at 84e1920 (before the architecture integration), re-stated here so the comparison does not
    move when arith.py starts using architecture.py. Every layer is a Llama layer: attention
    emb*hd*(2q+2kv), an MLP (or num_experts experts, a router and shared experts) at (n_in+1)*emb*mlp,
    two norms; embedding and (untied) logits vocab*emb."""

    def val(key: str, default: Any = None) -> Any:
        v = get(key, None)
        return default if v is None else v

    try:
        es, hs, ms, ls = arith.individual_scales(int(val("global_parameter_scale", 1)))
        emb = int(val("base_emb_dim")) * 2**es
        q = int(val("base_num_query_heads")) * 2**hs
        kv = int(val("base_num_kv_heads")) * 2**hs
        mlp = int(val("base_mlp_dim")) * 2**ms
        layers = int(val("base_num_decoder_layers")) * 2**ls
        hd, vocab = int(val("head_dim", 128)), int(val("vocab_size", 32000))
        moe_base = val("base_moe_mlp_dim", -1)
        moe_mlp = (moe_base if isinstance(moe_base, int) and moe_base > 0 else int(val("base_mlp_dim"))) * 2**ms
        experts, top = max(1, int(val("num_experts", 1))), max(1, int(val("num_experts_per_tok", 1)))
        shared = int(val("shared_experts", 0) or 0)
        acts = val("mlp_activations", ["silu", "linear"])
        n_in = max(1, len(acts)) if isinstance(acts, (list, tuple)) else 2
        tied = bool(val("logits_via_embedding", False))
    except (TypeError, ValueError, arith.ArithError):
        return None
    attn = emb * hd * (2 * q + 2 * kv)
    if experts > 1:
        expert = (n_in + 1) * emb * moe_mlp
        fixed = emb * experts + shared * expert
        mlp_total, mlp_active = experts * expert + fixed, top * expert + fixed
    else:
        mlp_total = mlp_active = (n_in + 1) * emb * mlp
    outer = vocab * emb * (1 if tied else 2)
    total = layers * (attn + mlp_total + 2 * emb) + outer
    active = layers * (attn + mlp_active + 2 * emb) + outer
    return float(total), float(active)


# --------------------------------------------------------------------------------------------------
# Table
# --------------------------------------------------------------------------------------------------


def compared(a: Architecture, pub: Published) -> tuple[float, float | None]:
    """(total, active) under the published figure's convention."""
    active = float(a.active_params)
    if pub.convention == "no-embed":
        active -= a.embedding
    return float(a.total_params), active


def err(x: float, ref: float) -> float:
    return (x - ref) / ref


def fmt_b(x: float | None) -> str:
    return "-" if x is None else f"{x / B:8.2f}"


def fmt_e(x: float | None) -> str:
    return "" if x is None else f"{100 * x:+6.1f}%"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", choices=("auto", "config", "json", "mirror"), default="auto")
    ap.add_argument("--notes", action="store_true", help="print each model's notes and sources")
    ap.add_argument("--flops", type=int, default=0, metavar="SEQ", help="also print forward GFLOP/token at SEQ")
    args = ap.parse_args(argv)

    source, models = load_models(args.source)
    print(f"MaxText @{COMMIT}, model keys from {source}; {len(models)} model files")
    print("new = server/perf/architecture.py (each decoder block as MaxText builds it);")
    print("old = today's uniform dense-Llama formula (arith.py shape()+params() at 84e1920) on the same keys.")
    print("Parameters in billions. Published comparisons use each row's convention (see --help).\n")

    head = f"{'model':26s} {'decoder_block':16s} {'layers':>6s} {'new total':>9s} {'new active':>10s}"
    head += f" {'old total':>9s} {'old active':>10s}"
    if args.flops:
        head += f" {'GFLOP/tok':>9s}"
    print(head)
    print("-" * len(head))
    built: dict[str, Architecture] = {}
    failures: list[tuple[str, str]] = []
    for name, obj in sorted(models.items()):
        get = _getter(obj)
        try:
            a = build(get)
        except Exception as e:  # a benchmark reports, never stops
            failures.append((name, f"{type(e).__name__}: {e}"))
            print(f"{name:26s} FAILED {type(e).__name__}: {e}")
            continue
        built[name] = a
        old = baseline(get)
        line = (
            f"{name:26s} {a.decoder_block:16s} {a.layers:6d} {fmt_b(a.total_params):>9s} {fmt_b(a.active_params):>10s}"
        )
        line += f" {fmt_b(old[0] if old else None):>9s} {fmt_b(old[1] if old else None):>10s}"
        if args.flops:
            line += f" {a.forward_flops(args.flops) / 1e9:9.2f}"
        print(line)
        if args.notes:
            print(f"    {a.summary()}")
            for n in a.notes:
                print(f"    note: {n}")

    print(f"\nresolved and priced: {len(built)}/{len(models)}" + (f"  FAILED: {failures}" if failures else ""))

    print("\nAgainst published figures (targets: total within 3%, active within 5%)\n")
    head = f"{'model':18s} {'conv':8s} {'pub total':>9s} {'new':>8s} {'err':>7s} {'old':>8s} {'err':>7s}"
    head += f"  {'pub act':>8s} {'new':>8s} {'err':>7s} {'old':>8s} {'err':>7s}  new   old"
    print(head)
    print("-" * len(head))
    n_pass = n_old_pass = n_rows = 0
    worst: list[tuple[float, str, str]] = []
    for name, pub in PUBLISHED.items():
        a = built.get(name)
        if a is None:
            print(f"{name:18s} missing")
            continue
        n_rows += 1
        total, active = compared(a, pub)
        old = baseline(_getter(models[name]))
        old_total = old[0] if old else None
        old_active = None
        if old is not None and pub.active is not None:
            old_active = old[1] - (a.embedding if pub.convention == "no-embed" else 0)
        e_t = err(total, pub.total)
        e_a = err(active, pub.active) if pub.active is not None and active is not None else None
        ok = abs(e_t) <= TOTAL_TARGET and (e_a is None or abs(e_a) <= ACTIVE_TARGET)
        eo_t = err(old_total, pub.total) if old_total is not None else None
        eo_a = err(old_active, pub.active) if old_active is not None and pub.active is not None else None
        old_ok = (
            eo_t is not None
            and abs(eo_t) <= TOTAL_TARGET
            and (pub.active is None or (eo_a is not None and abs(eo_a) <= ACTIVE_TARGET))
        )
        n_pass += ok
        n_old_pass += old_ok
        worst.append((max(abs(e_t) / TOTAL_TARGET, abs(e_a or 0) / ACTIVE_TARGET), name, pub.note))
        print(
            f"{name:18s} {pub.convention:8s} {fmt_b(pub.total):>9s} {fmt_b(total):>8s} {fmt_e(e_t):>7s}"
            f" {fmt_b(old_total):>8s} {fmt_e(eo_t):>7s}  {fmt_b(pub.active):>8s}"
            f" {fmt_b(active if pub.active is not None else None):>8s} {fmt_e(e_a):>7s}"
            f" {fmt_b(old_active):>8s} {fmt_e(eo_a):>7s}  {'PASS' if ok else 'FAIL'}  {'PASS' if old_ok else 'FAIL'}"
        )
    print(f"\nwithin target: new {n_pass}/{n_rows}, old {n_old_pass}/{n_rows}")
    worst.sort(reverse=True)
    print("closest to the limits (error as a fraction of its target):")
    for frac, name, note in worst[:4]:
        print(f"  {name}: {frac:.2f} of the target" + (f" ({note})" if note else ""))
    print("\nsources of the published figures:")
    for name, pub in PUBLISHED.items():
        print(f"  {name}: {pub.source}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
