"""The live judge subtracts the same context cost as the trajectory judge (weight λ per `context_token_unit`)."""

from __future__ import annotations

import pytest

from memora_rl.core.trajectory import Trajectory
from memora_rl.data.records import Task
from memora_rl.judge import JudgeConfig
from memora_rl.serve.live_judge import LiveJudge


def _walk(context_tokens: int) -> Trajectory:
    task = Task(id="q", conversation_id="g", question="?", answer="", category="open-domain")
    return Trajectory(task=task, graph_id="g", budget=4, budget_spent=2, context_tokens=context_tokens)


@pytest.mark.parametrize("weight", [0.0, 0.05, 0.2])
def test_the_context_cost_lowers_the_live_total_by_lambda_per_unit(weight: float):
    config = JudgeConfig(context_weight=weight, context_token_unit=100)
    short, long = LiveJudge(config).score(_walk(100)), LiveJudge(config).score(_walk(500))
    assert long.components["context_cost"] == pytest.approx(5.0)
    assert short.total - long.total == pytest.approx(weight * 4.0)
