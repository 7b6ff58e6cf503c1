"""Stores that heal (issue 17, fault 14): a sqlite store that cannot be read (garbage bytes, a damaged file, tables
of another shape) is moved aside with a timestamp and recreated, with a notice; one in a location that cannot be
written is kept in memory, with a notice; no command crashes on either. The stores: ASAP's cache and experiment
log (asap.sqlite, server/common/store.py and server/services/experiments.py) and the knowledge index (kb.sqlite,
server/kb/store.py).

The CLI runs in child processes with their own cache directory. Read-only locations are real: a directory of
mode 0500, under a user namespace when the tests run as root (root ignores permissions); skipped without one.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlite_utils
from support.cli import run_asap, unprivileged_prefix

from server.common import store

ROOT = Path(__file__).resolve().parent.parent
GARBAGE = bytes(range(256)) * 40  # not a database (and no SQLite header)


def asap(*args: str | Path, cache: Path, prefix: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ASAP_KB_PATH", "ASAP_OUTCOMES_DIR", "ASAP_KB_DIR")}
    env["ASAP_CACHE_DIR"] = str(cache)
    return run_asap(*args, env=env, prefix=prefix)


@pytest.fixture
def unprivileged() -> list[str]:
    """A command prefix under which a directory of mode 0500 cannot be written."""
    prefix = unprivileged_prefix()
    if prefix is None:
        pytest.skip("running as root without user namespaces: a directory cannot be made read-only")
    return prefix


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Path]:
    """A directory that becomes read-only (0500) once the test has filled it; writable again afterwards."""
    d = tmp_path / "ro"
    d.mkdir()
    yield d
    d.chmod(0o700)


def asides(d: Path, name: str) -> list[Path]:
    return sorted(d.glob(f"{name}.corrupt-*"))


# -- asap.sqlite --------------------------------------------------------------------------------------------------
def test_garbage_store_is_moved_aside_and_recreated(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "asap.sqlite").write_bytes(GARBAGE)
    r = asap("stats", "--json", cache=cache)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["outcomes"] == 0
    [aside] = asides(cache, "asap.sqlite")
    assert aside.read_bytes() == GARBAGE  # kept, never deleted
    assert f"asap: ASAP's store {cache / 'asap.sqlite'} was unusable (file is not a database): moved to {aside}" in (
        r.stderr
    )
    assert "Traceback" not in r.stderr
    db = sqlite3.connect(cache / "asap.sqlite")
    assert {"experiments", "applications", "outcomes"} <= {r[0] for r in db.execute("select name from sqlite_master")}
    db.close()
    again = asap("stats", cache=cache)  # healed: no second move, no notice
    assert again.returncode == 0 and again.stderr == "" and len(asides(cache, "asap.sqlite")) == 1


def test_store_with_log_tables_of_another_shape_is_moved_aside(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    other = sqlite3.connect(cache / "asap.sqlite")
    other.execute("create table outcomes (name text, value real)")
    other.execute("insert into outcomes values ('x', 1.0)")
    other.commit()
    other.close()
    r = asap("stats", "--json", cache=cache)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["outcomes"] == 0
    assert "the experiment log: table outcomes has no column id, created, generation and 5 more" in r.stderr
    [aside] = asides(cache, "asap.sqlite")
    assert sqlite3.connect(aside).execute("select name from outcomes").fetchall() == [("x",)]


def test_damaged_pages_are_found_when_read(tmp_path: Path) -> None:
    """A file whose header and schema read but whose outcome rows are damaged: moved aside when they are read."""
    path = tmp_path / "asap.sqlite"
    db = store.connect(path)
    from server.services import experiments

    experiments._db(db)
    db["outcomes"].insert_all({"id": f"o{i}", "created": float(i), "generation": "x" * 3000} for i in range(200))
    db.close()
    data = bytearray(path.read_bytes())
    data[3 * 4096 : 12 * 4096] = GARBAGE[: 9 * 4096]
    path.write_bytes(bytes(data))
    rec = experiments.track_record(store.connect(path))
    assert rec["outcomes"] == 0 and asides(tmp_path, "asap.sqlite")


def test_unwritable_cache_dir_keeps_the_store_in_memory(tmp_path: Path, read_only: Path, unprivileged: list[str]):
    read_only.chmod(0o500)
    cache = read_only / "cache"  # cannot be created
    r = asap("stats", "--json", cache=cache, prefix=unprivileged)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["outcomes"] == 0
    assert f"asap: ASAP's store {cache / 'asap.sqlite'} cannot be used (" in r.stderr
    assert "keeping results in memory for this run" in r.stderr and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1  # one notice, however many times the command opens the store
    read_only.chmod(0o700)
    cache.mkdir()
    (cache / "asap.sqlite").write_bytes(b"")  # an existing store in a directory that becomes read-only
    cache.chmod(0o500)
    try:
        r = asap("stats", cache=cache, prefix=unprivileged)
    finally:
        cache.chmod(0o700)
    assert r.returncode == 0 and "keeping results in memory" in r.stderr, r.stderr


def test_memory_fallback_is_one_store_per_process(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A cache location under a regular file (so it cannot be created, whoever runs the test)."""
    (tmp_path / "file").write_text("")
    path = tmp_path / "file" / "cache" / "asap.sqlite"
    with caplog.at_level(logging.WARNING, logger="asap"):
        a = store.connect(path)
        b = store.connect(path)
    assert [r.getMessage() for r in caplog.records] == [
        f"ASAP's store {path} cannot be used (cannot create {path.parent}: Not a directory): keeping results in "
        "memory for this run"
    ]
    a.table("t").insert({"k": 1})
    assert list(b.query("select k from t")) == [{"k": 1}]  # the same in-memory store
    cache = store.BlobCache("blobs", "value")
    cache.put(a, "key", {"x": 1})
    assert cache.get(b, "key") == {"x": 1}


def test_blob_cache_of_another_shape_is_a_miss_then_replaced(tmp_path: Path) -> None:
    db = sqlite_utils.Database(tmp_path / "x.sqlite")
    db.execute("create table profiles (name text)")
    cache = store.BlobCache("profiles", "tools")
    assert cache.get(db, "k") is None
    cache.put(db, "k", [1, 2])
    assert cache.get(db, "k") == [1, 2]


# -- the knowledge index ------------------------------------------------------------------------------------------
def kb_search(index: Path, cache: Path, prefix: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    return asap("kb", "--index", index, "search", "pipeline bubble", "--k", "1", "--json", cache=cache, prefix=prefix)


def top_source(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 0, r.stderr
    return str(json.loads(r.stdout)["results"][0]["source"])


def test_damaged_index_is_moved_aside_and_rebuilt(tmp_path: Path) -> None:
    index = tmp_path / "kb.sqlite"
    index.write_bytes(GARBAGE)
    r = kb_search(index, tmp_path)
    assert top_source(r) == "docs/pipeline-bubbles.md"
    [aside] = asides(tmp_path, "kb.sqlite")
    assert r.stderr == (
        f"asap: ASAP's knowledge index {index} was unusable (file is not a database): moved to {aside} and rebuilt\n"
    )
    assert asap("kb", "--index", index, "stats", "--json", cache=tmp_path).returncode == 0


def test_a_database_that_is_not_an_index_is_moved_aside(tmp_path: Path) -> None:
    index = tmp_path / "kb.sqlite"
    other = sqlite3.connect(index)
    other.execute("create table notes (id text)")
    other.commit()
    other.close()
    r = kb_search(index, tmp_path)
    assert top_source(r) == "docs/pipeline-bubbles.md"
    assert "not a knowledge index (its tables: notes)" in r.stderr
    [aside] = asides(tmp_path, "kb.sqlite")
    assert sqlite3.connect(aside).execute("select count(*) from notes").fetchone() == (0,)


def test_healthy_index_in_a_read_only_location_is_searched_as_it_is(
    read_only: Path, unprivileged: list[str], tmp_path: Path
) -> None:
    index = read_only / "kb.sqlite"
    assert asap("kb", "--index", index, "build", cache=tmp_path).returncode == 0
    built = index.read_bytes()
    read_only.chmod(0o500)
    r = kb_search(index, read_only / "cache", unprivileged)
    assert top_source(r) == "docs/pipeline-bubbles.md"
    assert r.stderr == ""  # not taken for damaged, nothing to say
    assert not asides(read_only, "kb.sqlite") and index.read_bytes() == built
    st = asap("kb", "--index", index, "stats", "--json", cache=read_only / "cache", prefix=unprivileged)
    assert st.returncode == 0 and json.loads(st.stdout)["storage"] == "read-only file"
    assert json.loads(st.stdout)["stale"] is None


def test_stale_or_damaged_index_in_a_read_only_location_is_built_in_memory(
    read_only: Path, unprivileged: list[str], tmp_path: Path
) -> None:
    kb = tmp_path / "kb"
    (kb / "docs").mkdir(parents=True)
    (kb / "history").mkdir()
    note = (ROOT / "kb" / "docs" / "pipeline-bubbles.md").read_text()
    (kb / "docs" / "pipeline-bubbles.md").write_text(note)
    index = read_only / "kb.sqlite"
    assert asap("kb", "--kb", kb, "--index", index, "build", cache=tmp_path).returncode == 0
    (kb / "docs" / "pipeline-bubbles.md").write_text(note + "\nOne more line.\n")  # the index is stale now
    read_only.chmod(0o500)
    args = ("kb", "--kb", kb, "--index", index, "search", "pipeline bubble", "--json")
    r = asap(*args, cache=read_only / "cache", prefix=unprivileged)
    assert top_source(r) == "docs/pipeline-bubbles.md"
    assert "cannot be written (a read-only location): searching an index built in memory for this run" in r.stderr
    read_only.chmod(0o700)
    index.write_bytes(GARBAGE)
    read_only.chmod(0o500)
    r = asap(*args, cache=read_only / "cache", prefix=unprivileged)
    assert top_source(r) == "docs/pipeline-bubbles.md"
    assert "is damaged (file is not a database) and cannot be moved aside (Permission denied)" in r.stderr
    assert index.read_bytes() == GARBAGE and not asides(read_only, "kb.sqlite")


def test_no_index_and_no_writable_cache_builds_in_memory(tmp_path: Path) -> None:
    """`asap kb search` with the default index under a cache directory that cannot be created."""
    (tmp_path / "file").write_text("")
    r = asap("kb", "search", "pipeline bubble", "--k", "1", "--json", cache=tmp_path / "file" / "cache")
    assert top_source(r) == "docs/pipeline-bubbles.md"
    assert "searching an index built in memory for this run" in r.stderr


# -- a knowledge index damaged past what opening reads (issue 25 item 4) ------------------------------------------
DAMAGE = ["half", "header", "pages"]


def damage(index: Path, how: str) -> None:
    """Truncate the index file to half its size, overwrite its 100-byte header with garbage, or overwrite the
    pages of its middle half (the header, the schema and the metadata written last still read: tables' rows, FTS
    and vectors are what a query finds damaged; sqlite-vec calls it a 'vectors blob read error')."""
    size = index.stat().st_size
    if how == "half":
        os.truncate(index, size // 2)
        return
    at, n = (0, 100) if how == "header" else (size // 4 // 4096 * 4096, size // 2 // 4096 * 4096)
    with open(index, "r+b") as f:
        f.seek(at)
        f.write((GARBAGE * (n // len(GARBAGE) + 1))[:n])


def aside_files(d: Path) -> list[Path]:
    """The index files moved aside (their -wal and -shm journals, moved with them, left out)."""
    return [p for p in asides(d, "kb.sqlite") if not p.name.endswith(("-wal", "-shm"))]


def moved_once(index: Path, aside: Path, lines: list[str]) -> None:
    """One warning, naming the file moved aside, whatever words SQLite used for the damage."""
    said = [ln for ln in lines if "knowledge index" in ln]
    assert len(said) == 1, lines
    assert said[0].startswith(f"ASAP's knowledge index {index} was unusable (") or said[0].startswith(
        f"asap: ASAP's knowledge index {index} was unusable ("
    ), said
    assert said[0].endswith(f"): moved to {aside} and rebuilt"), said


KB_COMMANDS = {
    "search": ("search", "pipeline bubble", "--k", "1", "--json"),
    "similar": ("similar", "--params-b", "70", "--slice", "v6e-256", "--json"),
    "stats": ("stats", "--json"),
    "build": ("build",),
}


@pytest.mark.parametrize(
    ("how", "command"),
    [
        *[pytest.param(how, c, id=f"{name}-{how}") for how in ("half", "header") for name, c in KB_COMMANDS.items()],
        pytest.param("pages", KB_COMMANDS["search"], id="search-pages"),  # the pages the others need may be whole
    ],
)
def test_damaged_real_index_heals_for_every_kb_command(tmp_path: Path, how: str, command: tuple[str, ...]) -> None:
    """A real index (the repository's kb/, sqlite-vec, the real embedder), damaged: every `asap kb` command that
    opens it works, the damaged file is beside the new one, and one `asap:` line says so; the next run is quiet."""
    index = tmp_path / "kb.sqlite"
    assert asap("kb", "--index", index, "build", cache=tmp_path).returncode == 0
    damage(index, how)
    r = asap("kb", "--index", index, *command, cache=tmp_path)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    [aside] = aside_files(tmp_path)
    moved_once(index, aside, r.stderr.splitlines())
    if command[0] == "search":
        assert json.loads(r.stdout)["results"][0]["source"] == "docs/pipeline-bubbles.md"
    elif command[0] == "similar":
        assert json.loads(r.stdout)["results"]
    elif command[0] == "stats":
        assert json.loads(r.stdout)["chunks"] > 0 and json.loads(r.stdout)["stale"] is None
    again = kb_search(index, tmp_path)
    assert top_source(again) == "docs/pipeline-bubbles.md" and again.stderr == ""
    assert aside_files(tmp_path) == [aside]


@pytest.mark.parametrize("how", DAMAGE)
@pytest.mark.parametrize("when", ["before", "during"])
def test_damaged_real_index_heals_for_the_agents_references(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, how: str, when: str
) -> None:
    """The agents' references (the proposal engine's kb search and similar-history lookups) on a real index
    damaged before the analysis opens it, or while it runs (after the analysis opened the index, before the
    references are read: corruption found mid-query, as when another process truncates the file)."""
    from server.agents.coordinator import run
    from server.agents.types import Experiment
    from server.kb.store import KnowledgeStore

    index = tmp_path / "kb.sqlite"
    KnowledgeStore(index).ensure().close()
    if when == "before":
        damage(index, how)

    def progress(step: str) -> None:
        if when == "during" and step == "pricing candidate meshes":
            damage(index, how)

    config = ROOT / "examples" / "llama3-8b-v6e-16.yml"
    with caplog.at_level(logging.WARNING, logger="asap"):
        result = run(Experiment(config, workspace=tmp_path), progress=progress, kb_path=index)
    assert result.notes == [] and result.proposals
    assert all(p.references for p in result.proposals), [p.references for p in result.proposals]
    [aside] = aside_files(tmp_path)
    moved_once(index, aside, [r.getMessage() for r in caplog.records])
