"""ASAP's own sqlite store: one file in the user's cache directory (or `ASAP_CACHE_DIR`), opened
through sqlite-utils in WAL mode so readers never block the one writer.

The stdlib `sqlite3` of some Pythons cannot load extensions (sqlite-vec needs that); sqlite-utils
uses `pysqlite3` when it is installed, and `connect` says which fix applies when neither can.

The tables in `asap.sqlite`, by owner (their names and row formats are what users' caches hold: keep them):
  profiles       server/profiles/profile_convert.py  XProf's tool JSON by content hash (a BlobCache)
  files          server/profiles/profile_convert.py  (path, size, mtime) -> sha256, so unchanged files are not re-hashed
  verifications  server/compile/verify.py            the compiler's results by job hash (a BlobCache)
  experiments, applications, outcomes   server/services/experiments.py   the experiment log (its own schema)
The knowledge index is a file of its own (kb.sqlite, server/kb/store.py), rebuilt from kb/ when stale.
"""

from __future__ import annotations

import json
import os
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs
import sqlite_utils

DB_NAME = "asap.sqlite"


def cache_dir() -> Path:
    """Where ASAP keeps its caches: $ASAP_CACHE_DIR, else the platform's user cache directory."""
    env = os.environ.get("ASAP_CACHE_DIR")
    d = Path(env) if env else Path(platformdirs.user_cache_dir("asap", appauthor=False))
    d.mkdir(parents=True, exist_ok=True)
    return d


def outcomes_dir() -> Path:
    """Where the outcomes of applied proposals are kept as knowledge records (kb/history schema), indexed with
    kb/history: $ASAP_OUTCOMES_DIR, else <cache>/outcomes."""
    env = os.environ.get("ASAP_OUTCOMES_DIR")
    return Path(env) if env else cache_dir() / "outcomes"


def connect(path: Path | None = None) -> sqlite_utils.Database:
    """Open (creating) the store; WAL journal, a busy timeout instead of 'database is locked'."""
    p = path or cache_dir() / DB_NAME
    p.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite_utils.Database(p)
    db.execute("PRAGMA busy_timeout = 5000")
    db.enable_wal()
    return db


@dataclass(frozen=True)
class BlobCache:
    """A cache table `key -> zlib-compressed JSON` in the store: `key` (the primary key, a content hash the
    owner computes), the owner's `extra` columns, `created` (seconds since the epoch) and the blob `column`.
    A `db` of None (no writable cache) reads nothing and keeps nothing."""

    table: str
    column: str

    def get(self, db: sqlite_utils.Database | None, key: str) -> Any | None:
        """The value stored under `key`, or None."""
        if db is None or self.table not in db.table_names():
            return None
        rows = list(db.query(f"select {self.column} from {self.table} where key = ?", [key]))
        return json.loads(zlib.decompress(rows[0][self.column])) if rows else None

    def put(self, db: sqlite_utils.Database | None, key: str, value: Any, **extra: Any) -> None:
        """Store `value` (JSON-serialisable) under `key`, replacing what was there."""
        if db is None:
            return
        blob = zlib.compress(json.dumps(value).encode(), 6)
        db.table(self.table).upsert({"key": key, **extra, "created": time.time(), self.column: blob}, pk="key")
