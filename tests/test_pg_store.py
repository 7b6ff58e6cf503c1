"""The shared experiment log on a real PostgreSQL server (issue 19), started by the tests from the machine's
binaries on 127.0.0.1 and stopped by PID (tests/support/postgres.py): migrations applied once, concurrent writers
losing and duplicating nothing, a connection killed mid-write degrading to the local outbox and syncing after,
credentials never in the log, and `asap stats`' team track record."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from server.common import pg_store
from server.services import experiments
from tests.support import postgres, servers


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[postgres.Postgres]:
    try:
        pg = postgres.start(tmp_path_factory.mktemp("pg"))
    except postgres.Unavailable as e:
        servers.unavailable(str(e))
    try:
        yield pg
    finally:
        pg.stop()
        assert pg.pid() is None


@pytest.fixture
def db_url(server: postgres.Postgres) -> str:
    """A fresh database on the server (each test starts from an empty schema)."""
    name = f"t_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server.url(), autocommit=True) as c:
        c.execute(f"CREATE DATABASE {name}")
    return server.url(name)


def outcome_row(app: str, profile: str, **kw: Any) -> dict[str, Any]:
    row = {
        "id": uuid.uuid4().hex[:12],
        "experiment_id": "e1",
        "application_id": app,
        "rank": 1,
        "created": 1.0,
        "generation": "v5e",
        "slice": "v5e-8",
        "profile": profile,
        "predicted_step_s": 1.0,
        "measured_step_s": 1.25,
        "step_error": -0.2,
        "delivered": True,
        "stated_confidence": 0.8,
        "bottleneck_moved": False,
    }
    return row | kw


def count(u: str, sql: str) -> int:
    with psycopg.connect(u) as c:
        return int(c.execute(sql).fetchone()[0])  # type: ignore[index]


def test_migrations_are_applied_once_by_concurrent_first_users(db_url: str, tmp_path: Path) -> None:
    stores = [pg_store.SharedStore(db_url, tmp_path / f"local{i}.sqlite") for i in range(4)]
    barrier = threading.Barrier(len(stores))
    errors: list[BaseException] = []

    def first_use(s: pg_store.SharedStore) -> None:
        try:
            barrier.wait()
            s.sync()  # connects: migrates under the advisory lock
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=first_use, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    versions = [v for v, _, _ in pg_store.migrations()]
    assert versions and versions[0] == 1
    with psycopg.connect(db_url) as c:
        rows = c.execute("SELECT version, count(*) FROM schema_version GROUP BY version ORDER BY version").fetchall()
    assert rows == [(v, 1) for v in versions]
    late = pg_store.SharedStore(db_url, tmp_path / "late.sqlite")
    with late._get_pool().connection() as conn:
        assert late._migrate(conn) == []  # nothing left to apply
    for s in [*stores, late]:
        s.close()


def test_two_concurrent_writers_lose_no_outcome_and_duplicate_none(db_url: str, tmp_path: Path) -> None:
    # both writers record the same 150 runs (as two editors would on the same profiles), each with its own ids,
    # and 50 runs of their own: 250 distinct outcomes
    shared_runs = [(f"app{i % 30}", f"gs://b/run{i}") for i in range(150)]
    writers = [pg_store.SharedStore(db_url, tmp_path / f"w{i}.sqlite") for i in range(2)]
    results: list[list[pg_store.WriteResult]] = [[], []]
    barrier = threading.Barrier(2)

    def write(i: int) -> None:
        barrier.wait()
        own = [(f"own{i}-{k}", f"/p/{i}/{k}") for k in range(50)]
        for app, profile in shared_runs + own:
            results[i].append(writers[i].write("outcomes", outcome_row(app, profile)))

    threads = [threading.Thread(target=write, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r.shared for rs in results for r in rs)
    assert sum(r.inserted for rs in results for r in rs) == 250
    assert count(db_url, "SELECT count(*) FROM outcomes") == 250
    assert count(db_url, "SELECT count(DISTINCT (application_id, profile)) FROM outcomes") == 250
    for w in writers:
        assert w.pending() == 0
        w.close()


def test_a_connection_killed_mid_write_degrades_to_local_and_syncs_after(
    db_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture, server: postgres.Postgres
) -> None:
    caplog.set_level(logging.DEBUG)
    s = pg_store.SharedStore(db_url, tmp_path / "local.sqlite")
    s.sync()  # migrated
    row = outcome_row("app-k", "/p/killed")
    result: list[pg_store.WriteResult] = []
    with psycopg.connect(db_url, autocommit=True) as admin:
        admin.execute("BEGIN")
        admin.execute("LOCK TABLE outcomes IN ACCESS EXCLUSIVE MODE")  # the writer's INSERT waits on this
        writer = threading.Thread(target=lambda: result.append(s.write("outcomes", row)))
        writer.start()
        waiting: list[int] = []
        while not waiting:  # until the INSERT is blocked on the lock (the server says so)
            waiting = [
                r[0]
                for r in admin.execute(
                    "SELECT pid FROM pg_stat_activity WHERE application_name = 'asap' AND wait_event_type = 'Lock'"
                ).fetchall()
            ]
            assert writer.is_alive() or waiting
        admin.execute("SELECT pg_terminate_backend(%s)", [waiting[0]])
        writer.join()
        admin.execute("ROLLBACK")
    assert result == [pg_store.WriteResult(shared=False, inserted=False)]
    assert s.pending() == 1
    assert count(db_url, "SELECT count(*) FROM outcomes") == 0
    notices = [r.getMessage() for r in caplog.records if "unavailable" in r.getMessage()]
    assert len(notices) == 1 and "keeping rows in the local store" in notices[0]
    assert s.sync() == 1  # reconnects: the kept row goes to the shared log
    assert s.pending() == 0
    assert count(db_url, f"SELECT count(*) FROM outcomes WHERE id = '{row['id']}'") == 1
    assert s.sync() == 0
    assert count(db_url, "SELECT count(*) FROM outcomes") == 1
    assert server.password not in caplog.text
    s.close()


def test_an_unreachable_server_keeps_rows_locally_and_never_logs_the_password(
    db_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture, server: postgres.Postgres
) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = db_url.replace(server.password, "not-the-Pa55word")
    s = pg_store.SharedStore(wrong, tmp_path / "local.sqlite")
    r1 = s.write("outcomes", outcome_row("a", "/p/1"))
    r2 = s.write("outcomes", outcome_row("a", "/p/2"))  # within the retry delay: queued without trying again
    assert (r1.shared, r2.shared) == (False, False)
    assert s.pending() == 2
    assert "password authentication failed" in caplog.text
    assert f"{postgres.USER}:***@127.0.0.1" in caplog.text
    assert "not-the-Pa55word" not in caplog.text and server.password not in caplog.text
    assert pg_store.redact(f"see {wrong} now", wrong) == f"see {pg_store.redact_url(wrong)} now"
    # the same local outbox, once the right URL is set: replayed, in order, on the next successful connect
    s.close()
    good = pg_store.SharedStore(db_url, tmp_path / "local.sqlite")
    assert good.write("outcomes", outcome_row("a", "/p/3")).shared
    assert good.pending() == 0
    assert count(db_url, "SELECT count(*) FROM outcomes") == 3
    good.close()


def test_stats_report_the_team_per_user_and_generation(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASAP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(pg_store.ENV, db_url)
    s = pg_store.shared()
    assert s is not None
    for i in range(3):
        s.write("outcomes", outcome_row(f"a{i}", f"/p/{i}", user_name="ana", generation="v5e"))
    s.write("outcomes", outcome_row("b", "/p/b", user_name="bo", generation="v6e", delivered=False))
    rec = experiments.track_record()
    assert rec["shared"]["source"] == "shared"
    assert "***" in rec["shared"]["store"] or ":" not in db_url.split("@")[0].split("//")[1]
    assert {u: v["outcomes"] for u, v in rec["per_user"].items()} == {"ana": 3, "bo": 1}
    assert rec["per_user"]["bo"]["delivered"] == 0.0
    assert {g: v["outcomes"] for g, v in rec["per_generation"].items()} == {"v5e": 3, "v6e": 1}
    s.close()
    pg_store._SHARED.clear()


def test_a_record_added_on_one_machine_is_indexed_on_another(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_kb import RECORD, write_kb

    from server.kb.store import KnowledgeStore, add_record

    monkeypatch.setenv("ASAP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(pg_store.ENV, db_url)
    a = KnowledgeStore(tmp_path / "a" / "kb.sqlite", write_kb(tmp_path / "a" / "kb"), outcomes=tmp_path / "a" / "out")
    b = KnowledgeStore(tmp_path / "b" / "kb.sqlite", write_kb(tmp_path / "b" / "kb"), outcomes=tmp_path / "b" / "out")
    assert b.ensure().stats()["records"] == 1
    src = tmp_path / "new-rec.yaml"
    src.write_text(RECORD.format(id="new-rec"))
    add_record(a, src)
    assert count(db_url, "SELECT count(*) FROM kb_records WHERE id = 'new-rec'") == 1
    assert b.pull_shared(force=True) == 1
    assert (tmp_path / "b" / "out" / "new-rec.yaml").read_text() == src.read_text()
    assert b.ensure().stats()["records"] == 2 and "new-rec" in {r.id for r in b.records()}
    assert b.pull_shared(force=True) == 0  # nothing new: nothing written, the index stays current
    assert b.stale_reason() is None
    assert a.pull_shared(force=True) == 0  # its own record lives in its kb/history: not copied again
    pg_store._SHARED.pop(db_url).close()


def test_the_experiment_log_goes_to_the_shared_store_end_to_end(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An analysis, applying proposal 1 and the outcome of its run, through ASAP's own code with ASAP_STORE set:
    each row in PostgreSQL with its user, the outcome's knowledge record shared, and `asap stats --json` the
    team's (per user)."""
    import json

    from profiles.synth import write_profile
    from support.configs import LOOP_CONFIG as CONFIG

    from server.agents.coordinator import run_report
    from server.agents.types import Experiment
    from server.cli.main import main
    from server.config.apply import apply_text, proposal_edits
    from server.services.analysis import analyze

    monkeypatch.setenv("ASAP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(pg_store.ENV, db_url)
    cfg = tmp_path / "c.yml"
    cfg.write_text(CONFIG)
    write_profile(tmp_path / "runs" / "before", "comm")
    doc, _ = run_report(Experiment(cfg, workspace=tmp_path))
    p1 = doc.proposals[0]
    cfg.write_text(apply_text(CONFIG, proposal_edits(analyze(cfg).config, p1.ici, p1.dcn, p1.other_changes)))
    applied = experiments.record_applied(doc.experiment, 1, cfg)
    write_profile(tmp_path / "runs" / "after", "compute")
    an = analyze(cfg)
    out = experiments.record_outcome(an, cfg, experiments.measure(an, tmp_path / "runs" / "after"))
    me = pg_store.user()
    with psycopg.connect(db_url) as c:
        assert c.execute("SELECT user_name FROM experiments WHERE id = %s", [doc.experiment]).fetchall() == [(me,)]
        assert c.execute("SELECT user_name FROM applications WHERE id = %s", [applied["id"]]).fetchall() == [(me,)]
        assert c.execute("SELECT id, application_id FROM outcomes").fetchall() == [(out.id, applied["id"])]
        assert c.execute("SELECT id FROM kb_records").fetchall() == [(f"outcome-{out.id}",)]
    assert main(["stats", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["shared"]["source"] == "shared" and rec["shared"]["pending_sync"] == 0
    assert rec["per_user"][me]["outcomes"] == 1 and rec["per_generation"]["v5e"]["outcomes"] == 1
    assert pg_store.redact_url(db_url) == rec["shared"]["store"] and "s3cret" not in json.dumps(rec)
    pg_store._SHARED.pop(db_url).close()


def test_stats_fall_back_to_the_local_log_with_one_notice_when_the_server_refuses(
    db_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    server: postgres.Postgres,
) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = db_url.replace(server.password, "guessed-Pa55")
    monkeypatch.setenv("ASAP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(pg_store.ENV, wrong)
    rec = experiments.track_record()
    assert rec["shared"]["source"] == "local (the shared store did not answer)" and rec["outcomes"] == 0
    notices = [r.getMessage() for r in caplog.records if "unavailable" in r.getMessage()]
    assert len(notices) == 1 and "password authentication failed" in notices[0]  # the calibrator did not ask again
    assert "guessed-Pa55" not in caplog.text and "asap:***@" in notices[0]
    pg_store._SHARED.pop(wrong).close()


def test_a_write_after_a_failed_read_names_the_servers_reason(
    db_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture, server: postgres.Postgres
) -> None:
    """`asap analyze` reads the track record (which fails and holds the server off for 30 s), then logs its experiment:
    the write's notice gives the read's reason, not the type of the missing exception ("unavailable (NoneType)")."""
    caplog.set_level(logging.DEBUG)
    wrong = db_url.replace(server.password, "guessed-Pa55")
    s = pg_store.SharedStore(wrong, tmp_path / "local.sqlite")
    with pytest.raises(pg_store.Unavailable, match="password authentication failed"):
        s.query("SELECT 1")
    assert not s.write("outcomes", outcome_row("a", "/p/1")).shared
    (notice,) = [r.getMessage() for r in caplog.records if "keeping rows in the local store" in r.getMessage()]
    assert "password authentication failed" in notice and "NoneType" not in notice, notice
    assert "guessed-Pa55" not in caplog.text
    s.close()
