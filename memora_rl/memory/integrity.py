"""Consistency checks of a store file: SQLite's own checks plus the graph's invariants.

The invariants (`GRAPH_INVARIANTS`) are portable SQL; the PostgreSQL store runs them too (`memory.pg_schema`).
"""

from __future__ import annotations

import sqlite3

GRAPH_INVARIANTS: list[tuple[str, str]] = [
    (
        "anchors without entries",
        "SELECT a.graph_id || ':' || a.id FROM anchors a "
        "WHERE NOT EXISTS (SELECT 1 FROM entry_anchors l WHERE l.anchor_seq = a.seq) LIMIT 20",
    ),
    (
        "links to a missing entry",
        "SELECT l.entry_seq FROM entry_anchors l LEFT JOIN entries e ON e.seq = l.entry_seq "
        "WHERE e.seq IS NULL LIMIT 20",
    ),
    (
        "links to a missing anchor",
        "SELECT l.anchor_seq FROM entry_anchors l LEFT JOIN anchors a ON a.seq = l.anchor_seq "
        "WHERE a.seq IS NULL LIMIT 20",
    ),
    (
        "links across graphs",
        "SELECT e.id || '->' || a.id FROM entry_anchors l JOIN entries e ON e.seq = l.entry_seq "
        "JOIN anchors a ON a.seq = l.anchor_seq WHERE e.graph_id != a.graph_id LIMIT 20",
    ),
    (
        "history of a missing entry",
        "SELECT h.entry_seq FROM entry_history h LEFT JOIN entries e ON e.seq = h.entry_seq "
        "WHERE e.seq IS NULL LIMIT 20",
    ),
    (
        "entries of an unknown graph",
        "SELECT e.graph_id || ':' || e.id FROM entries e LEFT JOIN graphs g ON g.graph_id = e.graph_id "
        "WHERE g.graph_id IS NULL LIMIT 20",
    ),
]


def _vector_checks(dim: int) -> list[tuple[str, str]]:
    size = 4 * dim
    return [
        (
            f"entries whose vectors are not {dim}-d float32",
            "SELECT graph_id || ':' || id FROM entries WHERE length(abstraction_vector) != "
            f"{size} OR length(value_vector) != {size} LIMIT 20",
        ),
        (
            f"anchors whose vector is not {dim}-d float32",
            f"SELECT graph_id || ':' || id FROM anchors WHERE length(vector) != {size} LIMIT 20",
        ),
        (
            f"episodes whose vector is not {dim}-d float32",
            f"SELECT graph_id || ':' || id FROM episodes WHERE length(vector) != {size} LIMIT 20",
        ),
    ]


def run_integrity_checks(conn: sqlite3.Connection, dim: int | None) -> list[str]:
    """Problems found (empty when consistent): integrity_check, foreign keys, FTS index, invariants."""
    problems: list[str] = []
    result = [row[0] for row in conn.execute("PRAGMA integrity_check")]
    if result != ["ok"]:
        problems.append(f"PRAGMA integrity_check: {'; '.join(result[:10])}")
    foreign = conn.execute("PRAGMA foreign_key_check").fetchall()
    if foreign:
        problems.append(f"foreign-key violations: {foreign[:10]}")
    try:
        conn.execute("INSERT INTO entries_fts(entries_fts, rank) VALUES ('integrity-check', 1)")
    except sqlite3.DatabaseError as error:
        problems.append(f"full-text index out of sync with entries: {error}")
    checks = GRAPH_INVARIANTS + (_vector_checks(dim) if dim is not None else [])
    for name, sql in checks:
        found = [str(row[0]) for row in conn.execute(sql)]
        if found:
            problems.append(f"{name}: {', '.join(found)}")
    return problems
