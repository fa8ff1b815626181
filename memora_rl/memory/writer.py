"""Mutations of a graph store (SQLite or PostgreSQL): episodes, create-or-update, anchors, delete, bulk loads.

Each store owns one `GraphWriter` and hands it its write calls. Each public method
embeds what it needs first, then writes in one transaction, then patches the graph's view
if it is loaded (the coherence rules are in `memory.views`). What a create-or-update writes
is planned by `UpsertPlanner` (`memory.upsert_plan`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from memora_rl.errors import GraphError
from memora_rl.memory import graph_rows, sql_io
from memora_rl.memory.bm25 import KeywordIndex
from memora_rl.memory.config import StoreConfig
from memora_rl.memory.database import SqlConnection, StoreDatabase
from memora_rl.memory.graph_cache import EntryRow, GraphCache, episode_label, timestamp
from memora_rl.memory.records import CueAnchor, EntryCandidate, Episode, MemoryEntry
from memora_rl.memory.store import Decider, SimilarBy, UpsertResult
from memora_rl.memory.upsert_plan import UpsertPlan, UpsertPlanner, union
from memora_rl.memory.vectors import as_unit_vector
from memora_rl.memory.views import GraphViews


class GraphWriter:
    """The write operations of one store.

    Args:
        db: the store's database (transactions, recorded dimension).
        views: the store's in-memory views, patched after each commit.
        embed: encodes texts to unit rows (n, dim), checking the store's dimension.
        config: store settings (create-or-update gamma and top-k).
        keywords: the backend's keyword index, told of every entry text written (`bm25.KeywordIndex`).
    """

    def __init__(
        self,
        db: StoreDatabase,
        views: GraphViews,
        embed: Callable[[Sequence[str]], np.ndarray],
        config: StoreConfig,
        keywords: KeywordIndex,
    ) -> None:
        self._db = db
        self._views = views
        self._embed = embed
        self.config = config
        self._keywords = keywords
        self._planner = UpsertPlanner(db, views, embed, config)

    def add_episode(self, episode: Episode) -> Episode:
        """Store (or replace, by id) an episode with the embedding of its cue + text (`Episode.embedding_text`).

        A loaded view of the graph gets the episode's vector after the commit (read back, not re-embedded).
        """
        vector = self._embed([episode.embedding_text])[0]
        with self._views.transaction() as conn:
            self._db.record_dim(conn, len(vector))
            sql_io.ensure_graph(conn, episode.graph_id)
            conn.execute(
                "INSERT INTO episodes(graph_id, id, text, title, source_turn_ids, start_time, end_time, vector) "
                "VALUES (?,?,?,?,?,?,?,?) ON CONFLICT(graph_id, id) DO UPDATE SET text=excluded.text, "
                "title=excluded.title, source_turn_ids=excluded.source_turn_ids, start_time=excluded.start_time, "
                "end_time=excluded.end_time, vector=excluded.vector",
                (episode.graph_id, episode.id, episode.text, episode.title, json.dumps(episode.source_turn_ids),
                 sql_io.iso(episode.start_time), sql_io.iso(episode.end_time), sql_io.blob(vector)),
            )  # fmt: skip
        with self._db.lock:
            cache = self._views.loaded(episode.graph_id)
            if cache is not None:
                (blob,) = self._db.conn.execute(
                    "SELECT vector FROM episodes WHERE graph_id = ? AND id = ?", (episode.graph_id, episode.id)
                ).fetchone()
                stored = np.frombuffer(blob, dtype=np.float32)
                cache.put_episode(episode.id, episode_label(episode.title, episode.text), stored)
        return episode

    def _vector_dim(self, vector: np.ndarray) -> int:
        """The store's dimension, or the given vector's when the store has none yet (no embedder load)."""
        recorded = self._db.dim
        return recorded if recorded is not None else int(np.asarray(vector).size)

    def _anchor_vectors(self, texts: Sequence[str], given: Mapping[str, np.ndarray] | None) -> dict[str, np.ndarray]:
        """Unit vectors per normalised anchor text: from `given` (keyed by text) or embedded."""
        vectors: dict[str, np.ndarray] = {}
        for text, vector in (given or {}).items():
            dim = self._vector_dim(vector)
            vectors[sql_io.normalise_anchor(text)] = as_unit_vector(vector, dim, f"Anchor vector of {text!r}")
        missing = {sql_io.normalise_anchor(t): t.strip() for t in texts if sql_io.normalise_anchor(t) not in vectors}
        missing.pop("", None)
        if missing:
            embedded = self._embed(list(missing.values()))
            vectors.update(zip(missing.keys(), embedded, strict=True))
        return vectors

    def upsert_entry(
        self,
        graph_id: str,
        candidate: EntryCandidate,
        decider: Decider,
        *,
        abstraction_vector: np.ndarray | None = None,
        value_vector: np.ndarray | None = None,
        anchor_vectors: Mapping[str, np.ndarray] | None = None,
        similar_by: SimilarBy = "abstraction",
        receipt: str | None = None,
    ) -> UpsertResult:
        """Create-or-update: the top-k existing abstractions (or values) with cosine >= gamma go to `decider`.

        A merge keeps the old value in `history`, may refine the abstraction, and unions source
        turn ids and episode ids. Anchors re-derived by the decider (`MergeDecision.anchors`) replace
        the entry's, and anchors left with no entry are pruned in the same transaction; without them
        the candidate's anchors join the entry's. Otherwise a new entry is created. Pass precomputed
        unit vectors (`anchor_vectors` maps anchor text -> vector) to skip embedding.

        The decider runs outside the write lock (it may be a slow LLM call). When another writer
        (a thread of this store, another store object or process) commits between the read it
        decided on and this write, the similar entries are read and decided on again inside the
        write transaction, so two writers cannot both create the same entry or merge into a stale one.
        A `receipt` is stored in the same transaction: the write and the record of it land together.
        """
        if abstraction_vector is None or value_vector is None:
            abstraction_vector, value_vector = self._embed([candidate.abstraction, candidate.value])
        dim = self._vector_dim(abstraction_vector)
        abstraction_vector = as_unit_vector(abstraction_vector, dim, "The abstraction vector")
        value_vector = as_unit_vector(value_vector, dim, "The value vector")
        seen = self._db.write_token()
        plan = self._planner.plan(graph_id, candidate, decider, abstraction_vector, value_vector, similar_by)
        anchors_by_text = self._anchor_vectors(plan.anchor_texts, anchor_vectors)
        with self._views.transaction() as conn:
            if self._db.write_token() != seen:  # BEGIN IMMEDIATE holds the write lock: this read cannot go stale
                plan = self._planner.plan(graph_id, candidate, decider, abstraction_vector, value_vector, similar_by)
                anchors_by_text = self._anchor_vectors(plan.anchor_texts, anchor_vectors)
            if plan.target is None:
                seq, anchors = self._write_create(conn, graph_id, plan, anchors_by_text)
            else:
                anchors, added, unlinked, pruned = self._write_merge(conn, graph_id, plan, anchors_by_text)
            if receipt is not None:
                sql_io.write_receipt(conn, graph_id, receipt)
        cache = self._views.loaded(graph_id)
        if plan.target is None:
            plan.entry.anchor_ids = [ref.id for ref in sorted(anchors.values(), key=lambda ref: ref.seq)]
            if cache is not None:
                entry = plan.entry
                row = EntryRow(entry.id, seq, entry.speaker, timestamp(entry.created_at), entry.episode_ids,
                               entry.source_turn_ids)  # fmt: skip
                cache.add_entries([row], plan.abstraction_vector[None], plan.value_vector[None])
                self._sync_links(cache, entry.id, anchors, anchors_by_text)
            return UpsertResult(entry=plan.entry, created=True)
        linked = [ref.id for ref in sorted(anchors.values(), key=lambda ref: ref.seq)]
        plan.entry.anchor_ids = linked if plan.replace_anchors else union(plan.target.anchor_ids, linked)
        if cache is not None:
            cache.update_entry(plan.target.id, plan.abstraction_vector, plan.value_vector, added,
                               plan.entry.source_turn_ids)  # fmt: skip
            self._sync_links(cache, plan.target.id, anchors, anchors_by_text)
            for anchor_id in unlinked:
                cache.unlink(plan.target.id, anchor_id)
            for anchor_id in pruned:
                cache.remove_anchor(anchor_id)
        return UpsertResult(entry=plan.entry, created=False)

    def _write_create(
        self,
        conn: SqlConnection,
        graph_id: str,
        plan: UpsertPlan,
        anchor_vectors: dict[str, np.ndarray],
    ) -> tuple[int, dict[str, sql_io.AnchorRef]]:
        """Insert the planned new entry and link its anchors (inside the transaction); returns its seq and anchors."""
        self._db.record_dim(conn, len(plan.abstraction_vector))
        sql_io.ensure_graph(conn, graph_id)
        (plan.entry.id,) = sql_io.allocate_ids(conn, graph_id, "next_entry", "e", 1)
        (seq,) = sql_io.insert_entries(conn, [plan.entry], plan.abstraction_vector[None], plan.value_vector[None])
        self._keywords.index(conn, graph_id, [(seq, plan.entry.abstraction, plan.entry.value)])
        anchors = sql_io.ensure_anchors(conn, graph_id, plan.anchor_texts, anchor_vectors)
        sql_io.link_entry_anchors(conn, [(seq, ref.seq) for ref in anchors.values()])
        return seq, anchors

    def _write_merge(
        self,
        conn: SqlConnection,
        graph_id: str,
        plan: UpsertPlan,
        anchor_vectors: dict[str, np.ndarray],
    ) -> tuple[dict[str, sql_io.AnchorRef], list[str], list[str], list[str]]:
        """Write the planned merge (inside the transaction).

        Returns:
            The linked anchors, the added episode ids, the ids of anchors unlinked from the entry
            (replaced anchors) and the ids of those pruned because no entry has them any more.
        """
        target, merged = plan.target, plan.entry
        assert target is not None and plan.old is not None
        seqs = sql_io.entry_seqs(conn, graph_id, [target.id])
        if target.id not in seqs:
            raise GraphError(f"Entry {target.id!r} vanished from graph {graph_id!r} before the merge; retry.")
        seq = seqs[target.id]
        conn.execute(
            "UPDATE entries SET abstraction=?, value=?, source_turn_ids=?, updated_at=?, abstraction_vector=?, "
            "value_vector=? WHERE seq=?",
            (merged.abstraction, merged.value, json.dumps(merged.source_turn_ids), sql_io.iso(merged.updated_at),
             sql_io.blob(plan.abstraction_vector), sql_io.blob(plan.value_vector), seq),
        )  # fmt: skip
        self._keywords.index(conn, graph_id, [(seq, merged.abstraction, merged.value)])
        sql_io.append_history(conn, seq, [plan.old], start=len(target.history))
        added = merged.episode_ids[len(target.episode_ids) :]
        conn.executemany(
            "INSERT INTO entry_episodes(entry_seq, position, episode_id) VALUES (?,?,?)",
            [(seq, len(target.episode_ids) + i, episode) for i, episode in enumerate(added)],
        )
        anchors = sql_io.ensure_anchors(conn, graph_id, plan.anchor_texts, anchor_vectors)
        sql_io.link_entry_anchors(conn, [(seq, ref.seq) for ref in anchors.values()])
        if not plan.replace_anchors:
            return anchors, added, [], []
        kept = {ref.seq for ref in anchors.values()}
        stale = [
            (anchor_seq, anchor_id)
            for anchor_seq, anchor_id in conn.execute(
                "SELECT l.anchor_seq, a.id FROM entry_anchors l JOIN anchors a ON a.seq = l.anchor_seq "
                "WHERE l.entry_seq = ?",
                (seq,),
            )
            if anchor_seq not in kept
        ]
        conn.executemany(
            "DELETE FROM entry_anchors WHERE entry_seq = ? AND anchor_seq = ?", [(seq, s) for s, _ in stale]
        )
        pruned = sql_io.prune_anchors(conn, [anchor_seq for anchor_seq, _ in stale])
        return anchors, added, [anchor_id for _, anchor_id in stale], pruned

    def _sync_links(
        self, cache: GraphCache, entry_id: str, anchors: dict[str, sql_io.AnchorRef], vectors: dict[str, np.ndarray]
    ) -> None:
        """Mirror new anchors and links of one entry into the in-memory view."""
        for norm, ref in anchors.items():
            if ref.id not in cache.anchor_row:
                cache.add_anchor(ref.id, ref.text, vectors[norm])
            cache.link(entry_id, ref.id)

    def link_anchors(self, graph_id: str, entry_id: str, anchor_texts: Sequence[str]) -> list[CueAnchor]:
        """Link an entry to anchors (same normalised text -> same anchor); returns the linked anchors."""
        vectors = self._anchor_vectors(anchor_texts, None)
        with self._views.transaction() as conn:
            seqs = sql_io.entry_seqs(conn, graph_id, [entry_id])
            if entry_id not in seqs:
                raise GraphError(
                    f"Entry {entry_id!r} is not in graph {graph_id!r} of {self._db.path}; cannot link anchors."
                )
            anchors = sql_io.ensure_anchors(conn, graph_id, anchor_texts, vectors)
            sql_io.link_entry_anchors(conn, [(seqs[entry_id], ref.seq) for ref in anchors.values()])
        cache = self._views.loaded(graph_id)
        if cache is not None:
            self._sync_links(cache, entry_id, anchors, vectors)
        return [
            CueAnchor(id=ref.id, graph_id=graph_id, text=ref.text, entry_ids=[entry_id]) for ref in anchors.values()
        ]

    def delete_entry(self, graph_id: str, entry_id: str) -> None:
        """Delete an entry (history, links cascade) and prune anchors left without entries, in one transaction."""
        with self._views.transaction() as conn:
            seqs = sql_io.entry_seqs(conn, graph_id, [entry_id])
            if entry_id not in seqs:
                raise GraphError(
                    f"Entry {entry_id!r} is not in graph {graph_id!r} of {self._db.path}; nothing deleted."
                )
            anchor_seqs = [
                r[0] for r in conn.execute("SELECT anchor_seq FROM entry_anchors WHERE entry_seq=?", (seqs[entry_id],))
            ]
            conn.execute("DELETE FROM entries WHERE seq = ?", (seqs[entry_id],))
            pruned = sql_io.prune_anchors(conn, anchor_seqs)
        cache = self._views.loaded(graph_id)
        if cache is not None:
            cache.remove_entry(entry_id)
            for anchor_id in pruned:
                cache.remove_anchor(anchor_id)

    def add_entries_bulk(
        self,
        graph_id: str,
        candidates: Sequence[EntryCandidate],
        abstraction_vectors: np.ndarray | None = None,
        value_vectors: np.ndarray | None = None,
        anchor_vectors: Mapping[str, np.ndarray] | None = None,
    ) -> list[str]:
        """Create many entries in ONE transaction, without create-or-update (fast loads, benchmarks).

        Args:
            graph_id: the graph (created if missing).
            candidates: entries to create; their anchors are existence-checked as usual.
            abstraction_vectors: (n, dim) unit rows, or None to embed the abstractions.
            value_vectors: (n, dim) unit rows, or None to embed the values.
            anchor_vectors: anchor text -> unit vector; texts absent here are embedded.

        Returns:
            The new entry ids, in the order of `candidates`.
        """
        entries = [
            MemoryEntry(id="", graph_id=graph_id, abstraction=c.abstraction, value=c.value, kind=c.kind,
                        episode_ids=list(dict.fromkeys(c.episode_ids)), speaker=c.speaker,
                        source_turn_ids=list(dict.fromkeys(c.source_turn_ids)), created_at=c.time, updated_at=c.time)
            for c in candidates
        ]  # fmt: skip
        return self._write_bulk(graph_id, entries, [c.anchors for c in candidates], abstraction_vectors,
                                value_vectors, anchor_vectors)  # fmt: skip

    def import_entries(
        self, graph_id: str, entries: Sequence[MemoryEntry], anchor_texts: Sequence[Sequence[str]]
    ) -> list[str]:
        """Insert entries keeping their ids, times and history (JSONL import); one transaction."""
        return self._write_bulk(graph_id, [e.model_copy(deep=True) for e in entries], anchor_texts, None, None, None)

    def _write_bulk(
        self,
        graph_id: str,
        entries: list[MemoryEntry],
        anchor_texts: Sequence[Sequence[str]],
        abstraction_vectors: np.ndarray | None,
        value_vectors: np.ndarray | None,
        anchor_vectors: Mapping[str, np.ndarray] | None,
    ) -> list[str]:
        if abstraction_vectors is None:
            abstraction_vectors = self._embed([e.abstraction for e in entries])
        if value_vectors is None:
            value_vectors = self._embed([e.value for e in entries])
        abstraction_vectors = _unit_rows(abstraction_vectors, len(entries), "abstraction_vectors")
        value_vectors = _unit_rows(value_vectors, len(entries), "value_vectors")
        all_texts = list(dict.fromkeys(t for texts in anchor_texts for t in texts))
        vectors = self._anchor_vectors(all_texts, anchor_vectors)
        with self._views.transaction() as conn:
            self._db.record_dim(conn, abstraction_vectors.shape[1])
            sql_io.ensure_graph(conn, graph_id)
            fresh = sql_io.allocate_ids(conn, graph_id, "next_entry", "e", sum(1 for e in entries if not e.id))
            fresh_ids = iter(fresh)
            for entry in entries:
                entry.id = entry.id or next(fresh_ids)
                entry.graph_id = graph_id
            sql_io.bump_counter(conn, graph_id, "next_entry", "e", [e.id for e in entries])
            seqs = sql_io.insert_entries(conn, entries, abstraction_vectors, value_vectors)
            self._keywords.index(
                conn, graph_id, [(q, e.abstraction, e.value) for q, e in zip(seqs, entries, strict=True)]
            )
            anchors = sql_io.ensure_anchors(conn, graph_id, all_texts, vectors)
            links = {(seq, anchors[n].seq) for seq, texts in zip(seqs, anchor_texts, strict=True)
                     for n in map(sql_io.normalise_anchor, texts) if n}  # fmt: skip
            sql_io.link_entry_anchors(conn, sorted(links))
        self._views.drop(graph_id)  # reloaded on next use
        return [entry.id for entry in entries]

    def write_graph_rows(self, rows: graph_rows.GraphRows) -> None:
        """Insert a whole graph read by `BaseGraphStore.graph_rows` (ids, counters, vectors kept), in one transaction.

        Raises:
            GraphError: the graph exists here already, or its vectors have another dimension than this store's.
        """
        with self._views.transaction() as conn:
            if self._db.has_graph(rows.graph_id):
                raise GraphError(
                    f"Graph {rows.graph_id!r} already exists in {self._db.path}; copy into another store "
                    "or drop the graph there first."
                )
            if rows.dim is not None:
                if self._db.dim is not None and self._db.dim != rows.dim:
                    raise GraphError(
                        f"Graph {rows.graph_id!r} holds {rows.dim}-d vectors, store {self._db.path} holds "
                        f"{self._db.dim}-d ones. Copy it into a store built with the same embedder."
                    )
                self._db.record_dim(conn, rows.dim)
            self._keywords.index(conn, rows.graph_id, graph_rows.insert_graph_rows(conn, rows))
        self._views.drop(rows.graph_id)


def _unit_rows(vectors: np.ndarray, count: int, name: str) -> np.ndarray:
    """Check an (count, dim) float32 matrix and L2-normalise its rows."""
    array = np.asarray(vectors, dtype=np.float32)
    if array.ndim != 2 or array.shape[0] != count:
        raise GraphError(f"{name} has shape {array.shape}; expected ({count}, dim), one row per entry.")
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    if not np.all(np.isfinite(norms)) or np.any(norms == 0):
        raise GraphError(f"{name} holds zero or non-finite rows; pass L2-normalised embeddings.")
    return array / norms
