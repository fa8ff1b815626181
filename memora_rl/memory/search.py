"""Search over one graph's in-memory view: per-channel rankings, filters and reciprocal-rank fusion.

Entries are ranked by their abstraction, value and anchor vectors (plus BM25 in the store, and
optionally the episode channel: entries of the episodes closest to the query); episodes are
ranked by their own cue + text vector.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from memora_rl.memory.graph_cache import GraphCache, timestamp
from memora_rl.memory.store import SearchFilters

_WORD = re.compile(r"\w+", re.UNICODE)


def rrf_fuse(rankings: Sequence[Sequence[int]], rrf_k: int) -> dict[int, float]:
    """Reciprocal-rank fusion: each ranking adds 1 / (rrf_k + rank + 1) to its items (rank is 0-based).

    >>> rrf_fuse([[7, 3], [3]], rrf_k=60) == {7: 1 / 61, 3: 1 / 62 + 1 / 61}
    True
    """
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking):
            scores[item] = scores.get(item, 0.0) + 1.0 / (rrf_k + rank + 1)
    return scores


def query_words(text: str) -> list[str]:
    """The distinct lower-cased words of a text query, in order.

    >>> query_words("What is Alice's job? What?")
    ['what', 'is', 'alice', 's', 'job']
    """
    return list(dict.fromkeys(word.lower() for word in _WORD.findall(text)))


def selective_words(words: Sequence[str], doc_counts: dict[str, int], max_docs: float) -> list[str]:
    """`words` found in at most `max_docs` entries; the rarest word when every word is more common.

    A word in a large share of the entries has a BM25 IDF near zero but costs FTS5 a scan of
    its whole posting list, so dropping it keeps the ranking and removes most of the cost.

    >>> selective_words(["what", "alice", "job"], {"what": 900, "alice": 40, "job": 70}, max_docs=100)
    ['alice', 'job']
    >>> selective_words(["the", "a"], {"the": 900, "a": 950}, max_docs=100)
    ['the']
    """
    kept = [word for word in words if doc_counts.get(word, 0) <= max_docs]
    if kept or not words:
        return kept
    return [min(words, key=lambda word: doc_counts.get(word, 0))]


def filter_mask(cache: GraphCache, filters: SearchFilters | None) -> np.ndarray | None:
    """Boolean mask (n_rows,) of entries passing `filters`; None when nothing is filtered.

    Entries without a time never pass a time-range filter.
    """
    if filters is None or (
        filters.start_time is None and filters.end_time is None and filters.speaker is None and not filters.episode_ids
    ):
        return None
    size = len(cache.entry_ids)
    mask = np.ones(size, dtype=bool)
    if filters.start_time is not None or filters.end_time is not None:
        times = cache.times_array()
        with np.errstate(invalid="ignore"):
            if filters.start_time is not None:
                mask &= times >= timestamp(filters.start_time)
            if filters.end_time is not None:
                mask &= times <= timestamp(filters.end_time)
    if filters.speaker is not None:
        wanted = filters.speaker.casefold()
        mask &= np.fromiter(
            ((speaker or "").casefold() == wanted for speaker in cache.speakers), dtype=bool, count=size
        )
    if filters.episode_ids is not None:
        in_episodes = np.zeros(size, dtype=bool)
        for episode_id in filters.episode_ids:
            rows = cache.episode_rows.get(episode_id)
            if rows:
                in_episodes[list(rows)] = True
        mask &= in_episodes
    return mask


def anchor_ranking(cache: GraphCache, query: np.ndarray, depth: int, mask: np.ndarray | None) -> list[int]:
    """Entry rows in the order of their best anchor's cosine to the query (ties by row)."""
    anchor_rows, _ = cache.anchors.top_k(query, depth)
    ranking: list[int] = []
    seen: set[int] = set()
    for anchor in anchor_rows:
        for entry in sorted(cache.anchor_entries[int(anchor)]):
            if entry in seen or (mask is not None and not mask[entry]):
                continue
            seen.add(entry)
            ranking.append(entry)
        if len(ranking) >= depth:
            break
    return ranking[:depth]


def vector_rankings(cache: GraphCache, query: np.ndarray, depth: int, mask: np.ndarray | None) -> list[list[int]]:
    """Rankings of entry rows by abstraction, value and anchor cosine."""
    abstraction_rows, _ = cache.abstractions.top_k(query, depth, mask)
    value_rows, _ = cache.values.top_k(query, depth, mask)
    return [
        [int(row) for row in abstraction_rows],
        [int(row) for row in value_rows],
        anchor_ranking(cache, query, depth, mask),
    ]


def episode_entry_ranking(cache: GraphCache, query: np.ndarray, depth: int, mask: np.ndarray | None) -> list[int]:
    """Entry rows of the episodes closest to the query (cue + text), each episode's entries by their own cosine.

    An entry's cosine is the larger of its abstraction and value cosine (as in the frontier); an
    entry of several episodes is ranked with the first (closest) of them.
    """
    episode_rows, _ = cache.episodes.top_k(query, depth)
    ranking: list[int] = []
    seen: set[int] = set()
    for episode_row in episode_rows:
        members = cache.episode_rows.get(cache.episode_ids[int(episode_row)], set())
        rows = [row for row in sorted(members) if row not in seen and (mask is None or mask[row])]
        if rows:
            scores = np.maximum(cache.abstractions.matrix[rows] @ query, cache.values.matrix[rows] @ query)  # (n,)
            ranked = [rows[i] for i in sorted(range(len(rows)), key=lambda i: (-float(scores[i]), rows[i]))]
            ranking.extend(ranked)
            seen.update(ranked)
        if len(ranking) >= depth:
            break
    return ranking[:depth]


def episode_mask(cache: GraphCache, filters: SearchFilters | None) -> np.ndarray | None:
    """Boolean mask (n_episode_rows,) of stored episodes named by `filters.episode_ids`; None when not filtered."""
    if filters is None or filters.episode_ids is None:
        return None
    mask = np.zeros(cache.episodes.size, dtype=bool)
    for episode_id in filters.episode_ids:
        row = cache.episode_row.get(episode_id)
        if row is not None:
            mask[row] = True
    return mask


def episode_ranking(
    cache: GraphCache, query: np.ndarray, k: int, filters: SearchFilters | None
) -> list[tuple[str, float]]:
    """The `k` stored episodes closest to the query as (episode id, cosine), best first.

    Of the filters only `episode_ids` applies: speaker and time ranges describe entries.
    """
    rows, scores = cache.episodes.top_k(query, k, episode_mask(cache, filters))
    return [(cache.episode_ids[int(row)], float(score)) for row, score in zip(rows, scores, strict=True)]
