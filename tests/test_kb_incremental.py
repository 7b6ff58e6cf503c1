"""The knowledge index updated in place (server/kb/store.py `update`): only the files added or changed since the
index was built are parsed and embedded, the documents of changed and removed files leave every table, and the
updated index answers every search exactly as a full rebuild of the same files does. A new embedding model
version or schema still rebuilds it whole. Real sqlite-vec, FTS5 and the real embedding model throughout; what
was embedded is read from the index itself (the `sources` table's per-file time of indexing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_kb import RECORD, write_kb

from server.kb import store as kbstore
from server.kb.records import RecordError
from server.kb.store import KnowledgeStore, Situation

QUERIES: list[dict[str, Any]] = [
    {"query": "pipeline bubble with few microbatches"},
    {"query": "sharding weights across chips", "k": 10},
    {"query": "MoE token routing between experts", "k": 10, "axis": "expert"},
    {"query": "communication bound fsdp transpose on v6e", "k": 10, "generation": "v6e"},
    {"query": "llama 70b", "k": 10, "kind": "history"},
    {"query": "memory per parameter optimizer state", "k": 10, "family": "llama3.1-70b"},
]


@pytest.fixture
def kb(tmp_path: Path) -> KnowledgeStore:
    store = KnowledgeStore(tmp_path / "index" / "kb.sqlite", write_kb(tmp_path / "kb"), outcomes=tmp_path / "outcomes")
    assert store.update()["mode"] == "full"
    return store


def _indexed_at(kb: KnowledgeStore) -> dict[str, str]:
    return {r["path"]: r["indexed_at"] for r in kb.db["sources"].rows}


def _answers(kb: KnowledgeStore) -> list[Any]:
    out: list[Any] = [[r.to_json() for r in kb.search(**q)] for q in QUERIES]
    sit = Situation(65, "v6e-256", "communication", {"ici_fsdp_parallelism": 256})
    out.append([(r.id, round(s, 9), why) for r, s, why in kb.similar_history(sit, 5)])
    return out


def _tables(kb: KnowledgeStore) -> dict[str, Any]:
    db = kb.db
    return {
        "documents": sorted(tuple(r.values()) for r in db["documents"].rows),
        "chunks": db.execute("select id, doc_id, title, position, heading, text from chunks order by id").fetchall(),
        "vectors": db.execute("select rowid, embedding from chunk_vec order by rowid").fetchall(),
        "history": sorted(tuple(r.values()) for r in db["history"].rows),
        "sources": db.execute("select path, sha256, doc_id from sources order by path").fetchall(),
        "kb_hash": kb._meta(db)["kb_hash"],
    }


def _same_as_a_full_rebuild(kb: KnowledgeStore, tmp_path: Path) -> None:
    """The updated index holds the rows a full rebuild of the same files holds, its keyword index is consistent
    with them, and every search answers the same."""
    kb.db.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('integrity-check')")  # raises on a stale FTS row
    full = KnowledgeStore(tmp_path / "full" / "kb.sqlite", kb.root, outcomes=kb.outcomes)
    full.build()
    assert _tables(kb) == _tables(full)
    assert _answers(kb) == _answers(full)
    full.close()


def _write_outcome(kb: KnowledgeStore, rid: str, **replace: str) -> Path:
    """A record as the shared store's pull writes it into the outcomes directory."""
    text = RECORD.format(id=rid)
    for old, new in replace.items():
        text = text.replace(old, new)
    assert kb.outcomes is not None
    kb.outcomes.mkdir(parents=True, exist_ok=True)
    p = kb.outcomes / f"{rid}.yaml"
    p.write_text(text)
    return p


def test_an_added_record_is_the_only_file_embedded(kb: KnowledgeStore, tmp_path: Path) -> None:
    before = _indexed_at(kb)
    _write_outcome(kb, "outcome-llama-tp", **{"fsdp_transpose": "tensor"})
    assert kb.stale_reason() == f"{kb.root} changed since the index was built"
    done = kb.update()
    assert (done["mode"], done["embedded"], done["added"], done["changed"], done["removed"]) == (
        "incremental",
        1,
        1,
        0,
        0,
    )
    assert (done["documents"], done["records"], done["chunks"]) == (3, 2, 6)
    after = _indexed_at(kb)
    assert set(after) - set(before) == {"outcomes/outcome-llama-tp.yaml"}
    assert {k: after[k] for k in before} == before  # no other file was indexed again
    assert kb.stale_reason() is None and kb.update()["mode"] == "current"
    assert kb.search("llama tensor parallelism", k=10, kind="history")[0].source == "outcomes/outcome-llama-tp.yaml"
    _same_as_a_full_rebuild(kb, tmp_path)


def test_a_changed_note_and_a_removed_record_are_replaced_and_dropped(kb: KnowledgeStore, tmp_path: Path) -> None:
    _write_outcome(kb, "outcome-a")
    _write_outcome(kb, "outcome-b", **{"v6e-256": "v5p-128"})
    assert kb.update()["added"] == 2
    before = _indexed_at(kb)
    note = kb.root / "docs" / "fsdp-threshold.md"  # two sections: two chunks
    note.write_text(note.read_text().replace("16 bytes per parameter", "16 bytes per parameter in fp32 Adam"))
    assert kb.outcomes is not None
    (kb.outcomes / "outcome-a.yaml").unlink()
    done = kb.update()
    assert (done["mode"], done["embedded"], done["added"], done["changed"], done["removed"]) == (
        "incremental",
        2,
        0,
        1,
        1,
    )
    after = _indexed_at(kb)
    assert set(before) - set(after) == {"outcomes/outcome-a.yaml"}
    assert {k for k in after if after[k] != before[k]} == {"docs/fsdp-threshold.md"}
    assert "outcome-a" not in {r.id for r in kb.records()}
    assert kb.search("fp32 Adam", k=1)[0].doc_id == "fsdp-threshold"
    _same_as_a_full_rebuild(kb, tmp_path)


def test_a_new_model_version_or_schema_rebuilds_the_whole_index(kb: KnowledgeStore) -> None:
    for key, value in (("model_version", "wordllama 0.0.1"), ("schema", "2")):
        kb.db.execute("update metadata set value = ? where key = ?", [value, key])
        kb.db.conn.commit()
        before = _indexed_at(kb)
        done = kb.update()
        assert done["mode"] == "full" and done["embedded"] == done["chunks"] == 5
        after = _indexed_at(kb)
        assert set(after) == set(before) and all(after[k] != before[k] for k in before)  # every file again
    assert "built with wordllama 0.0.1, this ASAP has wordllama" in kb.notices[0]
    assert kb.notices[1] == "rebuilding the knowledge index: built by another ASAP version"


def test_an_added_file_reusing_an_id_is_a_located_error_and_leaves_the_index(kb: KnowledgeStore) -> None:
    before = _tables(kb)
    clash = kb.root / "history" / "pipeline-bubble.yaml"  # the id of a note
    clash.write_text(RECORD.format(id="pipeline-bubble"))
    with pytest.raises(RecordError, match=r"pipeline-bubble\.yaml:1: id: 'pipeline-bubble' is also used by .*docs"):
        kb.update()
    assert _tables(kb) == before
    clash.unlink()
    assert kb.update()["mode"] == "current"


def test_a_reader_keeps_its_snapshot_during_an_update(kb: KnowledgeStore) -> None:
    reader = kbstore._connect(kb.path)
    reader.conn.isolation_level = None
    reader.execute("BEGIN")
    before = reader.execute("select count(*) from chunks").fetchone()[0]
    _write_outcome(kb, "outcome-c")
    assert kb.update()["mode"] == "incremental"
    assert reader.execute("select count(*) from chunks").fetchone()[0] == before
    reader.execute("COMMIT")
    assert reader.execute("select count(*) from chunks").fetchone()[0] == before + 1
    reader.close()


def test_a_filtered_vector_search_finds_the_nearest_allowed_chunk(tmp_path: Path) -> None:
    # the shipped kb/ (over 100 chunks): sqlite-vec's rowid filter is exact only while rowids stay below 2**31
    kb = KnowledgeStore(tmp_path / "kb.sqlite", kbstore.REPO_KB)
    kb.build()
    rows = kb.db.execute("select rowid, embedding from chunk_vec order by rowid").fetchall()
    assert len(rows) > 100 and max(r[0] for r in rows) <= kbstore.ID_SPACE
    vectors = {r[0]: np.frombuffer(r[1], dtype=np.float32) for r in rows}
    for query in ("how many tokens per chip before fsdp stops being communication bound", "OOM at batch 4"):
        qv = kb.embedder.embed([query])[0].astype(np.float32)
        for allowed in ([r[0] for r in rows[::3]], [r[0] for r in rows[1::2]]):
            got = kb._knn(qv.tobytes(), sorted(allowed))[:5]
            want = sorted(allowed, key=lambda i: float(np.linalg.norm(vectors[i] - qv)))[:5]
            assert got == want
    kb.close()


def test_a_chunk_whose_id_is_taken_gets_the_next_free_one() -> None:
    chunks = [{"doc_id": "a", "position": 0}, {"doc_id": "b", "position": 3}]
    first = kbstore.chunk_id("a", 0)
    kbstore._assign_ids(chunks, {first, first % kbstore.ID_SPACE + 1})
    assert chunks[0]["id"] == (first + 1) % kbstore.ID_SPACE + 1
    assert chunks[1]["id"] == kbstore.chunk_id("b", 3)
