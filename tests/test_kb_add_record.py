"""Adding an optimization record to the knowledge base (server/kb/store.py add_record, behind `asap kb add-record`):
validated before anything is copied, copied to <kb>/history/<id>.yaml, the index rebuilt; an id already held by
another file is refused unless forced."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_kb import RECORD, write_kb

from server.kb.records import RecordError
from server.kb.store import KbError, KnowledgeStore, add_record


@pytest.fixture
def store(tmp_path: Path) -> KnowledgeStore:
    return KnowledgeStore(tmp_path / "index" / "kb.sqlite", write_kb(tmp_path / "kb"))


def test_a_valid_record_is_copied_and_indexed(store: KnowledgeStore, tmp_path: Path) -> None:
    src = tmp_path / "new-rec.yaml"
    src.write_text(RECORD.format(id="new-rec"))
    added = add_record(store, src)
    assert added.record.id == "new-rec" and added.path == store.root / "history" / "new-rec.yaml"
    assert added.path.read_text() == src.read_text()
    assert added.stats["records"] == 2 and store.stats()["records"] == 2
    assert "new-rec" in {r.id for r in store.records()}


def test_an_id_in_use_is_refused_unless_forced(store: KnowledgeStore, tmp_path: Path) -> None:
    held = store.root / "history" / "llama70b-fsdp-transpose.yaml"
    src = tmp_path / "elsewhere" / "llama70b-fsdp-transpose.yaml"
    src.parent.mkdir()
    src.write_text(RECORD.format(id="llama70b-fsdp-transpose").replace("tags: [fsdp_transpose, v6e]", "tags: [v6e]"))
    with pytest.raises(KbError, match=r"llama70b-fsdp-transpose.yaml already exists \(use --force to replace it\)"):
        add_record(store, src)
    assert held.read_text() != src.read_text()
    assert add_record(store, src, force=True).stats["records"] == 1
    assert held.read_text() == src.read_text()


def test_a_record_already_in_place_is_reindexed(store: KnowledgeStore) -> None:
    held = store.root / "history" / "llama70b-fsdp-transpose.yaml"
    before = held.read_text()
    added = add_record(store, held)  # no --force needed: it is the same file
    assert added.path == held and held.read_text() == before and added.stats["records"] == 1


def test_a_malformed_or_missing_record_changes_nothing(store: KnowledgeStore, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(RECORD.format(id="bad").replace("source:", "sauce:"))
    with pytest.raises(RecordError, match=r"bad\.yaml:\d+: (sauce|source)"):
        add_record(store, bad)
    with pytest.raises(OSError):
        add_record(store, tmp_path / "missing.yaml")
    assert sorted(p.name for p in (store.root / "history").iterdir()) == ["llama70b-fsdp-transpose.yaml"]
    assert not store.path.exists()  # nothing was indexed
