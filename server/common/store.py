"""ASAP's own sqlite store: one file in the user's cache directory (or `ASAP_CACHE_DIR`), opened
through sqlite-utils in WAL mode so readers never block the one writer.

The stdlib `sqlite3` of some Pythons cannot load extensions (sqlite-vec needs that); sqlite-utils
uses `pysqlite3` when it is installed, and `connect` says which fix applies when neither can.

The store heals instead of failing a command (issue 17): a file that is not a database, or is damaged, or whose
tables are not the shape their owner writes (`recreate`), is moved aside (`<name>.corrupt-<timestamp>`, with its
journal) and a new one created, with a warning on the "asap" log (`set_aside`, which the knowledge index heals
with too); a location that cannot be written (a read-only
cache directory) gives a store in memory for the rest of the process, with one warning. Both keep what is kept:
a damaged file is renamed, never deleted.

The tables in `asap.sqlite`, by owner (their names and row formats are what users' caches hold: keep them):
  profiles       server/profiles/profile_convert.py  XProf's tool JSON by content hash (a BlobCache)
  files          server/profiles/profile_convert.py  (path, size, mtime) -> sha256, so unchanged files are not re-hashed
  verifications  server/compile/verify.py            the compiler's results by job hash (a BlobCache)
  experiments, applications, outcomes   server/services/experiments.py   the experiment log (its own schema)
  shared_outbox  server/common/pg_store.py           rows for the shared log (ASAP_STORE=postgresql://...) kept
                                                    while it was unreachable, replayed on the next connect
The knowledge index is a file of its own (kb.sqlite, server/kb/store.py), rebuilt from kb/ when stale.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import filelock
import platformdirs
import sqlite_utils

DB_NAME = "asap.sqlite"
sqlite3 = sqlite_utils.utils.sqlite3  # pysqlite3 when installed (it can load extensions), else the stdlib's
log = logging.getLogger("asap")

_MEMORY: dict[str, sqlite_utils.Database] = {}  # name -> the connection keeping an in-memory stand-in alive
_MEMORY_LOCK = threading.Lock()


def cache_dir() -> Path:
    """Where ASAP keeps its caches: $ASAP_CACHE_DIR, else the platform's user cache directory. Created when it
    can be; when it cannot (a read-only home), the path is still returned and what opens files in it handles that
    (`connect` keeps the store in memory)."""
    env = os.environ.get("ASAP_CACHE_DIR")
    d = Path(env) if env else Path(platformdirs.user_cache_dir("asap", appauthor=False))
    with contextlib.suppress(OSError):
        d.mkdir(parents=True, exist_ok=True)
    return d


def outcomes_dir() -> Path:
    """Where the outcomes of applied proposals are kept as knowledge records (kb/history schema), indexed with
    kb/history: $ASAP_OUTCOMES_DIR, else <cache>/outcomes."""
    env = os.environ.get("ASAP_OUTCOMES_DIR")
    return Path(env) if env else cache_dir() / "outcomes"


def is_damaged(e: BaseException) -> bool:
    """Whether a sqlite error says the file is not a database or is damaged (as opposed to one that cannot be
    opened, written or locked: those are OperationalError, and so are a missing table or column)."""
    if not isinstance(e, sqlite3.DatabaseError):
        return False
    name = getattr(e, "sqlite_errorname", "") or ""
    return type(e) is sqlite3.DatabaseError or name == "SQLITE_NOTADB" or name.startswith("SQLITE_CORRUPT")


def writable(path: Path) -> str | None:
    """Why a sqlite file at `path` cannot be written (its directory created, the directory or the file
    writable), or None when it can."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        return f"cannot create {path.parent}: {e.strerror or e}"
    if not os.access(path.parent, os.W_OK):
        return f"{path.parent} is not writable"
    if path.exists() and not os.access(path, os.W_OK):
        return f"{path} is not writable"
    return None


def move_aside(path: Path) -> Path:
    """Rename the sqlite file `path` (and its -wal and -shm journal files, which belong to it: left in place
    they would be replayed into the new file) to `<name>.corrupt-<timestamp>`; the new name. Raises OSError
    when it cannot be renamed."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while aside.exists():
        n += 1
        aside = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
    os.replace(path, aside)
    for suffix in ("-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.replace(path.with_name(path.name + suffix), aside.with_name(aside.name + suffix))
    return aside


def set_aside(
    p: Path, why: str, unusable: Callable[[], bool], what: str = "ASAP's store", then: str = "recreated"
) -> Path | None:
    """Move the sqlite file `p` aside (`move_aside`) under the lock beside it, when `unusable()` (its owner's
    test, run under the lock) still finds it so: two processes that find it unusable move it once, and the second
    keeps what the first made. Said once, as one warning on the "asap" log naming the file moved aside. The new
    name, or None when it is usable now. Raises OSError (or filelock.Timeout) when it cannot be moved."""
    with filelock.FileLock(str(p) + ".lock", timeout=30):
        if not unusable():
            return None
        aside = move_aside(p)
        log.warning("%s %s was unusable (%s): moved to %s and %s", what, p, why, aside, then)
        return aside


def connect(path: Path | None = None) -> sqlite_utils.Database:
    """Open (creating) the store; WAL journal, a busy timeout instead of 'database is locked'. A damaged file is
    moved aside and recreated; an unwritable location gives the process's in-memory store. Each with a warning."""
    p = path or cache_dir() / DB_NAME
    why = writable(p)
    if why is not None:
        return memory_store(p, why)
    try:
        return _open_file(p)
    except sqlite3.DatabaseError as e:
        if is_damaged(e):
            return _heal(p, f"{e}")
        return memory_store(p, f"{e}")
    except OSError as e:
        return memory_store(p, e.strerror or str(e))


def recreate(
    db: sqlite_utils.Database, why: str, check: Callable[[sqlite_utils.Database], str | None] | None = None
) -> sqlite_utils.Database:
    """The store `db` is unusable as its owner reads it (`why`, e.g. a table of another shape; `check` is the
    owner's test, None when usable): moved aside and recreated as `connect` does for a damaged file; the new
    connection (`db` is closed). An in-memory store is emptied instead."""
    path = file_of(db)
    if path is None:
        for name in db.table_names():
            with contextlib.suppress(sqlite3.Error):
                db.execute(f"drop table if exists [{name}]")
        log.warning("ASAP's in-memory store was unusable (%s); emptied", why)
        return db
    db.close()
    return _heal(path, why, check)


def file_of(db: sqlite_utils.Database) -> Path | None:
    """The file behind a connection, None for an in-memory database."""
    with contextlib.suppress(sqlite3.Error):
        for row in db.execute("PRAGMA database_list").fetchall():
            if row[1] == "main" and row[2]:
                return Path(row[2])
    return None


def integrity_problem(db: sqlite_utils.Database) -> str | None:
    """What SQLite's quick check finds wrong with `db`, None when nothing (a check for `recreate`)."""
    try:
        rows = [r[0] for r in db.execute("PRAGMA quick_check").fetchall()]
    except sqlite3.DatabaseError as e:
        return str(e)
    return None if rows == ["ok"] else "; ".join(map(str, rows[:3]))


def _open_file(p: Path) -> sqlite_utils.Database:
    db = sqlite_utils.Database(p)
    try:
        db.execute("PRAGMA busy_timeout = 5000")
        db.enable_wal()
        db.execute("select count(*) from sqlite_master").fetchone()  # reads the schema: a damaged file fails here
    except BaseException:
        db.close()
        raise
    return db


def _heal(
    p: Path, why: str, check: Callable[[sqlite_utils.Database], str | None] | None = None
) -> sqlite_utils.Database:
    """Move the store at `p` aside (`set_aside`) and open a new one; kept when, opened again under the lock, it is
    usable now (another process healed it meanwhile). Usable: it opens, and `check` (the owner's test, for
    `recreate`) finds nothing."""
    kept: list[sqlite_utils.Database] = []

    def unusable() -> bool:
        try:
            db = _open_file(p)
        except sqlite3.DatabaseError as e:
            if not is_damaged(e):
                raise
            return True
        if check is None or check(db) is None:
            kept.append(db)
            return False
        db.close()
        return True

    try:
        set_aside(p, why, unusable)
        return kept[0] if kept else _open_file(p)
    except (OSError, filelock.Timeout, sqlite3.Error) as e:
        return memory_store(p, f"{why}; and it could not be replaced: {e}")


def memory_store(p: Path, why: str) -> sqlite_utils.Database:
    """The in-memory stand-in for the store at `p`, one per path for the whole process (every connection to it
    sees the same tables), announced by one warning."""
    name = f"asap-{hashlib.sha256(str(p).encode()).hexdigest()[:16]}"
    with _MEMORY_LOCK:
        if name not in _MEMORY:
            log.warning("ASAP's store %s cannot be used (%s): keeping results in memory for this run", p, why)
            _MEMORY[name] = sqlite_utils.Database(memory_name=name)  # keeps the shared in-memory database alive
    return sqlite_utils.Database(memory_name=name)


@dataclass(frozen=True)
class BlobCache:
    """A cache table `key -> zlib-compressed JSON` in the store: `key` (the primary key, a content hash the
    owner computes), the owner's `extra` columns, `created` (seconds since the epoch) and the blob `column`.
    A `db` of None (no writable cache) reads nothing and keeps nothing; a table of another shape, or one that
    cannot be read, is a miss (and is replaced on the next `put`)."""

    table: str
    column: str

    def get(self, db: sqlite_utils.Database | None, key: str) -> Any | None:
        """The value stored under `key`, or None."""
        if db is None:
            return None
        try:
            if self.table not in db.table_names():
                return None
            rows = list(db.query(f"select {self.column} from {self.table} where key = ?", [key]))
            return json.loads(zlib.decompress(rows[0][self.column])) if rows else None
        except (sqlite3.Error, zlib.error, ValueError, TypeError) as e:
            log.warning("cache table %s unreadable (%s): treated as empty", self.table, e)
            return None

    def put(self, db: sqlite_utils.Database | None, key: str, value: Any, **extra: Any) -> None:
        """Store `value` (JSON-serialisable) under `key`, replacing what was there."""
        if db is None:
            return
        blob = zlib.compress(json.dumps(value).encode(), 6)
        row = {"key": key, **extra, "created": time.time(), self.column: blob}
        try:
            db.table(self.table).upsert(row, pk="key")
        except (sqlite3.OperationalError, sqlite_utils.db.InvalidColumns) as e:
            if getattr(e, "sqlite_errorname", "SQLITE_ERROR") != "SQLITE_ERROR":  # locked, read-only, I/O: not shape
                raise
            # a table of another shape (another ASAP's, or not ASAP's): a cache, so replaced
            log.warning("cache table %s has another shape (%s): recreated", self.table, e)
            db.execute(f"drop table if exists [{self.table}]")
            db.table(self.table).upsert(row, pk="key")
