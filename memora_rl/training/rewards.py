"""TRL reward functions, one per judge component, so GRPO logs every component on its own.

The env's judge already scored each finished episode (`info["reward_components"]`); the
rollout hands those dicts to the trainer as the `reward_components` column. Each reward
function below reads one component, and `GRPOConfig.reward_weights` carries the judge's
signed weights, so the weighted sum TRL optimises equals the judge's total J. Components
with weight 0 are only logged (TRL says `rewards/<name>/mean`; metrics.jsonl and wandb say `reward/<name>`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from memora_rl.errors import ConfigError, RolloutError

if TYPE_CHECKING:
    from memora_rl.judge.config import JudgeConfig

TOTAL = "total"
"""Key of the judge's weighted sum in `reward_components` (logged, never optimised twice)."""


class ComponentReward:
    """Reward function returning one judge component per completion.

    >>> reward = ComponentReward("cost")
    >>> reward(prompts=["p", "q"], completions=["a", "b"], reward_components=[{"cost": 0.5}, {"cost": 0.0}])
    [0.5, 0.0]
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.__name__ = name  # TRL names the metric after the callable's __name__

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
        """Read `reward_components[i][name]` for every completion; a missing component is an error."""
        components = kwargs.get("reward_components")
        if components is None or len(components) != len(completions):
            raise RolloutError(
                f"Reward {self.name!r} needs one `reward_components` dict per completion from the rollout, "
                f"got {None if components is None else len(components)} for {len(completions)} completions."
            )
        values = []
        for row in components:
            if self.name not in row:
                raise RolloutError(
                    f"Judge component {self.name!r} missing from an episode's reward_components "
                    f"(has {sorted(row)}); the reward weights and the env's judge disagree."
                )
            values.append(float(row[self.name]))
        return values

    def __reduce__(self) -> tuple[type, tuple[str]]:
        """Pickle by name (the instance carries no other state)."""
        return (ComponentReward, (self.name,))


def make_component_rewards(weights: Mapping[str, float]) -> tuple[list[ComponentReward], list[float]]:
    """Reward functions and their weights, one per component; adds `total` as a logged-only metric.

    Args:
        weights: Signed weight per component name (the judge rubric's weights; 0 = logged only).

    Raises:
        ConfigError: when no component has a non-zero weight (GRPO would have no signal).

    >>> funcs, w = make_component_rewards({"correctness": 1.0, "cost": -0.4, "steps": 0.0})
    >>> [f.__name__ for f in funcs], w
    (['correctness', 'cost', 'steps', 'total'], [1.0, -0.4, 0.0, 0.0])
    """
    if not any(weight != 0.0 for weight in weights.values()):
        raise ConfigError(
            f"Every reward weight is 0 ({dict(weights)}); set at least one non-zero weight in reward_weights "
            "or the env's judge config."
        )
    names = [name for name in weights if name != TOTAL]
    funcs = [ComponentReward(name) for name in [*names, TOTAL]]
    return funcs, [float(weights[name]) for name in names] + [0.0]


def judge_weights(config: JudgeConfig) -> dict[str, float]:
    """The signed weight of every component of the judge rubric a `JudgeConfig` builds (0 = logged only).

    >>> from memora_rl.judge.config import JudgeConfig
    >>> weights = judge_weights(JudgeConfig())
    >>> weights["correctness"], weights["cost"], weights["evidence_recall"]
    (1.0, -0.4, 0.0)
    """
    from memora_rl.judge.judge import build_rubric

    rubric = build_rubric(config, embedder=None)  # type: ignore[arg-type]  # the embedder is used only when grading
    return {item.name: item.weight for item in rubric.items}
