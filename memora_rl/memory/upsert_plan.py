"""What one create-or-update writes: the similar entries, the decider's answer, and the new or merged entry.

`GraphWriter.upsert_entry` plans outside the write lock (a decider may be a slow LLM call) and,
if another writer committed meanwhile, plans again inside it; `UpsertPlanner` only reads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from memora_rl.errors import GraphError
from memora_rl.memory import sql_io
from memora_rl.memory.config import StoreConfig
from memora_rl.memory.database import StoreDatabase
from memora_rl.memory.records import EntryCandidate, MemoryEntry, ValueVersion
from memora_rl.memory.store import Decider, MergeDecision, SimilarBy
from memora_rl.memory.vectors import single_thread_blas
from memora_rl.memory.views import GraphViews


def union(first: Sequence[str], second: Sequence[str]) -> list[str]:
    """Items of both, first-seen order, no duplicates."""
    return list(dict.fromkeys([*first, *second]))


@dataclass
class UpsertPlan:
    """What one create-or-update writes: a new `entry` (no `target`), or `entry` merged into `target`."""

    entry: MemoryEntry
    abstraction_vector: np.ndarray
    value_vector: np.ndarray
    anchor_texts: list[str]
    """Anchors to link: the candidate's, or on a merge the decider's re-derived ones when it gave any."""
    target: MemoryEntry | None = None
    old: ValueVersion | None = None
    """The target's value before the merge, appended to its history."""
    replace_anchors: bool = False
    """True when `anchor_texts` replace the target's anchors instead of joining them."""


class UpsertPlanner:
    """Plans the create-or-updates of one store.

    Args:
        db: the store's database (reads of the similar entries).
        views: the store's in-memory views (similarity search, stored vectors).
        embed: encodes texts to unit rows (n, dim), checking the store's dimension.
        config: store settings (create-or-update gamma and top-k).
    """

    def __init__(
        self,
        db: StoreDatabase,
        views: GraphViews,
        embed: Callable[[Sequence[str]], np.ndarray],
        config: StoreConfig,
    ) -> None:
        self._db = db
        self._views = views
        self._embed = embed
        self.config = config

    def plan(
        self,
        graph_id: str,
        candidate: EntryCandidate,
        decider: Decider,
        abstraction_vector: np.ndarray,
        value_vector: np.ndarray,
        similar_by: SimilarBy,
    ) -> UpsertPlan:
        """Read the similar entries, ask the decider, and work out what its answer writes."""
        compared = abstraction_vector if similar_by == "abstraction" else value_vector
        similar = self._similar_entries(graph_id, compared, similar_by)
        decision = decider(candidate, similar) if similar else MergeDecision(action="create")
        if decision.action == "create":
            entry = MemoryEntry(
                id="", graph_id=graph_id, abstraction=candidate.abstraction, value=candidate.value,
                kind=candidate.kind, episode_ids=list(dict.fromkeys(candidate.episode_ids)),
                source_turn_ids=list(dict.fromkeys(candidate.source_turn_ids)), speaker=candidate.speaker,
                created_at=candidate.time, updated_at=candidate.time,
            )  # fmt: skip
            return UpsertPlan(entry, abstraction_vector, value_vector, list(candidate.anchors))
        target = next((entry for entry in similar if entry.id == decision.target_id), None)
        if target is None:
            raise GraphError(
                f"The decider merged into {decision.target_id!r}, which is not among the similar entries "
                f"{[entry.id for entry in similar]}. A decider must pick one of the entries it was shown."
            )
        return self._merge_plan(graph_id, candidate, target, decision, value_vector)

    def _similar_entries(self, graph_id: str, vector: np.ndarray, similar_by: SimilarBy) -> list[MemoryEntry]:
        """Existing entries whose abstraction (or value) cosine to `vector` is >= gamma, best first (at most top_k)."""
        try:
            known = self._views.get(graph_id)
        except GraphError:  # a graph that does not exist yet has nothing to merge with
            return []
        table = known.abstractions if similar_by == "abstraction" else known.values
        with single_thread_blas():
            rows, scores = table.top_k(vector, self.config.upsert.top_k)
        ids = [
            known.entry_ids[row] for row, score in zip(rows, scores, strict=True) if score >= self.config.upsert.gamma
        ]
        return sql_io.entries_by_id(self._db.conn, graph_id, ids, self._db.path) if ids else []

    def _merge_plan(
        self,
        graph_id: str,
        candidate: EntryCandidate,
        target: MemoryEntry,
        decision: MergeDecision,
        candidate_value_vector: np.ndarray,
    ) -> UpsertPlan:
        """The merged entry and its vectors (embedding a new value or abstraction only when they changed)."""
        abstraction = decision.refined_abstraction or target.abstraction
        value = decision.merged_value if decision.merged_value is not None else candidate.value
        value_vector = candidate_value_vector if value == candidate.value else self._embed([value])[0]
        abstraction_vector = (
            self._embed([abstraction])[0]
            if abstraction != target.abstraction
            else self._stored_abstraction(graph_id, target.id)
        )
        old = ValueVersion(value=target.value, abstraction=target.abstraction, source_turn_ids=target.source_turn_ids,
                           recorded_at=target.updated_at or target.created_at)  # fmt: skip
        merged = target.model_copy(deep=True)
        merged.abstraction, merged.value, merged.history = abstraction, value, [*target.history, old]
        merged.source_turn_ids = union(target.source_turn_ids, candidate.source_turn_ids)
        merged.episode_ids = union(target.episode_ids, candidate.episode_ids)
        merged.updated_at = candidate.time or target.updated_at
        if decision.anchors is not None and not any(sql_io.normalise_anchor(text) for text in decision.anchors):
            raise GraphError(
                f"The decider re-derived the anchors {decision.anchors!r} for entry {target.id!r}, none of which "
                "has any text. Give at least one non-empty anchor, or None to keep the entry's anchors."
            )
        anchor_texts = list(decision.anchors) if decision.anchors is not None else list(candidate.anchors)
        return UpsertPlan(merged, abstraction_vector, value_vector, anchor_texts, target=target, old=old,
                     replace_anchors=decision.anchors is not None)  # fmt: skip

    def _stored_abstraction(self, graph_id: str, entry_id: str) -> np.ndarray:
        """The stored abstraction vector of an entry (no re-embedding when it is unchanged)."""
        cache = self._views.get(graph_id)
        return cache.abstractions.matrix[cache.entry_row[entry_id]].copy()
