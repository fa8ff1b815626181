"""SQLite schema of the graph store: tables, FTS5 index, pragmas and the schema-version check."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from memora_rl.errors import GraphError
from memora_rl.sqlite_wal import enable_wal

SCHEMA_VERSION = 1
"""Bump on any incompatible change to the tables below."""

_TABLES = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS graphs (
    graph_id TEXT PRIMARY KEY,
    next_entry INTEGER NOT NULL DEFAULT 0,
    next_anchor INTEGER NOT NULL DEFAULT 0,
    created_at TEXT
);
CREATE TABLE IF NOT EXISTS episodes (
    seq INTEGER PRIMARY KEY,
    graph_id TEXT NOT NULL REFERENCES graphs(graph_id) ON DELETE CASCADE,
    id TEXT NOT NULL,
    text TEXT NOT NULL,
    title TEXT NOT NULL,
    source_turn_ids TEXT NOT NULL,
    start_time TEXT,
    end_time TEXT,
    vector BLOB NOT NULL,
    UNIQUE (graph_id, id)
);
CREATE TABLE IF NOT EXISTS entries (
    seq INTEGER PRIMARY KEY,
    graph_id TEXT NOT NULL REFERENCES graphs(graph_id) ON DELETE CASCADE,
    id TEXT NOT NULL,
    abstraction TEXT NOT NULL,
    value TEXT NOT NULL,
    kind TEXT NOT NULL,
    speaker TEXT,
    source_turn_ids TEXT NOT NULL,
    created_at TEXT,
    updated_at TEXT,
    abstraction_vector BLOB NOT NULL,
    value_vector BLOB NOT NULL,
    UNIQUE (graph_id, id)
);
CREATE TABLE IF NOT EXISTS entry_history (
    entry_seq INTEGER NOT NULL REFERENCES entries(seq) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    value TEXT NOT NULL,
    abstraction TEXT NOT NULL,
    source_turn_ids TEXT NOT NULL,
    recorded_at TEXT,
    PRIMARY KEY (entry_seq, position)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS anchors (
    seq INTEGER PRIMARY KEY,
    graph_id TEXT NOT NULL REFERENCES graphs(graph_id) ON DELETE CASCADE,
    id TEXT NOT NULL,
    text TEXT NOT NULL,
    norm_text TEXT NOT NULL,
    vector BLOB NOT NULL,
    UNIQUE (graph_id, id),
    UNIQUE (graph_id, norm_text)
);
CREATE TABLE IF NOT EXISTS entry_anchors (
    entry_seq INTEGER NOT NULL REFERENCES entries(seq) ON DELETE CASCADE,
    anchor_seq INTEGER NOT NULL REFERENCES anchors(seq) ON DELETE CASCADE,
    PRIMARY KEY (entry_seq, anchor_seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS entry_anchors_by_anchor ON entry_anchors(anchor_seq);
CREATE TABLE IF NOT EXISTS entry_episodes (
    entry_seq INTEGER NOT NULL REFERENCES entries(seq) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    episode_id TEXT NOT NULL,
    PRIMARY KEY (entry_seq, position)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS upsert_receipts (
    graph_id TEXT NOT NULL REFERENCES graphs(graph_id) ON DELETE CASCADE,
    receipt TEXT NOT NULL,
    PRIMARY KEY (graph_id, receipt)
) WITHOUT ROWID;
CREATE VIRTUAL TABLE IF NOT EXISTS entries_fts USING fts5(
    abstraction, value, content='entries', content_rowid='seq'
);
CREATE TRIGGER IF NOT EXISTS entries_fts_insert AFTER INSERT ON entries BEGIN
    INSERT INTO entries_fts(rowid, abstraction, value) VALUES (new.seq, new.abstraction, new.value);
END;
CREATE TRIGGER IF NOT EXISTS entries_fts_delete AFTER DELETE ON entries BEGIN
    INSERT INTO entries_fts(entries_fts, rowid, abstraction, value)
    VALUES ('delete', old.seq, old.abstraction, old.value);
END;
CREATE TRIGGER IF NOT EXISTS entries_fts_update AFTER UPDATE OF abstraction, value ON entries BEGIN
    INSERT INTO entries_fts(entries_fts, rowid, abstraction, value)
    VALUES ('delete', old.seq, old.abstraction, old.value);
    INSERT INTO entries_fts(rowid, abstraction, value) VALUES (new.seq, new.abstraction, new.value);
END;
"""


def connect(path: str | Path) -> sqlite3.Connection:
    """Open (creating if needed) a store file with WAL, foreign keys on, and the schema checked.

    Raises:
        GraphError: when the file is not a SQLite database or has another schema version.
    """
    path = Path(path)
    if path.exists() and path.is_dir():
        raise GraphError(f"Store path {path} is a folder; pass a file path such as {path / 'graph.sqlite'}.")
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
    try:
        enable_wal(conn)
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        _check_or_create(conn, path)
    except sqlite3.DatabaseError as error:
        conn.close()
        raise GraphError(
            f"{path} is not a readable memory-graph store ({error}). Pass a store file or a new path."
        ) from error
    except GraphError:
        conn.close()
        raise
    return conn


def _has_meta(conn: sqlite3.Connection) -> bool:
    """True when the file holds memora-rl's `meta` table."""
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'").fetchone() is not None


def _check_or_create(conn: sqlite3.Connection, path: Path) -> None:
    """Create the tables in a new file, or check the recorded schema version of an existing one.

    Creation looks again under the write lock: processes opening one new store at once (eval
    beside training) create it once, and the others find it made.
    """
    if not _has_meta(conn):
        conn.execute("BEGIN IMMEDIATE")
        try:
            if not _has_meta(conn):
                if conn.execute("SELECT count(*) FROM sqlite_master WHERE type='table'").fetchone()[0]:
                    raise GraphError(
                        f"{path} is a SQLite file of another application. Pass a new path for the memory store."
                    )
                for statement in _split_statements(_TABLES):
                    conn.execute(statement)
                conn.execute("INSERT INTO meta(key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    found = row[0] if row else "none"
    if found != str(SCHEMA_VERSION):
        raise GraphError(
            f"Store {path} has schema version {found}, this memora-rl reads version {SCHEMA_VERSION}. "
            "Export it with the memora-rl version that wrote it (`memora-rl graph export`) and import the "
            "JSONL into a new store, or rebuild it with `memora-rl graph build`."
        )


def _split_statements(script: str) -> list[str]:
    """Split the DDL script into statements, keeping trigger bodies whole."""
    statements: list[str] = []
    buffer = ""
    for line in script.strip().splitlines():
        buffer += line + "\n"
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    return statements
