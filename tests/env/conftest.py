"""Fixtures of the env tests: a small graph filled by hand (real embedder), its tasks, and an env factory.

`HandFilledStore` implements the `GraphStore` calls the env makes over twelve invented
entries, so the env's semantics are tested independently of the SQLite store.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from memora_rl.data.records import Task
from memora_rl.embedding import DEFAULT_EMBEDDER, get_embedder
from memora_rl.env.config import EnvConfig
from memora_rl.env.retrieval import RetrievalEnv
from memora_rl.memory.records import CueAnchor, FrontierItem, MemoryEntry, SearchHit

GRAPH_ID = "conv-test"

# (id, abstraction, value, source turn, anchors)
ENTRIES: list[tuple[str, str, str, str, list[str]]] = [
    ("e1", "Alma's employer", "Alma works at Bluefin Analytics as a data analyst.", "D1:1", ["Alma + job"]),
    ("e2", "Alma's manager", "Alma's manager at Bluefin is Bruno.", "D1:3", ["Alma + job", "Bruno + work"]),
    ("e3", "Bruno's hobby", "Bruno goes rock climbing every Saturday.", "D2:2", ["Bruno + work", "Bruno + hobby"]),
    ("e4", "Alma's pet", "Alma has a cat called Pepper.", "D2:5", ["Alma + pet"]),
    ("e5", "Pepper's vet", "Pepper sees a vet in Lisbon every spring.", "D3:1", ["Alma + pet", "Lisbon + trips"]),
    ("e6", "Alma's home city", "Alma lives in Porto since 2024.", "D3:4", ["Alma + home"]),
    ("e7", "Alma's trip plans", "Alma plans a trip to Osaka in autumn.", "D4:2", ["Alma + travel", "Alma + home"]),
    ("e8", "Bruno's instrument", "Bruno plays the cello in a quartet.", "D4:6", ["Bruno + hobby"]),
    ("e9", "Alma's favourite food", "Alma's favourite food is Thai food.", "D5:1", ["Alma + food"]),
    ("e10", "Alma's sister", "Alma's sister Celia is a nurse in Lisbon.", "D5:3", ["Alma + family", "Lisbon + trips"]),
    ("e11", "Celia's partner", "Celia married Dario in June.", "D6:2", ["Alma + family"]),
    ("e12", "Dario's café", "Dario runs a small café near the river — “Café Ümlaut” 🙂.", "D6:4", ["Alma + family"]),
]

TASKS = [
    Task(id="t1", conversation_id=GRAPH_ID, question="Who is Alma's manager?", answer="Bruno",
         evidence=["D1:3"], category="single-hop"),
    Task(id="t2", conversation_id=GRAPH_ID, question="What does Alma's manager do on Saturdays?",
         answer="rock climbing", evidence=["D1:3", "D2:2"], category="multi-hop"),
    Task(id="t3", conversation_id=GRAPH_ID, question="Where does Alma’s sister work — and who’s her partner?",
         answer="Lisbon; Dario", evidence=["D5:3", "D6:2"], category="multi-hop"),
]  # fmt: skip


class HandFilledStore:
    """Implements the GraphStore calls the env makes, over `ENTRIES`, with real embeddings."""

    def __init__(self) -> None:
        self.embedder = get_embedder(DEFAULT_EMBEDDER)
        self._entries: dict[str, MemoryEntry] = {}
        self._anchors: dict[str, CueAnchor] = {}
        for entry_id, abstraction, value, turn, anchor_texts in ENTRIES:
            anchor_ids = []
            for text in anchor_texts:
                anchor_id = "a" + str(sorted({t for *_, ts in ENTRIES for t in ts}).index(text))
                anchor = self._anchors.setdefault(anchor_id, CueAnchor(id=anchor_id, graph_id=GRAPH_ID, text=text))
                anchor.entry_ids.append(entry_id)
                anchor_ids.append(anchor_id)
            self._entries[entry_id] = MemoryEntry(
                id=entry_id, graph_id=GRAPH_ID, abstraction=abstraction, value=value,
                source_turn_ids=[turn], anchor_ids=anchor_ids,
            )  # fmt: skip
        self._ids = list(self._entries)
        texts = [f"{e.abstraction}. {e.value}" for e in self._entries.values()]
        self._vectors = self.embedder.encode(texts)  # (N, 384)

    def graph_ids(self) -> list[str]:
        return [GRAPH_ID]

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
        vector = self._vector(query)
        found: dict[str, CueAnchor] = {}
        for entry_id in working_set:
            for anchor_id in self._entries[entry_id].anchor_ids:
                anchor = self._anchors[anchor_id]
                for linked in anchor.entry_ids:
                    if linked not in excluded:
                        found.setdefault(linked, anchor)
        items = [
            FrontierItem(entry_id=i, anchor_id=a.id, anchor_text=a.text,
                         score=float(self._vectors[self._ids.index(i)] @ vector))
            for i, a in found.items()
        ]  # fmt: skip
        return sorted(items, key=lambda item: (-item.score, item.entry_id))[:limit]

    def value_vectors(self, graph_id: str, entry_ids: Sequence[str]) -> np.ndarray:
        return self.embedder.encode([self._entries[i].value for i in entry_ids])


@pytest.fixture(scope="session")
def hand_store() -> HandFilledStore:
    return HandFilledStore()


@pytest.fixture(scope="session")
def hand_tasks() -> list[Task]:
    return list(TASKS)


@pytest.fixture(scope="session")
def judge() -> Any:
    from memora_rl.judge import TrajectoryJudge

    return TrajectoryJudge()


@pytest.fixture
def make_hand_env(hand_store: HandFilledStore, judge: Any) -> Callable[..., RetrievalEnv]:
    def factory(**config: Any) -> RetrievalEnv:
        defaults: dict[str, Any] = {"initial_top_k": 2, "frontier_limit": 4}
        return RetrievalEnv(
            hand_store, EnvConfig(**{**defaults, **config}), tasks=TASKS, judge=judge, embedder=hand_store.embedder
        )

    return factory
