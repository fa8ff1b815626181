"""A hand-built in-memory memory graph (real embeddings) shared by the env and policy tests.

`HandGraphStore` implements only the `GraphStore` calls `RetrievalEnv` makes (graph_ids,
get_entries, entries, search, frontier, value_vectors) over a list of invented entries, so
the env and the policies are tested independently of the SQLite store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from memora_rl.embedding import DEFAULT_EMBEDDER, get_embedder
from memora_rl.memory.records import CueAnchor, FrontierItem, MemoryEntry, SearchHit

EntrySpec = tuple[str, str, str, str, list[str]]
"""(id, abstraction, value, source turn, cue anchor texts) of one hand-written entry."""


class HandGraphStore:
    """One graph over hand-written entries; search is cosine over "abstraction. value".

    `anchor_choice` says which shared anchor a frontier item shows: "entry" (the first of the
    linked entry's own anchors that the working set reaches) or "walk" (the first met walking
    the working set's entries and their anchors in order).
    """

    def __init__(self, graph_id: str, entries: Sequence[EntrySpec], anchor_choice: Literal["entry", "walk"]) -> None:
        self.graph_id = graph_id
        self.anchor_choice = anchor_choice
        self.embedder = get_embedder(DEFAULT_EMBEDDER)
        self._entries: dict[str, MemoryEntry] = {}
        self._anchors: dict[str, CueAnchor] = {}
        texts = sorted({text for *_, anchor_texts in entries for text in anchor_texts})
        for entry_id, abstraction, value, turn, anchor_texts in entries:
            anchor_ids = []
            for text in anchor_texts:
                anchor_id = f"a{texts.index(text)}"
                anchor = self._anchors.setdefault(anchor_id, CueAnchor(id=anchor_id, graph_id=graph_id, text=text))
                anchor.entry_ids.append(entry_id)
                anchor_ids.append(anchor_id)
            self._entries[entry_id] = MemoryEntry(
                id=entry_id, graph_id=graph_id, abstraction=abstraction, value=value,
                source_turn_ids=[turn], anchor_ids=anchor_ids,
            )  # fmt: skip
        self._ids = list(self._entries)
        self._vectors = self.embedder.encode([f"{e.abstraction}. {e.value}" for e in self._entries.values()])  # (N, D)

    def graph_ids(self) -> list[str]:
        return [self.graph_id]

    def get_entries(self, graph_id: str, entry_ids: Sequence[str]) -> list[MemoryEntry]:
        return [self._entries[i].model_copy(deep=True) for i in entry_ids if i in self._entries]

    def entries(self, graph_id: str) -> list[MemoryEntry]:
        return self.get_entries(graph_id, self._ids)

    def _vector(self, query: str | np.ndarray) -> np.ndarray:
        return self.embedder.encode_one(query) if isinstance(query, str) else query

    def search(self, graph_id: str, query: str | np.ndarray, k: int = 10, filters: object = None) -> list[SearchHit]:
        scores = self._vectors @ self._vector(query)  # (N,)
        order = sorted(range(len(self._ids)), key=lambda i: (-scores[i], self._ids[i]))[:k]
        return [SearchHit(entry_id=self._ids[i], score=float(scores[i])) for i in order]

    def frontier(
        self,
        graph_id: str,
        working_set: Sequence[str],
        visited: Sequence[str],
        query: str | np.ndarray,
        limit: int = 20,
    ) -> list[FrontierItem]:
        excluded = set(working_set) | set(visited)
        by_entry = self.anchor_choice == "entry"
        linked = self._linked_by_entry(working_set) if by_entry else self._linked_by_walk(working_set)
        vector = self._vector(query)
        items = [
            FrontierItem(entry_id=i, anchor_id=a.id, anchor_text=a.text,
                         score=float(self._vectors[self._ids.index(i)] @ vector))
            for i, a in linked.items() if i not in excluded
        ]  # fmt: skip
        return sorted(items, key=lambda item: (-item.score, item.entry_id))[:limit]

    def _linked_by_entry(self, working_set: Sequence[str]) -> dict[str, CueAnchor]:
        """Entries sharing an anchor with the working set, each with the first of its own shared anchors."""
        reached = {anchor_id for entry_id in working_set for anchor_id in self._entries[entry_id].anchor_ids}
        linked: dict[str, CueAnchor] = {}
        for entry in self._entries.values():
            shared = [anchor_id for anchor_id in entry.anchor_ids if anchor_id in reached]
            if shared:
                linked[entry.id] = self._anchors[shared[0]]
        return linked

    def _linked_by_walk(self, working_set: Sequence[str]) -> dict[str, CueAnchor]:
        """Entries sharing an anchor with the working set, each with the first anchor met walking it."""
        linked: dict[str, CueAnchor] = {}
        for entry_id in working_set:
            for anchor_id in self._entries[entry_id].anchor_ids:
                anchor = self._anchors[anchor_id]
                for other in anchor.entry_ids:
                    linked.setdefault(other, anchor)
        return linked

    def value_vectors(self, graph_id: str, entry_ids: Sequence[str]) -> np.ndarray:
        return self.embedder.encode([self._entries[i].value for i in entry_ids])
