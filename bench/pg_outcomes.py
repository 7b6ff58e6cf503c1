"""1,000 outcomes written by 4 concurrent clients to the shared experiment log on PostgreSQL (issue 19, item 2),
against the same through the local sqlite store as the baseline.

    .venv/bin/python bench/pg_outcomes.py [--outcomes 1000] [--clients 4] [--url postgresql://...]

Without --url a PostgreSQL server is started from the machine's binaries in a temporary directory on 127.0.0.1
(tests/support/postgres.py; as root inside a user namespace) and stopped by PID at the end.
Each client is a process with its own connection pool (server/common/pg_store.py SharedStore) writing its share
of the outcomes, each a distinct (application, profile) run; then every client writes again the runs of the next
client, with new ids (as a second editor recording the same profile would): the unique constraint must keep
each run once. The baseline: the same clients inserting the same rows into one sqlite file (ASAP's store, WAL,
busy timeout) as the local log does, each run once. Printed: runs, writes, rows kept, runs lost and duplicated,
writes per second, and p50/p95/max latency of one write (ms, over every write), per store. A benchmark: always exits 0.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import queue
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def row(client: int, k: int) -> dict[str, Any]:
    return {
        "id": uuid.uuid4().hex[:12],
        "experiment_id": f"exp{client}",
        "application_id": f"app{client}-{k % 20}",
        "rank": 1,
        "created": time.time(),
        "generation": ("v5e", "v6e", "v5p")[k % 3],
        "slice": "v5e-8",
        "profile": f"gs://bench/run-{client}-{k}/tensorboard/plugins/profile",
        "predicted_step_s": 1.0,
        "measured_step_s": 1.1,
        "step_error": -0.09,
        "delivered": k % 4 != 0,
        "stated_confidence": 0.7,
        "bottleneck_moved": False,
    }


def pg_client(url: str, local: str, client: int, n: int, clients: int, q: Any) -> None:
    from server.common import pg_store

    s = pg_store.SharedStore(url, Path(local))
    s.sync()  # connected and migrated before the clock starts
    lat, inserted, queued = [], 0, 0
    for k in range(n):
        t = time.perf_counter()
        r = s.write("outcomes", row(client, k))
        lat.append(time.perf_counter() - t)
        inserted += r.inserted
        queued += not r.shared
    dup_inserted = 0
    nxt = (client + 1) % clients
    for k in range(n):  # the next client's runs again, new ids
        t = time.perf_counter()
        r = s.write("outcomes", row(nxt, k))
        lat.append(time.perf_counter() - t)
        dup_inserted += r.inserted
        queued += not r.shared
    s.close()
    q.put({"lat": lat, "inserted": inserted, "dup_inserted": dup_inserted, "queued": queued})


def sqlite_client(path: str, client: int, n: int, q: Any) -> None:
    from server.common import store
    from server.services import experiments

    db = experiments._db(store.connect(Path(path)))
    lat = []
    for k in range(n):
        t = time.perf_counter()
        db.table("outcomes").insert(row(client, k), pk="id", alter=True)  # as experiments._keep does locally
        lat.append(time.perf_counter() - t)
    q.put({"lat": lat, "inserted": n, "dup_inserted": 0, "queued": 0})


def run(target: Any, args_of: Any, clients: int) -> tuple[list[dict[str, Any]], float]:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args_of(c), q)) for c in range(clients)]
    t = time.perf_counter()
    for p in procs:
        p.start()
    results = []
    for _ in procs:
        try:
            results.append(q.get(timeout=300))
        except queue.Empty:
            break
    wall = time.perf_counter() - t
    for p in procs:
        p.join(timeout=30)
        if p.exitcode != 0:
            print(f"a client exited with {p.exitcode}: its writes are not counted")
    return results, wall


def summary(name: str, results: list[dict[str, Any]], wall: float, kept: int, distinct: int, total: int) -> None:
    lat = sorted(x * 1e3 for r in results for x in r["lat"])
    p95 = lat[min(len(lat) - 1, round(0.95 * (len(lat) - 1)))]
    new = sum(r["inserted"] + r["dup_inserted"] for r in results)
    print(
        f"{name:<24} runs {total}  writes {len(lat)}  rows kept {kept}  distinct runs kept {distinct}  "
        f"lost {total - distinct}  duplicated {kept - distinct}  writes that inserted {new}  "
        f"queued locally {sum(r['queued'] for r in results)}"
    )
    print(
        f"{'':<24} write latency p50 {statistics.median(lat):.2f} ms  p95 {p95:.2f} ms  max {lat[-1]:.2f} ms  "
        f"throughput {len(lat) / wall:.0f} writes/s (wall {wall:.2f} s, {len(results)} clients, incl. start-up)"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--outcomes", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--url")
    a = ap.parse_args()
    n = a.outcomes // a.clients
    total = n * a.clients
    tmp = Path(tempfile.mkdtemp(prefix="asap-bench-pg-"))
    os.environ["ASAP_CACHE_DIR"] = str(tmp / "cache")
    server = None
    url = a.url
    if url is None:
        from tests.support import postgres

        try:
            server = postgres.start(tmp / "pg")
        except postgres.Unavailable as e:
            print(f"PostgreSQL: not measured ({e})")
            return
        url = server.url()
    try:
        import psycopg

        name = f"bench_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(url, autocommit=True) as c:
            c.execute(f"CREATE DATABASE {name}")
        db_url = url.rsplit("/", 1)[0] + f"/{name}"
        results, wall = run(pg_client, lambda c: (db_url, str(tmp / f"local{c}.sqlite"), c, n, a.clients), a.clients)
        with psycopg.connect(db_url) as c:
            kept = c.execute("SELECT count(*) FROM outcomes").fetchone()[0]  # type: ignore[index]
            distinct = c.execute("SELECT count(DISTINCT (application_id, profile)) FROM outcomes").fetchone()[0]  # type: ignore[index]
        summary("PostgreSQL (shared)", results, wall, kept, distinct, total)
    finally:
        if server is not None:
            server.stop()
    path = tmp / "baseline.sqlite"
    from server.common import store
    from server.services import experiments

    experiments._db(store.connect(path)).close()  # an existing store, as a user's is: the clients only write
    results, wall = run(sqlite_client, lambda c: (str(path), c, n), a.clients)
    import sqlite3

    with sqlite3.connect(path) as c:
        kept = c.execute("select count(*) from outcomes").fetchone()[0]
        distinct = c.execute("select count(*) from (select distinct application_id, profile from outcomes)").fetchone()[
            0
        ]
    summary("sqlite (local, baseline)", results, wall, kept, distinct, total)
    print(
        "(PostgreSQL: each run written twice, by its client and by the next one with a new id, concurrently; the "
        "sqlite baseline writes each run once: its local table has no cross-client uniqueness)"
    )


if __name__ == "__main__":
    main()
