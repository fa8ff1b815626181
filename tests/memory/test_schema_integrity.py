from __future__ import annotations

import sqlite3

import pytest

from memora_rl.errors import GraphError
from memora_rl.memory import EntryCandidate, SQLiteGraphStore, always_create, open_store
from memora_rl.memory.schema import SCHEMA_VERSION


def test_schema_version_recorded_and_mismatch_names_fix(tmp_path):
    path = tmp_path / "s.sqlite"
    open_store(path).close()
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.execute("UPDATE meta SET value='999' WHERE key='schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(GraphError, match=r"schema version 999.*graph export"):
        open_store(path)


def test_foreign_sqlite_file_and_folder_are_rejected(tmp_path):
    other = tmp_path / "other.sqlite"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    with pytest.raises(GraphError, match="another application"):
        open_store(other)
    with pytest.raises(GraphError, match="folder"):
        open_store(tmp_path)
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not a database at all" * 100)
    with pytest.raises(GraphError, match="not a readable"):
        open_store(junk)


def test_integrity_check_finds_planted_problems(tmp_path, embedder):
    """SQLite's checks (PostgreSQL's: test_postgres_store)."""
    store = SQLiteGraphStore(tmp_path / "graph.sqlite", embedder=embedder)
    entry = store.upsert_entry("g", EntryCandidate(abstraction="a", value="b", anchors=["x + y"]), always_create).entry
    assert store.check_integrity().ok
    conn = store._db.conn
    conn.execute("INSERT INTO anchors(graph_id, id, text, norm_text, vector) VALUES ('g', 'a99', 'z', 'z', x'00')")
    conn.execute("PRAGMA foreign_keys=OFF")
    conn.execute("INSERT INTO entry_anchors VALUES (12345, 1)")
    report = store.check_integrity()
    text = " | ".join(report.problems)
    assert not report.ok
    assert "anchors without entries: g:a99" in text
    assert "links to a missing entry" in text
    assert "anchors whose vector is not 384-d" in text
    assert entry.id
    store.close()


def test_failed_transaction_rolls_back_everything(store, backend):
    store.upsert_entry("g", EntryCandidate(abstraction="a", value="b", anchors=["x"]), always_create)
    before = store.stats("g")
    duplicate = sqlite3.IntegrityError if backend == "sqlite" else pytest.importorskip("psycopg").errors.UniqueViolation
    with pytest.raises(duplicate), store._views.transaction() as conn:
        conn.execute("DELETE FROM entries WHERE graph_id='g'")
        conn.execute("INSERT INTO graphs(graph_id) VALUES ('g')")  # duplicate key -> error
    assert store.stats("g") == before
    assert len(store.search("g", "b")) == 1


def test_connections_creating_one_new_store_at_once_all_open_it(tmp_path):
    """Processes that open a new store at once (eval beside training) race to create its tables; none fails."""
    import threading

    from memora_rl.memory.schema import connect

    for attempt in range(10):
        path = tmp_path / f"race-{attempt}.sqlite"
        barrier, errors, connections = threading.Barrier(6), [], []

        def open_it(path=path, barrier=barrier, errors=errors, connections=connections) -> None:
            barrier.wait()
            try:
                connections.append(connect(path))
            except GraphError as error:
                errors.append(error)

        threads = [threading.Thread(target=open_it) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == [] and len(connections) == 6
        versions = {
            conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() for conn in connections
        }
        assert versions == {(str(SCHEMA_VERSION),)}
        for conn in connections:
            conn.close()
