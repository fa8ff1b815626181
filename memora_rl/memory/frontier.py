"""The frontier of a working set: entries reached through shared (or similar) cue anchors."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from memora_rl.memory.graph_cache import GraphCache
from memora_rl.memory.records import FrontierItem


def working_set_anchors(cache: GraphCache, working_rows: Iterable[int], relaxed_threshold: float | None) -> set[int]:
    """Anchor rows linked to the working set, plus anchors within `relaxed_threshold` cosine of them."""
    anchors: set[int] = set()
    for row in working_rows:
        anchors |= cache.entry_anchors[row]
    if relaxed_threshold is None or not anchors or cache.anchors.live == 0:
        return anchors
    relaxed: set[int] = set()
    per_anchor = cache.config.relaxed_anchors_per_anchor
    for anchor in anchors:  # nearest anchors of each own anchor (exact or ANN, like search)
        rows, scores = cache.anchors.top_k(cache.anchors.matrix[anchor], per_anchor + 1)
        relaxed |= {int(row) for row, score in zip(rows, scores, strict=True) if score >= relaxed_threshold}
    return anchors | relaxed


def frontier_items(
    cache: GraphCache,
    working_rows: list[int],
    excluded_rows: set[int],
    query: np.ndarray,
    limit: int,
    relaxed_threshold: float | None,
) -> list[FrontierItem]:
    """Entries sharing an anchor with the working set, minus `excluded_rows`, best cosine to `query` first.

    An entry's score is the larger of its abstraction and value cosine to the query; the
    anchor reported with it is, among the anchors that reached it, the one closest to the query.
    """
    anchors = working_set_anchors(cache, working_rows, relaxed_threshold)
    if not anchors or limit <= 0:
        return []
    reached: dict[int, list[int]] = {}
    cap = cache.config.frontier_max_per_anchor
    for anchor in anchors:
        members = cache.anchor_entries[anchor]
        for entry in sorted(members)[:cap] if len(members) > cap else members:
            if entry not in excluded_rows:
                reached.setdefault(entry, []).append(anchor)
    if not reached:
        return []
    rows = np.fromiter(reached.keys(), dtype=np.int64, count=len(reached))
    scores = np.maximum(cache.abstractions.matrix[rows] @ query, cache.values.matrix[rows] @ query)  # (n,)
    best = np.argpartition(-scores, limit - 1)[:limit] if len(rows) > limit else np.arange(len(rows))
    order = sorted(best.tolist(), key=lambda i: (-float(scores[i]), cache.entry_ids[rows[i]]))
    anchor_list = sorted(anchors)
    anchor_scores = dict(zip(anchor_list, (cache.anchors.matrix[anchor_list] @ query).tolist(), strict=True))
    items = []
    for i in order:
        row = int(rows[i])
        best = max(reached[row], key=lambda anchor: (anchor_scores[anchor], -anchor))
        items.append(
            FrontierItem(
                entry_id=cache.entry_ids[row],
                anchor_id=cache.anchor_ids[best],
                anchor_text=cache.anchor_texts[best],
                score=float(scores[i]),
            )
        )
    return items
