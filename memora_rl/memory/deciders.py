"""Deterministic deciders for create-or-update (the LLM deciders live with the LLM builders).

A decider receives a candidate and the existing entries whose abstraction cosine is at least
gamma (best first, at most top_k) and answers a `MergeDecision`.
"""

from __future__ import annotations

from collections.abc import Sequence

from memora_rl.memory.records import EntryCandidate, MemoryEntry
from memora_rl.memory.store import MergeDecision


def always_create(candidate: EntryCandidate, similar: Sequence[MemoryEntry]) -> MergeDecision:
    """Never merge: every candidate becomes a new entry."""
    return MergeDecision(action="create")


def _same_speaker(candidate: EntryCandidate, entry: MemoryEntry) -> bool:
    """Speakers match case-insensitively; two unknown speakers match too."""
    return (candidate.speaker or "").casefold() == (entry.speaker or "").casefold()


def same_speaker_merge(candidate: EntryCandidate, similar: Sequence[MemoryEntry]) -> MergeDecision:
    """Merge into the most similar entry when it has the candidate's speaker; else create.

    The store only shows entries at or above gamma, so "most similar" already passed the
    threshold. The merged value is the candidate's value (the newer statement; the old value
    goes to history) unless the two values are equal, when the old value is kept. The
    abstraction is kept.
    """
    if not similar or not _same_speaker(candidate, similar[0]):
        return MergeDecision(action="create")
    top = similar[0]
    merged_value = top.value if top.value.strip().casefold() == candidate.value.strip().casefold() else None
    return MergeDecision(action="merge", target_id=top.id, merged_value=merged_value)


DEFAULT_DECIDER = same_speaker_merge
"""The deterministic decider the extractive builder uses unless told otherwise."""
