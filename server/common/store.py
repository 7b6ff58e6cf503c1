"""ASAP's own sqlite store: one file in the user's cache directory (or `ASAP_CACHE_DIR`), opened
through sqlite-utils in WAL mode so readers never block the one writer.

The stdlib `sqlite3` of some Pythons cannot load extensions (sqlite-vec needs that); sqlite-utils
uses `pysqlite3` when it is installed, and `connect` says which fix applies when neither can.
"""

from __future__ import annotations

import os
from pathlib import Path

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
