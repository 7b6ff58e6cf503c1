"""From a path to XProf's tool output: find the profile files, convert them with XProf's Python API
in a child process (xprof_worker.py), and cache the result by content hash in ASAP's sqlite store.

A path may be a `.xplane.pb` file (all hosts' files next to it are read together), a run
directory (MaxText's `<run>/tensorboard/plugins/profile/<timestamp>/`, newest timestamp first),
a directory holding `.xplane.pb` files, or a directory of exported tool JSON (`*.<tool>.json` or
`.json.gz`, as XProf's integration tests and `xprof` CLI write them).

The cache key is a hash of the files' contents (plus the tools and XProf's version); a
(path, size, mtime) table avoids re-hashing files that did not change, so a warm load is a few
stat calls and one row read.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import logging
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import sqlite_utils

from server.common import childproc, store
from server.common.childproc import MAX_MEMORY_ENV, default_max_memory
from server.common.progress import Cancelled, CancelToken, Progress
from server.profiles import gcs
from server.profiles.profile import ProfileError

log = logging.getLogger("asap")

TOOLS = ("overview_page", "input_pipeline_analyzer", "hlo_stats", "roofline_model")
KNOWN_TOOLS = (*TOOLS, "framework_op_stats", "op_profile", "memory_profile", "host_trace")
XPLANE = ".xplane.pb"
SCHEMA = 1  # bump when what is cached changes
# How running into RLIMIT_AS shows in the child's stderr (Python, the C++ allocator, the dynamic loader).
_OUT_OF_MEMORY = ("MemoryError", "bad_alloc", "Cannot allocate memory", "failed to map segment")


@dataclass
class ProfileFiles:
    kind: str  # "xplane" | "json"
    files: list[Path]
    run_dir: Path
    remote: gcs.RemoteRun | None = None  # a gs:// run: `files` are its mirror, downloaded by load_tools

    @property
    def total_bytes(self) -> int:
        if self.remote is not None:
            return self.remote.total_bytes
        return sum(f.stat().st_size for f in self.files)

    def describe(self) -> str:
        if self.kind == "xplane":
            hosts = ", ".join(f.name.removesuffix(XPLANE) for f in self.files)
            where = self.remote.url if self.remote is not None else self.run_dir
            return f"{where} ({len(self.files)} host{'s' if len(self.files) != 1 else ''}: {hosts})"
        return f"{self.run_dir} (exported XProf tool JSON: {', '.join(sorted(tool_of(f) or '?' for f in self.files))})"


def tool_of(path: Path) -> str | None:
    """'tpu_training.hlo_stats.json.gz' -> 'hlo_stats'."""
    name = path.name
    for suffix in (".json.gz", ".json"):
        if name.endswith(suffix):
            stem = name[: -len(suffix)]
            tool = stem.rsplit(".", 1)[-1]
            return tool if tool in KNOWN_TOOLS else None
    return None


def _newest_run(root: Path) -> Path | None:
    """The newest `<timestamp>` directory under `root` that holds `.xplane.pb` files."""
    runs = [d for d in root.iterdir() if d.is_dir() and any(d.glob(f"*{XPLANE}"))] if root.is_dir() else []
    if not runs:
        return None
    return max(runs, key=lambda d: (d.name, d.stat().st_mtime))  # XProf names runs by timestamp


def find_profile(path: Path | str) -> ProfileFiles:
    """The profile at `path`, or a ProfileError saying what was looked for. A gs:// URL (or its mirror directory
    under ASAP's cache, as a link names it) lists the newest run in the bucket; its files are downloaded by
    `load_tools`."""
    url = path if isinstance(path, str) and gcs.is_gcs(path) else gcs.url_of(Path(path))
    if url is not None:
        remote = gcs.find_run(url)
        return ProfileFiles("xplane", remote.files, remote.local_dir, remote)
    path = Path(path)
    if not path.exists():
        raise ProfileError(f"{path} does not exist")
    if path.is_file():
        if path.name.endswith(XPLANE):
            return ProfileFiles("xplane", sorted(path.parent.glob(f"*{XPLANE}")), path.parent)
        if tool_of(path):
            prefix = path.name[: path.name.index(f".{tool_of(path)}.json")]
            files = sorted(f for f in path.parent.iterdir() if f.name.startswith(prefix + ".") and tool_of(f))
            return ProfileFiles("json", files, path.parent)
        raise ProfileError(f"{path} is neither an XProf profile (*{XPLANE}) nor exported XProf tool JSON")
    here = sorted(path.glob(f"*{XPLANE}"))
    if here:
        return ProfileFiles("xplane", here, path)
    for sub in (path / "tensorboard" / "plugins" / "profile", path / "plugins" / "profile", path):
        run = _newest_run(sub)
        if run is not None:
            return ProfileFiles("xplane", sorted(run.glob(f"*{XPLANE}")), run)
    exported = sorted(f for f in path.iterdir() if f.is_file() and tool_of(f))
    if exported:
        return ProfileFiles("json", exported, path)
    raise ProfileError(
        f"no profiles in {path}: expected *{XPLANE} files (directly, or under tensorboard/plugins/profile/<run>/) "
        "or exported XProf tool JSON (*.<tool>.json[.gz])"
    )


def _read_json(path: Path) -> Any:
    raw = path.read_bytes()
    if path.name.endswith(".gz"):
        raw = gzip.decompress(raw)
    return json.loads(raw)


# -- cache ------------------------------------------------------------------------------------------
def _xprof_version() -> str:
    try:
        return metadata.version("xprof")
    except metadata.PackageNotFoundError:
        return "?"


def _file_hash(db: Any, path: Path) -> str:
    st = path.stat()
    key = str(path.resolve())
    rows = list(
        db.query(
            "select sha from files where path = ? and size = ? and mtime_ns = ?", [key, st.st_size, st.st_mtime_ns]
        )
        if "files" in db.table_names()
        else []
    )
    if rows:
        return str(rows[0]["sha"])
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    sha = h.hexdigest()
    db["files"].upsert({"path": key, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha": sha}, pk="path")
    return sha


def cache_key(db: Any, pf: ProfileFiles, tools: tuple[str, ...]) -> str:
    h = hashlib.sha256(f"{SCHEMA}|{_xprof_version()}|{','.join(tools)}".encode())
    for f in sorted(pf.files, key=lambda p: p.name):
        h.update(f"{f.name}:{_file_hash(db, f)}".encode())
    return h.hexdigest()


_CACHE = store.BlobCache("profiles", "tools")  # key -> the tools' JSON; also a `source` column (describe())


def _cached(db: Any, key: str) -> dict[str, Any] | None:
    hit = _CACHE.get(db, key)
    return dict(hit) if hit is not None else None


def _store(db: Any, key: str, source: str, tools: dict[str, Any]) -> None:
    _CACHE.put(db, key, tools, source=source)


# -- conversion -------------------------------------------------------------------------------------
def convert(
    pf: ProfileFiles,
    tools: tuple[str, ...] = TOOLS,
    progress: Progress | None = None,
    cancel: CancelToken | None = None,
    max_memory: int | None = None,
) -> dict[str, Any]:
    """XProf's tool JSON for `pf`, converted by the real XProf in a child process."""
    limit = max_memory or default_max_memory()
    with tempfile.TemporaryDirectory(prefix="asap-xprof-") as tmp:
        out = Path(tmp)
        error: str | None = None
        done: list[str] = []

        def on_event(ev: dict[str, Any]) -> None:
            nonlocal error, done
            kind = ev.get("event")
            if kind == "start" and progress:
                progress(f"reading {len(pf.files)} file(s), {ev.get('bytes', 0) / 1e6:.0f} MB", 0.0)
            elif kind == "tool" and progress:
                progress(f"XProf: {ev['tool']}", ev["index"] / max(1, ev["of"]))
            elif kind == "error":
                stage, msg = ev.get("stage"), ev.get("message")
                error = (
                    f"{pf.run_dir}/{msg}"
                    if stage == "read"
                    else f"XProf's {stage} conversion failed for {pf.describe()}: {msg}"
                )
            elif kind == "done":
                done = list(ev.get("tools", []))

        # the child caps its own address space (RLIMIT_AS) at `limit`; no time limit: a large profile takes long
        child = childproc.run(
            [sys.executable, "-m", "server.profiles.xprof_worker", str(out), ",".join(tools), *map(str, pf.files)],
            env=childproc.python_env(limit),
            on_event=on_event,
            cancel=cancel,
            stderr_tail=None,
        )
        if child.cancelled:
            raise Cancelled(f"conversion of {pf.describe()} cancelled")
        if error:
            raise ProfileError(error)
        rc, stderr = child.returncode, child.stderr
        if rc != 0:
            tail = stderr.strip().splitlines()[-1:] if stderr.strip() else []
            if rc < 0 or any(m in stderr for m in _OUT_OF_MEMORY):
                raise ProfileError(
                    f"XProf's conversion of {pf.describe()} ran out of its memory limit ({limit >> 20} MiB; "
                    f"set {MAX_MEMORY_ENV} in bytes to raise it)" + (f": {tail[0][:200]}" if tail else "")
                )
            raise ProfileError(
                f"XProf's conversion of {pf.describe()} failed (exit {rc})" + (f": {tail[0][:300]}" if tail else "")
            )
        return {t: json.loads((out / f"{t}.json").read_bytes()) for t in done}


def load_tools(
    pf: ProfileFiles,
    progress: Progress | None = None,
    cancel: CancelToken | None = None,
    db: Any = None,
    tools: tuple[str, ...] = TOOLS,
) -> tuple[dict[str, Any], bool]:
    """(tool JSON, whether it came from the cache). Exported JSON is read as it is (not cached)."""
    if pf.kind == "json":
        out: dict[str, Any] = {}
        for f in pf.files:
            t = tool_of(f)
            if t is None:
                continue
            try:
                out[t] = _read_json(f)
            except (OSError, ValueError, EOFError) as e:
                raise ProfileError(f"{f}: not valid XProf tool JSON ({type(e).__name__}: {e})") from e
        return out, False
    if pf.remote is not None:
        gcs.download(pf.remote, progress, cancel)
    db = db if db is not None else _open_store()
    if all(_hash_known(db, f) for f in pf.files):
        key = cache_key(db, pf, tools)
        hit = _MEMO.get(key) or _cached(db, key)
        if hit is not None:
            _remember(key, hit)
            return hit, True
        result = convert(pf, tools, progress, cancel)
    else:
        # Files never seen at this path and mtime: hashing a large profile takes a while, so it runs while
        # the child converts; the same content cached under another path still wins.
        mine = CancelToken()
        if cancel is not None:
            cancel.on_cancel(mine.cancel)
        with ThreadPoolExecutor(1, thread_name_prefix="asap-convert") as pool:
            job = pool.submit(convert, pf, tools, progress, mine)
            key = cache_key(db, pf, tools)
            hit = _MEMO.get(key) or _cached(db, key)
            if hit is not None:
                mine.cancel()
                with contextlib.suppress(Cancelled, ProfileError):
                    job.result()
                _remember(key, hit)
                return hit, True
            try:
                result = job.result()
            except Cancelled:
                if cancel is not None and cancel.cancelled:
                    raise
                raise ProfileError("conversion stopped") from None
    try:
        _store(db, key, pf.describe(), result)
    except sqlite_utils.utils.sqlite3.Error as e:  # a full disk or read-only cache: keep it in memory only
        log.warning("could not cache the converted profile %s: %s", pf.run_dir, e)
    _remember(key, result)
    return result, False


def _hash_known(db: Any, path: Path) -> bool:
    if "files" not in db.table_names():
        return False
    st = path.stat()
    rows = db.query(
        "select 1 from files where path = ? and size = ? and mtime_ns = ?",
        [str(path.resolve()), st.st_size, st.st_mtime_ns],
    )
    return next(iter(rows), None) is not None


_MEMO: dict[str, dict[str, Any]] = {}  # the last few profiles' tool JSON, parsed: re-analysis on every edit
_MEMO_SIZE = 4


def _remember(key: str, tools: dict[str, Any]) -> None:
    _MEMO.pop(key, None)
    _MEMO[key] = tools
    while len(_MEMO) > _MEMO_SIZE:
        _MEMO.pop(next(iter(_MEMO)))


def files_key(pf: ProfileFiles) -> tuple[tuple[str, int, int], ...]:
    """Identity of the files as they are now (path, size, mtime): a failed conversion is not retried until
    one of them changes."""
    out = []
    for f in pf.files:
        try:
            st = f.stat()
            out.append((str(f), st.st_size, st.st_mtime_ns))
        except OSError:
            out.append((str(f), -1, -1))
    return tuple(out)


def is_cached(pf: ProfileFiles, db: Any = None, tools: tuple[str, ...] = TOOLS) -> bool:
    """Whether `load_tools` would answer from the cache (hashes new files; no conversion)."""
    if pf.kind == "json":
        return True
    if pf.remote is not None and not gcs.is_local(pf.remote):
        return False  # to be downloaded first
    db = db if db is not None else _open_store()
    key = cache_key(db, pf, tools)
    return key in _MEMO or _cached(db, key) is not None


def _open_store() -> Any:
    """ASAP's store; an in-memory one (with a log line) when the cache directory cannot be written, so a
    read-only home still analyses profiles, only without keeping them."""
    try:
        return store.connect()
    except (OSError, sqlite_utils.utils.sqlite3.Error) as e:
        log.warning("profile cache unavailable (%s): converting without keeping results", e)
        return sqlite_utils.Database(memory=True)
