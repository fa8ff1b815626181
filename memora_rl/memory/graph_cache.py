"""The in-memory view of one graph: vector tables, entry/anchor/episode adjacency and filter columns.

Loaded lazily from the database (SQLite or PostgreSQL) on first use and updated by the store after each committed
mutation, so search and frontier never touch the database.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np

from memora_rl.memory import ann_files
from memora_rl.memory.config import StoreConfig
from memora_rl.memory.database import SqlConnection
from memora_rl.memory.vectors import VectorTable
from memora_rl.turn_ids import TurnKey, turn_key


def timestamp(value: datetime | str | None) -> float:
    """Seconds since the epoch of a datetime or ISO string (naive read as UTC); NaN for None."""
    if value is None:
        return float("nan")
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if value.tzinfo is None:
        from datetime import UTC

        value = value.replace(tzinfo=UTC)
    return value.timestamp()


_EPISODE_CAPACITY = 64
"""Initial rows of a view's episode table (it doubles as needed): a graph holds far fewer episodes than entries."""


@dataclass
class EntryRow:
    """What the cache keeps of an entry besides its vectors."""

    entry_id: str
    seq: int
    speaker: str | None
    time: float
    episode_ids: list[str]
    turn_ids: list[str] = field(default_factory=list)
    """Source turn ids (provenance): where the entry sits in its conversation, for turn links."""


@dataclass
class GraphCache:
    """Vectors, adjacency and filter columns of one graph, addressed by row number."""

    dim: int
    config: StoreConfig
    entry_ids: list[str] = field(default_factory=list)
    entry_row: dict[str, int] = field(default_factory=dict)
    seq_row: dict[int, int] = field(default_factory=dict)
    speakers: list[str | None] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    episode_rows: dict[str, set[int]] = field(default_factory=dict)
    """Entry rows of each episode id the entries name (stored as an episode or not)."""
    row_episodes: list[list[str]] = field(default_factory=list)
    """Episode ids of each entry row, in the entry's order (empty for a removed entry)."""
    row_turns: list[list[TurnKey]] = field(default_factory=list)
    """(session, turn) of each entry row's source turns (empty for a removed entry)."""
    turn_rows: dict[TurnKey, set[int]] = field(default_factory=dict)
    """Entry rows holding each source turn."""
    episode_ids: list[str] = field(default_factory=list)
    """Ids of the stored episodes, by row of the `episodes` vector table."""
    episode_labels: list[str] = field(default_factory=list)
    """Each stored episode's cue (its title, or the start of its text when it has none), by row."""
    episode_row: dict[str, int] = field(default_factory=dict)
    anchor_ids: list[str] = field(default_factory=list)
    anchor_texts: list[str] = field(default_factory=list)
    anchor_row: dict[str, int] = field(default_factory=dict)
    entry_anchors: list[set[int]] = field(default_factory=list)
    anchor_entries: list[set[int]] = field(default_factory=list)
    token_total: int | None = None
    """Tokens of all entries' abstraction and value (BM25's average length); None until asked, and after a change."""
    doc_counts: dict[str, int] = field(default_factory=dict)
    """What BM25's common-word filter read for each index term asked so far: the graph's count of entries
    holding it, or the store's (an upper bound) where that is under the filter's cut, which decides alike.
    A count costs a scan of the term's postings (a round trip on PostgreSQL), so it is kept until a change."""

    def __post_init__(self) -> None:
        self.abstractions = VectorTable(self.dim, self.config)
        self.values = VectorTable(self.dim, self.config)
        self.anchors = VectorTable(self.dim, self.config)
        self.episodes = VectorTable(self.dim, self.config, capacity=_EPISODE_CAPACITY)
        """Stored episodes' cue + text vectors (not in `tables`: their HNSW index, past `ann_threshold`
        episodes, is rebuilt per process rather than saved)."""

    def _text_changed(self) -> None:
        """Forget the keyword statistics kept for BM25: an entry's text was added, changed or removed."""
        self.token_total = None
        self.doc_counts.clear()

    # --- entries -----------------------------------------------------------------------------
    def add_entries(self, rows: list[EntryRow], abstraction_vectors: np.ndarray, value_vectors: np.ndarray) -> None:
        """Append entries with their (n, dim) vectors."""
        self.abstractions.append(abstraction_vectors)
        self.values.append(value_vectors)
        for item in rows:
            row = len(self.entry_ids)
            self.entry_ids.append(item.entry_id)
            self.entry_row[item.entry_id] = row
            self.seq_row[item.seq] = row
            self.speakers.append(item.speaker)
            self.times.append(item.time)
            self.entry_anchors.append(set())
            self.row_episodes.append(list(dict.fromkeys(item.episode_ids)))
            for episode_id in item.episode_ids:
                self.episode_rows.setdefault(episode_id, set()).add(row)
            self.row_turns.append([])
            self._set_turns(row, item.turn_ids)
        self._times_array: np.ndarray | None = None
        self._text_changed()

    def update_entry(
        self,
        entry_id: str,
        abstraction_vector: np.ndarray,
        value_vector: np.ndarray,
        episode_ids: list[str],
        turn_ids: list[str] | None = None,
    ) -> None:
        """Refresh a merged entry's vectors and episodes (added ones), and its source turns when given (all of them)."""
        row = self.entry_row[entry_id]
        self._text_changed()
        if turn_ids is not None:
            self._set_turns(row, turn_ids)
        self.abstractions.replace(row, abstraction_vector)
        self.values.replace(row, value_vector)
        for episode_id in episode_ids:
            self.episode_rows.setdefault(episode_id, set()).add(row)
            if episode_id not in self.row_episodes[row]:
                self.row_episodes[row].append(episode_id)

    def remove_entry(self, entry_id: str) -> None:
        """Tombstone an entry and unlink it from its anchors (anchor pruning is separate)."""
        row = self.entry_row.pop(entry_id)
        self._text_changed()
        self.abstractions.remove(row)
        self.values.remove(row)
        for anchor in self.entry_anchors[row]:
            self.anchor_entries[anchor].discard(row)
        self.entry_anchors[row] = set()
        for episode_id in self.row_episodes[row]:
            self.episode_rows.get(episode_id, set()).discard(row)
        self.row_episodes[row] = []
        self._set_turns(row, [])

    def _set_turns(self, row: int, turn_ids: list[str]) -> None:
        """Make `turn_ids` the source turns of entry `row` in the turn index (ids of another form are skipped)."""
        for key in self.row_turns[row]:
            self.turn_rows[key].discard(row)
        keys = [key for key in dict.fromkeys(map(turn_key, turn_ids)) if key is not None]
        self.row_turns[row] = keys
        for key in keys:
            self.turn_rows.setdefault(key, set()).add(row)

    # --- anchors -----------------------------------------------------------------------------
    def add_anchor(self, anchor_id: str, text: str, vector: np.ndarray) -> int:
        """Append an anchor; returns its row."""
        row = int(self.anchors.append(vector.reshape(1, -1))[0])
        self.anchor_ids.append(anchor_id)
        self.anchor_texts.append(text)
        self.anchor_row[anchor_id] = row
        self.anchor_entries.append(set())
        return row

    def link(self, entry_id: str, anchor_id: str) -> None:
        """Record an entry-anchor link."""
        entry, anchor = self.entry_row[entry_id], self.anchor_row[anchor_id]
        self.entry_anchors[entry].add(anchor)
        self.anchor_entries[anchor].add(entry)

    def unlink(self, entry_id: str, anchor_id: str) -> None:
        """Forget an entry-anchor link (the anchor stays; pruning is separate)."""
        entry, anchor = self.entry_row[entry_id], self.anchor_row[anchor_id]
        self.entry_anchors[entry].discard(anchor)
        self.anchor_entries[anchor].discard(entry)

    def remove_anchor(self, anchor_id: str) -> None:
        """Tombstone an anchor (it must have no entries left)."""
        row = self.anchor_row.pop(anchor_id)
        self.anchors.remove(row)
        for entry in self.anchor_entries[row]:
            self.entry_anchors[entry].discard(row)
        self.anchor_entries[row] = set()

    # --- episodes ----------------------------------------------------------------------------
    def put_episode(self, episode_id: str, label: str, vector: np.ndarray) -> int:
        """Add a stored episode's vector, or replace it when the id is known; returns its row."""
        row = self.episode_row.get(episode_id)
        if row is not None:
            self.episodes.replace(row, vector)
            self.episode_labels[row] = label
            return row
        row = int(self.episodes.append(vector.reshape(1, -1))[0])
        self.episode_ids.append(episode_id)
        self.episode_labels.append(label)
        self.episode_row[episode_id] = row
        return row

    def episode_label(self, episode_id: str) -> str:
        """The cue of a stored episode, or its id when the entries name an episode never stored."""
        row = self.episode_row.get(episode_id)
        return self.episode_labels[row] if row is not None else episode_id

    # --- saved ANN indexes -------------------------------------------------------------------
    @property
    def tables(self) -> dict[str, VectorTable]:
        """The three vector tables by name."""
        return {"abstractions": self.abstractions, "values": self.values, "anchors": self.anchors}

    def save_ann_in(self, folder: Path, graph_id: str) -> None:
        """Save and reuse this graph's HNSW indexes in `folder` (names: `memory.ann_files`)."""
        for name, table in self.tables.items():
            table.ann_file = ann_files.table_prefix(folder, graph_id, name)

    def save_ann(self) -> None:
        """Write each index built or changed since it was last loaded or saved."""
        for table in self.tables.values():
            table.save_ann()

    # --- filter columns ----------------------------------------------------------------------
    def times_array(self) -> np.ndarray:
        """Entry times as seconds since the epoch, (n_rows,), NaN where unknown."""
        cached = getattr(self, "_times_array", None)
        if cached is None or len(cached) != len(self.times):
            cached = np.asarray(self.times, dtype=np.float64)
            self._times_array = cached
        return cached


def _blobs_to_matrix(blobs: list[bytes], dim: int) -> np.ndarray:
    """Concatenate float32 BLOBs into an (n, dim) matrix."""
    if not blobs:
        return np.zeros((0, dim), dtype=np.float32)
    return np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), dim)


def load_graph_cache(conn: SqlConnection, graph_id: str, dim: int, config: StoreConfig) -> GraphCache:
    """Read one graph's vectors, links and filter columns from the database."""
    cache = GraphCache(dim=dim, config=config)
    rows = conn.execute(
        "SELECT seq, id, speaker, created_at, abstraction_vector, value_vector, source_turn_ids FROM entries "
        "WHERE graph_id = ? ORDER BY seq",
        (graph_id,),
    ).fetchall()
    episodes: dict[int, list[str]] = {}
    for entry_seq, episode_id in conn.execute(
        "SELECT l.entry_seq, l.episode_id FROM entry_episodes l JOIN entries e ON e.seq = l.entry_seq "
        "WHERE e.graph_id = ? ORDER BY l.entry_seq, l.position",
        (graph_id,),
    ):
        episodes.setdefault(entry_seq, []).append(episode_id)
    cache.add_entries(
        [EntryRow(r[1], r[0], r[2], timestamp(r[3]), episodes.get(r[0], []), json.loads(r[6])) for r in rows],
        _blobs_to_matrix([r[4] for r in rows], dim),
        _blobs_to_matrix([r[5] for r in rows], dim),
    )
    anchors = conn.execute(
        "SELECT seq, id, text, vector FROM anchors WHERE graph_id = ? ORDER BY seq", (graph_id,)
    ).fetchall()
    anchor_rows = cache.anchors.append(_blobs_to_matrix([a[3] for a in anchors], dim))
    anchor_seq_row: dict[int, int] = {}
    for (seq, anchor_id, text, _), row in zip(anchors, anchor_rows, strict=True):
        cache.anchor_ids.append(anchor_id)
        cache.anchor_texts.append(text)
        cache.anchor_row[anchor_id] = int(row)
        cache.anchor_entries.append(set())
        anchor_seq_row[seq] = int(row)
    for entry_seq, anchor_seq in conn.execute(
        "SELECT l.entry_seq, l.anchor_seq FROM entry_anchors l JOIN anchors a ON a.seq = l.anchor_seq "
        "WHERE a.graph_id = ?",
        (graph_id,),
    ):
        entry, anchor = cache.seq_row[entry_seq], anchor_seq_row[anchor_seq]
        cache.entry_anchors[entry].add(anchor)
        cache.anchor_entries[anchor].add(entry)
    episodes = conn.execute(
        "SELECT id, title, text, vector FROM episodes WHERE graph_id = ? ORDER BY seq", (graph_id,)
    ).fetchall()
    episode_rows = cache.episodes.append(_blobs_to_matrix([e[3] for e in episodes], dim))
    for (episode_id, title, text, _), row in zip(episodes, episode_rows, strict=True):
        cache.episode_ids.append(episode_id)
        cache.episode_labels.append(episode_label(title, text))
        cache.episode_row[episode_id] = int(row)
    return cache


EPISODE_LABEL_CHARS = 80
"""Characters of an episode's text that stand in for its cue when it has no title."""


def episode_label(title: str, text: str) -> str:
    r"""An episode's cue for labels: its title, else the first `EPISODE_LABEL_CHARS` characters of its text.

    >>> episode_label("", "Alice  talks about\nher new job at Nova")
    'Alice talks about her new job at Nova'
    """
    return " ".join((title.strip() or text.strip()[:EPISODE_LABEL_CHARS]).split())
