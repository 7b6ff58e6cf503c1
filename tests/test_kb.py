"""The knowledge store on real sqlite-vec, FTS5 and the real embedding model: build from a temporary
kb/, hybrid search with filters, rebuild on change, model mismatch, a reader during a rebuild, a
damaged index file, record and note schema errors, and the CLI."""

from __future__ import annotations

import json
import logging
import multiprocessing
import sqlite3
import textwrap
from pathlib import Path

import pytest

from server.cli.main import main
from server.kb import store as kbstore
from server.kb.records import RecordError, load_note, load_record
from server.kb.store import KbError, KnowledgeStore, Situation

NOTES = {
    "fsdp-threshold": (
        "When FSDP beats data parallelism",
        "[fsdp, data]",
        "[]",
        {
            "Threshold": "FSDP all-gathers each layer's weights; it stays compute-bound while the tokens per chip "
            "exceed the ratio of peak FLOP/s to ICI bandwidth.",
            "Memory": "Sharding weights, gradients and optimizer state divides the 16 bytes per parameter.",
        },
    ),
    "pipeline-bubble": (
        "Pipeline bubbles",
        "[pipeline]",
        "[v5p]",
        {"Bubble": "The idle fraction of a pipeline is (stages - 1) / (microbatches + stages - 1)."},
    ),
    "expert-all-to-all": (
        "Expert parallelism",
        "[expert]",
        "[]",
        {"Dispatch": "Mixture-of-experts layers route tokens to experts with all-to-all collectives."},
    ),
}

RECORD = """\
id: {id}
title: Llama 2 70B on v6e-256 with fsdp_transpose
model: {{name: llama2-70b, params_b: 70, emb: 8192, layers: 80, q_heads: 64, kv_heads: 8, mlp: 28672, seq: 4096}}
slice: {{name: v6e-256, num_slices: 1}}
before: {{mesh: {{ici_fsdp_parallelism: -1}}, per_device_batch_size: 4, remat_policy: full}}
after: {{mesh: {{ici_fsdp_transpose_parallelism: -1}}, per_device_batch_size: 4, remat_policy: full}}
bottleneck: communication
change: "Moved the weight-sharding axis to fsdp_transpose."
impact: {{kind: published, metric: mfu, before: null, after: 0.438, note: "MaxText tiering table"}}
source: "AI-Hypercomputer/maxtext docs/reference/models/tiering.md"
tags: [fsdp_transpose, v6e]
"""


def write_kb(root: Path) -> Path:
    (root / "docs").mkdir(parents=True, exist_ok=True)
    (root / "history").mkdir(exist_ok=True)
    for nid, (title, axes, gens, sections) in NOTES.items():
        body = "".join(f"## {h}\n{t}\n\n" for h, t in sections.items())
        (root / "docs" / f"{nid}.md").write_text(
            f"---\ntitle: {title}\naxes: {axes}\ngenerations: {gens}\nfamilies: []\nsources: [test]\n---\n"
            f"# {title}\n\n{body}"
        )
    (root / "history" / "llama70b-fsdp-transpose.yaml").write_text(RECORD.format(id="llama70b-fsdp-transpose"))
    return root


@pytest.fixture
def kb(tmp_path: Path) -> KnowledgeStore:
    root = write_kb(tmp_path / "kb")
    return KnowledgeStore(tmp_path / "index" / "kb.sqlite", root).ensure()


def test_build_and_search_finds_by_words_and_meaning(kb: KnowledgeStore) -> None:
    st = kb.stats()
    assert (st["documents"], st["records"], st["chunks"]) == (3, 1, 5)
    assert (st["model"], st["dim"], st["stale"]) == ("wordllama/l2_supercat", 256, None)
    top = kb.search("pipeline bubble with few microbatches", k=3)
    assert top[0].source == "docs/pipeline-bubble.md" and top[0].heading == "Bubble"
    # no shared keyword: found by the embedding ("MoE" / "routing")
    moe = kb.search("MoE token routing between experts", k=2)
    assert moe[0].doc_id == "expert-all-to-all"
    assert all(r.score > 0 for r in top) and [r.score for r in top] == sorted((r.score for r in top), reverse=True)


def test_filters_on_generation_family_axis_and_kind(kb: KnowledgeStore) -> None:
    q = "sharding weights across chips"
    assert "pipeline-bubble" not in {r.doc_id for r in kb.search(q, k=10, generation="v6e")}  # v5p-only note
    assert {r.doc_id for r in kb.search(q, k=10, axis="pipeline")} == {"pipeline-bubble"}
    hist = kb.search(q, k=10, kind="history")
    assert [r.doc_id for r in hist] == ["llama70b-fsdp-transpose"] and hist[0].kind == "history"
    assert "llama70b-fsdp-transpose" not in {r.doc_id for r in kb.search(q, k=10, family="mixtral")}
    assert "llama70b-fsdp-transpose" in {r.doc_id for r in kb.search(q, k=10, family="llama3.1-70b")}


def test_similar_history_ranks_by_situation(kb: KnowledgeStore, tmp_path: Path) -> None:
    rec, score, why = kb.similar_history(Situation(65, "v6e-256", "communication", {"ici_fsdp_parallelism": 256}))[0]
    assert rec.id == "llama70b-fsdp-transpose" and score > 0.8
    assert "same bottleneck (communication)" in why and "same generation (v6e)" in why
    _, far, _ = kb.similar_history(Situation(7, "v5e-16", "hbm"))[0]
    assert far < score / 2


def test_rebuild_when_content_changes(kb: KnowledgeStore) -> None:
    note = kb.root / "docs" / "pipeline-bubble.md"
    note.write_text(note.read_text().replace("microbatches", "microbatches (interleaving shrinks it)"))
    assert kb.stale_reason() == f"{kb.root} changed since the index was built"
    kb.ensure()
    assert kb.stale_reason() is None
    assert "interleaving" in kb.search("interleaving", k=1)[0].text


def test_index_of_another_model_is_detected_and_rebuilt(kb: KnowledgeStore) -> None:
    kb.db.execute("update metadata set value = 'other/model' where key = 'model'")
    kb.db.conn.commit()
    assert "built with embedding model other/model" in (kb.stale_reason() or "")
    kb.ensure()
    assert kb.stats()["model"] == "wordllama/l2_supercat"
    assert any("other/model" in n for n in kb.notices)


def _rebuild(path: str, root: str) -> None:
    KnowledgeStore(Path(path), Path(root)).build()


def test_reader_keeps_its_snapshot_during_a_rebuild(kb: KnowledgeStore) -> None:
    reader = kbstore._connect(kb.path)
    reader.conn.isolation_level = None
    reader.execute("BEGIN")
    before = reader.execute("select count(*) from chunks").fetchone()[0]
    (kb.root / "docs" / "extra.md").write_text(
        "---\ntitle: Extra\naxes: [general]\n---\n# Extra\n\n## One\nmore text here\n\n## Two\neven more text\n"
    )
    proc = multiprocessing.get_context("spawn").Process(target=_rebuild, args=(str(kb.path), str(kb.root)))
    proc.start()
    proc.join(120)
    assert proc.exitcode == 0  # the writer was not blocked by the open read transaction
    assert reader.execute("select count(*) from chunks").fetchone()[0] == before  # old snapshot, whole
    reader.execute("COMMIT")
    assert reader.execute("select count(*) from chunks").fetchone()[0] == before + 2  # the new index, whole
    reader.close()


def test_damaged_index_is_moved_aside_and_rebuilt(kb: KnowledgeStore, caplog: pytest.LogCaptureFixture) -> None:
    kb.close()
    kb.path.write_bytes(b"this is not a database" * 100)
    with caplog.at_level(logging.WARNING, logger="asap"):
        fresh = KnowledgeStore(kb.path, kb.root).ensure()
    [aside] = kb.path.parent.glob("kb.sqlite.corrupt-*")
    assert [r.getMessage() for r in caplog.records] == [
        f"ASAP's knowledge index {kb.path} was unusable (file is not a database): moved to {aside} and rebuilt"
    ]
    assert fresh.notices == []  # said once, on the log
    assert fresh.search("pipeline bubble", k=1)[0].doc_id == "pipeline-bubble"


def test_stdlib_sqlite_without_extensions_names_the_fix(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "x.sqlite")
    if hasattr(conn, "enable_load_extension"):
        pytest.skip("this Python's sqlite3 can load extensions")
    with pytest.raises(KbError, match="pysqlite3-binary"):
        kbstore._connect(tmp_path / "x.sqlite", conn)


# -- schema errors: file, line and field ----------------------------------------------------------------
def record_error(tmp_path: Path, text: str, name: str = "r1") -> RecordError:
    p = tmp_path / f"{name}.yaml"
    p.write_text(text)
    with pytest.raises(RecordError) as e:
        load_record(p)
    return e.value


def test_record_schema_errors_name_file_line_and_field(tmp_path: Path) -> None:
    good = RECORD.format(id="r1")
    e = record_error(tmp_path, good.replace("bottleneck: communication\n", ""))
    assert (e.field, e.line) == ("bottleneck", 1) and "missing" in str(e)
    e = record_error(tmp_path, good.replace("bottleneck: communication", "bottleneck: slow"))
    assert (e.field, e.line) == ("bottleneck", 7) and str(e).startswith(f"{tmp_path / 'r1.yaml'}:7: bottleneck:")
    e = record_error(tmp_path, good.replace("ici_fsdp_transpose_parallelism", "fsdp_transpose"))
    assert e.field == "after.mesh" and e.line == 6 and "not a MaxText mesh key" in str(e)
    e = record_error(tmp_path, good.replace("params_b: 70", "params_b: seventy"))
    assert e.field == "model.params_b" and e.line == 3
    e = record_error(tmp_path, good + "owner: me\n")
    assert e.field == "owner" and "unknown field" in str(e)
    e = record_error(tmp_path, good, name="other-name")
    assert e.field == "id" and "must equal the file name" in str(e)
    e = record_error(tmp_path, "id: [unclosed\n")
    assert "invalid YAML" in str(e)


def test_note_errors(tmp_path: Path) -> None:
    p = tmp_path / "n.md"
    p.write_text("# no front matter\n")
    with pytest.raises(RecordError, match="front matter"):
        load_note(p)
    p.write_text("---\ntitle: T\naxes: [fsdp, warp]\n---\n## A\ntext\n")
    with pytest.raises(RecordError, match=r"n\.md:3: axes: unknown value\(s\) \['warp'\]"):
        load_note(p)
    p.write_text("---\ntitle: T\n---\n# T\n\n## A\nalpha\n\n## B\nbeta\n")
    assert [c.heading for c in load_note(p).chunks] == ["A", "B"]


def test_a_malformed_file_stops_the_build_and_leaves_the_index(kb: KnowledgeStore) -> None:
    bad = kb.root / "history" / "broken.yaml"
    bad.write_text(
        RECORD.format(id="broken").replace("remat_policy: full}\nbottleneck", "remat_policy: full}\nbottlenek")
    )
    with pytest.raises(RecordError, match=r"broken\.yaml"):
        kb.build()
    assert kb.stats()["records"] == 1  # the previous index is intact


# -- CLI --------------------------------------------------------------------------------------------------
def test_cli_search_builds_first_and_prints_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_kb(tmp_path / "kb")
    args = ["kb", "--kb", str(root), "--index", str(tmp_path / "i.sqlite")]
    assert main([*args, "search", "pipeline bubble", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    first = out["results"][0]
    assert set(first) >= {"source", "heading", "text", "score"} and first["source"] == "docs/pipeline-bubble.md"
    assert main([*args, "stats", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["chunks"] == 5


def test_cli_add_record_validates_copies_and_reindexes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_kb(tmp_path / "kb")
    args = ["kb", "--kb", str(root), "--index", str(tmp_path / "i.sqlite")]
    new = tmp_path / "new-rec.yaml"
    new.write_text(RECORD.format(id="new-rec"))
    assert main([*args, "add-record", str(new)]) == 0
    assert (root / "history" / "new-rec.yaml").read_text() == new.read_text()
    assert "2 records" in capsys.readouterr().out
    assert main([*args, "add-record", str(new)]) == 2  # already there
    bad = tmp_path / "bad.yaml"
    bad.write_text(textwrap.dedent(RECORD.format(id="bad")).replace("source:", "sauce:"))
    assert main([*args, "add-record", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "bad.yaml:11: sauce: unknown field" in err or "source: missing" in err
    assert not (root / "history" / "bad.yaml").exists()


def test_index_writers_take_turns_across_processes(tmp_path: Path) -> None:
    """The index's writer lock (filelock, next to the index) is held across processes: while another process
    holds it, it cannot be taken; once that one lets go, a writer here proceeds."""
    import subprocess
    import sys
    import threading

    import filelock

    index = tmp_path / "kb.sqlite"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys\nfrom pathlib import Path\nfrom server.kb.store import _writer_lock\n"
            "with _writer_lock(Path(sys.argv[1])):\n    print('locked', flush=True)\n    sys.stdin.readline()\n",
            str(index),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(filelock.Timeout):
            filelock.FileLock(tmp_path / "kb.sqlite.lock").acquire(blocking=False)
        entered = threading.Event()

        def write() -> None:
            with kbstore._writer_lock(index):
                entered.set()

        t = threading.Thread(target=write)
        t.start()
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.wait(30) == 0
        assert entered.wait(10)
        t.join(10)
    finally:
        holder.kill()
        holder.wait()


def test_loading_the_embedder_leaves_the_root_logger_as_it_was() -> None:
    """wordllama's import calls logging.basicConfig(level=INFO). Left alone, every "asap" record was printed a second
    time on stderr ("WARNING:asap: ..." after the CLI's "asap: ..."; each server log line twice in the editor's
    channel). In a fresh interpreter: the root logger has no handler and its level after the model loads."""
    import subprocess
    import sys

    code = (
        "import logging\n"
        "from server.kb.embed import Embedder\n"
        "Embedder().embed(['fsdp over ici'])\n"
        "root = logging.getLogger()\n"
        "print(len(root.handlers), logging.getLevelName(root.level))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert r.stdout.split() == ["0", "WARNING"], r.stdout + r.stderr
