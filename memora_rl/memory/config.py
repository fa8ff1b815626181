"""Typed configuration of the graph stores (SQLite, PostgreSQL): create-or-update, search fusion, ANN index."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from memora_rl.config import StrictModel


class UpsertConfig(StrictModel):
    """How create-or-update finds the existing entries a candidate may merge into."""

    gamma: float = Field(default=0.80, ge=-1.0, le=1.0)
    """Cosine threshold (unitless, -1..1): existing abstractions (NEMORI: fact values) this close go to the decider."""
    top_k: int = Field(default=5, ge=1)
    """At most this many similar entries (best first) are shown to the decider."""


class StoreConfig(StrictModel):
    """Every default of a graph store (`SQLiteGraphStore`, `PostgresGraphStore`) in one place."""

    upsert: UpsertConfig = Field(default_factory=UpsertConfig)
    """Create-or-update settings (gamma, top_k)."""
    embedder: str = "all-MiniLM-L6-v2"
    """Sentence-transformers model name or folder used to embed texts (loaded lazily, only when needed)."""
    rrf_k: int = Field(default=60, ge=1)
    """Reciprocal-rank-fusion constant: a hit at rank r (0-based) scores 1 / (rrf_k + r + 1) per channel."""
    channel_depth: int = Field(default=50, ge=1)
    """Candidates each search channel (abstraction, value, anchor, BM25) contributes before fusion."""
    bm25: bool = True
    """Add an FTS5 BM25 channel when the query is text (ignored for vector queries)."""
    episode_channel: bool = False
    """Add an episode channel to the fused entry search: the entries of the episodes closest to the query
    (cue + text embedding), each episode's entries by their own cosine, join the RRF fusion. Off keeps the
    entry search as it was (abstraction, value, anchor and BM25 channels)."""
    bm25_max_doc_share: float = Field(default=0.05, gt=0.0, le=1.0)
    """In graphs of at least `ann_threshold` entries, BM25 drops query words found in more than this share of
    the graph's entries (near-zero IDF, but a scan of a long posting list each); 1.0 keeps every word."""
    ann_threshold: int = Field(default=10_000, ge=1)
    """Live vectors in a matrix at which the SQLite store's searches switch from exact numpy to usearch's HNSW
    index in memory (PostgreSQL: `pgvector_threshold`). On 2 cores, at 10k x 384, an exact search of the
    matrix takes ~0.4 ms, an HNSW search ~0.3 ms."""
    pgvector_threshold: int = Field(default=50_000, ge=1)
    """Live vectors in a loaded graph's matrix at which the PostgreSQL store's searches switch from exact numpy
    over the rows it holds in memory anyway to pgvector's HNSW index in the database (created then, on first
    need, and shared by every process). A pgvector search is a round trip of 2-4 ms at 10k-20k rows on 2 cores,
    ten times the exact search of a 10k matrix; from about 50k rows the exact search costs as much."""
    ann_dtype: Literal["f32", "f16", "i8"] = "i8"
    """Scalar type stored in the usearch HNSW index (SQLite; pgvector stores f32); i8 builds ~5x faster than f32
    on 2 cores, hits are re-scored exactly."""
    ann_connectivity: int = Field(default=16, ge=2)
    """HNSW graph degree (higher: better recall, slower build)."""
    ann_expansion_add: int = Field(default=64, ge=1)
    """HNSW beam width while inserting (higher: better graph, slower build)."""
    ann_expansion_search: int = Field(default=128, ge=1)
    """HNSW beam width while searching (higher: better recall, slower queries)."""
    ann_persist: bool = True
    """Save built HNSW indexes beside the store (`<store>.ann/`) and load them when the vectors are unchanged
    (SQLite; PostgreSQL keeps its indexes in the database)."""
    ann_oversample: int = Field(default=2, ge=1)
    """The ANN path fetches oversample * k candidates, drops filtered ones and re-scores them exactly."""
    relaxed_anchor_threshold: float | None = Field(default=None, ge=-1.0, le=1.0)
    """Frontier default: also follow anchors whose cosine to a working-set anchor is at least this (None: off)."""
    relaxed_anchors_per_anchor: int = Field(default=10, ge=1)
    """With relaxed anchors on, each working-set anchor brings at most this many similar anchors."""
    frontier_max_per_anchor: int = Field(default=1000, ge=1)
    """Frontier reads at most this many entries per anchor (and per episode, for episode links), so a hub
    anchor cannot blow up the candidate set."""
    turn_link_window: int = Field(default=4, ge=1)
    """Turn links reach the same speaker's nearest turn with entries at most this many turns before and after."""
    similar_entries_per_entry: int = Field(default=10, ge=1)
    """With similar-abstraction frontier links on, each working-set entry brings at most this many entries."""
