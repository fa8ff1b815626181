"""A tiny in-memory memory graph (real embeddings) for policy and runner tests, with its tasks.

It implements only the `GraphStore` calls `RetrievalEnv` makes: graph_ids, get_entries,
search (cosine over abstraction + value) and frontier (entries sharing a cue anchor).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from memora_rl.data.records import Task
from memora_rl.embedding import get_embedder
from memora_rl.memory.records import FrontierItem, MemoryEntry, SearchHit

GRAPH_ID = "conv-policy"

# (id, abstraction, value, source turn, cue anchors)
ENTRIES = [
    (
        "m1",
        "Tomas's job",
        "Tomas repairs bicycles at a shop called Spoke & Chain.",
        "D1:2",
        ["Tomas + work", "Tomas + daily life"],
    ),
    (
        "m2",
        "Tomas's coworker",
        "Tomas works alongside Ines, who builds wheels.",
        "D1:5",
        ["Tomas + work", "Ines + craft"],
    ),
    ("m3", "Ines's side project", "Ines restores vintage radios on weekends.", "D2:1", ["Ines + craft"]),
    ("m4", "Tomas's dog", "Tomas has a greyhound named Comet.", "D2:4", ["Tomas + pets", "Tomas + daily life"]),
    ("m5", "Comet's habits", "Comet sleeps under the workbench at the shop.", "D3:3", ["Tomas + pets", "Tomas + work"]),
    ("m6", "Tomas's hometown", "Tomas grew up in Valdivia, Chile.", "D3:6", ["Tomas + home", "Tomas + daily life"]),
    (
        "m7",
        "Tomas's holiday",
        "Tomas will visit his parents in Valdivia in December.",
        "D4:1",
        ["Tomas + home", "Tomas + daily life"],
    ),
    (
        "m8",
        "Tomas's breakfast",
        "Tomas eats oatmeal with honey every morning.",
        "D4:3",
        ["Tomas + food", "Tomas + daily life"],
    ),
]

TASKS = [
    Task(id="p1", conversation_id=GRAPH_ID, question="Where does Tomas work?", answer="Spoke & Chain",
         evidence=["D1:2"], category="single-hop"),
    Task(id="p2", conversation_id=GRAPH_ID, question="What does Tomas's coworker do on weekends?",
         answer="restores vintage radios", evidence=["D1:5", "D2:1"], category="multi-hop"),
    Task(id="p3", conversation_id=GRAPH_ID, question="When will Tomas go back to his hometown?",
         answer="December", evidence=["D3:6", "D4:1"], category="temporal"),
]  # fmt: skip


class PolicyTestStore:
    """The graph above with real all-MiniLM-L6-v2 vectors."""

    def __init__(self) -> None:
        self.embedder = get_embedder()
        self.entries = {
            entry_id: MemoryEntry(
                id=entry_id, graph_id=GRAPH_ID, abstraction=abstraction, value=value,
                source_turn_ids=[turn], anchor_ids=anchors,
            )
            for entry_id, abstraction, value, turn, anchors in ENTRIES
        }  # fmt: skip
        self.ids = list(self.entries)
        self.vectors = self.embedder.encode([f"{e.abstraction}. {e.value}" for e in self.entries.values()])  # (N, D)

    def graph_ids(self) -> list[str]:
        return [GRAPH_ID]

    def get_entries(self, graph_id: str, entry_ids: Sequence[str]) -> list[MemoryEntry]:
        return [self.entries[i].model_copy(deep=True) for i in entry_ids if i in self.entries]

    def _vector(self, query: str | np.ndarray) -> np.ndarray:
        return self.embedder.encode_one(query) if isinstance(query, str) else query

    def search(self, graph_id: str, query: str | np.ndarray, k: int = 10, filters: object = None) -> list[SearchHit]:
        scores = self.vectors @ self._vector(query)  # (N,)
        order = sorted(range(len(self.ids)), key=lambda i: (-scores[i], self.ids[i]))[:k]
        return [SearchHit(entry_id=self.ids[i], score=float(scores[i])) for i in order]

    def frontier(
        self,
        graph_id: str,
        working_set: Sequence[str],
        visited: Sequence[str],
        query: str | np.ndarray,
        limit: int = 20,
    ) -> list[FrontierItem]:
        vector = self._vector(query)
        excluded = set(working_set) | set(visited)
        reached = {anchor for entry_id in working_set for anchor in self.entries[entry_id].anchor_ids}
        items = []
        for entry in self.entries.values():
            shared = [anchor for anchor in entry.anchor_ids if anchor in reached]
            if entry.id in excluded or not shared:
                continue
            score = float(self.vectors[self.ids.index(entry.id)] @ vector)
            items.append(FrontierItem(entry_id=entry.id, anchor_id=shared[0], anchor_text=shared[0], score=score))
        return sorted(items, key=lambda item: (-item.score, item.entry_id))[:limit]
