"""Latency is timed warm: a cold first call (model load, store cache) is paid by an untimed warm-up, never a record."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from memora_rl.data.records import Conversation
from memora_rl.env.retrieval import RetrievalEnv
from memora_rl.evaluation.playback import play_context_tasks, play_graph_tasks
from memora_rl.evaluation.report import read_records
from memora_rl.judge import TrajectoryJudge
from memora_rl.policy.baselines import HeuristicPolicy
from memora_rl.policy.context_baselines import RetrievedContext
from tests.policy.graph import TASKS, PolicyTestStore

COLD_S = 1.5
"""What the first call costs in these tests (a model or index loaded on first use)."""


class ColdStartEnv:
    """A real `RetrievalEnv` whose first reset is slow, as a cold embedder and store make it."""

    def __init__(self, env: RetrievalEnv) -> None:
        self.env = env
        self.config = env.config
        self.cold = True
        self.resets = 0

    @property
    def last_search_s(self) -> float:
        return self.env.last_search_s

    def reset(self, **kwargs: Any) -> Any:
        self.resets += 1
        if self.cold:
            time.sleep(COLD_S)
            self.cold = False
        return self.env.reset(**kwargs)

    def step(self, action: str) -> Any:
        return self.env.step(action)


def test_the_first_graph_question_is_timed_warm(tmp_path: Path) -> None:
    store = PolicyTestStore()
    env = ColdStartEnv(RetrievalEnv(store, judge=TrajectoryJudge(embedder=store.embedder), embedder=store.embedder))
    jobs = list(enumerate(TASKS))
    asyncio.run(play_graph_tasks([env], jobs, HeuristicPolicy(), tmp_path / "records.jsonl"))
    records = read_records(tmp_path / "records.jsonl")
    assert [r.task_id for r in records] == [t.id for t in TASKS]  # the warm-up wrote no record
    assert env.resets == len(TASKS) + 1
    assert all(r.total_latency_s < COLD_S for r in records), [r.total_latency_s for r in records]


class ColdBaseline:
    """A context baseline whose first retrieval is slow (the embedder loads on first use)."""

    name = "cold"

    def __init__(self) -> None:
        self.calls = 0

    def retrieve_context(self, conversation: Conversation, question: str) -> RetrievedContext:
        self.calls += 1
        if self.calls == 1:
            time.sleep(COLD_S)
        return RetrievedContext(text="Alma: hello", turn_ids=["D1:1"], tokens=2)


def test_the_first_context_question_is_timed_warm(tmp_path: Path) -> None:
    conversation = Conversation.model_construct(id=TASKS[0].conversation_id)
    jobs = list(enumerate(TASKS))
    baseline = ColdBaseline()
    asyncio.run(play_context_tasks(baseline, {conversation.id: conversation}, jobs, tmp_path / "records.jsonl"))
    records = read_records(tmp_path / "records.jsonl")
    assert len(records) == len(TASKS) and baseline.calls == len(TASKS) + 1
    assert all(r.total_latency_s < COLD_S for r in records)
