"""The frontier of a working set: entries linked to it by anchors, episodes, similar abstractions or turns.

Links are shared (or relaxed: similar) cue anchors, shared episodes, abstractions similar to a
working-set entry's, and the same speaker's neighbouring turns; callers choose which count (anchors
only by default). A `search` link needs no working-set entry: the query's best entries not yet held.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import TypeVar

import numpy as np

from memora_rl.memory.graph_cache import GraphCache
from memora_rl.memory.records import SEARCH_LINK_TEXT, FrontierItem, FrontierLink, FrontierOrder, FrontierScore
from memora_rl.memory.search import rrf_fuse, vector_rankings

T = TypeVar("T")

AbstractionLookup = Callable[[Sequence[str]], Mapping[str, str]]
"""Abstractions of entries by id (the view keeps vectors, not texts): labels of similar-abstraction links."""


def working_set_anchors(cache: GraphCache, working_rows: Iterable[int]) -> set[int]:
    """Anchor rows linked to the working set's entries."""
    anchors: set[int] = set()
    for row in working_rows:
        anchors |= cache.entry_anchors[row]
    return anchors


def relaxed_anchors(cache: GraphCache, anchors: set[int], threshold: float | None) -> set[int]:
    """Anchor rows within `threshold` cosine of one of `anchors` (and not among them); none when threshold is None."""
    if threshold is None or not anchors or cache.anchors.live == 0:
        return set()
    relaxed: set[int] = set()
    per_anchor = cache.config.relaxed_anchors_per_anchor
    for anchor in anchors:  # nearest anchors of each own anchor (exact or ANN, like search)
        rows, scores = cache.anchors.top_k(cache.anchors.matrix[anchor], per_anchor + 1)
        relaxed |= {int(row) for row, score in zip(rows, scores, strict=True) if score >= threshold}
    return relaxed - anchors


def anchor_links(cache: GraphCache, anchors: set[int], excluded_rows: set[int]) -> dict[int, list[int]]:
    """Entry rows reached through `anchors` (at most `frontier_max_per_anchor` each), with their anchors."""
    reached: dict[int, list[int]] = {}
    cap = cache.config.frontier_max_per_anchor
    for anchor in anchors:
        members = cache.anchor_entries[anchor]
        for entry in sorted(members)[:cap] if len(members) > cap else members:
            if entry not in excluded_rows:
                reached.setdefault(entry, []).append(anchor)
    return reached


def episode_links(cache: GraphCache, working_rows: Iterable[int], excluded_rows: set[int]) -> dict[int, list[str]]:
    """Entry rows sharing an episode with the working set, with the shared episode ids (in the working set's order)."""
    episodes = dict.fromkeys(episode_id for row in working_rows for episode_id in cache.row_episodes[row])
    reached: dict[int, list[str]] = {}
    cap = cache.config.frontier_max_per_anchor
    for episode_id in episodes:
        for entry in sorted(cache.episode_rows.get(episode_id, ()))[:cap]:
            if entry not in excluded_rows:
                reached.setdefault(entry, []).append(episode_id)
    return reached


def turn_links(cache: GraphCache, working_rows: Iterable[int], excluded_rows: set[int]) -> dict[int, list[int]]:
    """Entry rows of the same speaker's previous and next turn of each working-set entry, with that entry's row.

    A speaker's story runs over their turns, between the other speaker's replies: the same speaker's
    turn before and after a hit often holds the rest of it.
    """
    reached: dict[int, list[int]] = {}
    for row in working_rows:
        for entry in neighbour_turn_rows(cache, row):
            if entry not in excluded_rows:
                reached.setdefault(entry, []).append(row)
    return reached


def neighbour_turn_rows(cache: GraphCache, row: int) -> list[int]:
    """Entry rows of the same speaker's nearest turn with entries before and after each source turn of `row`.

    Only turns of the same session at most `turn_link_window` turns away count; speakers are compared
    as stored (None matches None).
    """
    found: list[int] = []
    for session, turn in cache.row_turns[row]:
        for step in (-1, 1):
            for distance in range(1, cache.config.turn_link_window + 1):
                rows = cache.turn_rows.get((session, turn + step * distance), ())
                same = sorted(other for other in rows if cache.speakers[other] == cache.speakers[row])
                if same:
                    found += same
                    break
    return found


def similar_links(
    cache: GraphCache, working_rows: Iterable[int], excluded_rows: set[int], threshold: float
) -> dict[int, list[tuple[int, float]]]:
    """Entry rows whose abstraction is within `threshold` cosine of a working-set entry's, with (that entry, cosine).

    Each working-set entry brings at most `similar_entries_per_entry` entries, closest first.
    """
    allowed = np.ones(cache.abstractions.size, dtype=bool)  # (n_rows,)
    allowed[list(excluded_rows)] = False
    reached: dict[int, list[tuple[int, float]]] = {}
    for row in working_rows:
        rows, scores = cache.abstractions.top_k(
            cache.abstractions.matrix[row], cache.config.similar_entries_per_entry, allowed
        )
        for entry, score in zip(rows.tolist(), scores.tolist(), strict=True):
            if score >= threshold:
                reached.setdefault(entry, []).append((row, score))
    return reached


def search_links(cache: GraphCache, excluded_rows: set[int], query: np.ndarray, count: int) -> dict[int, list[int]]:
    """The `count` best entry rows for `query` outside `excluded_rows` as the store's search fuses them: its next hits.

    The search's vector channels (abstraction, value, anchor) fused by reciprocal rank; the keyword channel needs
    the query's text, which the frontier is not given.
    """
    mask = np.ones(cache.values.size, dtype=bool)  # (n_rows,)
    mask[list(excluded_rows)] = False
    rankings = vector_rankings(cache, query, max(count, cache.config.channel_depth), mask)
    fused = rrf_fuse(rankings, cache.config.rrf_k)
    return {row: [] for row, _ in sorted(fused.items(), key=lambda item: (-item[1], item[0]))[:count]}


def frontier_items(
    cache: GraphCache,
    working_rows: list[int],
    excluded_rows: set[int],
    query: np.ndarray,
    limit: int,
    relaxed_threshold: float | None,
    links: Collection[FrontierLink] = ("anchor",),
    similar_threshold: float = 1.0,
    score: FrontierScore = "best",
    order: FrontierOrder = "score",
    abstraction_of: AbstractionLookup | None = None,
) -> list[FrontierItem]:
    """Entries linked to the working set, minus `excluded_rows`: those sharing an anchor with it first, then the rest.

    Within each group, best cosine to `query` first; an entry's score is the larger of its abstraction
    and value cosine to the query (`score="best"`) or its value's (`"value"`). `links` says which links
    count: shared (or relaxed) anchors, shared episodes, similar abstractions (cosine >=
    `similar_threshold`), the same speaker's neighbouring turns (`abstraction_of` labels the last two
    by the working-set entry's abstraction), the search's best `limit` entries not held (search). A shared
    anchor is the strongest link: a relaxed one only says two cues read alike ("Talia + jonas", "Talia +
    jogging"), so entries it alone reaches never push a shared anchor's out of the frontier.
    An entry reached several ways is labelled by the first of anchor, episode, similar, turn, search: among
    the anchors that reached it the one closest to the query (a shared one if any), among the episodes
    the closest stored one, among similar entries the most similar, among turn links the first.
    `order="interleave"` takes the best item of each such label in turn, labels in `links` order.
    """
    if limit <= 0:
        return []
    own = working_set_anchors(cache, working_rows) if "anchor" in links else set()
    anchors = own | relaxed_anchors(cache, own, relaxed_threshold)
    by_anchor = anchor_links(cache, anchors, excluded_rows)
    by_episode = episode_links(cache, working_rows, excluded_rows) if "episode" in links else {}
    by_similar = similar_links(cache, working_rows, excluded_rows, similar_threshold) if "similar" in links else {}
    by_turn = turn_links(cache, working_rows, excluded_rows) if "turn" in links else {}
    by_search = search_links(cache, excluded_rows, query, limit) if "search" in links else {}
    reached = dict.fromkeys([*by_anchor, *by_episode, *by_similar, *by_turn, *by_search])
    if not reached:
        return []
    rows = np.fromiter(reached.keys(), dtype=np.int64, count=len(reached))
    scores = cache.values.matrix[rows] @ query  # (n,)
    if score == "best":
        scores = np.maximum(cache.abstractions.matrix[rows] @ query, scores)
    shared = np.fromiter((not own.isdisjoint(by_anchor.get(int(row), ())) for row in rows), dtype=bool, count=len(rows))
    rank = scores - 3.0 * ~shared  # (n,) cosines lie in [-1, 1], so every shared-anchor entry outranks the rest
    kinds: list[FrontierLink] = [
        "anchor" if row in by_anchor else "episode" if row in by_episode else "similar" if row in by_similar
        else "turn" if row in by_turn else "search"
        for row in rows.tolist()
    ]  # fmt: skip

    def best_first(indices: Iterable[int]) -> list[int]:
        return sorted(indices, key=lambda i: (-float(rank[i]), cache.entry_ids[rows[i]]))

    if order == "interleave":
        chosen = round_robin([best_first(i for i, k in enumerate(kinds) if k == link) for link in links], limit)
    else:
        top = np.argpartition(-rank, limit - 1)[:limit] if len(rows) > limit else np.arange(len(rows))
        chosen = best_first(top.tolist())
    anchor_list = sorted(anchors)
    anchor_scores = dict(zip(anchor_list, (cache.anchors.matrix[anchor_list] @ query).tolist(), strict=True))
    sources = [source for i in chosen for source, _ in by_similar.get(int(rows[i]), [])]
    sources += [source for i in chosen for source in by_turn.get(int(rows[i]), [])[:1]]
    abstractions = abstraction_of([cache.entry_ids[row] for row in set(sources)]) if sources and abstraction_of else {}
    items = []
    for i in chosen:
        row, cosine = int(rows[i]), float(scores[i])
        entry_id = cache.entry_ids[row]
        if kinds[i] == "anchor":
            reaching = [a for a in by_anchor[row] if a in own] or by_anchor[row]
            anchor = max(reaching, key=lambda a: (anchor_scores[a], -a))
            link = (cache.anchor_ids[anchor], cache.anchor_texts[anchor])
        elif kinds[i] == "episode":
            episode_id = max(by_episode[row], key=lambda e: _episode_score(cache, e, query))
            link = (episode_id, cache.episode_label(episode_id))
        elif kinds[i] == "similar":
            source = cache.entry_ids[max(by_similar[row], key=lambda pair: pair[1])[0]]
            link = (source, abstractions.get(source, source))
        elif kinds[i] == "turn":
            source = cache.entry_ids[by_turn[row][0]]
            link = (source, abstractions.get(source, source))
        else:
            link = (SEARCH_LINK_TEXT, SEARCH_LINK_TEXT)
        anchor_id, anchor_text = link
        items.append(
            FrontierItem(entry_id=entry_id, anchor_id=anchor_id, anchor_text=anchor_text, score=cosine, via=kinds[i])
        )
    return items


def round_robin(groups: Sequence[Sequence[T]], limit: int) -> list[T]:
    """The first `limit` items taken one group at a time, each group in its own order.

    >>> round_robin([[1, 2, 3], [], [4]], 3)
    [1, 4, 2]
    """
    return [item for turn in itertools.zip_longest(*groups) for item in turn if item is not None][:limit]


def _episode_score(cache: GraphCache, episode_id: str, query: np.ndarray) -> float:
    """Cosine of a stored episode to the query; -2 (below any cosine) for an episode never stored."""
    row = cache.episode_row.get(episode_id)
    return float(cache.episodes.matrix[row] @ query) if row is not None else -2.0
