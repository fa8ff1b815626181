"""The synthetic-hard recipe with the learned ranker shown, as the hint tests load it (hint line or not)."""

from __future__ import annotations

from typing import Any

RANKER_RECIPE = "configs/grpo/smollm-synthetic-hard-ranker.yaml"  # synthetic-hard with the learned ranker shown


def ranker_config(hint_line: bool = False) -> Any:
    """The ranker recipe's `TrainConfig`; `hint_line` adds `env.hint_line=true` to its env overrides."""
    from memora_rl.config import load_config
    from memora_rl.training.config import TrainConfig

    config = load_config(TrainConfig, RANKER_RECIPE)
    if hint_line:
        config = config.model_copy(update={"env_overrides": [*config.env_overrides, "env.hint_line=true"]})
    return config
