"""The knowledge index after one record arrives: a full rebuild (the baseline, what every change cost before)
against the incremental update (only the new file parsed and embedded, one write transaction).

    .venv/bin/python bench/kb_index.py [--records 0,500] [--runs 7]

The content is the shipped kb/ plus N outcome records in the outcomes directory (a team's shared records,
as `KnowledgeStore.pull_shared` writes them: variations of the shipped kb/history records), for each N of
--records. Each run adds one more record file, then times either the full rebuild or the incremental update of
an index that was current before the file arrived; the median of --runs runs of each is printed, and their
ratio. The embedding model is loaded (and warmed up) before anything is timed. A benchmark: always exits 0.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ruamel.yaml import YAML  # noqa: E402

from server.kb import store as kbstore  # noqa: E402
from server.kb.embed import Embedder  # noqa: E402
from server.kb.store import KnowledgeStore  # noqa: E402

TEMPLATES = sorted((kbstore.REPO_KB / "history").glob("*.yaml"))


def write_record(outcomes: Path, n: int) -> Path:
    """Record number `n`: a shipped record under a new id, its change text made distinct."""
    yaml = YAML(typ="rt")
    data = yaml.load(TEMPLATES[n % len(TEMPLATES)].read_text(encoding="utf-8"))
    data["id"] = f"outcome-bench-{n:05d}"
    data["change"] = f"Run {n}: {data['change']}"
    p = outcomes / f"{data['id']}.yaml"
    with p.open("w", encoding="utf-8") as f:
        yaml.dump(data, f)
    return p


def measure(records: int, runs: int, emb: Embedder) -> tuple[float, float, dict[str, int]]:
    with tempfile.TemporaryDirectory(prefix="asap-kb-index-bench-") as tmp:
        outcomes = Path(tmp) / "outcomes"
        outcomes.mkdir()
        for n in range(records):
            write_record(outcomes, n)
        store = KnowledgeStore(Path(tmp) / "kb.sqlite", kbstore.REPO_KB, emb, outcomes=outcomes)
        store.build()
        full, incremental = [], []
        n = records
        counts: dict[str, int] = {}
        for _ in range(runs):
            write_record(outcomes, n)
            n += 1
            t0 = time.perf_counter()
            done = store.build()  # the baseline: everything parsed, embedded and written again
            full.append(time.perf_counter() - t0)
            assert done["embedded"] == done["chunks"]
            write_record(outcomes, n)
            n += 1
            t0 = time.perf_counter()
            done = store.update()
            incremental.append(time.perf_counter() - t0)
            assert done["mode"] == "incremental" and done["embedded"] == 1, done
            counts = {k: int(done[k]) for k in ("documents", "records", "chunks")}
        store.close()
        return statistics.median(full), statistics.median(incremental), counts


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", default="0,500", help="outcome records besides kb/, comma-separated sizes")
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    emb = Embedder()
    emb.embed(["warm up"])
    print(f"one record added; median of {args.runs} runs each; the full rebuild is the baseline")
    print(
        f"{'outcome records':>15} {'notes':>6} {'records':>8} {'chunks':>7} "
        f"{'full rebuild':>13} {'incremental':>12} {'ratio':>7}"
    )
    for size in (int(x) for x in args.records.split(",")):
        full, inc, c = measure(size, args.runs, emb)
        print(
            f"{size:>15} {c['documents']:>6} {c['records']:>8} {c['chunks']:>7} {full * 1e3:>10.1f} ms "
            f"{inc * 1e3:>9.1f} ms {full / inc:>6.1f}x"
        )


if __name__ == "__main__":
    main()
