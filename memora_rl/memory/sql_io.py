"""Row-level reads and writes of the graph store; callers own the transaction around them.

The SQL is the subset SQLite and PostgreSQL both read (see `memory.database`): `?` placeholders,
`ON CONFLICT`, `RETURNING`, and vectors as `VectorBytes` (float32 bytes; a BLOB in SQLite, a
pgvector `vector` in PostgreSQL).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

import numpy as np

from memora_rl.errors import GraphError
from memora_rl.memory.database import SqlConnection
from memora_rl.memory.records import CueAnchor, Episode, MemoryEntry, ValueVersion

_CHUNK = 900  # stays under SQLite's default limit of bound parameters
_SPACES = re.compile(r"\s+")
_PLUS = re.compile(r"\s*\+\s*")


@lru_cache(maxsize=1 << 16)
def normalise_anchor(text: str) -> str:
    """The key under which anchor texts are existence-checked: case-folded, spaces collapsed.

    >>> normalise_anchor("  Alice+  JOB ")
    'alice + job'
    """
    return _PLUS.sub(" + ", _SPACES.sub(" ", text.strip().casefold())).strip(" .,;:")


def iso(value: datetime | None) -> str | None:
    """ISO text of a datetime, or None."""
    return value.isoformat() if value is not None else None


class VectorBytes(bytes):
    """The float32 bytes of one vector as a statement parameter.

    SQLite stores them as a BLOB; the PostgreSQL connection sends them as a pgvector `vector`
    (its own type, so no other bytes parameter is ever taken for a vector).
    """


def blob(vector: np.ndarray) -> VectorBytes:
    """float32 bytes of a vector."""
    return VectorBytes(np.asarray(vector, dtype=np.float32).tobytes())


def chunks(items: Sequence, size: int = _CHUNK) -> Iterator[Sequence]:
    """Consecutive slices of at most `size` items."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def ensure_graph(conn: SqlConnection, graph_id: str) -> None:
    """Create the graph row if missing."""
    conn.execute(
        "INSERT INTO graphs(graph_id, created_at) VALUES (?, ?) ON CONFLICT DO NOTHING",
        (graph_id, datetime.now().isoformat()),
    )


def allocate_ids(conn: SqlConnection, graph_id: str, column: str, prefix: str, count: int) -> list[str]:
    """Reserve `count` fresh ids (`e12`, `a40`) from the graph's counter."""
    (end,) = conn.execute(
        f"UPDATE graphs SET {column} = {column} + ? WHERE graph_id = ? RETURNING {column}", (count, graph_id)
    ).fetchone()
    return [f"{prefix}{n}" for n in range(end - count, end)]


def bump_counter(conn: SqlConnection, graph_id: str, column: str, prefix: str, ids: Sequence[str]) -> None:
    """Move a counter past imported ids of the form `<prefix><n>` so new ids never collide."""
    numbers = [int(i[len(prefix) :]) for i in ids if i.startswith(prefix) and i[len(prefix) :].isdigit()]
    if numbers:
        after = max(numbers) + 1
        conn.execute(
            f"UPDATE graphs SET {column} = CASE WHEN {column} < ? THEN ? ELSE {column} END WHERE graph_id = ?",
            (after, after, graph_id),
        )


def next_seq(conn: SqlConnection, table: str) -> int:
    """The next free integer primary key of `table` (safe inside a write transaction)."""
    return conn.execute(f"SELECT COALESCE(MAX(seq), 0) + 1 FROM {table}").fetchone()[0]


@dataclass
class AnchorRef:
    """An anchor as the writer needs it."""

    seq: int
    id: str
    text: str
    created: bool


def ensure_anchors(
    conn: SqlConnection, graph_id: str, texts: Sequence[str], vectors: Mapping[str, np.ndarray]
) -> dict[str, AnchorRef]:
    """Find or create one anchor per normalised text; `vectors` maps normalised text -> unit vector."""
    wanted = list(dict.fromkeys(normalise_anchor(t) for t in texts if normalise_anchor(t)))
    found: dict[str, AnchorRef] = {}
    for part in chunks(wanted):
        marks = ",".join("?" * len(part))
        for seq, anchor_id, text, norm in conn.execute(
            f"SELECT seq, id, text, norm_text FROM anchors WHERE graph_id = ? AND norm_text IN ({marks})",
            [graph_id, *part],
        ):
            found[norm] = AnchorRef(seq, anchor_id, text, created=False)
    original = {normalise_anchor(t): t.strip() for t in reversed(list(texts))}
    missing = [norm for norm in wanted if norm not in found]
    if missing:
        ids = allocate_ids(conn, graph_id, "next_anchor", "a", len(missing))
        seq = next_seq(conn, "anchors")
        rows = []
        for offset, (norm, anchor_id) in enumerate(zip(missing, ids, strict=True)):
            found[norm] = AnchorRef(seq + offset, anchor_id, original[norm], created=True)
            rows.append((seq + offset, graph_id, anchor_id, original[norm], norm, blob(vectors[norm])))
        conn.executemany("INSERT INTO anchors(seq, graph_id, id, text, norm_text, vector) VALUES (?,?,?,?,?,?)", rows)
    return found


def prune_anchors(conn: SqlConnection, anchor_seqs: Sequence[int]) -> list[str]:
    """Delete those of `anchor_seqs` left without entries; returns the deleted anchor ids."""
    pruned: list[str] = []
    for part in chunks(list(anchor_seqs)):
        marks = ",".join("?" * len(part))
        pruned += [
            row[0]
            for row in conn.execute(
                f"DELETE FROM anchors WHERE seq IN ({marks}) AND NOT EXISTS "
                "(SELECT 1 FROM entry_anchors l WHERE l.anchor_seq = anchors.seq) RETURNING id",
                list(part),
            )
        ]
    return pruned


def insert_entries(
    conn: SqlConnection,
    entries: Sequence[MemoryEntry],
    abstraction_vectors: np.ndarray,
    value_vectors: np.ndarray,
) -> list[int]:
    """Insert entries with their history and episode links; returns their seqs."""
    first = next_seq(conn, "entries")
    seqs = list(range(first, first + len(entries)))
    conn.executemany(
        "INSERT INTO entries(seq, graph_id, id, abstraction, value, kind, speaker, source_turn_ids, created_at, "
        "updated_at, abstraction_vector, value_vector) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        [
            (seq, e.graph_id, e.id, e.abstraction, e.value, e.kind, e.speaker, json.dumps(e.source_turn_ids),
             iso(e.created_at), iso(e.updated_at), blob(a), blob(v))
            for seq, e, a, v in zip(seqs, entries, abstraction_vectors, value_vectors, strict=True)
        ],
    )  # fmt: skip
    conn.executemany(
        "INSERT INTO entry_episodes(entry_seq, position, episode_id) VALUES (?,?,?)",
        [(seq, i, ep) for seq, e in zip(seqs, entries, strict=True) for i, ep in enumerate(e.episode_ids)],
    )
    for seq, entry in zip(seqs, entries, strict=True):
        if entry.history:
            append_history(conn, seq, entry.history, start=0)
    return seqs


def append_history(conn: SqlConnection, entry_seq: int, versions: Sequence[ValueVersion], start: int) -> None:
    """Append value versions to an entry's history at positions start, start+1, ..."""
    conn.executemany(
        "INSERT INTO entry_history(entry_seq, position, value, abstraction, source_turn_ids, recorded_at) "
        "VALUES (?,?,?,?,?,?)",
        [
            (entry_seq, start + i, v.value, v.abstraction, json.dumps(v.source_turn_ids), iso(v.recorded_at))
            for i, v in enumerate(versions)
        ],
    )


def link_entry_anchors(conn: SqlConnection, pairs: Sequence[tuple[int, int]]) -> None:
    """Insert (entry_seq, anchor_seq) links, ignoring ones that exist."""
    conn.executemany("INSERT INTO entry_anchors(entry_seq, anchor_seq) VALUES (?,?) ON CONFLICT DO NOTHING", pairs)


def entry_seqs(conn: SqlConnection, graph_id: str, entry_ids: Sequence[str]) -> dict[str, int]:
    """Map entry ids of a graph to seqs (missing ids are absent)."""
    found: dict[str, int] = {}
    for part in chunks(list(entry_ids)):
        marks = ",".join("?" * len(part))
        found.update(
            conn.execute(f"SELECT id, seq FROM entries WHERE graph_id = ? AND id IN ({marks})", [graph_id, *part])
        )
    return found


def abstractions_by_id(conn: SqlConnection, graph_id: str, entry_ids: Sequence[str]) -> dict[str, str]:
    """Abstractions of a graph's entries by id (missing ids are absent)."""
    found: dict[str, str] = {}
    for part in chunks(list(entry_ids)):
        marks = ",".join("?" * len(part))
        found.update(
            conn.execute(
                f"SELECT id, abstraction FROM entries WHERE graph_id = ? AND id IN ({marks})", [graph_id, *part]
            )
        )
    return found


def write_receipt(conn: SqlConnection, graph_id: str, receipt: str) -> None:
    """Record that an upsert with this receipt was written into the graph (in the caller's transaction)."""
    conn.execute(
        "INSERT INTO upsert_receipts(graph_id, receipt) VALUES (?, ?) ON CONFLICT DO NOTHING", (graph_id, receipt)
    )


def read_receipts(conn: SqlConnection, graph_id: str) -> set[str]:
    """Every upsert receipt recorded in a graph."""
    return {row[0] for row in conn.execute("SELECT receipt FROM upsert_receipts WHERE graph_id = ?", (graph_id,))}


def read_entries(conn: SqlConnection, graph_id: str, seqs: Sequence[int]) -> dict[int, MemoryEntry]:
    """Full entries (history, episodes, anchor ids) by seq."""
    result: dict[int, MemoryEntry] = {}
    for part in chunks(list(seqs)):
        marks = ",".join("?" * len(part))
        extra: dict[int, dict[str, list]] = {seq: {"history": [], "episode_ids": [], "anchor_ids": []} for seq in part}
        for seq, value, abstraction, turns, recorded in conn.execute(
            f"SELECT entry_seq, value, abstraction, source_turn_ids, recorded_at FROM entry_history "
            f"WHERE entry_seq IN ({marks}) ORDER BY entry_seq, position",
            list(part),
        ):
            version = ValueVersion(value=value, abstraction=abstraction, source_turn_ids=json.loads(turns),
                                   recorded_at=recorded)  # fmt: skip
            extra[seq]["history"].append(version)
        for seq, episode_id in conn.execute(
            f"SELECT entry_seq, episode_id FROM entry_episodes WHERE entry_seq IN ({marks}) "
            "ORDER BY entry_seq, position",
            list(part),
        ):
            extra[seq]["episode_ids"].append(episode_id)
        for seq, anchor_id in conn.execute(
            f"SELECT l.entry_seq, a.id FROM entry_anchors l JOIN anchors a ON a.seq = l.anchor_seq "
            f"WHERE l.entry_seq IN ({marks}) ORDER BY l.entry_seq, a.seq",
            list(part),
        ):
            extra[seq]["anchor_ids"].append(anchor_id)
        # The graph is checked here, not in SQL: `graph_id = ?` took SQLite off the seq primary key
        # onto the (graph_id, id) index, a scan of the whole graph.
        for row in conn.execute(
            "SELECT seq, id, abstraction, value, kind, speaker, source_turn_ids, created_at, updated_at, graph_id "
            f"FROM entries WHERE seq IN ({marks})",
            list(part),
        ):
            seq = row[0]
            if row[9] != graph_id:
                continue
            result[seq] = MemoryEntry(
                id=row[1], graph_id=graph_id, abstraction=row[2], value=row[3], kind=row[4], speaker=row[5],
                source_turn_ids=json.loads(row[6]), created_at=row[7], updated_at=row[8], **extra[seq],
            )  # fmt: skip
    return result


def entries_by_id(conn: SqlConnection, graph_id: str, entry_ids: Sequence[str], store: object) -> list[MemoryEntry]:
    """Entries by id, in the order asked; unknown ids raise `GraphError` naming the `store`."""
    seqs = entry_seqs(conn, graph_id, entry_ids)
    missing = [entry_id for entry_id in entry_ids if entry_id not in seqs]
    if missing:
        raise GraphError(f"Entries {missing[:10]} are not in graph {graph_id!r} of {store}.")
    found = read_entries(conn, graph_id, list(seqs.values()))
    return [found[seqs[entry_id]] for entry_id in entry_ids]


def _episode(graph_id: str, row: Sequence) -> Episode:
    """An episode from its (id, text, title, source_turn_ids, start_time, end_time) row."""
    return Episode(
        id=row[0],
        graph_id=graph_id,
        text=row[1],
        title=row[2],
        source_turn_ids=json.loads(row[3]),
        start_time=row[4],
        end_time=row[5],
    )


_EPISODE_COLUMNS = "id, text, title, source_turn_ids, start_time, end_time"


def read_episodes(conn: SqlConnection, graph_id: str, episode_ids: Sequence[str] | None = None) -> list[Episode]:
    """All episodes of a graph in insertion order, or those of `episode_ids` in the order asked (unknown: skipped)."""
    if episode_ids is None:
        return [
            _episode(graph_id, row)
            for row in conn.execute(
                f"SELECT {_EPISODE_COLUMNS} FROM episodes WHERE graph_id = ? ORDER BY seq", (graph_id,)
            )
        ]
    found: dict[str, Episode] = {}
    for part in chunks(list(dict.fromkeys(episode_ids))):
        marks = ",".join("?" * len(part))
        for row in conn.execute(
            f"SELECT {_EPISODE_COLUMNS} FROM episodes WHERE graph_id = ? AND id IN ({marks})", [graph_id, *part]
        ):
            found[row[0]] = _episode(graph_id, row)
    return [found[episode_id] for episode_id in episode_ids if episode_id in found]


def read_anchors(conn: SqlConnection, graph_id: str) -> list[CueAnchor]:
    """All anchors of a graph with their entry ids, in insertion order."""
    members: dict[int, list[str]] = {}
    for anchor_seq, entry_id in conn.execute(
        "SELECT l.anchor_seq, e.id FROM entry_anchors l JOIN entries e ON e.seq = l.entry_seq "
        "WHERE e.graph_id = ? ORDER BY l.anchor_seq, e.seq",
        (graph_id,),
    ):
        members.setdefault(anchor_seq, []).append(entry_id)
    return [
        CueAnchor(id=anchor_id, graph_id=graph_id, text=text, entry_ids=members.get(seq, []))
        for seq, anchor_id, text in conn.execute(
            "SELECT seq, id, text FROM anchors WHERE graph_id = ? ORDER BY seq", (graph_id,)
        )
    ]


def graph_counts(conn: SqlConnection, graph_id: str) -> dict[str, int]:
    """Counts of entries, anchors, episodes, links and history versions of a graph."""
    one = conn.execute
    return {
        "entries": one("SELECT count(*) FROM entries WHERE graph_id = ?", (graph_id,)).fetchone()[0],
        "anchors": one("SELECT count(*) FROM anchors WHERE graph_id = ?", (graph_id,)).fetchone()[0],
        "episodes": one("SELECT count(*) FROM episodes WHERE graph_id = ?", (graph_id,)).fetchone()[0],
        "links": one(
            "SELECT count(*) FROM entry_anchors l JOIN anchors a ON a.seq = l.anchor_seq WHERE a.graph_id = ?",
            (graph_id,),
        ).fetchone()[0],
        "history": one(
            "SELECT count(*) FROM entry_history h JOIN entries e ON e.seq = h.entry_seq WHERE e.graph_id = ?",
            (graph_id,),
        ).fetchone()[0],
    }
