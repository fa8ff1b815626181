"""GRPO glue: rollouts over the env, generation backends, reward functions, the trainer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memora_rl.training.config import TrainConfig
    from memora_rl.training.run import RunResult


def run(config: TrainConfig, callbacks: list[Any] | None = None) -> RunResult:
    """Train as `config` says (see `memora_rl.training.run.run`); heavy imports happen on call."""
    from memora_rl.training.run import run as run_training

    return run_training(config, callbacks)
