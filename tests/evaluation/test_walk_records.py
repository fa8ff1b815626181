"""Eval records carry the walk of graph policies (the states the web page's walk viewer steps through)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from memora_rl.core.walk import WalkLog
from memora_rl.env.retrieval import RetrievalEnv
from memora_rl.evaluation.playback import graph_record
from memora_rl.evaluation.records import QuestionRecord
from memora_rl.evaluation.report import append_record, read_records
from memora_rl.judge import TrajectoryJudge
from memora_rl.policy.baselines import HeuristicPolicy
from memora_rl.policy.runner import play_episode
from tests.policy.graph import TASKS, PolicyTestStore


def test_a_graph_record_carries_each_state_and_action_of_the_walk(tmp_path: Path) -> None:
    store = PolicyTestStore()
    env = RetrievalEnv(store, judge=TrajectoryJudge(embedder=store.embedder), embedder=store.embedder)
    task = TASKS[1]  # multi-hop: the heuristic expands before it stops
    result = asyncio.run(play_episode(env, task, HeuristicPolicy(), seed=0))
    record = graph_record(task, result, None)
    walk = record.walk
    assert walk is not None and walk == result.walk
    actions = result.trajectory.actions
    assert len(walk) == len(actions) + 1 and len(walk) > 2
    assert [step.action_text for step in walk[:-1]] == [action.text for action in actions]
    assert [step.action for step in walk[:-1]] == [action.kind for action in actions]
    assert walk[-1].action is None and walk[-1].action_text is None
    assert [step.step for step in walk] == list(range(len(walk)))
    chat_observations = [m["content"] for m in result.messages if m["role"] == "user"][-len(actions) :]
    assert [step.observation for step in walk[:-1]] == chat_observations  # what the policy was shown
    assert walk[0].working_set_ids and walk[0].frontier and walk[0].budget_left > walk[-1].budget_left
    assert walk[-1].working_set_ids == [entry.id for entry in result.trajectory.retrieved]

    append_record(tmp_path / "records.jsonl", record)
    (loaded,) = read_records(tmp_path)
    assert loaded.walk == walk


def test_an_old_record_line_without_walk_still_loads(tmp_path: Path) -> None:
    old = {"task_id": "t1", "conversation_id": "c1", "category": "temporal", "question": "q?", "gold_answer": "a",
           "policy": "heuristic", "retrieved_ids": ["e1"], "evidence_recall": 1.0, "context_tokens": 12, "steps": 1,
           "action_counts": {"stop": 1}, "judge_total": 0.4, "total_latency_s": 0.01}  # fmt: skip
    (tmp_path / "records.jsonl").write_text(json.dumps(old) + "\n")
    (record,) = read_records(tmp_path)
    assert record.walk is None and record.judge_total == 0.4
    assert QuestionRecord.model_validate_json(json.dumps(old)).walk is None


def test_an_env_whose_info_lacks_the_state_gives_no_walk() -> None:
    log = WalkLog()
    log.seen("obs", {"task_id": "t", "step": 0})  # a scripted env's info: no working set, frontier or budget
    log.acted('{"action": "stop"}', {"action": "stop"})
    log.ended("end", {"step": 1})
    assert log.walk() is None
