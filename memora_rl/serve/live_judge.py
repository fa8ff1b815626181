"""The judge of live walks: the model-free cost and format terms only.

A live question has no gold evidence, so correctness (evidence recall) would always read 1.0,
and redundancy costs one embedding per retrieved value (about half of a semantic retrieve's
time on 2 cores). The service therefore scores a walk with the terms that need neither:
cost, context cost, format, steps, context tokens, refines and invalid actions, with
total = format_weight * format - cost_weight * cost - context_weight * context_cost (the trajectory judge's
weights).
"""

from __future__ import annotations

from memora_rl.core.trajectory import Trajectory
from memora_rl.judge import JudgeConfig, JudgeResult
from memora_rl.judge.graders import (
    context_cost,
    context_tokens,
    cost,
    format_score,
    invalid_actions,
    refines,
    steps,
)


class LiveJudge:
    """Scores live trajectories without gold evidence or embeddings (see the module docstring)."""

    def __init__(self, config: JudgeConfig | None = None) -> None:
        self.config = config or JudgeConfig()

    def score(self, trajectory: Trajectory) -> JudgeResult:
        """Cost and format components of one walk, and their weighted total.

        >>> from memora_rl.data.records import Task
        >>> task = Task(id="q", conversation_id="g", question="?", answer="", category="open-domain")
        >>> LiveJudge().score(Trajectory(task=task, graph_id="g", budget=4)).components["cost"]
        0.0
        """
        components = {
            "cost": cost(trajectory, self.config.refine_cost),
            "context_cost": context_cost(trajectory, self.config.context_token_unit),
            "format": format_score(trajectory),
            "steps": steps(trajectory),
            "context_tokens": context_tokens(trajectory),
            "refines": refines(trajectory),
            "invalid_actions": invalid_actions(trajectory),
        }
        config = self.config
        total = (
            config.format_weight * components["format"]
            - config.cost_weight * components["cost"]
            - config.context_weight * components["context_cost"]
        )
        return JudgeResult(total=total, components={**components, "total": total})
