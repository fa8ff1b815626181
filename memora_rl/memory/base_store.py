"""`BaseGraphStore`: the `GraphStore` facade both backends share (reads, search, frontier, writes).

A store is a facade over: its database (`memory.database.StoreDatabase`: the shared connection,
the lock that serialises its use across threads, write transactions; `memory.connection` for
SQLite, `memory.pg_connection` for PostgreSQL); `GraphViews` (`memory.views`: the per-graph
in-memory views search and frontier read, kept coherent with the database); `GraphWriter`
(`memory.writer`: every mutation, one write transaction each, so a process killed mid-write
leaves the previous consistent state); and `EntrySearch` (`memory.entry_search`: the fused search).
A backend subclass passes its database, keyword index and view hook, and adds `check_integrity`
and `close`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Literal, Self, get_args, overload

import numpy as np

from memora_rl.errors import GraphError
from memora_rl.memory import graph_rows, sql_io
from memora_rl.memory.bm25 import KeywordIndex
from memora_rl.memory.config import StoreConfig
from memora_rl.memory.database import StoreDatabase
from memora_rl.memory.entry_search import EntrySearch
from memora_rl.memory.frontier import frontier_items
from memora_rl.memory.graph_cache import GraphCache
from memora_rl.memory.records import (
    CueAnchor,
    EntryCandidate,
    Episode,
    EpisodeHit,
    FrontierItem,
    FrontierLink,
    FrontierOrder,
    FrontierScore,
    MemoryEntry,
    SearchHit,
    SearchKind,
)
from memora_rl.memory.search import episode_ranking
from memora_rl.memory.store import Decider, IntegrityReport, SearchFilters, SimilarBy, UpsertResult
from memora_rl.memory.vectors import as_unit_vector, single_thread_blas
from memora_rl.memory.views import GraphViews, ViewHook
from memora_rl.memory.writer import GraphWriter

if TYPE_CHECKING:
    from memora_rl.embedding import Embedder

logger = logging.getLogger(__name__)


class BaseGraphStore:
    """A collection of memory graphs in one database, with in-memory vector search over per-graph views.

    Args:
        db: the opened database of the store.
        embedder: encodes texts; defaults to `memora_rl.embedding.get_embedder()`, created on first need,
            so read-only uses with vector queries never load a model.
        config: store settings (`StoreConfig` defaults when None).
        keywords: the backend's keyword index (BM25 statistics).
        prepare_view: the backend's hook for each freshly loaded view (where its ANN indexes live).
    """

    def __init__(
        self,
        db: StoreDatabase,
        embedder: Embedder | None,
        config: StoreConfig | None,
        keywords: KeywordIndex,
        prepare_view: ViewHook | None,
    ) -> None:
        self.config = config or StoreConfig()
        self._embedder = embedder
        self._db = db
        self._views = GraphViews(self._db, self.config, lambda: self.dim, prepare_view)
        self._writer = GraphWriter(self._db, self._views, self._embed, self.config, keywords)
        self._search = EntrySearch(self._db, self.config, keywords)

    @property
    def location(self) -> str:
        """What names the store in messages: its file, or its PostgreSQL URL without the password."""
        return str(self._db.path)

    # --- plumbing ----------------------------------------------------------------------------
    def __enter__(self) -> Self:
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
        if self._db.dim is None:
            return self.embedder.dim
        return self._db.dim

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts, (n, dim), checking the embedder matches the store."""
        return self._checked_dim(self.embedder.encode(list(texts)))

    def _checked_dim(self, vectors: np.ndarray) -> np.ndarray:
        """`vectors`, (n, dim), once their width is the store's."""
        if self._db.dim is not None and len(vectors) and vectors.shape[1] != self._db.dim:
            raise GraphError(
                f"The embedder gives {vectors.shape[1]}-d vectors but store {self._db.path} holds {self._db.dim}-d "
                "ones. Open it with the embedder that built it."
            )
        return vectors

    def _query_vector(self, query: str | np.ndarray) -> np.ndarray:
        """A query's unit vector: text through the embedder's query cache (`encode_one`), or a vector checked."""
        if isinstance(query, str):
            return self._checked_dim(self.embedder.encode_one(query)[None])[0]
        return as_unit_vector(query, self.dim, "The query vector")

    def _cache(self, graph_id: str) -> GraphCache:
        """The in-memory view of a graph (see `memory.views` for when it is reloaded)."""
        return self._views.get(graph_id)

    # --- writes (done by `GraphWriter`) ------------------------------------------------------
    @contextmanager
    def batch(self) -> Iterator[None]:
        """One transaction around every write made inside the block on this thread: all land or none.

        Other threads' writes on this store wait for it; other connections see it only once it
        commits. A failure rolls the whole batch back and drops the loaded views (they reload).

        Raises:
            GraphError: a batch is already open on this thread (batches do not nest).
        """
        with self._views.transaction(batch=True):
            yield

    def add_episode(self, episode: Episode) -> Episode:
        """Store (or replace, by id) an episode with the embedding of its cue + text; see `GraphWriter.add_episode`."""
        return self._writer.add_episode(episode)

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
        """Create-or-update an entry; see `GraphWriter.upsert_entry`."""
        return self._writer.upsert_entry(
            graph_id,
            candidate,
            decider,
            abstraction_vector=abstraction_vector,
            value_vector=value_vector,
            anchor_vectors=anchor_vectors,
            similar_by=similar_by,
            receipt=receipt,
        )

    def link_anchors(self, graph_id: str, entry_id: str, anchor_texts: Sequence[str]) -> list[CueAnchor]:
        """Link an entry to anchors (same normalised text -> same anchor); returns the linked anchors."""
        return self._writer.link_anchors(graph_id, entry_id, anchor_texts)

    def delete_entry(self, graph_id: str, entry_id: str) -> None:
        """Delete an entry and prune anchors left without entries, in one transaction."""
        self._writer.delete_entry(graph_id, entry_id)

    def add_entries_bulk(
        self,
        graph_id: str,
        candidates: Sequence[EntryCandidate],
        abstraction_vectors: np.ndarray | None = None,
        value_vectors: np.ndarray | None = None,
        anchor_vectors: Mapping[str, np.ndarray] | None = None,
    ) -> list[str]:
        """Create many entries in one transaction, without create-or-update; see `GraphWriter.add_entries_bulk`."""
        return self._writer.add_entries_bulk(graph_id, candidates, abstraction_vectors, value_vectors, anchor_vectors)

    def import_entries(
        self, graph_id: str, entries: Sequence[MemoryEntry], anchor_texts: Sequence[Sequence[str]]
    ) -> list[str]:
        """Insert entries keeping their ids, times and history (JSONL import); one transaction."""
        return self._writer.import_entries(graph_id, entries, anchor_texts)

    # --- reads -------------------------------------------------------------------------------
    def graph_ids(self) -> list[str]:
        """Ids of the graphs held, sorted."""
        return self._db.graph_ids()

    def get_entries(self, graph_id: str, entry_ids: Sequence[str]) -> list[MemoryEntry]:
        """Entries by id, in the order asked; unknown ids raise `GraphError`."""
        return sql_io.entries_by_id(self._db.conn, graph_id, entry_ids, self._db.path)

    def entries(self, graph_id: str) -> list[MemoryEntry]:
        """All entries of a graph, in insertion order."""
        conn = self._db.conn
        seqs = [row[0] for row in conn.execute("SELECT seq FROM entries WHERE graph_id = ? ORDER BY seq", (graph_id,))]
        found = sql_io.read_entries(conn, graph_id, seqs)
        return [found[seq] for seq in seqs]

    def episodes(self, graph_id: str) -> list[Episode]:
        """All episodes of a graph, in insertion order."""
        return sql_io.read_episodes(self._db.conn, graph_id)

    def get_episodes(self, graph_id: str, episode_ids: Sequence[str]) -> list[Episode]:
        """Stored episodes by id, in the order asked; ids never stored are left out (entries may name them)."""
        return sql_io.read_episodes(self._db.conn, graph_id, episode_ids)

    def anchors(self, graph_id: str) -> list[CueAnchor]:
        """All cue anchors of a graph with their entry ids."""
        return sql_io.read_anchors(self._db.conn, graph_id)

    def receipts(self, graph_id: str) -> set[str]:
        """Receipts of the upserts written into a graph (a resumed build skips their candidates)."""
        return sql_io.read_receipts(self._db.conn, graph_id)

    def stats(self, graph_id: str) -> dict[str, int]:
        """Counts of entries, anchors, episodes, links and history versions of a graph."""
        return sql_io.graph_counts(self._db.conn, graph_id)

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
            raise GraphError(f"Entries {missing[:10]} are not in graph {graph_id!r} of {self._db.path}.")
        return [cache.entry_row[entry_id] for entry_id in entry_ids]

    # --- search ------------------------------------------------------------------------------
    @overload
    def search(
        self,
        graph_id: str,
        query: str | np.ndarray,
        k: int = 10,
        filters: SearchFilters | None = None,
        *,
        kinds: tuple[Literal["entry"]] = ("entry",),
        episode_channel: bool | None = None,
    ) -> list[SearchHit]: ...

    @overload
    def search(
        self,
        graph_id: str,
        query: str | np.ndarray,
        k: int = 10,
        filters: SearchFilters | None = None,
        *,
        kinds: Sequence[SearchKind],
        episode_channel: bool | None = None,
    ) -> list[SearchHit | EpisodeHit]: ...

    def search(
        self,
        graph_id: str,
        query: str | np.ndarray,
        k: int = 10,
        filters: SearchFilters | None = None,
        *,
        kinds: Sequence[SearchKind] = ("entry",),
        episode_channel: bool | None = None,
    ) -> list[SearchHit] | list[SearchHit | EpisodeHit]:
        """Search a graph's entries and/or episodes.

        Entries: RRF fusion of abstraction, value and anchor cosine rankings, plus BM25 when `query`
        is text, plus the episode channel (`search.episode_entry_ranking`) when it is on.
        Episodes: cosine of their cue + text embedding (of the filters, only `episode_ids` applies).

        Args:
            graph_id: the graph.
            query: text or unit vector.
            k: most hits of each kind.
            filters: restrictions (speaker, time range, episode ids).
            kinds: what to return; with both, up to `k` entry hits (fused scores) come first, then up to
                `k` episode hits (cosines): the two scores are not comparable, so the kinds are not interleaved.
            episode_channel: add the episode channel to the entry fusion; None uses `config.episode_channel`.
        """
        unknown = sorted(set(kinds) - {"entry", "episode"})
        if unknown or not kinds:
            raise GraphError(f"search kinds={list(kinds)} holds {unknown or 'nothing'}; use 'entry' and/or 'episode'.")
        cache = self._cache(graph_id)
        vector = self._query_vector(query)
        hits: list[SearchHit | EpisodeHit] = []
        if "entry" in kinds:
            with_episodes = self.config.episode_channel if episode_channel is None else episode_channel
            hits.extend(self._search.entry_hits(cache, graph_id, query, vector, k, filters, with_episodes))
        if "episode" in kinds:
            with self._db.lock, single_thread_blas():
                ranked = episode_ranking(cache, vector, k, filters)
            hits.extend(EpisodeHit(episode_id=episode_id, score=score) for episode_id, score in ranked)
        return hits

    def frontier(
        self,
        graph_id: str,
        working_set: Sequence[str],
        visited: Sequence[str],
        query: str | np.ndarray,
        limit: int = 20,
        relaxed_threshold: float | None = None,
        *,
        links: Sequence[FrontierLink] = ("anchor",),
        similar_threshold: float = 0.85,
        score: FrontierScore = "best",
        order: FrontierOrder = "score",
    ) -> list[FrontierItem]:
        """Entries linked to `working_set`, minus it and `visited`, best cosine to `query` first.

        Args:
            graph_id: the graph.
            working_set: entry ids currently held; unknown ids raise `GraphError`.
            visited: entry ids to leave out (unknown ones are ignored).
            query: text or unit vector ranking the result by cosine.
            limit: most items returned.
            relaxed_threshold: also follow anchors this close (cosine) to the working set's anchors;
                None uses `config.relaxed_anchor_threshold`.
            links: which links count (`FrontierItem.via`): `anchor` (a shared or relaxed cue anchor),
                `episode` (a shared episode), `similar` (an abstraction within `similar_threshold` cosine
                of a working-set entry's), `turn` (the same speaker's previous or next turn), `search` (the
                query's best `limit` entries not yet held, linked or not). The default is anchors only.
            similar_threshold: cosine (-1..1) of a similar-abstraction link.
            score: what ranks the items by `query`: `best` (the better of abstraction and value cosine)
                or `value` (the value's cosine).
            order: `score` (the `limit` best items) or `interleave` (the best of each link kind in turn,
                kinds in `links` order).
        """
        unknown = sorted(set(links) - set(get_args(FrontierLink)))
        if unknown:
            raise GraphError(
                f"frontier links={list(links)} holds {unknown}; use any of {', '.join(get_args(FrontierLink))}."
            )
        cache = self._cache(graph_id)
        vector = self._query_vector(query)
        working_rows = self._rows(cache, graph_id, working_set)
        excluded = set(working_rows) | {cache.entry_row[i] for i in visited if i in cache.entry_row}
        threshold = self.config.relaxed_anchor_threshold if relaxed_threshold is None else relaxed_threshold
        with self._db.lock, single_thread_blas():
            return frontier_items(
                cache,
                working_rows,
                excluded,
                vector,
                limit,
                threshold,
                links,
                similar_threshold,
                score,
                order,
                lambda ids: sql_io.abstractions_by_id(self._db.conn, graph_id, ids),
            )

    def check_integrity(self) -> IntegrityReport:
        """Database checks of the backend plus the graph invariants; see the subclass."""
        raise NotImplementedError

    def close(self) -> None:
        """Flush and close the database; see the subclass."""
        raise NotImplementedError

    # --- whole-graph rows (`memory.graph_rows`, `memory.graph_copy`) -----------------------
    def graph_rows(self, graph_id: str) -> graph_rows.GraphRows:
        """Every stored row of a graph, vectors included, in a backend-neutral form (one read snapshot)."""
        if not self._db.has_graph(graph_id):
            raise GraphError(f"Graph {graph_id!r} is not in store {self.location}; it holds {self.graph_ids()}.")
        with self._db.snapshot() as conn:
            return graph_rows.read_graph_rows(conn, graph_id, self._db.dim)

    def write_graph_rows(self, rows: graph_rows.GraphRows) -> None:
        """Insert a whole graph read by `graph_rows`, ids and vectors kept; see `GraphWriter.write_graph_rows`."""
        self._writer.write_graph_rows(rows)
