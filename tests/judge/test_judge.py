"""TrajectoryJudge with the model-free grader, on hand-built trajectories and the real embedder."""

from __future__ import annotations

import asyncio

import pytest

from memora_rl.errors import ConfigError
from memora_rl.judge import JudgeConfig, TrajectoryJudge
from memora_rl.judge.judge import JudgeResult
from tests.judge.trajectories import build_trajectory, make_entry

ALICE = make_entry("e1", "Alice works at Nova as a backend engineer", ["D1:1"])
ALICE_COPY = make_entry("e2", "Alice works at Nova as a backend engineer", ["D2:3"])
ALICE_MOVE = make_entry("e5", "Alice moved to Lisbon in March", ["D2:3"])


@pytest.fixture(scope="module")
def judge(embedder) -> TrajectoryJudge:
    return TrajectoryJudge(JudgeConfig(), embedder=embedder)


def test_components_and_total(judge):
    trajectory = build_trajectory(
        entries=[ALICE, ALICE_MOVE], budget=10, budget_spent=2, kinds=["expand", "stop"], context_tokens=17
    )
    result = judge.score(trajectory)
    parts = result.components
    assert set(parts) == set(judge.component_names)
    assert parts["correctness"] == parts["evidence_recall"] == 1.0
    assert parts["redundancy"] == 0.0
    assert parts["cost"] == pytest.approx(0.2)
    assert parts["format"] == 1.0
    assert parts["context_tokens"] == 17 and parts["steps"] == 2
    assert parts["initial_recall"] == 0.0 and parts["recall_gain"] == 1.0  # nothing retrieved at reset
    assert parts["valid_action_rate"] == 1.0 and (parts["actions_expand"], parts["actions_stop"]) == (1.0, 1.0)
    assert result.total == parts["total"] == pytest.approx(1.0 - 0.4 * 0.2 + 0.1)
    weights = {item.name: item.weight for item in judge.rubric.items}
    logged = ["initial_recall", "recall_gain", "valid_action_rate", "actions_expand", "actions_forced"]
    assert all(weights[name] == 0.0 for name in logged)  # logged only
    assert result.metrics()["reward/cost"] == pytest.approx(0.2)


def test_duplicates_and_invalid_actions_lower_the_reward(judge):
    clean = judge.score(build_trajectory(entries=[ALICE, ALICE_MOVE], budget_spent=2, kinds=["expand", "stop"]))
    duplicated = judge.score(build_trajectory(entries=[ALICE, ALICE_COPY], budget_spent=2, kinds=["expand", "stop"]))
    invalid = judge.score(build_trajectory(entries=[ALICE, ALICE_MOVE], budget_spent=2, kinds=["invalid", "stop"]))
    assert duplicated.components["redundancy"] == 1.0
    assert duplicated.total == pytest.approx(clean.total - 0.4)
    assert invalid.components["format"] == 0.5
    assert invalid.total < clean.total


def test_weights_come_from_config(embedder):
    config = JudgeConfig(correctness_weight=2.0, cost_weight=0.0, format_weight=0.0, redundancy_weight=0.0)
    result = TrajectoryJudge(config, embedder=embedder).score(build_trajectory(entries=[ALICE], budget_spent=9))
    assert result.total == pytest.approx(2.0 * 0.5)
    assert result.components["cost"] == pytest.approx(0.9)  # still logged


def test_judge_never_swallows_an_exception(embedder):
    class BrokenEncoder:
        def encode(self, texts):
            raise RuntimeError("embedder down")

    judge = TrajectoryJudge(JudgeConfig(), embedder=BrokenEncoder())
    with pytest.raises(RuntimeError, match="embedder down"):
        judge.score(build_trajectory(entries=[ALICE, ALICE_MOVE]))


def test_score_many_matches_score(judge):
    batch = [build_trajectory(entries=[ALICE]), build_trajectory(entries=[ALICE, ALICE_COPY])]
    results = asyncio.run(judge.score_many(batch))
    assert [result.total for result in results] == [judge.score(t).total for t in batch]
    assert all(isinstance(result, JudgeResult) and result.answer is None for result in results)


def test_answer_grader_without_llm_is_a_config_error(embedder):
    with pytest.raises(ConfigError, match="needs an answerer LLM"):
        TrajectoryJudge(JudgeConfig(correctness="answer_llm"), embedder=embedder)


def test_config_rejects_judge_without_answerer():
    with pytest.raises(ConfigError, match="answerer"):
        JudgeConfig(judge_llm={"base_url": "http://127.0.0.1:1/v1", "model": "m"})
