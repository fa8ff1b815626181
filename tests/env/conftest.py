"""Fixtures of the env tests: a small graph filled by hand (real embedder), its tasks, and an env factory.

`hand_store` is a `tests.graph_fixtures.HandGraphStore` over twelve invented entries, so the
env's semantics are tested independently of the SQLite store.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from memora_rl.data.records import Task
from memora_rl.env.config import EnvConfig
from memora_rl.env.retrieval import RetrievalEnv
from tests.graph_fixtures import EntrySpec, HandGraphStore

GRAPH_ID = "conv-test"

# (id, abstraction, value, source turn, anchors)
ENTRIES: list[EntrySpec] = [
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


@pytest.fixture(scope="session")
def hand_store() -> HandGraphStore:
    return HandGraphStore(GRAPH_ID, ENTRIES, anchor_choice="walk")


@pytest.fixture(scope="session")
def hand_tasks() -> list[Task]:
    return list(TASKS)


@pytest.fixture(scope="session")
def judge() -> Any:
    from memora_rl.judge import TrajectoryJudge

    return TrajectoryJudge()


@pytest.fixture
def make_hand_env(hand_store: HandGraphStore, judge: Any) -> Callable[..., RetrievalEnv]:
    def factory(**config: Any) -> RetrievalEnv:
        defaults: dict[str, Any] = {"initial_top_k": 2, "frontier_limit": 4}
        return RetrievalEnv(
            hand_store, EnvConfig(**{**defaults, **config}), tasks=TASKS, judge=judge, embedder=hand_store.embedder
        )

    return factory
