"""The context cost X (issue 51): with λ > 0, choosing the evidence entries beats expanding every id."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest

from memora_rl.config import load_config
from memora_rl.core.trajectory import Trajectory
from memora_rl.errors import ConfigError
from memora_rl.judge import JudgeConfig, TrajectoryJudge
from memora_rl.judge.judge import JudgeResult
from tests.judge.trajectories import build_trajectory, factual_context_tokens, make_entry

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
EVIDENCE = ["D1:1", "D2:3"]
BUDGET = 6.0  # synthetic and synthetic-hard: budget 6, one unit per expanded id
PICKED = [
    make_entry("e1", "Alice works at Nova as a backend engineer", ["D1:1"]),
    make_entry("e5", "Alice moved to Lisbon in March", ["D2:3"]),
]
OTHERS = [
    make_entry("e3", "Bob went hiking in the Alps last summer", ["D3:1"]),
    make_entry("e4", "Carol's favourite food is sushi", ["D4:2"]),
    make_entry("e6", "Dave plays the cello in a string quartet on Fridays", ["D5:1"]),
    make_entry("e7", "Erin adopted a grey kitten called Pixel from the shelter", ["D6:4"]),
]
RECIPE_COST_WEIGHT = 0.1
"""`env.judge.cost_weight` of the GRPO recipes (configs/grpo/*.yaml)."""


def choosing_walk() -> Trajectory:
    """One expand of the two evidence ids, then stop: 2 of 6 budget units."""
    return build_trajectory(
        evidence=EVIDENCE,
        entries=PICKED,
        kinds=["expand", "stop"],
        budget=BUDGET,
        budget_spent=2.0,
        context_tokens=factual_context_tokens(PICKED),
    )


def expand_all_walk() -> Trajectory:
    """Expands every id it sees until the budget runs out: same recall, 6 of 6 units, three times the entries."""
    everything = [*PICKED, *OTHERS]
    trajectory = build_trajectory(
        evidence=EVIDENCE,
        entries=everything,
        kinds=["expand", "expand", "expand"],
        budget=BUDGET,
        budget_spent=BUDGET,
        context_tokens=factual_context_tokens(everything),
    )
    return trajectory.model_copy(update={"stop_reason": "budget"})


def score_both(config: JudgeConfig, embedder) -> tuple[JudgeResult, JudgeResult]:
    judge = TrajectoryJudge(config, embedder=embedder)
    return judge.score(choosing_walk()), judge.score(expand_all_walk())


def test_the_two_walks_differ_only_in_what_they_spent(embedder):
    choosing, expand_all = score_both(JudgeConfig(), embedder)
    for name in ("correctness", "evidence_recall", "format", "redundancy"):
        assert choosing.components[name] == expand_all.components[name], name
    assert choosing.components["evidence_recall"] == 1.0 and choosing.components["redundancy"] == 0.0
    assert (choosing.components["cost"], expand_all.components["cost"]) == pytest.approx((2 / 6, 1.0))
    assert expand_all.components["context_tokens"] > 2.5 * choosing.components["context_tokens"] > 0


@pytest.mark.parametrize(
    ("cost_weight", "gap"),
    [
        (0.4, 0.4 * 4 / 6),  # JudgeConfig's default w_c
        (RECIPE_COST_WEIGHT, RECIPE_COST_WEIGHT * 4 / 6),  # the recipes: ~0.017 per extra id
    ],
)
def test_without_a_context_cost_only_the_budget_separates_the_walks(embedder, cost_weight, gap):
    choosing, expand_all = score_both(JudgeConfig(cost_weight=cost_weight), embedder)
    assert choosing.components["context_cost"] > 0.0  # logged at weight 0 ...
    assert choosing.total - expand_all.total == pytest.approx(gap)  # ... but it does not move the reward


@pytest.mark.parametrize("cost_weight", [0.4, RECIPE_COST_WEIGHT])
def test_a_walk_that_expands_everything_scores_below_one_that_picks_the_two_evidence_ids_at_the_same_recall(
    embedder, cost_weight
):
    context_weights = [0.0, 0.02, 0.05, 0.1, 0.2]
    gaps = []
    for context_weight in context_weights:
        config = JudgeConfig(cost_weight=cost_weight, context_weight=context_weight)
        choosing, expand_all = score_both(config, embedder)
        assert choosing.components["evidence_recall"] == expand_all.components["evidence_recall"] == 1.0
        assert choosing.total > expand_all.total
        extra_context = expand_all.components["context_cost"] - choosing.components["context_cost"]
        budget_gap = cost_weight * (expand_all.components["cost"] - choosing.components["cost"])
        assert choosing.total - expand_all.total == pytest.approx(budget_gap + context_weight * extra_context)
        gaps.append(choosing.total - expand_all.total)
    assert all(later > earlier for earlier, later in pairwise(gaps))  # grows with λ


def test_the_context_cost_is_always_a_component_and_its_weight_is_minus_lambda(embedder):
    from memora_rl.training.rewards import judge_weights, make_component_rewards

    trajectory = build_trajectory(entries=PICKED, context_tokens=250)
    off = TrajectoryJudge(JudgeConfig(), embedder=embedder).score(trajectory)
    on = TrajectoryJudge(JudgeConfig(context_weight=0.05, context_token_unit=50), embedder=embedder).score(trajectory)
    assert off.metrics()["reward/context_cost"] == pytest.approx(2.5)  # logged even at weight 0
    assert on.components["context_cost"] == pytest.approx(5.0)
    assert on.total == pytest.approx(off.total - 0.05 * 5.0)
    assert judge_weights(JudgeConfig())["context_cost"] == 0.0
    funcs, weights = make_component_rewards(judge_weights(JudgeConfig(context_weight=0.05)))
    names = [func.__name__ for func in funcs]
    assert weights[names.index("context_cost")] == -0.05  # GRPO optimises it with the judge's sign
    column = [{"context_cost": 2.5}, {"context_cost": 0.0}]
    assert funcs[names.index("context_cost")](prompts=["p"] * 2, completions=["c"] * 2, reward_components=column) == [
        2.5,
        0.0,
    ]


@pytest.mark.parametrize(
    "override", ["env.judge.context_weight=-0.1", "env.judge.context_token_unit=0", "env.judge.context_wieght=1"]
)
def test_bad_context_cost_settings_are_config_errors(override):
    from memora_rl.env.registry import resolve_env_spec

    with pytest.raises(ConfigError, match="context_"):
        resolve_env_spec("synthetic-hard", [override])


def test_a_training_config_sets_the_context_cost_through_env_overrides():
    """The spelling a recipe or the command line uses: one more item of the run's `env_overrides` list."""
    from memora_rl.env.registry import resolve_env_spec
    from memora_rl.training.config import TrainConfig
    from memora_rl.training.rewards import judge_weights

    path = CONFIGS / "grpo" / "quickstart.yaml"
    recipe = load_config(TrainConfig, path)
    override = f"env_overrides=[{', '.join(recipe.env_overrides)}, env.judge.context_weight=0.05]"
    config = load_config(TrainConfig, path, [override])
    assert config.env_overrides == [*recipe.env_overrides, "env.judge.context_weight=0.05"]
    judge = resolve_env_spec(config.env, config.env_overrides).env.judge
    assert (judge.context_weight, judge.context_token_unit, judge.cost_weight) == (0.05, 100, RECIPE_COST_WEIGHT)
    assert judge_weights(judge)["context_cost"] == -0.05
    default = resolve_env_spec(recipe.env, recipe.env_overrides).env.judge
    assert default.context_weight == 0.0 and judge_weights(default)["context_cost"] == 0.0
