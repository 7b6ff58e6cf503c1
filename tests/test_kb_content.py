"""The shipped kb/: every note and record passes the schema, ids are unique, and the benchmark's labeled
queries point at notes and records that exist."""

from __future__ import annotations

from pathlib import Path

from ruamel.yaml import YAML

from server.kb.store import REPO_KB, KnowledgeStore

QUERIES = Path(__file__).resolve().parents[1] / "bench" / "kb_queries.yaml"


def test_shipped_content_validates() -> None:
    notes, records = KnowledgeStore(Path("/nonexistent/kb.sqlite"), REPO_KB).load_content()  # raises on any error
    assert len(notes) >= 20 and len(records) >= 10
    for n in notes:
        assert n.sources, f"{n.path}: a note cites its sources"
        assert all(len(c.text.split()) >= 20 for c in n.chunks), f"{n.path}: a section too short to stand alone"
    for r in records:
        assert r.source and r.change


def test_labeled_queries_point_at_existing_content() -> None:
    data = YAML(typ="safe").load(QUERIES.read_text())
    notes, records = KnowledgeStore(Path("/nonexistent/kb.sqlite"), REPO_KB).load_content()
    ids = {n.id for n in notes} | {r.id for r in records}
    assert len(data["queries"]) >= 30
    for q in data["queries"]:
        assert set(q["relevant"]) <= ids, q
    for h in data.get("history", []):
        assert set(h["relevant"]) <= {r.id for r in records}, h
