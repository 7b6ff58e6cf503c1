"""Profiles where MaxText writes them: `gs://<bucket>/<run_name>/tensorboard/plugins/profile/<ts>/*.xplane.pb`.

A gs:// profile is read through gcsfs with the user's Application Default Credentials (ASAP stores none;
`STORAGE_EMULATOR_HOST`, which gcsfs honours, points it at another GCS-API server, anonymously). Only the
newest run's `.xplane.pb` files are downloaded, into a mirror under ASAP's cache directory
(`<cache>/gcs/<bucket>/<path>`); a manifest there records each object's generation and size, so a second
open lists the run (one request per directory) and downloads nothing while the objects are unchanged.

`mirror_path(url)` is the local directory a gs:// URL maps to, computed without any request, so a link can
name it; `find_run` lists the newest run (network) and `download` fetches what the mirror lacks, with
progress (bytes and files) and cancellation. Errors say what went wrong where: no credentials, the bucket
not found, permission denied (naming the principal when known), no profile under the path, a truncated
object.

An endpoint that cannot be reached fails fast: gcsfs retries every failed request 6 times with exponential
backoff (about 34 s), which is right for HTTP 429/5xx and a dropped connection, but a refused connection, a
name that does not resolve or a certificate that does not verify will not change in seconds. The file system
ASAP uses connects through a connector that tries such a connection CONNECT_ATTEMPTS times, CONNECT_PAUSE_S
apart, then raises `Unreachable`, which gcsfs's retry does not catch; answers from a reachable server (429, 5xx)
and connections lost mid-request are retried by gcsfs as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from server.common import store
from server.common.progress import Cancelled, CancelToken, Progress
from server.profiles.profile import ProfileError

log = logging.getLogger("asap")

SCHEME = "gs://"
XPLANE = ".xplane.pb"
MANIFEST = ".asap-gcs.json"
EMULATOR_ENV = "STORAGE_EMULATOR_HOST"  # gcsfs's own: a GCS-API server to use instead of Google's
CHUNK = 8 << 20
_RUN_SUBDIRS = ("tensorboard/plugins/profile", "plugins/profile", "")
CONNECT_ATTEMPTS = 2  # a connection that cannot be opened (refused, no such host): tried this often, then an error
CONNECT_PAUSE_S = 0.5  # between those attempts (a network blip of half a second is absorbed)


class GcsError(ProfileError):
    """A gs:// profile that could not be listed or downloaded; the message says why and where. `kind`:
    "credentials", "bucket" (not found), "permission", "no_profile", "truncated" or "other"."""

    def __init__(self, message: str, kind: str = "other") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Obj:
    name: str  # file name in the run directory
    key: str  # "bucket/path/to/object" as gcsfs names it
    size: int
    generation: str


@dataclass(frozen=True)
class RemoteRun:
    url: str  # gs://bucket/.../<ts> (the run directory)
    objects: tuple[Obj, ...]
    local_dir: Path

    @property
    def total_bytes(self) -> int:
        return sum(o.size for o in self.objects)

    @property
    def files(self) -> list[Path]:
        return [self.local_dir / o.name for o in self.objects]


def is_gcs(raw: str) -> bool:
    return raw.strip().lower().startswith(SCHEME)


def _split(url: str) -> tuple[str, str]:
    """'gs://bucket/a/b/' -> ('bucket', 'a/b')."""
    rest = url.strip()[len(SCHEME) :]
    bucket, _, path = rest.partition("/")
    if not bucket:
        raise GcsError(f"{url}: no bucket name (expected gs://<bucket>/<path>)")
    return bucket, "/".join(p for p in path.split("/") if p and p != ".")


def mirror_root() -> Path:
    return store.cache_dir() / "gcs"


def mirror_path(url: str) -> Path:
    """The local directory mirroring `url` (nothing is read or created)."""
    bucket, path = _split(url)
    if ".." in path.split("/") or bucket in (".", ".."):
        raise GcsError(f"{url}: '..' is not allowed in a gs:// profile path")
    return mirror_root().joinpath(bucket, *path.split("/")) if path else mirror_root() / bucket


def url_of(path: Path) -> str | None:
    """The gs:// URL a mirror directory stands for, None when `path` is not under the mirror."""
    try:
        rel = Path(os.path.abspath(path)).relative_to(os.path.abspath(mirror_root()))
    except ValueError:
        return None
    parts = rel.parts
    return SCHEME + "/".join(parts) if parts else None


class Unreachable(Exception):
    """No connection could be opened to the storage endpoint (refused, DNS, TLS). Neither an OSError (aiohttp
    would wrap it in its ClientOSError, which gcsfs retries) nor one of the errors gcsfs's retry catches."""


# -- the file system ---------------------------------------------------------------------------------------
@functools.cache
def _filesystem_class() -> Any:
    """gcsfs's JSON-API file system whose HTTP session connects through a connector that fails fast."""
    import aiohttp
    from gcsfs.core import GCSFileSystem

    class FailFastConnector(aiohttp.TCPConnector):
        async def connect(self, req: Any, traces: Any, timeout: Any) -> Any:
            for attempt in range(1, CONNECT_ATTEMPTS + 1):
                try:
                    return await super().connect(req, traces, timeout)
                except aiohttp.ClientConnectorError as e:  # DNS, refused, unreachable, TLS; not an HTTP answer
                    if attempt == CONNECT_ATTEMPTS:
                        raise Unreachable(f"{e} (tried {attempt} times)") from e
                    await asyncio.sleep(CONNECT_PAUSE_S)
            raise AssertionError("unreachable")  # pragma: no cover

    class FailFastGCSFileSystem(GCSFileSystem):
        async def _set_session(self) -> Any:
            # a new session (the first request) gets a connector of its own, made in the loop (aiohttp wants a
            # running one); mutual TLS (client certificates) keeps gcsfs's own connector and its retries
            given: dict[str, Any] = getattr(self, "session_kwargs", {})
            if self._session is not None or "connector" in given or self._use_client_cert:
                return await super()._set_session()
            self.session_kwargs = {**given, "connector": FailFastConnector()}
            try:
                return await super()._set_session()
            finally:
                self.session_kwargs = given

    return FailFastGCSFileSystem


def _filesystem(url: str) -> Any:
    """A gcsfs file system: anonymous against an emulator, else Application Default Credentials only (not
    gcsfs's silent fall back to anonymous, which would turn 'no credentials' into a puzzling 401)."""
    # imported here: starting the server does not pay for it. The JSON-API class itself, not gcsfs's default
    # (which asks a gRPC control service for the bucket type first: a second endpoint, 60 s against an emulator)
    fs_class = _filesystem_class()
    logging.getLogger("gcsfs").setLevel(logging.CRITICAL)  # its retry tracebacks: ASAP says what failed, once
    emulator = os.environ.get(EMULATOR_ENV, "") not in ("", "default")
    try:
        return fs_class(
            token="anon" if emulator else "google_default",
            skip_instance_cache=True,
            use_listings_cache=False,
        )
    except Exception as e:  # google.auth.exceptions.DefaultCredentialsError and friends
        if (
            type(e).__name__ in ("DefaultCredentialsError", "RefreshError", "TransportError")
            or "credentials" in str(e).lower()
        ):
            raise GcsError(
                f"{url}: no Google Cloud credentials: run 'gcloud auth application-default login' (ASAP reads "
                f"gs:// with your Application Default Credentials and stores none) [{type(e).__name__}]",
                "credentials",
            ) from e
        raise GcsError(f"{url}: cannot reach Google Cloud Storage: {type(e).__name__}: {e}") from e


def _principal(fs: Any) -> str:
    creds = getattr(getattr(fs, "credentials", None), "credentials", None)
    for attr in ("service_account_email", "signer_email", "_service_account_email", "account"):
        v = getattr(creds, attr, None)
        if isinstance(v, str) and v and v != "default":
            return v
    if creds is None:
        return "anonymous"
    return "the account of your Application Default Credentials (gcloud auth application-default login)"


def _explain(fs: Any, url: str, e: BaseException) -> GcsError:
    """A gcsfs/HTTP error as a specific message about `url`."""
    bucket, _ = _split(url)
    text = str(e)
    code = getattr(e, "code", None)
    if isinstance(e, GcsError):
        return e
    if text.startswith("Forbidden") or code == 403:
        said = text.split("\n", 1)[1].strip() if "\n" in text else ""  # GCS's message names the principal
        who = said.split(" does not have ", 1)[0] if " does not have " in said else _principal(fs)
        return GcsError(
            f"{url}: permission denied for {who} (needs storage.objects.list and storage.objects.get on the bucket)"
            + (f": {said}" if said else ""),
            "permission",
        )
    if code == 401:
        return GcsError(
            f"{url}: the credentials were refused (expired or revoked?): run 'gcloud auth application-default login'",
            "credentials",
        )
    if isinstance(e, FileNotFoundError):
        if not _bucket_exists(fs, bucket):
            return GcsError(f"{url}: bucket '{bucket}' not found", "bucket")
        return GcsError(f"{url}: not found")
    if (
        isinstance(e, Unreachable)
        or type(e).__name__.startswith("ClientConnector")
        or isinstance(e, ConnectionError | TimeoutError)
    ):
        return GcsError(f"{url}: cannot reach {_endpoint()}: {text.splitlines()[0] if text else type(e).__name__}")
    return GcsError(f"{url}: {type(e).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": "))


def _endpoint() -> str:
    emulator = os.environ.get(EMULATOR_ENV, "")
    return f"the storage server at {emulator} ({EMULATOR_ENV})" if emulator not in ("", "default") else "Cloud Storage"


def _bucket_exists(fs: Any, bucket: str) -> bool:
    try:
        fs.info(bucket)
        return True
    except FileNotFoundError:
        return False
    except Exception:
        return True  # forbidden or unreachable: not evidence that it is missing


def _ls(fs: Any, key: str) -> list[dict[str, Any]]:
    try:
        return list(fs.ls(key, detail=True))
    except FileNotFoundError:
        return []


def _xplanes(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(
        (e for e in entries if e.get("type") == "file" and str(e["name"]).endswith(XPLANE)),
        key=lambda e: str(e["name"]),
    )


# -- listing -----------------------------------------------------------------------------------------------
# url -> (when, run or the error): the editor re-analyses on every edit, and asking Google for credentials that
# are not there can take seconds (the metadata-server probe). Oldest first; at most MAX_LISTED URLs (a run_name
# typed a character at a time is a URL a keystroke), expired ones dropped as new ones come.
_LISTED: dict[str, tuple[float, RemoteRun | GcsError]] = {}
_LISTED_TTL_S = 30.0
MAX_LISTED = 256
_LOCK = threading.Lock()


def _bare(e: GcsError) -> GcsError:
    """`e` as the memo keeps it and raises it: a new error of the same message and kind, without traceback, cause
    or context. The original's traceback holds the frames of the analysis that listed, and through them all that
    analysis held (the agents' priced meshes: MBs); and raising one object again adds the frames of each raise to
    its traceback, so an error raised on every analysis kept every analysis alive (issue 25: the agents' worker
    grew about 1 MB per analysed version)."""
    bare = GcsError(str(e), e.kind)
    bare.__suppress_context__ = True
    return bare


def _remember(url: str, hit: RemoteRun | GcsError) -> None:
    now = time.monotonic()
    with _LOCK:
        _LISTED.pop(url, None)
        _LISTED[url] = (now, hit)
        for old in [u for u, (when, _) in _LISTED.items() if now - when >= _LISTED_TTL_S]:
            del _LISTED[old]
        while len(_LISTED) > MAX_LISTED:
            del _LISTED[next(iter(_LISTED))]


def find_run(url: str, max_age_s: float | None = None) -> RemoteRun:
    """The newest run under `url` (a run directory, a `<run_name>` directory or its profile directory):
    MaxText's `<ts>` directories are named by timestamp, so the greatest name holding `.xplane.pb` files wins.
    A listing younger than `max_age_s` (default 30 s) is reused."""
    ttl = _LISTED_TTL_S if max_age_s is None else max_age_s
    with _LOCK:
        hit = _LISTED.get(url)
    if hit is not None and time.monotonic() - hit[0] < ttl:
        if isinstance(hit[1], GcsError):
            raise _bare(hit[1])
        return hit[1]
    try:
        run = _list(url)
    except GcsError as e:
        _remember(url, _bare(e))
        raise
    _remember(url, run)
    return run


def _list(url: str) -> RemoteRun:
    bucket, path = _split(url)
    local = mirror_path(url)
    fs = _filesystem(url)
    base = f"{bucket}/{path}" if path else bucket
    try:
        return _find(fs, url, base, local)
    except Exception as e:
        raise _explain(fs, url, e) from e


def _find(fs: Any, url: str, base: str, local: Path) -> RemoteRun:
    here = _ls(fs, base)
    if not here and not _bucket_exists(fs, base.split("/", 1)[0]):
        raise GcsError(f"{url}: bucket '{base.split('/', 1)[0]}' not found", "bucket")
    direct = _xplanes(here)
    if direct:
        return _run(url, direct, local)
    for sub in _RUN_SUBDIRS:
        root = f"{base}/{sub}" if sub else base
        entries = here if not sub else _ls(fs, root)
        dirs = sorted((str(e["name"]).rstrip("/") for e in entries if e.get("type") == "directory"), reverse=True)
        for d in dirs:
            files = _xplanes(_ls(fs, d))
            if files:
                rel = d[len(base) :].strip("/")
                return _run(f"{url.rstrip('/')}/{rel}", files, local.joinpath(*rel.split("/")))
    raise GcsError(
        f"no profile under {url}: expected *{XPLANE} objects directly, or under tensorboard/plugins/profile/<ts>/ "
        "(MaxText writes them there when profiler: xplane is set)",
        "no_profile",
    )


def _run(url: str, entries: list[dict[str, Any]], local: Path) -> RemoteRun:
    objs = tuple(
        Obj(
            str(e["name"]).rsplit("/", 1)[-1],
            str(e["name"]),
            int(e.get("size") or 0),
            str(e.get("generation") or e.get("etag") or e.get("md5Hash") or ""),
        )
        for e in entries
    )
    return RemoteRun(url, objs, local)


# -- downloading -------------------------------------------------------------------------------------------
def _manifest(d: Path) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads((d / MANIFEST).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_manifest(d: Path, m: dict[str, dict[str, Any]]) -> None:
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".manifest-", suffix=".json")
    with os.fdopen(fd, "w") as out:
        json.dump(m, out, indent=1, sort_keys=True)
    os.replace(tmp, d / MANIFEST)


def _current(run: RemoteRun, o: Obj, m: dict[str, dict[str, Any]]) -> bool:
    entry = m.get(o.name)
    if not entry or entry.get("generation") != o.generation or entry.get("size") != o.size:
        return False
    try:
        return (run.local_dir / o.name).stat().st_size == o.size
    except OSError:
        return False


def is_local(run: RemoteRun) -> bool:
    """Whether the mirror holds every object of `run` at its listed generation (no download needed)."""
    m = _manifest(run.local_dir)
    return all(_current(run, o, m) for o in run.objects)


def download(run: RemoteRun, progress: Progress | None = None, cancel: CancelToken | None = None) -> int:
    """Download the objects of `run` the mirror lacks; the number of bytes downloaded (0 when all were
    current). Cancellable between chunks (raises Cancelled; a partial file is never kept)."""
    m = _manifest(run.local_dir)
    todo = [o for o in run.objects if not _current(run, o, m)]
    if not todo:
        return 0
    try:
        run.local_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise GcsError(f"cannot write ASAP's cache {run.local_dir}: {e}") from e
    fs = _filesystem(run.url)
    total = sum(o.size for o in todo)
    done = 0
    for i, o in enumerate(todo):
        if progress:
            progress(
                f"downloading {run.url}: file {i + 1}/{len(todo)}, {done / 1e6:.0f}/{total / 1e6:.0f} MB",
                done / total if total else None,
            )
        got = _fetch(fs, run, o, cancel, lambda n, i=i, d=done: _report(progress, run, i, len(todo), d + n, total))
        done += got
        m[o.name] = {"generation": o.generation, "size": o.size}
        _write_manifest(run.local_dir, m)
    if progress:
        progress(f"downloaded {len(todo)} file(s), {total / 1e6:.0f} MB from {run.url}", 1.0)
    return done


def _report(progress: Progress | None, run: RemoteRun, i: int, n: int, done: int, total: int) -> None:
    if progress:
        progress(
            f"downloading {run.url}: file {i + 1}/{n}, {done / 1e6:.0f}/{total / 1e6:.0f} MB",
            done / total if total else None,
        )


def _fetch(fs: Any, run: RemoteRun, o: Obj, cancel: CancelToken | None, on_bytes: Any) -> int:
    url = SCHEME + o.key
    fd, tmp = tempfile.mkstemp(dir=run.local_dir, prefix=f".{o.name}-", suffix=".part")
    n = 0
    last = 0
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                with fs.open(o.key, "rb", block_size=CHUNK, cache_type="none") as src:
                    while True:
                        if cancel is not None and cancel.cancelled:
                            raise Cancelled(f"download of {url} cancelled")
                        chunk = src.read(CHUNK)
                        if not chunk:
                            break
                        out.write(chunk)
                        n += len(chunk)
                        if n - last >= CHUNK:
                            on_bytes(n)
                            last = n
            except (Cancelled, GcsError):
                raise
            except Exception as e:
                raise _explain(fs, url, e) from e
        if n != o.size:
            raise GcsError(
                f"{url} is truncated: {n} of {o.size} bytes arrived (the listing says {o.size}); "
                "was it still being written? Open it again once the run has finished writing its profile",
                "truncated",
            )
        os.replace(tmp, run.local_dir / o.name)
        tmp = ""
    finally:
        if tmp:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    return n


def forget_listings() -> None:
    """Drop the listing memo (the next find_run lists again)."""
    with _LOCK:
        _LISTED.clear()
