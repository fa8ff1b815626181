"""Every stored row of one graph in a backend-neutral form: what `memora-rl graph copy` moves and compares.

Internal keys (`seq` numbers) differ between stores, so rows name each other by id: a history
row by its entry's id, a link by its entry's and anchor's ids. Rows keep their insertion order
(the order `entries()`, `anchors()` and `episodes()` return), and vectors are the stored float32
bytes, so two stores holding equal `GraphRows` answer every read and search alike. The SQL is
the portable subset of `memory.sql_io`, run on either backend's connection.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memora_rl.memory import sql_io
from memora_rl.memory.database import SqlConnection

Row = tuple
"""One table row as read (ids, texts, counters, vectors as bytes)."""


@dataclass
class GraphRows:
    """All rows of one graph, seqs replaced by ids (see the module docstring).

    Attributes:
        graph_id: the graph.
        dim: the store's vector dimension (None when the store holds no vectors).
        graph: (next_entry, next_anchor, created_at) of the `graphs` row: new ids continue after copied ones.
        episodes: (id, text, title, source_turn_ids, start_time, end_time, vector), in insertion order.
        entries: (id, abstraction, value, kind, speaker, source_turn_ids, created_at, updated_at,
            abstraction_vector, value_vector), in insertion order.
        history: (entry id, position, value, abstraction, source_turn_ids, recorded_at).
        anchors: (id, text, norm_text, vector), in insertion order.
        links: (entry id, anchor id) of each entry-anchor link.
        entry_episodes: (entry id, position, episode id).
        receipts: the upsert receipts, sorted.
    """

    graph_id: str
    dim: int | None
    graph: Row = ()
    episodes: list[Row] = field(default_factory=list)
    entries: list[Row] = field(default_factory=list)
    history: list[Row] = field(default_factory=list)
    anchors: list[Row] = field(default_factory=list)
    links: list[Row] = field(default_factory=list)
    entry_episodes: list[Row] = field(default_factory=list)
    receipts: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """Rows per table, for a copy's report."""
        return {
            "entries": len(self.entries),
            "anchors": len(self.anchors),
            "episodes": len(self.episodes),
            "links": len(self.links),
            "history": len(self.history),
            "receipts": len(self.receipts),
        }


_ENTRY_COLUMNS = (
    "id, abstraction, value, kind, speaker, source_turn_ids, created_at, updated_at, abstraction_vector, value_vector"
)
_EPISODE_COLUMNS = "id, text, title, source_turn_ids, start_time, end_time, vector"


def _rows(conn: SqlConnection, sql: str, graph_id: str) -> list[Row]:
    """The rows of one query over a graph, as plain tuples with vectors as plain bytes."""
    return [
        tuple(bytes(v) if isinstance(v, bytes | memoryview) else v for v in row)
        for row in conn.execute(sql, (graph_id,))
    ]


def read_graph_rows(conn: SqlConnection, graph_id: str, dim: int | None) -> GraphRows:
    """Read every row of a graph (run it in one read snapshot so the tables agree)."""
    (graph,) = _rows(conn, "SELECT next_entry, next_anchor, created_at FROM graphs WHERE graph_id = ?", graph_id)
    return GraphRows(
        graph_id=graph_id,
        dim=dim,
        graph=graph,
        episodes=_rows(conn, f"SELECT {_EPISODE_COLUMNS} FROM episodes WHERE graph_id = ? ORDER BY seq", graph_id),
        entries=_rows(conn, f"SELECT {_ENTRY_COLUMNS} FROM entries WHERE graph_id = ? ORDER BY seq", graph_id),
        history=_rows(
            conn,
            "SELECT e.id, h.position, h.value, h.abstraction, h.source_turn_ids, h.recorded_at FROM entry_history h "
            "JOIN entries e ON e.seq = h.entry_seq WHERE e.graph_id = ? ORDER BY e.seq, h.position",
            graph_id,
        ),
        anchors=_rows(
            conn, "SELECT id, text, norm_text, vector FROM anchors WHERE graph_id = ? ORDER BY seq", graph_id
        ),
        links=_rows(
            conn,
            "SELECT e.id, a.id FROM entry_anchors l JOIN entries e ON e.seq = l.entry_seq "
            "JOIN anchors a ON a.seq = l.anchor_seq WHERE e.graph_id = ? ORDER BY e.seq, a.seq",
            graph_id,
        ),
        entry_episodes=_rows(
            conn,
            "SELECT e.id, l.position, l.episode_id FROM entry_episodes l JOIN entries e ON e.seq = l.entry_seq "
            "WHERE e.graph_id = ? ORDER BY e.seq, l.position",
            graph_id,
        ),
        receipts=sorted(sql_io.read_receipts(conn, graph_id)),
    )


def insert_graph_rows(conn: SqlConnection, rows: GraphRows) -> list[tuple[int, str, str]]:
    """Insert a graph's rows into a store that lacks the graph (inside the caller's transaction).

    Returns:
        (seq, abstraction, value) of each inserted entry, for the backend's keyword index.
    """
    graph_id = rows.graph_id
    next_entry, next_anchor, created_at = rows.graph
    conn.execute(
        "INSERT INTO graphs(graph_id, next_entry, next_anchor, created_at) VALUES (?,?,?,?)",
        (graph_id, next_entry, next_anchor, created_at),
    )
    conn.executemany(
        f"INSERT INTO episodes(graph_id, {_EPISODE_COLUMNS}) VALUES (?,?,?,?,?,?,?,?)",
        [(graph_id, *row[:-1], sql_io.VectorBytes(row[-1])) for row in rows.episodes],
    )
    first = sql_io.next_seq(conn, "entries")
    entry_seq = {row[0]: first + offset for offset, row in enumerate(rows.entries)}
    conn.executemany(
        f"INSERT INTO entries(seq, graph_id, {_ENTRY_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        [
            (entry_seq[row[0]], graph_id, *row[:-2], sql_io.VectorBytes(row[-2]), sql_io.VectorBytes(row[-1]))
            for row in rows.entries
        ],
    )
    conn.executemany(
        "INSERT INTO entry_history(entry_seq, position, value, abstraction, source_turn_ids, recorded_at) "
        "VALUES (?,?,?,?,?,?)",
        [(entry_seq[row[0]], *row[1:]) for row in rows.history],
    )
    first = sql_io.next_seq(conn, "anchors")
    anchor_seq = {row[0]: first + offset for offset, row in enumerate(rows.anchors)}
    conn.executemany(
        "INSERT INTO anchors(seq, graph_id, id, text, norm_text, vector) VALUES (?,?,?,?,?,?)",
        [(anchor_seq[row[0]], graph_id, *row[:-1], sql_io.VectorBytes(row[-1])) for row in rows.anchors],
    )
    sql_io.link_entry_anchors(conn, [(entry_seq[entry], anchor_seq[anchor]) for entry, anchor in rows.links])
    conn.executemany(
        "INSERT INTO entry_episodes(entry_seq, position, episode_id) VALUES (?,?,?)",
        [(entry_seq[row[0]], *row[1:]) for row in rows.entry_episodes],
    )
    for receipt in rows.receipts:
        sql_io.write_receipt(conn, graph_id, receipt)
    return [(entry_seq[row[0]], row[1], row[2]) for row in rows.entries]
