"""The knowledge index: one sqlite file (sqlite-utils tables, an FTS5 index, a sqlite-vec `vec0` table)
built from `kb/`, searched by reciprocal-rank fusion of BM25 and vector KNN.

Where: `path` argument, else `$ASAP_KB_PATH` (the editor passes `asap.kbPath` this way), else
`<ASAP cache dir>/kb.sqlite`. Content: `$ASAP_KB_DIR`, else the repository's `kb/`.

Consistency: the index records a hash of every `kb/` file it was built from, the embedding model's
name, dimension and package version and a schema version; `ensure()` rebuilds when the model or the schema
differs, and when the file is not a database, is damaged or is not a knowledge index. Damage found by a query
(a file truncated or overwritten past the schema and metadata that opening reads) heals the same way: the query
moves the file aside, rebuilds and runs again, once (`_heals`). Either way the file is moved aside as ASAP's other
stores are (server/common/store.py `set_aside`: under the writers' lock, once across processes), with one warning
on the log naming where it went. A rebuild is prepared in a temporary database and copied into the index with
SQLite's backup API in one write transaction, by one writer at a time (a file lock next to the index): readers,
in WAL mode, keep their snapshot and never see half an index.

Incremental updates: when only the content changed (a note edited, a record added with `asap kb add-record`,
the team's records pulled from the shared store into the outcomes directory), `ensure()` updates the index in
place instead: the `sources` table holds each indexed file's sha256 and document id, so only the added and
changed files are parsed and embedded, the documents of changed and removed files are deleted, all in one
write transaction under the same lock. A chunk's id is a hash of its document id and position, so an updated
index holds the very rows a full rebuild would, and search answers the same.

A location that cannot be written (a read-only cache directory) does not stop search (issue 17): an index
there that is current is read as it is (opened immutable: SQLite cannot create its WAL index beside it), and
one that must be built or rebuilt is built in memory for the process, with a notice.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import os
import re
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import filelock
import numpy as np
import sqlite_utils

from server.common import pg_store
from server.common import store as cache_store
from server.config import slices
from server.kb.embed import Embedder
from server.kb.embed import default as default_embedder
from server.kb.records import GENERATIONS, Note, Record, RecordError, load_note, load_record

sqlite3 = sqlite_utils.utils.sqlite3  # pysqlite3 when installed (it loads extensions), else the stdlib's
SCHEMA_VERSION = 3  # 2: chunk titles in the keyword index; 3: chunk ids from (document, position), `sources`
# what search reads, and the indexed files (`sources`) an incremental update compares with
TABLES = frozenset(["documents", "chunks", "chunks_fts", "chunk_vec", "history", "metadata", "sources"])
PULL_EVERY_S = 60.0  # how often one process asks the shared store for new knowledge records
_pulled_at: dict[str, float] = {}  # outcomes directory -> time.monotonic() of its last pull
RRF_K = 60  # reciprocal rank fusion constant (Cormack et al. 2009): score = sum 1 / (RRF_K + rank)
CANDIDATES = 50  # per retriever, before fusion
FTS_POOL = 400  # BM25 results looked at when filters drop some
# The shipped knowledge content, as package data: `server/kb/content` is a symlink to kb/ at the repository root in a
# checkout (resolved, so links open kb/docs/...) and the files themselves in an installed wheel (pyproject.toml's
# package-data). pip installs packages as files, so the resource is a directory on disk.
REPO_KB = Path(str(resources.files("server.kb") / "content")).resolve()
# Abbreviations engineers type, spelled out as the notes write them (added to the query, not replacing it).
ABBREVIATIONS = {
    "oom": "out of memory",
    "moe": "mixture of experts",
    "tp": "tensor parallelism",
    "dp": "data parallelism",
    "pp": "pipeline parallelism",
    "cp": "context parallelism",
    "ep": "expert parallelism",
    "sp": "sequence parallelism",
    "ga": "gradient accumulation",
    "pdbs": "per_device_batch_size",
}
# Words that carry no topic in a question ("how do I ..."): left out of the BM25 query, where they would
# otherwise match every note. The embedding still sees the whole query.
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "how",
        "i",
        "if",
        "in",
        "is",
        "it",
        "its",
        "my",
        "of",
        "on",
        "or",
        "should",
        "so",
        "than",
        "that",
        "the",
        "this",
        "to",
        "use",
        "vs",
        "what",
        "when",
        "which",
        "why",
        "will",
        "with",
    ]
)


class KbError(RuntimeError):
    """The store cannot be used; the message says why and what fixes it."""


F = TypeVar("F", bound=Callable[..., Any])


def _heals(method: F) -> F:
    """A query of the index that finds the file damaged where opening did not look (a file truncated or
    overwritten past its schema and metadata: the rows of a table cut off) moves it aside, rebuilds it and runs
    again, once (`KnowledgeStore._heal`)."""

    @functools.wraps(method)
    def run(self: KnowledgeStore, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except sqlite3.DatabaseError as e:
            if not self._damaged_by(e):
                raise
            self._heal(str(e))
        return method(self, *args, **kwargs)

    return run  # type: ignore[return-value]


@dataclass(frozen=True)
class Result:
    source: str  # kb-relative path, e.g. docs/fsdp-vs-data-parallelism.md
    doc_id: str
    kind: str  # "doc" | "history"
    title: str
    heading: str
    text: str
    score: float

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "id": self.doc_id,
            "kind": self.kind,
            "title": self.title,
            "heading": self.heading,
            "text": self.text,
            "score": round(self.score, 6),
        }


@dataclass(frozen=True)
class Situation:
    """What the history search compares: the config being tuned, as the analysis sees it."""

    params_b: float
    slice: str
    bottleneck: str | None = None
    mesh: dict[str, int] = field(default_factory=dict)
    num_slices: int = 1


def kb_dir() -> Path:
    """The knowledge content indexed: $ASAP_KB_DIR, else the notes and records ASAP ships (`REPO_KB`)."""
    env = os.environ.get("ASAP_KB_DIR")
    return Path(env) if env else REPO_KB


def index_path() -> Path:
    env = os.environ.get("ASAP_KB_PATH")
    return Path(env).expanduser() if env else cache_store.cache_dir() / "kb.sqlite"


def family_of(model_name: str) -> str:
    m = re.match(r"[a-z]+", model_name.lower())
    return m.group(0) if m else model_name.lower()


def generation_of(slice_name: str) -> str | None:
    """The slice's generation (server/config/slices.py's name rules) when the knowledge base records it."""
    gen = slices.name_generation(slice_name)
    return gen if gen in GENERATIONS else None


def _connect(path: Path, conn: Any = None) -> sqlite_utils.Database:
    """A connection with sqlite-vec loaded; a clear message when this Python's sqlite3 cannot load it.
    `conn`: an already open DB-API connection to use instead (sqlite-utils picks pysqlite3 by default)."""
    import sqlite_vec

    db = sqlite_utils.Database(conn if conn is not None else path)
    conn = db.conn
    if not hasattr(conn, "enable_load_extension"):
        raise KbError(
            "this Python's sqlite3 cannot load extensions, which sqlite-vec needs: install pysqlite3-binary "
            "(pip install pysqlite3-binary; sqlite-utils uses it automatically) or use a Python built with "
            "--enable-loadable-sqlite-extensions"
        )
    try:
        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        conn.enable_load_extension(False)
    except Exception as e:
        raise KbError(f"could not load sqlite-vec into sqlite {sqlite_utils.utils.sqlite3.sqlite_version}: {e}") from e
    db.execute("PRAGMA busy_timeout = 10000")
    return db


def _content(root: Path) -> list[Path]:
    return sorted([*root.glob("docs/*.md"), *root.glob("history/*.yaml")])


def _outcomes(outcomes: Path | None) -> list[Path]:
    return sorted(outcomes.glob("*.yaml")) if outcomes is not None and outcomes.is_dir() else []


def _files(root: Path, outcomes: Path | None) -> list[tuple[str, Path]]:
    """The indexed files, each with its key (`docs/x.md`, `history/x.yaml`, `outcomes/x.yaml`), in index order."""
    return [(p.relative_to(root).as_posix(), p) for p in _content(root)] + [
        (f"outcomes/{p.name}", p) for p in _outcomes(outcomes)
    ]


def _hash(embedder_name: str, files: list[tuple[str, bytes]]) -> str:
    h = hashlib.sha256(f"{SCHEMA_VERSION}|{embedder_name}".encode())
    for key, data in files:
        h.update(key.encode() + b"\0" + data + b"\0")
    return h.hexdigest()


def content_hash(root: Path, embedder_name: str, outcomes: Path | None = None) -> str:
    """Of the notes, the records and the outcome records of ASAP's own applied proposals."""
    return _hash(embedder_name, [(key, p.read_bytes()) for key, p in _files(root, outcomes)])


# Chunk rowids stay below 2**31: sqlite-vec 0.1.9's KNN with a `rowid IN (...)` filter misses allowed rows
# when rowids differ by 2**31 or more (measured: the nearest allowed chunk left out; tested).
ID_SPACE = 2**31 - 1


def chunk_id(doc_id: str, position: int) -> int:
    """A chunk's preferred rowid: 31 bits of sha256 of its document id and position, the same in every build
    (1 .. ID_SPACE). `_assign_ids` moves a chunk whose id is taken to the next free one."""
    return int.from_bytes(hashlib.sha256(f"{doc_id}\0{position}".encode()).digest()[:4], "big") % ID_SPACE + 1


def _assign_ids(chunks: list[dict[str, Any]], taken: set[int]) -> None:
    """Each chunk's id: its `chunk_id`, else (a collision: about 1 in 4,300 indexes of 1,000 chunks holds one)
    the next free one after it; `taken` (the ids in use) gets them."""
    for c in chunks:
        i = chunk_id(c["doc_id"], c["position"])
        while i in taken:
            i = i % ID_SPACE + 1
        c["id"] = i
        taken.add(i)


def model_version(embedder: Embedder) -> str:
    """The embedding model's package version (a new one may embed differently under the same name)."""
    return str(getattr(embedder, "version", "") or "")


@dataclass(frozen=True)
class _File:
    key: str  # docs/x.md, history/x.yaml, outcomes/x.yaml
    path: Path
    data: bytes

    @functools.cached_property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


@contextlib.contextmanager
def _writer_lock(path: Path) -> Iterator[None]:
    """One writer at a time across processes."""
    lock = path.with_name(path.name + ".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(lock):
        yield


class KnowledgeStore:
    def __init__(
        self,
        path: Path | None = None,
        root: Path | None = None,
        embedder: Embedder | None = None,
        outcomes: Path | None = None,
    ) -> None:
        self.path = path or index_path()
        self.root = root or kb_dir()
        # the measured outcomes of ASAP's applied proposals, indexed with kb/history (server/services/experiments.py);
        # a knowledge base of another root (tests, benchmarks) has only what its root holds, unless given
        self.outcomes = outcomes if outcomes is not None else (cache_store.outcomes_dir() if root is None else None)
        self.embedder = embedder or default_embedder()
        self.notices: list[str] = []
        self._db: sqlite_utils.Database | None = None
        self._docs: dict[str, dict[str, Any]] | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._local = threading.local()
        # where the index is read from: the file (`_uri` None), the file read-only, or a database in memory
        self.storage = "file"
        self._uri: str | None = None
        self._anchor: sqlite_utils.Database | None = None  # keeps an in-memory index alive

    # -- opening and building --------------------------------------------------------------------------
    def _meta(self, db: sqlite_utils.Database) -> dict[str, str]:
        if "metadata" not in db.table_names():
            return {}
        return {r["key"]: r["value"] for r in db["metadata"].rows}

    def stale_reason(self) -> str | None:
        """Why the index must be (re)built, or None when it matches kb/ and the model. 'corrupt: ...' when the
        file is damaged or is not a knowledge index."""
        if self._uri is None and not self.path.exists():
            return "no index yet"
        try:
            tables, meta = self._contents()
        except sqlite3.DatabaseError as e:
            if cache_store.is_damaged(e):
                return f"corrupt: {e}"
            if self._uri is not None or cache_store.writable(self.path) is None:
                raise KbError(f"cannot read the knowledge index {self.path}: {e}") from e
            # A read-only location, where SQLite cannot create the shared-memory file a WAL database is read
            # with: read it as it is.
            self._read_only()
            try:
                tables, meta = self._contents()
            except sqlite3.DatabaseError as e2:
                if cache_store.is_damaged(e2):
                    return f"corrupt: {e2}"
                raise KbError(f"cannot read the knowledge index {self.path}: {e2}") from e2
        if not tables:
            return "empty index"
        if not meta:
            return f"corrupt: not a knowledge index (its tables: {', '.join(sorted(tables)[:5])})"
        if meta.get("model") != self.embedder.name or meta.get("dim") != str(self.embedder.dim):
            return (
                f"built with embedding model {meta.get('model')} ({meta.get('dim')} dims), "
                f"this ASAP uses {self.embedder.name} ({self.embedder.dim})"
            )
        if meta.get("schema") != str(SCHEMA_VERSION):
            return "built by another ASAP version"
        if (built := meta.get("model_version", "")) != (ours := model_version(self.embedder)):
            return f"built with {built or 'another model version'}, this ASAP has {ours or 'another'}"
        if missing := TABLES - tables:
            return f"the index has no table {', '.join(sorted(missing))}"
        if meta.get("kb_hash") != content_hash(self.root, self.embedder.name, self.outcomes):
            return self._changed()
        return None

    def _changed(self) -> str:
        """The stale reason that an incremental update answers."""
        return f"{self.root} changed since the index was built"

    def _contents(self) -> tuple[set[str], dict[str, str]]:
        db = self.db
        return set(db.table_names()), self._meta(db)

    def _open(self) -> sqlite_utils.Database:
        """A connection to the index where it is read from now (the file, the file read-only, or memory)."""
        if self._uri is None:
            return _connect(self.path)
        return _connect(self.path, sqlite3.connect(self._uri, uri=True, check_same_thread=False))

    def _read_only(self) -> None:
        self.close()
        self._uri = f"{self.path.resolve().as_uri()}?immutable=1"
        self.storage = "read-only file"

    def _in_memory(self) -> sqlite_utils.Database:
        """A new, empty in-memory index for this store (the previous one, if any, is dropped); its connection."""
        self.close()
        if self._anchor is not None:
            self._anchor.close()
        self._uri = f"file:asap-kb-{uuid.uuid4().hex[:12]}?mode=memory&cache=shared"
        self.storage = "memory"
        self._anchor = self._open()
        return self._anchor

    @property
    def db(self) -> sqlite_utils.Database:
        if self._db is None:
            self._db = self._open()
        return self._db

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        self._docs = None
        if self._executor is not None:
            self._executor.submit(self._close_local).result()

    def _close_local(self) -> None:
        conn = getattr(self._local, "db", None)
        if conn is not None:
            conn.close()
            self._local.db = None

    def ensure(self) -> KnowledgeStore:
        """Bring the index up to date (`update()`), after pulling the team's records when shared."""
        self.pull_shared()
        self._refresh()
        return self

    @_heals
    def update(self) -> dict[str, Any]:
        """Build, update or rebuild as needed, and say what was done: `mode` "current" (nothing to do),
        "incremental" (only the added and changed files embedded) or "full"; the counts; `embedded`, the chunks
        embedded. Incremental when only kb/ or the outcomes changed and the index is a writable file; a full
        rebuild when the index is missing, of another model, model version or schema, or damaged (moved aside
        first; where it cannot be moved, the rebuilt index is kept in memory)."""
        done = self._refresh()
        return done if done is not None else {"mode": "current", **self._counts(), "embedded": 0}

    def _refresh(self) -> dict[str, Any] | None:
        """`update()`'s work; None when the index was current."""
        why = self.stale_reason()
        if why is None:
            return None
        if why == self._changed() and self.storage == "file" and self._unwritable() is None:
            try:
                done = self._incremental()
            except sqlite3.DatabaseError as e:  # damaged in a way the checks missed: rebuild it whole
                self.close()
                if self._damaged_by(e) and self._set_aside(str(e), self._unusable):
                    return {"mode": "full", **self.build()}
                self.notices.append(f"the knowledge index could not be updated ({e}): rebuilding it")
                done = None
            if done is not None:
                return done
        if why.startswith("corrupt"):
            if not self._set_aside(why.removeprefix("corrupt: "), self._unusable):
                return self._refresh()  # another process moved it aside and rebuilt it meanwhile
        elif why not in ("no index yet", "empty index"):
            self.notices.append(f"rebuilding the knowledge index: {why}")
        return {"mode": "full", **self.build()}

    def _set_aside(self, damage: str, unusable: Callable[[], bool]) -> bool:
        """The index file is damaged (`damage`): moved aside as ASAP's other stores are (server/common/store.py
        `set_aside`: under the writers' lock, once across processes, one warning on the log naming the file moved
        aside), for the rebuild that follows. Where it cannot be moved (a read-only location), the rebuild is kept
        in memory for this run, with a notice. False when `unusable()`, asked again under the lock, finds the
        file usable now."""
        self.close()
        try:
            moved = cache_store.set_aside(self.path, damage, unusable, "ASAP's knowledge index", "rebuilt")
        except (OSError, filelock.Timeout) as e:
            self.close()
            why = (e.strerror if isinstance(e, OSError) else None) or str(e)
            self.notices.append(
                f"the knowledge index {self.path} is damaged ({damage}) and cannot be moved aside "
                f"({why}): searching an index built in memory for this run"
            )
            self._in_memory()
            return True
        self.close()
        if moved is None:
            return False
        self._uri, self.storage = None, "file"
        return True

    def _unusable(self) -> bool:
        """Whether the index file, read afresh, is (still) damaged or not a knowledge index: what opening reads
        (`stale_reason`), then SQLite's quick check of every page (a file truncated or overwritten past its
        schema and metadata)."""
        self.close()
        try:
            why = self.stale_reason()
            if why is not None and why.startswith("corrupt"):
                return True
            return why != "no index yet" and cache_store.integrity_problem(self.db) is not None
        except sqlite3.DatabaseError as e:
            return cache_store.is_damaged(e)
        finally:
            self.close()

    def _damaged_by(self, e: sqlite3.DatabaseError) -> bool:
        """Whether the error `e` of a query comes of a damaged file: SQLite says so, or the quick check finds the
        damage (sqlite-vec reports a damaged vector page as a plain error: 'vectors blob read error for 1')."""
        if cache_store.is_damaged(e):
            return True
        if getattr(e, "sqlite_errorname", "") in ("SQLITE_BUSY", "SQLITE_LOCKED") or self.storage == "memory":
            return False
        try:
            return self._unusable()
        except KbError:
            return False

    def _heal(self, damage: str) -> None:
        """A query found the index damaged (`damage`): moved aside and rebuilt, or, when another process did so
        meanwhile, brought up to date."""
        if self.storage != "memory":
            self._set_aside(damage, self._unusable)  # (False: usable now, another process rebuilt it)
        self.close()
        self._refresh()

    def _counts(self) -> dict[str, int]:
        db = self.db
        return {
            "documents": db.execute("select count(*) from documents where kind = 'doc'").fetchone()[0],
            "records": db.execute("select count(*) from history").fetchone()[0],
            "chunks": db.execute("select count(*) from chunks").fetchone()[0],
        }

    def pull_shared(self, force: bool = False) -> int:
        """When `ASAP_STORE` names a shared log: copy the team's knowledge records (added with `asap kb add`, and
        the outcomes of teammates' applied proposals) that this machine lacks or holds another text of into the
        outcomes directory, which is indexed with kb/history, so the next `ensure()` reindexes them and search
        stays local. At most every PULL_EVERY_S per process (unless `force`); a record whose id kb/history holds is
        left out, one that does not validate is left out with a notice. The records written."""
        shared = pg_store.shared()
        if shared is None or self.outcomes is None or not shared.available():
            return 0
        key = str(self.outcomes)
        if not force and time.monotonic() - _pulled_at.get(key, -PULL_EVERY_S) < PULL_EVERY_S:
            return 0
        _pulled_at[key] = time.monotonic()
        have = {p.stem: pg_store.sha256_text(p.read_text(encoding="utf-8")) for p in _outcomes(self.outcomes)}
        try:
            changed = shared.records_changed(have)
        except Exception as e:  # unreachable: the local records answer
            self.notices.append(f"shared store {shared.shown}: {pg_store.redact(str(e), shared.url)}")
            return 0
        own = {p.stem for p in (self.root / "history").glob("*.yaml")}
        written = 0
        for rid, text in changed:
            if rid in own or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", rid):
                continue
            dest = self.outcomes / f"{rid}.yaml"
            try:
                load_record(dest, text)
            except RecordError as e:
                self.notices.append(f"shared knowledge record {rid} left out: {e}")
                continue
            self.outcomes.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_suffix(".tmp")
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(dest)
            written += 1
        return written

    def _snapshot(self) -> list[_File]:
        """The indexed files' bytes, read once (what is parsed, hashed and recorded is the same text)."""
        if not self.root.is_dir():
            raise KbError(f"knowledge content directory {self.root} does not exist (set ASAP_KB_DIR)")
        return [_File(key, p, p.read_bytes()) for key, p in _files(self.root, self.outcomes)]

    def _parse(
        self, files: list[_File], taken: dict[str, Path] | None = None
    ) -> tuple[list[Note], list[Record], dict[str, str]]:
        """The notes and records of `files`, validated; the document id of each file's key. An id used twice,
        or already used by a file in `taken` (id -> path), raises RecordError, as does the first malformed file."""
        notes: list[Note] = []
        records: list[Record] = []
        ids: dict[str, str] = {}
        seen: dict[str, Path] = dict(taken or {})
        for f in files:
            text = f.data.decode("utf-8")
            item: Note | Record = load_note(f.path, text) if f.key.startswith("docs/") else load_record(f.path, text)
            if item.id in seen:
                raise RecordError(f.path, 1, "id", f"'{item.id}' is also used by {seen[item.id]}")
            seen[item.id] = f.path
            ids[f.key] = item.id
            if isinstance(item, Note):
                notes.append(item)
            else:
                records.append(item)
        return notes, records, ids

    def load_content(self) -> tuple[list[Note], list[Record]]:
        """Every note and record, validated; the first malformed file raises RecordError."""
        notes, records, _ = self._parse(self._snapshot())
        return notes, records

    def _rows(
        self, notes: list[Note], records: list[Record]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
        """The documents, chunks (without their ids: `_assign_ids`) and history rows of these notes and records."""
        docs: list[dict[str, Any]] = []
        chunks: list[dict[str, Any]] = []
        for n in notes:
            docs.append(
                {
                    "id": n.id,
                    "kind": "doc",
                    "source": n.path.relative_to(self.root).as_posix(),
                    "title": n.title,
                    "axes": json.dumps(n.axes),
                    "generations": json.dumps(n.generations),
                    "families": json.dumps(n.families),
                    "sources": json.dumps(n.sources),
                }
            )
            for i, part in enumerate(n.chunks):
                chunks.append(
                    {"doc_id": n.id, "title": n.title, "position": i, "heading": part.heading, "text": part.text}
                )
        history_rows = []
        for r in records:
            gen = r.slice.generation
            axes = sorted({k.split("_", 1)[1].rsplit("_parallelism", 1)[0] for k in {*r.before.mesh, *r.after.mesh}})
            docs.append(
                {
                    "id": r.id,
                    "kind": "history",
                    "source": f"outcomes/{r.id}.yaml" if r.id.startswith("outcome-") else f"history/{r.id}.yaml",
                    "title": r.title,
                    "axes": json.dumps(sorted({*axes, *(t for t in r.tags if t not in GENERATIONS)})),
                    "generations": json.dumps([gen] if gen else []),
                    "families": json.dumps([family_of(r.model.name)]),
                    "sources": json.dumps([r.source]),
                }
            )
            chunks.append({"doc_id": r.id, "title": r.title, "position": 0, "heading": r.title, "text": r.text()})
            history_rows.append({"id": r.id, "record": r.model_dump_json()})
        return docs, chunks, history_rows

    def _embed(self, chunks: list[dict[str, Any]]) -> Any:
        return self.embedder.embed([f"{c['title']}. {c['heading']}. {c['text']}" for c in chunks])

    def build(self, extra_chunks: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """Index kb/ (plus `extra_chunks`, for benchmarks) into a fresh database, then swap it in."""
        t0 = time.perf_counter()
        files = self._snapshot()
        notes, records, ids = self._parse(files)
        docs, chunks, history_rows = self._rows(notes, records)
        chunks += [{"title": "", **c} for c in extra_chunks or []]
        _assign_ids(chunks, set())
        vectors = self._embed(chunks)
        t_embed = time.perf_counter() - t0
        now = str(time.time())
        sources = [{"path": f.key, "sha256": f.sha256, "doc_id": ids[f.key], "indexed_at": now} for f in files]

        meta = {
            "schema": str(SCHEMA_VERSION),
            "model": self.embedder.name,
            "dim": str(self.embedder.dim),
            "model_version": model_version(self.embedder),
            "kb_hash": _hash(self.embedder.name, [(f.key, f.data) for f in files]),
            "kb_dir": str(self.root),
            "built_at": now,
            "updated_at": now,
        }
        content = (docs, chunks, vectors, history_rows, sources, meta)
        unwritable = None if self.storage == "memory" else self._unwritable()
        if unwritable is None and self.storage != "memory":
            try:
                try:
                    self._build_file(*content)
                except sqlite3.DatabaseError as e:  # the file it replaces is damaged: aside first, then again
                    if not self._damaged_by(e):
                        raise
                    self._set_aside(str(e), self._unusable)
                    if self.storage == "file":
                        self._build_file(*content)
            except (OSError, sqlite3.OperationalError) as e:
                unwritable = str(e)
        if unwritable is not None or self.storage == "memory":
            if unwritable is not None:
                self.notices.append(
                    f"the knowledge index {self.path} cannot be written ({unwritable}): "
                    "searching an index built in memory for this run"
                )
            live = self._in_memory()
            self._fill(live, *content)
            live.conn.commit()
        return {
            "documents": len(notes),
            "records": len(records),
            "chunks": len(chunks),
            "embedded": len(chunks),
            "embed_s": t_embed,
            "total_s": time.perf_counter() - t0,
        }

    def _incremental(self) -> dict[str, Any] | None:
        """Update the index file in place from the files added, changed and removed since it was last built or
        updated (compared by sha256 with its `sources` table), in one write transaction; None when the index
        cannot be updated so (no `sources` table, another model or schema: then it is rebuilt)."""
        t0 = time.perf_counter()
        with _writer_lock(self.path):  # the files are read under the lock: a writer applies what it compared
            self.close()
            files = self._snapshot()
            db = _connect(self.path)
            try:
                tables, meta = set(db.table_names()), self._meta(db)
                if TABLES - tables or meta.get("schema") != str(SCHEMA_VERSION):
                    return None
                if (meta.get("model"), meta.get("dim"), meta.get("model_version", "")) != (
                    self.embedder.name,
                    str(self.embedder.dim),
                    model_version(self.embedder),
                ):
                    return None
                indexed = {r[0]: (r[1], r[2]) for r in db.execute("select path, sha256, doc_id from sources")}
                now = {f.key: f for f in files}
                fresh = [f for f in files if f.key not in indexed or indexed[f.key][0] != f.sha256]
                gone = sorted(k for k in indexed if k not in now or now[k].sha256 != indexed[k][0])
                kept = {indexed[k][1]: now[k].path for k in indexed if k in now and k not in gone}
                notes, records, ids = self._parse(fresh, taken=kept)
                docs, chunks, history_rows = self._rows(notes, records)
                vectors = self._embed(chunks)
                t_embed = time.perf_counter() - t0
                stamp = str(time.time())
                self._apply(
                    db,
                    [(k, indexed[k][1]) for k in gone],
                    docs,
                    chunks,
                    vectors,
                    history_rows,
                    [(f.key, f.sha256, ids[f.key], stamp) for f in fresh],
                    {"kb_hash": _hash(self.embedder.name, [(f.key, f.data) for f in files]), "updated_at": stamp},
                )
            finally:
                db.close()
        counts = self._counts()
        return {
            "mode": "incremental",
            **counts,
            "embedded": len(chunks),
            "added": sum(f.key not in indexed for f in fresh),
            "changed": sum(f.key in indexed for f in fresh),
            "removed": sum(k not in now for k in gone),
            "embed_s": t_embed,
            "total_s": time.perf_counter() - t0,
        }

    def _apply(
        self,
        db: sqlite_utils.Database,
        gone: list[tuple[str, str]],
        docs: list[dict[str, Any]],
        chunks: list[dict[str, Any]],
        vectors: Any,
        history_rows: list[dict[str, Any]],
        sources: list[tuple[str, str, str, str]],
        meta: dict[str, str],
    ) -> None:
        """One write transaction: the documents of `gone` ((key, document id) of each replaced or removed file)
        out of every table, the new rows in (their ids assigned here, once the ids of `gone` are free), the
        metadata updated. Raw statements: sqlite-utils' inserts commit on their own."""
        conn = db.conn
        conn.isolation_level = None
        conn.execute("BEGIN IMMEDIATE")
        try:
            for key, doc_id in gone:
                old = conn.execute("select id, heading, text from chunks where doc_id = ?", [doc_id]).fetchall()
                conn.executemany(  # an external-content FTS5 index forgets a row given its indexed text
                    "INSERT INTO chunks_fts(chunks_fts, rowid, heading, text) VALUES ('delete', ?, ?, ?)", old
                )
                conn.executemany("DELETE FROM chunk_vec WHERE rowid = ?", [(r[0],) for r in old])
                conn.execute("DELETE FROM chunks WHERE doc_id = ?", [doc_id])
                conn.execute("DELETE FROM documents WHERE id = ?", [doc_id])
                conn.execute("DELETE FROM history WHERE id = ?", [doc_id])
                conn.execute("DELETE FROM sources WHERE path = ?", [key])
            _assign_ids(chunks, {r[0] for r in conn.execute("select id from chunks")})
            columns = ("id", "kind", "source", "title", "axes", "generations", "families", "sources")
            conn.executemany(
                f"INSERT INTO documents ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                [tuple(d[c] for c in columns) for d in docs],
            )
            conn.executemany(
                "INSERT INTO chunks (id, doc_id, title, position, heading, text) VALUES (?, ?, ?, ?, ?, ?)",
                [(c["id"], c["doc_id"], c["title"], c["position"], c["heading"], c["text"]) for c in chunks],
            )
            conn.executemany(
                "INSERT INTO chunks_fts (rowid, heading, text) VALUES (?, ?, ?)",
                [(c["id"], c["heading"], c["text"]) for c in chunks],
            )
            conn.executemany(
                "INSERT INTO chunk_vec (rowid, embedding) VALUES (?, ?)",
                [(c["id"], v.astype(np.float32).tobytes()) for c, v in zip(chunks, vectors, strict=True)],
            )
            conn.executemany(
                "INSERT INTO history (id, record) VALUES (?, ?)", [(h["id"], h["record"]) for h in history_rows]
            )
            conn.executemany("INSERT INTO sources (path, sha256, doc_id, indexed_at) VALUES (?, ?, ?, ?)", sources)
            conn.executemany("INSERT OR REPLACE INTO metadata (key, value) VALUES (?, ?)", list(meta.items()))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _unwritable(self) -> str | None:
        """Why the index file cannot be written where it is, None when it can."""
        if self.storage == "read-only file":
            return "a read-only location"
        return cache_store.writable(self.path)

    def _build_file(
        self,
        docs: list[dict[str, Any]],
        chunks: list[dict[str, Any]],
        vectors: Any,
        history_rows: list[dict[str, Any]],
        sources: list[dict[str, Any]],
        meta: dict[str, str],
    ) -> None:
        """The index prepared in a temporary database beside the file, then copied in (one write transaction)."""
        with tempfile.TemporaryDirectory(dir=self.path.parent, prefix=".kb-build-") as tmp:
            fresh = _connect(Path(tmp) / "kb.sqlite")
            self._fill(fresh, docs, chunks, vectors, history_rows, sources, meta)
            fresh.conn.commit()
            with _writer_lock(self.path):
                self.close()
                live = _connect(self.path)
                live.execute("PRAGMA journal_mode = WAL")
                fresh.conn.backup(live.conn)  # one write transaction on the index; readers keep their snapshot
                live.close()
            fresh.close()
        self._uri, self.storage = None, "file"

    def _fill(
        self,
        fresh: sqlite_utils.Database,
        docs: list[dict[str, Any]],
        chunks: list[dict[str, Any]],
        vectors: Any,
        history_rows: list[dict[str, Any]],
        sources: list[dict[str, Any]],
        meta: dict[str, str],
    ) -> None:
        # created with their columns first, so that every table search reads exists however little kb/ holds
        text = {k: str for k in ("id", "kind", "source", "title", "axes", "generations", "families", "sources")}
        fresh.table("documents").create(text, pk="id")
        chunk_columns = {"id": int, "doc_id": str, "title": str, "position": int, "heading": str, "text": str}
        fresh.table("chunks").create(chunk_columns, pk="id")
        fresh.table("history").create({"id": str, "record": str}, pk="id")
        fresh.table("sources").create({"path": str, "sha256": str, "doc_id": str, "indexed_at": str}, pk="path")
        fresh.table("documents").insert_all(docs, pk="id")
        fresh.table("chunks").insert_all(chunks, pk="id", foreign_keys=[])
        fresh.table("chunks").create_index(["doc_id"])
        fresh.table("chunks").enable_fts(["heading", "text"], tokenize="porter", create_triggers=False)
        fresh.execute(f"CREATE VIRTUAL TABLE chunk_vec USING vec0(embedding float[{self.embedder.dim}])")
        fresh.conn.executemany(
            "INSERT INTO chunk_vec(rowid, embedding) VALUES (?, ?)",
            [(c["id"], v.astype(np.float32).tobytes()) for c, v in zip(chunks, vectors, strict=True)],
        )
        fresh.table("history").insert_all(history_rows, pk="id")
        fresh.table("sources").insert_all(sources, pk="path")
        fresh.table("metadata").insert_all([{"key": k, "value": v} for k, v in meta.items()], pk="key")

    # -- search ---------------------------------------------------------------------------------------
    def _documents(self) -> dict[str, dict[str, Any]]:
        if self._docs is None:
            self._docs = {
                r["id"]: {**r, **{k: json.loads(r[k]) for k in ("axes", "generations", "families", "sources")}}
                for r in self.db["documents"].rows
            }
        return self._docs

    def _allowed(self, generation: str | None, family: str | None, axis: str | None) -> set[str] | None:
        if not (generation or family or axis):
            return None
        out = set()
        for doc_id, d in self._documents().items():
            if generation and d["generations"] and generation not in d["generations"]:
                continue
            if family and d["families"] and family_of(family) not in d["families"]:
                continue
            if axis and axis not in d["axes"]:
                continue
            out.add(doc_id)
        return out

    @_heals
    def search(
        self,
        query: str,
        k: int = 5,
        generation: str | None = None,
        family: str | None = None,
        axis: str | None = None,
        kind: str | None = None,
        retrievers: tuple[str, ...] = ("bm25", "vector"),
    ) -> list[Result]:
        """Hybrid search: BM25 (FTS5) and vector KNN (sqlite-vec), fused by reciprocal rank. `retrievers`
        selects either alone (the benchmark's baselines)."""
        db = self.db
        allowed = self._allowed(generation, family, axis)
        docs = self._documents()
        if kind:
            allowed = {d for d in (allowed if allowed is not None else docs) if docs[d]["kind"] == kind}
        # The two retrievers run at once: vector KNN on a second connection in a worker thread (SQLite
        # releases the GIL while it steps), BM25 here. Filters restrict the KNN scan (vec0 takes a rowid IN
        # list); BM25 ranks over everything and keeps the allowed chunks of its first FTS_POOL.
        allowed_ids: set[int] | None = None
        if allowed is not None:
            marks = ",".join("?" * len(allowed)) or "NULL"
            allowed_ids = {
                r[0] for r in db.execute(f"select id from chunks where doc_id in ({marks})", sorted(allowed))
            }
        extra = [ABBREVIATIONS[w] for w in re.findall(r"[a-z0-9]+", query.lower()) if w in ABBREVIATIONS]
        query = " ".join([query, *extra])
        vec_job = None
        if "vector" in retrievers:
            qv = self.embedder.embed([query])[0].astype(np.float32).tobytes()
            vec_job = self._pool().submit(self._knn, qv, sorted(allowed_ids) if allowed_ids is not None else None)
        ranked: dict[int, float] = {}
        words = [w for w in re.findall(r"[a-z0-9]+", query.lower()) if w not in STOPWORDS]
        if words and "bm25" in retrievers:
            match = " OR ".join(f'"{w}"' for w in dict.fromkeys(words))
            limit = CANDIDATES if allowed_ids is None else FTS_POOL
            ids = [
                r[0]
                for r in db.execute(
                    "select rowid from chunks_fts where chunks_fts match ? order by bm25(chunks_fts) limit ?",
                    [match, limit],
                )
            ]
            self._fuse(ranked, [i for i in ids if allowed_ids is None or i in allowed_ids])
        if vec_job is not None:
            self._fuse(ranked, vec_job.result())
        if not ranked:
            return []
        ids = list(ranked)
        marks = ",".join("?" * len(ids))
        found = {
            r[0]: r for r in db.execute(f"select id, doc_id, heading, text from chunks where id in ({marks})", ids)
        }
        # One result per note or record: its best section, so three results are three sources.
        best: dict[str, tuple[int, float]] = {}
        for cid, score in ranked.items():
            doc_id = found[cid][1]
            if doc_id not in best or score > best[doc_id][1]:
                best[doc_id] = (cid, score)
        out = []
        for doc_id, (cid, score) in sorted(best.items(), key=lambda kv: -kv[1][1])[:k]:
            _, _, heading, text = found[cid]
            d = docs.get(doc_id, {"source": doc_id, "kind": "extra", "title": doc_id})
            out.append(Result(d["source"], doc_id, d["kind"], d["title"], heading, text, score))
        return out

    def _pool(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="asap-kb-knn")
        return self._executor

    def _knn(self, qv: bytes, only: list[int] | None) -> list[int]:
        """Vector KNN on the worker thread's own connection."""
        conn = getattr(self._local, "db", None)
        where_from = (self.path, self._uri)
        if conn is None or getattr(self._local, "where", None) != where_from:
            if conn is not None:
                conn.close()
            conn = self._local.db = self._open()
            self._local.where = where_from
        where = f" and rowid in ({','.join('?' * len(only)) or 'NULL'})" if only is not None else ""
        rows = conn.execute(
            f"select rowid from chunk_vec where embedding match ? and k = ?{where} order by distance",
            [qv, CANDIDATES, *(only or [])],
        ).fetchall()
        return [r[0] for r in rows]

    def _fuse(self, ranked: dict[int, float], ids: list[int]) -> None:
        for rank, cid in enumerate(ids[:CANDIDATES], start=1):
            ranked[cid] = ranked.get(cid, 0.0) + 1.0 / (RRF_K + rank)

    # -- history ----------------------------------------------------------------------------------------
    @_heals
    def records(self) -> list[Record]:
        return [Record.model_validate_json(r["record"]) for r in self.db["history"].rows]

    def similar_history(self, s: Situation, k: int = 3) -> list[tuple[Record, float, list[str]]]:
        """Past optimizations whose situation is closest: model size (log ratio), generation, slice size,
        bottleneck and the mesh axes in use. Weights sum to 1; the reasons say what matched."""
        gen = generation_of(s.slice)
        axes = {key.split("_", 1)[1] for key, v in s.mesh.items() if v not in (1,)}
        size = _chips(s.slice) * s.num_slices
        scored = []
        for r in self.records():
            why = []
            size_sim = math.exp(-abs(math.log(max(s.params_b, 1e-3) / r.model.params_b)))
            score = 0.35 * size_sim
            if size_sim > 0.5:
                why.append(f"similar model size ({r.model.params_b:g}B)")
            if gen and r.slice.generation == gen:
                score += 0.2
                why.append(f"same generation ({gen})")
            rsize = _chips(r.slice.name) * r.slice.num_slices
            if size and rsize:
                score += 0.1 * math.exp(-abs(math.log(size / rsize)))
            if s.bottleneck and r.bottleneck == s.bottleneck:
                score += 0.25
                why.append(f"same bottleneck ({s.bottleneck})")
            raxes = {key.split("_", 1)[1] for key, v in r.before.mesh.items() if v not in (1,)}
            if axes or raxes:
                jac = len(axes & raxes) / len(axes | raxes)
                score += 0.1 * jac
                if jac >= 0.5:
                    why.append("similar mesh")
            scored.append((r, score, why))
        scored.sort(key=lambda t: -t[1])
        return scored[:k]

    @_heals
    def stats(self) -> dict[str, Any]:
        db = self.db
        meta = self._meta(db)
        return {
            "path": str(self.path),
            "storage": self.storage,
            "bytes": self.path.stat().st_size if self.path.exists() and self.storage != "memory" else 0,
            "kb_dir": meta.get("kb_dir"),
            "model": meta.get("model"),
            "dim": int(meta.get("dim", 0) or 0),
            "built_at": float(meta.get("built_at", 0) or 0),
            "updated_at": float(meta.get("updated_at", 0) or 0),
            "documents": db.execute("select count(*) from documents where kind = 'doc'").fetchone()[0],
            "records": db.execute("select count(*) from history").fetchone()[0],
            "chunks": db.execute("select count(*) from chunks").fetchone()[0],
            "stale": self.stale_reason(),
        }


def _chips(slice_name: str) -> int:
    return slices.name_chips(slice_name) or 0  # 0: not a slice name (no size to compare)


@dataclass(frozen=True)
class AddedRecord:
    """What `add_record` did: the record, where it now lives and the rebuilt index's counts (`build()`)."""

    record: Record
    path: Path
    stats: dict[str, Any]


def add_record(store: KnowledgeStore, src: Path, force: bool = False) -> AddedRecord:
    """Validate the optimization record `src`, copy it to `<kb>/history/<id>.yaml` and rebuild the index.
    Raises RecordError when the record is malformed, KbError when another file already holds its id (unless
    `force`: then it is replaced), OSError when `src` cannot be read. A file already in place is only reindexed."""
    rec = load_record(src)
    dest = store.root / "history" / f"{rec.id}.yaml"
    if dest.exists() and not force and dest.resolve() != src.resolve():
        raise KbError(f"{dest} already exists (use --force to replace it)")
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.resolve() != src.resolve():
        shutil.copyfile(src, dest)
    shared = pg_store.shared()
    if shared is not None:  # the team's copy (or the outbox, synced on the next connect)
        shared.write("kb_records", pg_store.record_row(rec.id, dest.read_text(encoding="utf-8")))
    return AddedRecord(rec, dest, store.update())
