"""Rollouts on the real synthetic env: forced stops and cut turns are graded honestly; env_overrides reach the env."""

from __future__ import annotations

import pytest

from memora_rl.env.retrieval import CUT_TURN_ERROR
from memora_rl.policy.chat import initial_messages
from memora_rl.training.config import TrainConfig
from memora_rl.training.rewards import judge_weights
from memora_rl.training.rollout import EpisodePlayer, RolloutSettings, end_of_turn_ids
from memora_rl.training.run import _load_env

from .conftest import ScriptedGenerator

SMALL_SYNTHETIC = [
    "data.options.conversations=2",
    "data.options.sessions_per_conversation=3",
    "data.options.turns_per_session=6",
    "data.options.questions_per_conversation=5",
]
"""The tiny synthetic data of tests/env/test_contract.py (same overrides: the cached graph is shared)."""
OVERRIDES = [*SMALL_SYNTHETIC, "env.max_steps=5", "env.judge.cost_weight=0.2"]


@pytest.fixture(scope="module")
def real_env(smol_tokenizer):
    """The synthetic env of a training config with env_overrides, its tasks and its env factory."""
    return _load_env(TrainConfig(env_overrides=OVERRIDES), smol_tokenizer)


def play_one(tokenizer, env, task, action: str, settings: RolloutSettings):
    """One rollout episode of a generator that always writes `action`."""
    player = EpisodePlayer(tokenizer, initial_messages, settings)
    generator = ScriptedGenerator(tokenizer, [action], end_of_turn_ids(tokenizer, player.turn_format)[0])
    episode = player.start(env, task)
    player.play([episode], generator, temperature=1.0)
    return episode


def test_env_overrides_reach_every_env_and_the_reward_weights(real_env):
    env, tasks, factory = real_env
    assert tasks and env.config.max_steps == 5 and env.config.judge.cost_weight == 0.2
    assert judge_weights(env.config.judge)["cost"] == -0.2
    assert factory() is env  # the first env is reused; later ones are made with the same overrides
    other = factory()
    assert other is not env and other.config == env.config


def test_a_cut_turn_is_invalid_and_the_forced_stop_is_not_the_policys(smol_tokenizer, real_env):
    env, tasks, _ = real_env
    settings = RolloutSettings(max_turns=3, max_new_tokens=64, max_completion_tokens=10)
    episode = play_one(smol_tokenizer, env, tasks[0], '{"action": "stop"}', settings)
    assert episode.cut and episode.forced_stop
    trajectory = episode.final_info["trajectory"]
    assert episode.final_info["stop_reason"] == trajectory.stop_reason == "forced"
    cut, forced = trajectory.actions
    assert (cut.kind, cut.text, cut.error, cut.cost) == ("invalid", '{"action":', CUT_TURN_ERROR, 1.0)
    assert (forced.kind, forced.cost) == ("forced", 0.0)
    parts = episode.reward_components
    assert parts["format"] == parts["valid_action_rate"] == 0.0  # the old forced `stop` scored F = 1.0
    assert (parts["actions_invalid"], parts["actions_forced"], parts["actions_stop"], parts["steps"]) == (1, 1, 0, 1)
    assert parts["cost"] == pytest.approx(1.0 / env.config.budget)
    assert episode.reward == pytest.approx(parts["total"])


def test_a_forced_stop_after_the_last_turn_leaves_the_format_score_alone(smol_tokenizer, real_env):
    env, tasks, _ = real_env
    settings = RolloutSettings(max_turns=1, max_new_tokens=64, max_completion_tokens=256)
    episode = play_one(smol_tokenizer, env, tasks[0], "not an action", settings)
    assert episode.forced_stop and not episode.cut
    assert [action.kind for action in episode.final_info["trajectory"].actions] == ["invalid", "forced"]
    parts = episode.reward_components
    assert parts["format"] == 0.0  # one invalid policy turn out of one (the old forced stop made it 0.5)
    assert (parts["actions_invalid"], parts["actions_forced"], parts["steps"]) == (1, 1, 1)
    assert parts["initial_recall"] == parts["evidence_recall"] and parts["recall_gain"] == 0.0
