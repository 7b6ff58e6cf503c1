"""The team's shared experiment log on PostgreSQL (issue 19): experiments, applications, outcomes and added
knowledge records, when `ASAP_STORE` (the editor's `asap.store`) is a `postgresql://` URL. sqlite stays the
default: without the setting nothing here runs.

- Connections come from a psycopg_pool pool (at most POOL_MAX per process), each checked before it is lent.
- The schema is the versioned SQL in server/common/migrations/ (`NNNN_name.sql`), applied on first use in one
  transaction under a PostgreSQL advisory lock, each version recorded in `schema_version`: applying is idempotent
  and several processes starting at once apply each file once.
- Writes are `INSERT ... ON CONFLICT DO NOTHING` (ids are the primary keys; an outcome is unique per
  (application, profile)), so a row written twice (a replay, two editors recording the same run) is kept once.
- A write that fails (the server unreachable, the connection dropped mid-write) goes to the local outbox, a table
  `shared_outbox` in ASAP's sqlite store, with one warning on the "asap" log; the outbox is replayed, in order,
  on the next successful connect. The URL in every message has its password replaced by `***`.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import logging
import os
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import sqlite_utils

from server.common import store

ENV = "ASAP_STORE"
POOL_MAX = 4
CONNECT_TIMEOUT_S = 5
RETRY_AFTER_S = 30.0  # after a failure, writes go straight to the outbox (and reads to the local store) this long
MIGRATIONS = Path(str(resources.files("server.common") / "migrations"))  # package data
LOCK_KEY = 0x4153_4150_19  # pg_advisory_xact_lock key of ASAP's migrations ("ASAP", issue 19)
OUTBOX = "shared_outbox"
TABLES = ("experiments", "applications", "outcomes", "kb_records")
log = logging.getLogger("asap")


def url() -> str | None:
    """The shared store's URL when one is set (`ASAP_STORE=postgresql://...`), else None (the local sqlite store)."""
    u = os.environ.get(ENV, "").strip()
    return u if u.startswith(("postgresql://", "postgres://")) else None


_LAUNCH_URL = os.environ.get(ENV)  # the shared store this process was started with, if any


def use(u: str | None) -> None:
    """Point this process, and the processes it starts, at the shared store `u` (an editor's `asap.store` setting:
    clients other than VS Code's extension send the setting and no environment); None: back to the store the
    process was started with (ASAP_STORE at launch), or to the local log."""
    target = u or _LAUNCH_URL
    if target:
        os.environ[ENV] = target
    else:
        os.environ.pop(ENV, None)


def redact(text: str, u: str | None = None) -> str:
    """`text` with the password of any postgresql:// URL in it (and of `u`, wherever it appears) as `***`."""
    if u:
        pw = urlsplit(u).password
        if pw:
            text = text.replace(u, redact_url(u)).replace(pw, "***")
    return re.sub(r"(postgres(?:ql)?://[^:/@\s]*:)[^@\s]*@", r"\1***@", text)


def redact_url(u: str) -> str:
    """The URL without its password (`postgresql://user:***@host/db`)."""
    parts = urlsplit(u)
    if parts.password is None:
        return u
    netloc = parts.netloc.rsplit("@", 1)
    user = netloc[0].split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[1]}"))


def user() -> str:
    """Who writes a row: the login name (getpass), recorded on every shared row for `asap stats`."""
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "unknown"


def migrations() -> list[tuple[int, str, str]]:
    """The versioned migrations in the repository: (version, name, SQL), by version."""
    out = []
    for p in sorted(MIGRATIONS.glob("*.sql")):
        m = re.match(r"(\d+)_(.+)\.sql$", p.name)
        if m:
            out.append((int(m.group(1)), m.group(2), p.read_text(encoding="utf-8")))
    return out


class Unavailable(RuntimeError):
    """The shared store did not answer a read; the message (password redacted) says why."""


@dataclass
class WriteResult:
    """What `SharedStore.write` did: `shared` (written to PostgreSQL, or already there) or queued locally."""

    shared: bool
    inserted: bool  # a new row (False: it was there already, or it was queued)


class SharedStore:
    """One process's handle on the shared log at `u`; `local` is the sqlite store holding the outbox (ASAP's
    store by default). Thread-safe: the pool lends each thread its own connection."""

    def __init__(self, u: str, local: Path | None = None) -> None:
        self.url = u
        self.shown = redact_url(u)
        self.local_path = local
        self._pool: Any = None
        self._lock = threading.Lock()
        self._migrated = False
        self._degraded = False  # a notice was logged since the last successful write
        self._outbox_empty = False  # known empty since this process last replayed it (skips a local read per write)
        self._retry_at = 0.0  # before this (time.monotonic), the server is not tried again (`sync` always tries)
        self._why = ""  # the server's reason for the last failure (redacted), said in the notices

    # -- connections -----------------------------------------------------------------------------------
    def _get_pool(self) -> Any:
        from psycopg_pool import ConnectionPool

        with self._lock:
            if self._pool is None:
                self._pool = ConnectionPool(
                    self.url,
                    min_size=0,
                    max_size=POOL_MAX,
                    open=True,
                    timeout=CONNECT_TIMEOUT_S,
                    check=ConnectionPool.check_connection,
                    kwargs={"connect_timeout": CONNECT_TIMEOUT_S, "application_name": "asap"},
                    name="asap-shared",
                )
                # the pool's own reconnect messages name the host only; keep its retries off the console
                logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
            return self._pool

    @contextlib.contextmanager
    def connection(self) -> Iterator[Any]:
        """A pooled connection with the schema migrated; raises psycopg/pool errors when unreachable."""
        with self._get_pool().connection() as conn:
            if not self._migrated:
                self._migrate(conn)
            yield conn

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None

    def _migrate(self, conn: Any) -> list[int]:
        """Apply the migrations not applied yet, under the advisory lock; the versions applied now."""
        applied_now: list[int] = []
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", [LOCK_KEY])
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_version (version integer PRIMARY KEY, name text NOT NULL, "
                "applied_at timestamptz NOT NULL DEFAULT now())"
            )
            have = {r[0] for r in conn.execute("SELECT version FROM schema_version").fetchall()}
            for version, name, sql in migrations():
                if version in have:
                    continue
                conn.execute(sql)
                conn.execute("INSERT INTO schema_version (version, name) VALUES (%s, %s)", [version, name])
                applied_now.append(version)
        if applied_now:
            log.info("shared store %s: schema migrated to version %d", self.shown, applied_now[-1])
        self._migrated = True
        return applied_now

    # -- writes ----------------------------------------------------------------------------------------
    def _local(self) -> sqlite_utils.Database:
        return store.connect(self.local_path)

    def write(self, table: str, row: dict[str, Any]) -> WriteResult:
        """Write `row` to `table` of the shared log (replaying the outbox first); on failure keep it in the local
        outbox, with one notice, to be replayed on the next successful connect."""
        import psycopg
        from psycopg_pool import PoolTimeout

        row = {"user_name": user(), **row}
        if not self.available():
            self._queue(table, row, None)
            return WriteResult(shared=False, inserted=False)
        try:
            with self.connection() as conn:
                self._replay(conn)
                inserted = self._insert(conn, table, row)
        except PoolTimeout as e:
            self._queue(table, row, self._why_unreachable(e))
            return WriteResult(shared=False, inserted=False)
        except (psycopg.OperationalError, psycopg.InterfaceError) as e:
            self._queue(table, row, e)
            return WriteResult(shared=False, inserted=False)
        self._retry_at = 0.0
        if self._degraded:
            log.warning("shared store %s reachable again: the rows kept locally are synced", self.shown)
            self._degraded = False
        return WriteResult(shared=True, inserted=inserted)

    def _why_unreachable(self, e: BaseException) -> BaseException:
        """The server's own reason when the pool timed out (it retries quietly): one direct connect's error."""
        import psycopg

        try:
            psycopg.connect(self.url, connect_timeout=CONNECT_TIMEOUT_S).close()
        except psycopg.Error as direct:
            return direct
        return e

    def available(self) -> bool:
        """Whether to try the server now: not within RETRY_AFTER_S of a failure."""
        return time.monotonic() >= self._retry_at

    def sync(self) -> int:
        """Replay the outbox now; the rows it held (0 when empty). Raises when the server is unreachable."""
        with self.connection() as conn:
            n = self._replay(conn, force=True)
        self._degraded = False
        self._retry_at = 0.0
        return n

    @staticmethod
    def _insert(conn: Any, table: str, row: dict[str, Any]) -> bool:
        if table not in TABLES:
            raise ValueError(f"not a table of the shared log: {table}")
        cols = list(row)
        names = ", ".join(cols)
        marks = ", ".join(["%s"] * len(cols))
        if table == "kb_records":  # a record added again (--force) replaces its text
            conflict = "ON CONFLICT (id) DO UPDATE SET yaml = EXCLUDED.yaml, sha256 = EXCLUDED.sha256, "
            conflict += "user_name = EXCLUDED.user_name, created = EXCLUDED.created"
        else:
            conflict = "ON CONFLICT DO NOTHING"
        with conn.transaction():
            cur = conn.execute(f"INSERT INTO {table} ({names}) VALUES ({marks}) {conflict}", [row[c] for c in cols])
            return bool(cur.rowcount)

    def _queue(self, table: str, row: dict[str, Any], e: BaseException | None) -> None:
        self._outbox_empty = False
        db = self._local()
        db.table(OUTBOX).insert(
            {"table_name": table, "row": json.dumps(row), "queued": time.time()},
            pk="seq",
            alter=True,
        )
        if e is not None:
            self._retry_at = time.monotonic() + RETRY_AFTER_S
            self._why = self._reason(e)
        if not self._degraded:
            self._degraded = True
            why = self._why or "not answering"
            log.warning(
                "shared store %s unavailable (%s): keeping rows in the local store, synced on the next connect",
                self.shown,
                why,
            )

    def pending(self) -> int:
        """Rows in the local outbox, not yet in the shared log."""
        db = self._local()
        if OUTBOX not in db.table_names():
            return 0
        return int(db.execute(f"select count(*) from {OUTBOX}").fetchone()[0])

    def _replay(self, conn: Any, force: bool = False) -> int:
        if self._outbox_empty and not force:
            return 0
        db = self._local()
        if OUTBOX not in db.table_names():
            self._outbox_empty = True
            return 0
        rows = list(db.query(f"select seq, table_name, row from {OUTBOX} order by seq"))
        for r in rows:
            self._insert(conn, r["table_name"], json.loads(r["row"]))
            db.execute(f"delete from {OUTBOX} where seq = ?", [r["seq"]])  # after its commit: a replay is idempotent
            db.conn.commit()
        self._outbox_empty = True
        if rows:
            log.info("shared store %s: %d row(s) kept locally synced", self.shown, len(rows))
        return len(rows)

    def records_changed(self, have: dict[str, str]) -> list[tuple[str, str]]:
        """The shared knowledge records (id, YAML) whose id is not in `have` (id -> sha256 of the local text) or
        whose text differs: two reads, the second only of what changed. Raises when unreachable."""
        ids = self.query("SELECT id, sha256 FROM kb_records")
        want = [r["id"] for r in ids if have.get(r["id"]) != r["sha256"]]
        if not want:
            return []
        rows = self.query("SELECT id, yaml FROM kb_records WHERE id = ANY(%s) ORDER BY id", [want])
        return [(r["id"], r["yaml"]) for r in rows]

    # -- reads -----------------------------------------------------------------------------------------
    def query(self, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
        """Rows of a read on the shared log as dicts; raises Unavailable when it does not answer (and the store
        is then not tried again for RETRY_AFTER_S)."""
        import psycopg
        from psycopg.rows import dict_row
        from psycopg_pool import PoolTimeout

        try:
            with self.connection() as conn:
                self._replay(conn)  # rows kept locally go first, so a read sees them
                cur = conn.cursor(row_factory=dict_row)
                cur.execute(sql, params or [])
                return [dict(r) for r in cur.fetchall()]
        except (PoolTimeout, psycopg.OperationalError, psycopg.InterfaceError) as e:
            # not tried again for RETRY_AFTER_S: the callers read the local store meanwhile
            self._retry_at = time.monotonic() + RETRY_AFTER_S
            self._why = self._reason(self._why_unreachable(e) if isinstance(e, PoolTimeout) else e)
            raise Unavailable(self._why) from None

    def _reason(self, e: BaseException) -> str:
        """The first line of the server's (or the driver's) message, its password redacted."""
        text = str(e).strip()
        return redact(text.splitlines()[0] if text else type(e).__name__, self.url)


def record_row(rid: str, text: str) -> dict[str, Any]:
    """A knowledge record (its id and YAML text) as a row of the shared `kb_records` table."""
    return {"id": rid, "created": time.time(), "sha256": sha256_text(text), "yaml": text}


def sha256_text(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_SHARED: dict[str, SharedStore] = {}
_SHARED_LOCK = threading.Lock()


def shared() -> SharedStore | None:
    """The process's shared store when `ASAP_STORE` names one, else None."""
    u = url()
    if u is None:
        return None
    with _SHARED_LOCK:
        if u not in _SHARED:
            _SHARED[u] = SharedStore(u)
        return _SHARED[u]
