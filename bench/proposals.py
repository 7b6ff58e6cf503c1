"""Do the proposals find the tuned meshes? For each reference config (the tuned MaxText configs in
bench/references.py), start from naive meshes (pure data parallelism; all tensor parallelism) and run the offline
engine (no profile): is the tuned mesh among the three proposals, and first? Also: started from the tuned config
itself, does ASAP leave it alone (no change beats the model's error for its kind)? And the end-to-end
`asap analyze` time with and without a (cached) profile.

    .venv/bin/python bench/proposals.py [--quiet]

Two sets: development (DOMAIN.md §4: the v6e tuned configs and tiering rows, the v4 runs, and the MoE development
rows, Mixtral 8x7B and 8x22B) and held-out (every other reference: the v5p and v5e README runs, the Ironwood dense
and MoE recipes, Llama 4, DeepSeek-V3, Qwen3 MoE, gpt-oss, Gemma 4 MoE, the custom 700B MoE); the held-out set was
not looked at while the engine was built and judges it.

Matching is exact on the ICI and DCN degree of every axis (the tuned -1 resolved), reported strictly and "folded":
fsdp_transpose folded into fsdp, and a proposal's stated equivalents (meshes the model prices identically, same
step time and HBM) counted with it, since the engine shows them as one candidate written once (issue 16 item 4);
the folded figure is the one the targets use. Targets (issue 16): the tuned mesh among
the three for every reference, first for at least 87.5%, strictly ahead of both baselines; analyze under 2 s with
a cached profile. A benchmark: always exits 0.

Two trivial baselines are scored on the same starts: "always pure FSDP" (the one mesh fsdp = every device of a
slice, DCN data parallelism over the slices), and "the enumeration's fastest meshes without the knowledge base"
(server/perf/enumeration.py top_alternatives: the three fastest meshes the cost model prices, with no agent and no
knowledge store).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import references as R  # noqa: E402
from mfu_references import config_text  # noqa: E402

from server.agents.coordinator import run  # noqa: E402
from server.agents.types import Experiment  # noqa: E402
from server.config.axes import AXES  # noqa: E402
from server.perf.enumeration import fold_fsdp, top_alternatives  # noqa: E402
from server.services.analysis import analyze  # noqa: E402

# The DOMAIN.md §4 development references (v6e-256 tuned configs, the v6e tiering results, the v4 runs).
DEV = (
    "llama2-7b v6e-256 seq4096 (llama2_7b_4096)",
    "llama2-70b v6e-256 seq4096 (llama2_70b_4096:",
    "llama3-8b v6e-256 seq8192 (llama3_8b_8192)",
    "llama3.1-70b v6e-256 seq8192 (llama3_1_70b_8192)",
    "llama3.1-405b 2x v6e-256 seq8192 (llama3_1_405b_8192_fsdp_dcn",
    "mixtral-8x22b v6e-256",
    "deepseek3-671b 2x v6e-256",
    "gemma2-9b v6e-256",
    "llama3.1-8b v6e-256 seq8192 (llama3_1_8b_8192)",
    "mixtral-8x7b v6e-256",
    "synthetic-22b 1x v4-128",
    "synthetic-52b 1x v4-384",
)  # plus the MoE development rows (bench/references.py _MOE_DEV: Mixtral 8x7B and 8x22B)
MESH_KEYS = {a.ici_key for a in AXES} | {a.dcn_key for a in AXES}


def resolved(text: str) -> tuple[dict[str, int], dict[str, int]]:
    chk = analyze(None, text).check
    return chk.degrees("ici", drop_ones=True), chk.degrees("dcn", drop_ones=True)


def naive(ref: object, kind: str) -> str:
    cfg = {k: v for k, v in ref.config.items() if k not in MESH_KEYS}  # type: ignore[attr-defined]
    if kind == "data":
        cfg["ici_data_parallelism"], cfg["ici_fsdp_parallelism"] = -1, 1
    else:
        cfg["ici_tensor_parallelism"], cfg["ici_fsdp_parallelism"] = -1, 1
    cfg["dcn_data_parallelism"] = -1
    return config_text(type(ref)(**{**ref.__dict__, "config": cfg}))  # type: ignore[attr-defined]


Mesh = tuple[dict[str, int], dict[str, int]]


class Score:
    """How often a rule's meshes hold the tuned one: among them, and first; strictly and with fsdp_transpose folded."""

    def __init__(self, name: str) -> None:
        self.name, self.found, self.first, self.found_alike, self.first_alike = name, 0, 0, 0, 0

    def add(self, meshes: list[Mesh | None], tuned: Mesh, equivalents: list[list[Mesh]] | None = None) -> None:
        """`meshes` in rank order; None for a rank that proposes no change (keep the current mesh). `equivalents`:
        per rank, the meshes the engine states are priced identically (one candidate, issue 16 item 4); they count
        in the folded figure only."""
        folded = (fold_fsdp(tuned[0]), fold_fsdp(tuned[1]))
        eq = equivalents or [[] for _ in meshes]
        ranks = [i for i, m in enumerate(meshes, 1) if m == tuned]
        alike = [
            i
            for i, (m, alts) in enumerate(zip(meshes, eq, strict=True), 1)
            if m is not None and any((fold_fsdp(x[0]), fold_fsdp(x[1])) == folded for x in [m, *alts])
        ]
        self.found += bool(ranks)
        self.first += ranks[:1] == [1]
        self.found_alike += bool(alike)
        self.first_alike += alike[:1] == [1]

    def line(self, total: int) -> str:
        return (
            f"{self.name:<46} among its meshes {self.found:>2}/{total}, first {self.first:>2}/{total}; "
            f"folded: among {self.found_alike:>2}/{total}, first {self.first_alike:>2}/{total}"
        )


def pure_fsdp(text: str) -> list[Mesh]:
    """The baseline "always pure FSDP": fsdp over every device of a slice, data parallelism over the slices."""
    sl = analyze(None, text).check.slice
    if sl is None:
        return []
    return [({"fsdp": sl.devices_per_slice}, {"data": sl.num_slices} if sl.num_slices > 1 else {})]


def fastest_priced(path: Path, text: str) -> list[Mesh]:
    """The baseline "the enumeration's three fastest meshes", no agents and no knowledge base."""
    an = analyze(path, text)
    if an.estimate is None:
        return []
    return [(a.ici, a.dcn) for a in top_alternatives(an.config, an.estimate, 3)]


def held_out_refs() -> list[object]:
    """Tuned configs not used while developing the engine (issue 16: "further tuned configs are held out to judge
    this"): the v5p and v5e MaxText README runs, the Ironwood dense and MoE recipes and the other MoE rows."""
    dev = {r.name for r in dev_refs()}
    return [r for r in (*R.REFERENCES, *R.IRONWOOD_DENSE_REFERENCES, *R.MOE_REFERENCES) if r.name not in dev]


def dev_refs() -> list[object]:
    refs = [r for r in (*R.REFERENCES, *R.TUNED_CONFIGS_WITHOUT_RESULT) if any(r.name.startswith(d) for d in DEV)]
    return refs + list(R._MOE_DEV)


def score_set(label: str, refs: list[object], tmp: str, verbose: bool) -> tuple[Score, Score, Score, int, list[str]]:
    asap_score, fsdp_score, fastest_score = (
        Score("ASAP (agents, offline)"),
        Score("B1 always pure FSDP"),
        Score("B2 enumeration's 3 fastest, no knowledge base"),
    )
    total = 0
    kept: list[str] = []
    for ref in refs:
        tuned = resolved(config_text(ref))  # type: ignore[arg-type]
        for kind in ("data", "tensor"):
            text = naive(ref, kind)
            p = Path(tmp) / "c.yml"
            p.write_text(text)
            res = run(Experiment(p, text))  # with the knowledge store, as users run it
            meshes = [None if pr.keep_current else (pr.ici, pr.dcn) for pr in res.proposals]
            eqs = [[(e["ici"], e["dcn"]) for e in pr.equivalent] for pr in res.proposals]
            asap_score.add(meshes, tuned, eqs)
            fsdp_score.add(pure_fsdp(text), tuned)
            fastest_score.add(fastest_priced(p, text), tuned)
            total += 1
            if verbose:
                rank = next(
                    (
                        i
                        for i, (m, alts) in enumerate(zip(meshes, eqs, strict=True), 1)
                        if m is not None and any(folded(x) == folded(tuned) for x in [m, *alts])
                    ),
                    None,
                )
                label_t = mesh_words(tuned)
                tops = " | ".join(mesh_words(m) if m else "keep" for m in meshes) or "-"
                print(f"{ref.name[:56]:<56} {kind:<7} {label_t[:40]:<40} {rank or '-':>4}  {tops}")  # type: ignore[attr-defined]
        # from the tuned config itself: does ASAP leave a tuned mesh alone?
        text = config_text(ref)  # type: ignore[arg-type]
        p = Path(tmp) / "c.yml"
        p.write_text(text)
        res = run(Experiment(p, text))
        if res.proposals and not res.proposals[0].keep_current:
            top = res.proposals[0]
            kept.append(
                f"{ref.name[:60]}: proposes {mesh_words((top.ici, top.dcn))} x{top.speedup:.2f} "  # type: ignore[attr-defined]
                f"(confidence {top.confidence:.0%})"
            )
    return asap_score, fsdp_score, fastest_score, total, kept


def folded(m: Mesh) -> Mesh:
    return fold_fsdp(m[0]), fold_fsdp(m[1])


def mesh_words(m: Mesh) -> str:
    return " x ".join(f"{a}={d}" for a, d in m[0].items()) + (
        "; dcn " + " x ".join(f"{a}={d}" for a, d in m[1].items()) if m[1] else ""
    )


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--quiet", action="store_true", help="summaries only")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for label, refs in (("development", dev_refs()), ("held-out", held_out_refs())):
            print(f"\n== {label} references ({len(refs)}), from naive starts (pure data, all tensor) ==")
            if not args.quiet:
                print(
                    f"{'reference':<56} {'start':<7} {'tuned mesh':<40} rank  ASAP's proposals (fsdp_transpose folded)"
                )
            asap_score, fsdp_score, fastest_score, total, moved = score_set(label, refs, tmp, not args.quiet)
            print(f"\n{label}: the same starts, ASAP beside two trivial baselines (a rule scores its own meshes):")
            for sc in (asap_score, fsdp_score, fastest_score):
                print("  " + sc.line(total))
            n = len(refs)
            print(
                f"  targets: tuned mesh among the 3 for every start ({asap_score.found_alike}/{total} folded), first "
                f">= 87.5% ({asap_score.first_alike / total:.1%} folded), strictly ahead of both baselines "
                f"({'yes' if asap_score.found_alike > max(fsdp_score.found_alike, fastest_score.found_alike) else 'no'}"
                " on among-3, folded)"
            )
            print(
                f"  started from the tuned config itself: {n - len(moved)}/{n} kept (no change beats the model's error)"
            )
            for m in moved:
                print(f"    {m}")
    # -- end-to-end time: `asap analyze` as a user runs it (a new process each time) -------------------------
    import subprocess

    from tests.profiles.synth import write_profile

    asap = str(Path(sys.executable).with_name("asap"))
    with tempfile.TemporaryDirectory() as tmp:
        write_profile(Path(tmp) / "run", "comm")
        base = "compile_topology: v5e-4\nmodel_name: llama2-7b\nper_device_batch_size: 1\nici_fsdp_parallelism: 4\n"
        results = {}
        for label, link in (("no profile", ""), ("cached profile", "# asap: profile=run\n")):
            times = []
            for i in range(6):
                cfg = Path(tmp) / "c.yml"
                cfg.write_text(f"# run {i} {label}\n{link}{base}")  # new text: the analysis cache cannot answer
                t0 = time.perf_counter()
                out = subprocess.run([asap, "analyze", str(cfg), "--json"], capture_output=True, cwd=tmp, text=True)
                assert out.returncode in (0, 1), out.stderr  # 1: the config has errors (here: HBM)
                if i or not link:  # the first run with a profile converts it: not counted
                    times.append(time.perf_counter() - t0)
            results[label] = statistics.median(times)
        print(
            f"asap analyze end to end (new process, offline): no profile {results['no profile']:.2f} s, "
            f"cached profile {results['cached profile']:.2f} s (target < 2 s) "
            f"{'PASS' if results['cached profile'] < 2 else 'MISS'}"
        )


if __name__ == "__main__":
    main()
