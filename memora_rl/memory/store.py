"""The graph-store protocol: what callers may ask of any backend (SQLite, PostgreSQL + pgvector)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Literal, Protocol, overload

import numpy as np
from pydantic import BaseModel, Field

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


class MergeDecision(BaseModel):
    """A decider's answer for a candidate: create a new entry, or merge into `target_id`."""

    action: Literal["create", "merge"]
    target_id: str | None = None
    merged_value: str | None = None
    """The value after merging (None keeps the candidate's value as the new value)."""
    refined_abstraction: str | None = None
    """A better abstraction for the merged entry, or None to keep the existing one."""
    anchors: list[str] | None = Field(default=None, min_length=1)
    """Cue anchors re-derived from the merged value: they replace the entry's anchors (anchors left with
    no entry are pruned); None keeps the entry's anchors and adds the candidate's."""


SimilarBy = Literal["abstraction", "value"]
"""Which vectors create-or-update compares: a candidate's abstraction with the stored abstractions, or its
value with the stored values (NEMORI reconciles a fact by the fact's own embedding)."""


Decider = Callable[[EntryCandidate, Sequence[MemoryEntry]], MergeDecision]
"""Given a candidate and its similar existing entries (cosine >= gamma, top-k, see `SimilarBy`), decide."""


class UpsertResult(BaseModel):
    """What create-or-update did."""

    entry: MemoryEntry
    created: bool


class SearchFilters(BaseModel):
    """Optional restrictions on a search."""

    start_time: datetime | None = None
    end_time: datetime | None = None
    speaker: str | None = None
    episode_ids: list[str] | None = None


class IntegrityReport(BaseModel):
    """Result of a consistency check; `ok` is True when `problems` is empty."""

    problems: list[str]

    @property
    def ok(self) -> bool:
        """True when no problem was found."""
        return not self.problems


class GraphStore(Protocol):
    """A collection of memory graphs (one per conversation or user), keyed by `graph_id`."""

    def graph_ids(self) -> list[str]:
        """Ids of the graphs held."""
        ...

    def add_episode(self, episode: Episode) -> Episode:
        """Store an episode (embedding its cue + text)."""
        ...

    def upsert_entry(
        self,
        graph_id: str,
        candidate: EntryCandidate,
        decider: Decider,
        *,
        similar_by: SimilarBy = "abstraction",
        receipt: str | None = None,
    ) -> UpsertResult:
        """Create-or-update: compare with existing abstractions (or values), let `decider` merge or create.

        `receipt` is stored in the same transaction as the write, so a resumed build knows it happened.
        """
        ...

    def receipts(self, graph_id: str) -> set[str]:
        """Receipts of the upserts written into a graph (see `upsert_entry`)."""
        ...

    def link_anchors(self, graph_id: str, entry_id: str, anchor_texts: Sequence[str]) -> list[CueAnchor]:
        """Link an entry to anchors, reusing an anchor with the same text."""
        ...

    def delete_entry(self, graph_id: str, entry_id: str) -> None:
        """Delete an entry and prune anchors left without entries, in one transaction."""
        ...

    def get_entries(self, graph_id: str, entry_ids: Sequence[str]) -> list[MemoryEntry]:
        """Entries by id, in the order asked."""
        ...

    def entries(self, graph_id: str) -> list[MemoryEntry]:
        """All entries of a graph."""
        ...

    def episodes(self, graph_id: str) -> list[Episode]:
        """All episodes of a graph."""
        ...

    def get_episodes(self, graph_id: str, episode_ids: Sequence[str]) -> list[Episode]:
        """Stored episodes by id, in the order asked; ids never stored are left out."""
        ...

    def anchors(self, graph_id: str) -> list[CueAnchor]:
        """All cue anchors of a graph."""
        ...

    def value_vectors(self, graph_id: str, entry_ids: Sequence[str]) -> np.ndarray:
        """L2-normalised value embeddings, shape (len(entry_ids), dim), for redundancy scoring."""
        ...

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
        """Fused (RRF) search over abstractions, values and anchors; `query` is text or a unit vector.

        `kinds` asks for entries (`SearchHit`, the default and only kind unless asked), episodes
        (`EpisodeHit`, by their cue + text vector) or both (up to `k` of each, entries first);
        `episode_channel` adds the entries of the closest episodes to the entry fusion (None: the store's default).
        """
        ...

    def frontier(
        self,
        graph_id: str,
        working_set: Sequence[str],
        visited: Sequence[str],
        query: str | np.ndarray,
        limit: int = 20,
        *,
        links: Sequence[FrontierLink] = ("anchor",),
        similar_threshold: float = 0.85,
        score: FrontierScore = "best",
        order: FrontierOrder = "score",
    ) -> list[FrontierItem]:
        """Entries linked to the working set, minus working set and visited, ranked by query (`score`).

        `links` says which links count: a shared cue anchor (the default, alone), a shared episode,
        an abstraction within `similar_threshold` cosine of a working-set entry's, the same speaker's
        neighbouring turn (`FrontierItem.via`). `order="interleave"` takes the best of each kind in turn.
        """
        ...

    def check_integrity(self) -> IntegrityReport:
        """Database integrity plus graph invariants (no dangling anchor, no entry missing its anchors)."""
        ...

    def close(self) -> None:
        """Flush and close."""
        ...
