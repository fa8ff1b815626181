"""`SQLiteGraphStore`: the embedded `GraphStore` backend (one SQLite file, several graphs).

Every mutation runs in one `BEGIN IMMEDIATE` transaction, so a process killed mid-write
leaves the previous consistent state. Search and frontier read a per-graph in-memory
view (`GraphCache`) loaded lazily and updated after each commit; a commit by another
connection (seen through `PRAGMA data_version`) drops the views so they reload.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from memora_rl.errors import GraphError
from memora_rl.memory import sql_io
from memora_rl.memory.config import StoreConfig
from memora_rl.memory.frontier import frontier_items
from memora_rl.memory.graph_cache import GraphCache, load_graph_cache
from memora_rl.memory.integrity import run_integrity_checks
from memora_rl.memory.records import CueAnchor, Episode, FrontierItem, MemoryEntry, SearchHit
from memora_rl.memory.schema import connect
from memora_rl.memory.search import (
    filter_mask,
    fts_match_expression,
    query_words,
    rrf_fuse,
    selective_words,
    vector_rankings,
)
from memora_rl.memory.store import IntegrityReport, SearchFilters
from memora_rl.memory.vectors import as_unit_vector, single_thread_blas
from memora_rl.memory.writer import GraphWriter

if TYPE_CHECKING:
    from memora_rl.embedding import Embedder

logger = logging.getLogger(__name__)


class SQLiteGraphStore(GraphWriter):
    """A collection of memory graphs in one SQLite file, with in-memory vector search.

    Args:
        path: the store file (created if missing).
        embedder: encodes texts; defaults to `memora_rl.embedding.get_embedder()`, created on first need,
            so read-only uses with vector queries never load a model.
        config: store settings (`StoreConfig` defaults when None).
    """

    def __init__(self, path: str | Path, embedder: Embedder | None = None, config: StoreConfig | None = None) -> None:
        self.path = Path(path)
        self.config = config or StoreConfig()
        self._conn = connect(self.path)
        self._embedder = embedder
        self._caches: dict[str, GraphCache] = {}
        self._lock = threading.RLock()
        self._data_version = self._read_data_version()
        self._has_vocab = False
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'dim'").fetchone()
        self._dim: int | None = int(row[0]) if row else None

    # --- plumbing ----------------------------------------------------------------------------
    def __enter__(self) -> SQLiteGraphStore:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @property
    def embedder(self) -> Embedder:
        """The text embedder, loaded on first use."""
        if self._embedder is None:
            from memora_rl.embedding import get_embedder

            self._embedder = get_embedder(self.config.embedder)
        return self._embedder

    @property
    def dim(self) -> int:
        """Vector dimension of this store (recorded on the first write; else the embedder's)."""
        if self._dim is None:
            return self.embedder.dim
        return self._dim

    def _read_data_version(self) -> int:
        return self._conn.execute("PRAGMA data_version").fetchone()[0]

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; on any error it rolls back and drops the in-memory views."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                self._caches.clear()
                raise

    def _record_dim(self, conn: sqlite3.Connection, dim: int) -> None:
        """Record the store's vector dimension on its first vector write."""
        if self._dim is None:
            conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('dim', ?)", (str(dim),))
            self._dim = dim

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts, (n, dim), checking the embedder matches the store."""
        vectors = self.embedder.encode(list(texts))
        if self._dim is not None and len(texts) and vectors.shape[1] != self._dim:
            raise GraphError(
                f"The embedder gives {vectors.shape[1]}-d vectors but store {self.path} holds {self._dim}-d ones. "
                "Open it with the embedder that built it."
            )
        return vectors

    def _query_vector(self, query: str | np.ndarray) -> np.ndarray:
        if isinstance(query, str):
            return self._embed([query])[0]
        return as_unit_vector(query, self.dim, "The query vector")

    def _cache(self, graph_id: str, must_exist: bool = True) -> GraphCache:
        """The in-memory view of a graph, (re)loaded when missing or changed by another connection."""
        with self._lock:
            version = self._read_data_version()
            if version != self._data_version:
                self._caches.clear()
                self._data_version = version
            cache = self._caches.get(graph_id)
            if cache is None:
                if (
                    must_exist
                    and not self._conn.execute("SELECT 1 FROM graphs WHERE graph_id = ?", (graph_id,)).fetchone()
                ):
                    raise GraphError(
                        f"Graph {graph_id!r} is not in store {self.path}; it holds {self.graph_ids() or 'no graphs'}."
                    )
                cache = load_graph_cache(self._conn, graph_id, self.dim, self.config)
                if self.config.ann_persist:
                    cache.save_ann_under(self.ann_dir / hashlib.sha256(graph_id.encode()).hexdigest()[:16])
                self._caches[graph_id] = cache
            return cache

    def _loaded_cache(self, graph_id: str) -> GraphCache | None:
        return self._caches.get(graph_id)

    @property
    def ann_dir(self) -> Path:
        """Folder of the saved HNSW indexes (`<store file>.ann`); safe to delete, they are rebuilt."""
        return self.path.with_name(f"{self.path.name}.ann")

    def close(self) -> None:
        """Save changed HNSW indexes, then close the database (WAL content is checkpointed by SQLite)."""
        with self._lock:
            for cache in self._caches.values():
                cache.save_ann()
            self._caches.clear()
            self._conn.close()

    # --- reads -------------------------------------------------------------------------------
    def graph_ids(self) -> list[str]:
        """Ids of the graphs held, sorted."""
        return [row[0] for row in self._conn.execute("SELECT graph_id FROM graphs ORDER BY graph_id")]

    def get_entries(self, graph_id: str, entry_ids: Sequence[str]) -> list[MemoryEntry]:
        """Entries by id, in the order asked; unknown ids raise `GraphError`."""
        seqs = sql_io.entry_seqs(self._conn, graph_id, entry_ids)
        missing = [entry_id for entry_id in entry_ids if entry_id not in seqs]
        if missing:
            raise GraphError(f"Entries {missing[:10]} are not in graph {graph_id!r} of {self.path}.")
        found = sql_io.read_entries(self._conn, graph_id, list(seqs.values()))
        return [found[seqs[entry_id]] for entry_id in entry_ids]

    def entries(self, graph_id: str) -> list[MemoryEntry]:
        """All entries of a graph, in insertion order."""
        seqs = [
            row[0] for row in self._conn.execute("SELECT seq FROM entries WHERE graph_id = ? ORDER BY seq", (graph_id,))
        ]
        found = sql_io.read_entries(self._conn, graph_id, seqs)
        return [found[seq] for seq in seqs]

    def episodes(self, graph_id: str) -> list[Episode]:
        """All episodes of a graph, in insertion order."""
        return sql_io.read_episodes(self._conn, graph_id)

    def anchors(self, graph_id: str) -> list[CueAnchor]:
        """All cue anchors of a graph with their entry ids."""
        return sql_io.read_anchors(self._conn, graph_id)

    def stats(self, graph_id: str) -> dict[str, int]:
        """Counts of entries, anchors, episodes, links and history versions of a graph."""
        one = self._conn.execute
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

    def value_vectors(self, graph_id: str, entry_ids: Sequence[str]) -> np.ndarray:
        """L2-normalised value embeddings, (len(entry_ids), dim)."""
        cache = self._cache(graph_id)
        rows = self._rows(cache, graph_id, entry_ids)
        return cache.values.matrix[rows].copy()

    def abstraction_vectors(self, graph_id: str, entry_ids: Sequence[str]) -> np.ndarray:
        """L2-normalised abstraction embeddings, (len(entry_ids), dim)."""
        cache = self._cache(graph_id)
        rows = self._rows(cache, graph_id, entry_ids)
        return cache.abstractions.matrix[rows].copy()

    def _rows(self, cache: GraphCache, graph_id: str, entry_ids: Sequence[str]) -> list[int]:
        missing = [entry_id for entry_id in entry_ids if entry_id not in cache.entry_row]
        if missing:
            raise GraphError(f"Entries {missing[:10]} are not in graph {graph_id!r} of {self.path}.")
        return [cache.entry_row[entry_id] for entry_id in entry_ids]

    # --- search ------------------------------------------------------------------------------
    def search(
        self, graph_id: str, query: str | np.ndarray, k: int = 10, filters: SearchFilters | None = None
    ) -> list[SearchHit]:
        """Fuse (RRF) abstraction, value and anchor cosine rankings, plus BM25 when `query` is text."""
        cache = self._cache(graph_id)
        vector = self._query_vector(query)
        mask = filter_mask(cache, filters)
        depth = max(k, self.config.channel_depth)
        with self._lock, single_thread_blas():
            rankings = vector_rankings(cache, vector, depth, mask)
            if isinstance(query, str) and self.config.bm25:
                rankings.append(self._bm25_ranking(cache, graph_id, query, depth, mask))
        fused = rrf_fuse(rankings, self.config.rrf_k)
        best = sorted(fused.items(), key=lambda item: (-item[1], item[0]))[:k]
        return [SearchHit(entry_id=cache.entry_ids[row], score=score) for row, score in best]

    def _bm25_ranking(
        self, cache: GraphCache, graph_id: str, text: str, depth: int, mask: np.ndarray | None
    ) -> list[int]:
        expression = fts_match_expression(self._selective_words(query_words(text)))
        if expression is None:
            return []
        fetch = depth if mask is None else depth * 4
        seqs = self._conn.execute(
            "SELECT e.seq FROM entries_fts JOIN entries e ON e.seq = entries_fts.rowid "
            "WHERE entries_fts MATCH ? AND e.graph_id = ? ORDER BY bm25(entries_fts) LIMIT ?",
            (expression, graph_id, fetch),
        ).fetchall()
        rows = [cache.seq_row[seq] for (seq,) in seqs if seq in cache.seq_row]
        return [row for row in rows if mask is None or mask[row]][:depth]

    def _selective_words(self, words: list[str]) -> list[str]:
        """Drop very common words from a BM25 query in a large store (see `StoreConfig.bm25_max_doc_share`).

        The store size is the highest entry number ever written (cheap, counts deleted entries too).
        """
        share = self.config.bm25_max_doc_share
        if share >= 1.0 or not words:
            return words
        size = self._conn.execute("SELECT max(seq) FROM entries").fetchone()[0] or 0
        if size < self.config.ann_threshold:
            return words
        if not self._has_vocab:
            self._conn.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS temp.entries_vocab USING fts5vocab(main, entries_fts, 'row')"
            )
            self._has_vocab = True
        counts = {
            term: doc
            for word in words
            for term, doc in self._conn.execute("SELECT term, doc FROM temp.entries_vocab WHERE term = ?", (word,))
        }
        return selective_words(words, counts, share * size)

    def frontier(
        self,
        graph_id: str,
        working_set: Sequence[str],
        visited: Sequence[str],
        query: str | np.ndarray,
        limit: int = 20,
        relaxed_threshold: float | None = None,
    ) -> list[FrontierItem]:
        """Entries sharing an anchor with `working_set` (or a relaxed anchor), minus it and `visited`.

        Args:
            graph_id: the graph.
            working_set: entry ids currently held; unknown ids raise `GraphError`.
            visited: entry ids to leave out (unknown ones are ignored).
            query: text or unit vector ranking the result by cosine.
            limit: most items returned.
            relaxed_threshold: also follow anchors this close (cosine) to the working set's anchors;
                None uses `config.relaxed_anchor_threshold`.
        """
        cache = self._cache(graph_id)
        vector = self._query_vector(query)
        working_rows = self._rows(cache, graph_id, working_set)
        excluded = set(working_rows) | {cache.entry_row[i] for i in visited if i in cache.entry_row}
        threshold = self.config.relaxed_anchor_threshold if relaxed_threshold is None else relaxed_threshold
        with self._lock, single_thread_blas():
            return frontier_items(cache, working_rows, excluded, vector, limit, threshold)

    def check_integrity(self) -> IntegrityReport:
        """`PRAGMA integrity_check`, foreign keys, FTS index and graph invariants."""
        with self._lock:
            return IntegrityReport(problems=run_integrity_checks(self._conn, self._dim))


def open_store(
    path: str | Path, embedder: Embedder | None = None, config: StoreConfig | Mapping | None = None
) -> SQLiteGraphStore:
    """Open (or create) a SQLite graph store at `path`."""
    if isinstance(config, Mapping):
        config = StoreConfig.model_validate(dict(config))
    return SQLiteGraphStore(path, embedder=embedder, config=config)
