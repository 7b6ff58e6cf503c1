"""`asap stats` (the text) with the shared store set (ASAP_STORE=postgresql://...), against a real PostgreSQL server
started by the tests on 127.0.0.1 and stopped by PID (tests/test_pg_store.py's fixtures, tests/support/postgres.py):
where the figures come from (the team's store with its password hidden, or this machine's log when the server did
not answer, and the rows waiting in the outbox), and the per-user and per-generation tables of the JSON's figures."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.cli import run_asap
from test_pg_store import db_url, outcome_row, server  # noqa: F401  (the server and a fresh database: fixtures)

from server.common import pg_store
from tests.support import postgres


def _env(cache: Path, url: str) -> dict[str, str]:
    return {**os.environ, "ASAP_CACHE_DIR": str(cache), pg_store.ENV: url}


def _rows(text: str, section: str) -> dict[str, list[str]]:
    """A table of the text (the lines under `  section:` up to the next section), by its first cell."""
    lines = text.splitlines()
    start = lines.index(f"  {section}:") + 1
    out: dict[str, list[str]] = {}
    for line in lines[start + 1 :]:  # after the header row
        if not line.startswith("    "):
            break
        cells = line.split()
        out[cells[0]] = cells[1:]
    return out


def test_stats_text_shows_the_team_per_user_and_generation(
    db_url: str,  # noqa: F811
    server: postgres.Postgres,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("ASAP_CACHE_DIR", str(cache))
    # a row written while the server refused this machine: kept in its outbox
    wrong = db_url.replace(server.password, "not-the-Pa55word")
    offline = pg_store.SharedStore(wrong)
    assert not offline.write(
        "outcomes", outcome_row("b", "/p/b", user_name="bo", generation="v6e", delivered=False)
    ).shared
    offline.close()

    r = run_asap("stats", env=_env(cache, wrong), timeout=120)
    assert r.returncode == 0, r.stderr
    assert (
        f"  source: this machine's log only: the shared store {pg_store.redact_url(wrong)} did not answer (see the "
        "notice above); 1 row waits in this machine's outbox, synced on the next connect"
    ) in r.stdout
    assert "password authentication failed" in r.stderr  # the notice, once, with the server's reason
    assert "not-the-Pa55word" not in r.stdout + r.stderr

    team = pg_store.SharedStore(db_url)
    for i, (step_error, delivered) in enumerate([(-0.2, True), (0.1, True), (0.3, None)]):
        row = outcome_row(f"a{i}", f"/p/{i}", user_name="ana", generation="v5e", step_error=step_error)
        assert team.write("outcomes", row | {"delivered": delivered}).shared
    team.close()

    r = run_asap("stats", env=_env(cache, db_url), timeout=120)
    assert r.returncode == 0, r.stderr
    text = r.stdout
    assert text.startswith("ASAP's track record: 4 outcomes of applied proposals")
    assert (
        f"  source: the team's shared store {pg_store.redact_url(db_url)} (every user's outcomes); nothing waits to "
        "be synced"
    ) in text  # the outbox replayed on this read: bo's row is the team's now
    assert server.password not in text + r.stderr and ":***@127.0.0.1" in text
    users = _rows(text, "per user")
    # ana: |errors| 0.2, 0.1, 0.3 (median 20%, p90 30%, mean signed +6.7%), 2 of 2 with a baseline delivered
    assert users == {
        "ana": ["3", "20.0%", "30.0%", "6.7%", "100.0%"],
        "bo": ["1", "20.0%", "20.0%", "-20.0%", "0.0%"],
    }
    gens = _rows(text, "per generation")
    # delivered per generation: v5e 2 of 2 with a baseline, v6e bo's 0 of 1
    assert gens == {
        "v5e": ["3", "20.0%", "30.0%", "-", "0", "100.0%"],
        "v6e": ["1", "20.0%", "20.0%", "-", "0", "0.0%"],
    }
    # the same figures as the JSON
    doc = json.loads(run_asap("stats", "--json", env=_env(cache, db_url), timeout=120).stdout)
    assert {u: d["outcomes"] for u, d in doc["per_user"].items()} == {"ana": 3, "bo": 1}
    assert doc["per_user"]["ana"]["step_time_error"]["median_abs"] == pytest.approx(0.2)
    assert doc["shared"] == {"store": pg_store.redact_url(db_url), "source": "shared", "pending_sync": 0}


def test_stats_text_without_a_shared_store_is_unchanged(tmp_path: Path) -> None:
    env = {**os.environ, "ASAP_CACHE_DIR": str(tmp_path / "cache")}
    env.pop(pg_store.ENV, None)
    r = run_asap("stats", env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "source:" not in r.stdout and "per user" not in r.stdout
    assert r.stdout.startswith("ASAP's track record: 0 outcomes of applied proposals (0 with a measured baseline)")
