"""`EntrySearch`: the fused entry search of a loaded graph (vector channels, BM25, the episode channel, RRF)."""

from __future__ import annotations

import numpy as np

from memora_rl.memory import bm25
from memora_rl.memory.config import StoreConfig
from memora_rl.memory.database import StoreDatabase
from memora_rl.memory.graph_cache import GraphCache
from memora_rl.memory.records import SearchHit
from memora_rl.memory.search import (
    episode_entry_ranking,
    filter_mask,
    query_words,
    rrf_fuse,
    selective_words,
    vector_rankings,
)
from memora_rl.memory.store import SearchFilters
from memora_rl.memory.vectors import single_thread_blas


class EntrySearch:
    """The entry search of one store: each channel ranks a graph's entries, RRF fuses the rankings.

    Channels: abstraction, value and anchor cosine (`search.vector_rankings`), BM25 over the graph's
    own statistics when the query is text (`memory.bm25`), and the episode channel when asked
    (`search.episode_entry_ranking`). Rankings are computed under the store's lock.

    Args:
        db: the store's database (its lock, and the keyword statistics BM25 reads).
        config: store settings (channel depth, RRF k, BM25 switches).
        keywords: the backend's keyword index (`bm25.KeywordIndex`); FTS5 when None.
    """

    def __init__(self, db: StoreDatabase, config: StoreConfig, keywords: bm25.KeywordIndex | None = None) -> None:
        self._db = db
        self.config = config
        self.keywords = keywords if keywords is not None else bm25.Fts5Keywords()
        self._has_vocab = False

    def entry_hits(
        self,
        cache: GraphCache,
        graph_id: str,
        query: str | np.ndarray,
        vector: np.ndarray,
        k: int,
        filters: SearchFilters | None,
        episode_channel: bool,
    ) -> list[SearchHit]:
        """The fused (RRF) entry search: vector channels, BM25 for text, the episode channel when asked."""
        mask = filter_mask(cache, filters)
        depth = max(k, self.config.channel_depth)
        with self._db.lock, single_thread_blas():
            rankings = vector_rankings(cache, vector, depth, mask)
            if isinstance(query, str) and self.config.bm25:
                rankings.append(self.bm25_ranking(cache, graph_id, query, depth, mask))
            if episode_channel:
                rankings.append(episode_entry_ranking(cache, vector, depth, mask))
        fused = rrf_fuse(rankings, self.config.rrf_k)
        best = sorted(fused.items(), key=lambda item: (-item[1], item[0]))[:k]
        return [SearchHit(entry_id=cache.entry_ids[row], score=score) for row, score in best]

    def bm25_ranking(
        self, cache: GraphCache, graph_id: str, text: str, depth: int, mask: np.ndarray | None
    ) -> list[int]:
        """Rows of the graph's entries by BM25 over the graph's own statistics (see `memory.bm25`)."""
        conn, keywords = self._db.conn, self.keywords
        terms = self.query_terms(cache, graph_id, query_words(text))
        by_term = keywords.term_frequencies(conn, graph_id, terms) if terms else {}
        frequencies = [per_entry for term in terms if (per_entry := by_term.get(term))]
        if not frequencies:
            return []
        if cache.token_total is None:
            cache.token_total = keywords.token_total(conn, graph_id)
        entries = cache.abstractions.live
        candidates = sorted({seq for per_entry in frequencies for seq in per_entry})
        scores = bm25.bm25_scores(
            frequencies, keywords.entry_lengths(conn, candidates), entries, cache.token_total / max(entries, 1)
        )
        fetch = depth if mask is None else depth * 4
        best = sorted(scores, key=lambda seq: (-scores[seq], seq))[:fetch]
        rows = [cache.seq_row[seq] for seq in best if seq in cache.seq_row]
        return [row for row in rows if mask is None or mask[row]][:depth]

    def _graph_count(self) -> int:
        """Graphs in the store (a handful of rows: cheap to count per query)."""
        return int(self._db.conn.execute("SELECT count(*) FROM graphs").fetchone()[0])

    def _doc_counts(self, cache: GraphCache, graph_id: str, terms: list[str], most: float) -> dict[str, int]:
        """The counts the common-word filter reads, kept in the view until its text changes (`doc_counts`).

        A term new to the view costs the store's count (a cheap upper bound), and the graph's own count
        where that bound is over `most` in a store of several graphs; all new terms are asked together.
        """
        conn, keywords = self._db.conn, self.keywords
        new = [term for term in terms if term not in cache.doc_counts]
        if new:
            counts = keywords.store_doc_counts(conn, new)
            common = [term for term in new if counts[term] > most]
            if common and self._graph_count() > 1:  # with one graph the store's count is the graph's
                counts |= keywords.graph_doc_counts(conn, graph_id, common)
            cache.doc_counts.update(counts)
        return {term: cache.doc_counts[term] for term in terms}

    def query_terms(self, cache: GraphCache, graph_id: str, words: list[str]) -> list[str]:
        """The index terms of the query words that BM25 scores.

        In a graph of `ann_threshold` entries or more, terms found in more than
        `StoreConfig.bm25_max_doc_share` of its entries are dropped (see `search.selective_words`).
        """
        conn, keywords = self._db.conn, self.keywords
        if not self._has_vocab:
            keywords.prepare(conn)
            self._has_vocab = True
        terms = list(dict.fromkeys(term for word in words for term in bm25.fts_terms(word)))
        entries = cache.abstractions.live
        share = self.config.bm25_max_doc_share
        if share < 1.0 and terms and entries >= self.config.ann_threshold:
            most = share * entries
            terms = selective_words(terms, self._doc_counts(cache, graph_id, terms, most), most)
        return terms
