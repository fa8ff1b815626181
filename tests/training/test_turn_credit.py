"""Step-level (GiGPO-style) credit: step groups, step advantages, per-token advantages and the trainer hook."""

from __future__ import annotations

import math
from collections import defaultdict
from types import SimpleNamespace

import numpy as np
import pytest

from memora_rl.training.rollout import EpisodePlayer, GRPORollout, RolloutSettings, end_of_turn_ids
from memora_rl.training.turn_credit import (
    Turn,
    Walk,
    discounted_returns,
    state_key,
    step_advantages,
    token_advantages,
    walks_from_rows,
)

from .conftest import ScriptedEnv, ScriptedGenerator, initial_messages, make_tasks


def scripted_group() -> list[Walk]:
    """Four walks of task t0; walks 0 and 1 both reach state s1, then 0 stops well (J=1) and 1 badly (J=0).

    Token layout per walk: turn 0 at [0, 4), an observation, turn 1 at [10, 14).
    """
    spans = [(0, 4), (10, 14)]
    return [
        Walk("t0", ["s0", "s1"], [0.0, 1.0], spans),
        Walk("t0", ["s0", "s1"], [0.0, 0.0], spans),
        Walk("t0", ["s0", "s2"], [0.0, 0.5], spans),
        Walk("t0", ["s0", "s3"], [0.0, 0.5], spans),
    ]


def test_better_action_from_a_shared_state_gets_a_positive_step_advantage_and_the_worse_a_negative_one() -> None:
    walks = scripted_group()
    turns = [turn for walk in walks for turn in walk.turns(gamma=1.0)]
    steps = step_advantages(turns)
    by_walk = steps.reshape(4, 2)
    assert by_walk[0, 1] > 0 > by_walk[1, 1]  # the two actions taken from s1
    assert by_walk[0, 1] == pytest.approx(-by_walk[1, 1])
    assert by_walk[2, 1] == by_walk[3, 1] == 0.0  # s2 and s3 were each reached once
    # turn 0: every walk acts from the reset state, so the step group is the whole GRPO group
    assert by_walk[:, 0].tolist() == pytest.approx(
        ((np.array([1.0, 0.0, 0.5, 0.5]) - 0.5) / (np.std([1.0, 0.0, 0.5, 0.5], ddof=1) + 1e-4)).tolist()
    )
    credit = token_advantages([0.2, -0.2, 0.0, 0.0], walks, length=16, weight=0.5)
    assert credit.advantages.shape == (4, 16)
    assert (credit.advantages[0, 10:14] > 0.2).all() and (credit.advantages[1, 10:14] < -0.2).all()
    assert credit.advantages[0, 4:10].tolist() == [0.2] * 6  # the observation between turns keeps the episode's
    assert credit.shared == pytest.approx(6 / 8)


def test_a_turn_alone_in_its_state_gets_zero() -> None:
    turns = [Turn("t0", "s0", 0, 3.0), Turn("t0", "s1", 0, -2.0), Turn("t0", "s1", 1, -2.0)]
    assert step_advantages(turns).tolist() == [0.0, 0.0, 0.0]  # alone, and a step group of equal returns
    assert step_advantages(turns, scale=False).tolist() == [0.0, 0.0, 0.0]
    credit = token_advantages([1.5], [Walk("t0", ["s0"], [3.0], [(0, 2)])], length=3, weight=2.0)
    assert credit.advantages.tolist() == [[1.5, 1.5, 1.5]] and credit.shared == 0.0


def test_different_tasks_never_share_a_step_group() -> None:
    walks = [
        Walk("t0", ["same"], [1.0], [(0, 2)]),
        Walk("t1", ["same"], [0.0], [(0, 2)]),
        Walk("t1", ["same"], [0.0], [(0, 2)]),
    ]
    credit = token_advantages([0.0, 0.0, 0.0], walks, length=2, weight=1.0)
    assert credit.step_advantages.tolist() == [0.0, 0.0, 0.0]  # t0's better return does not lift t1's mean
    assert credit.shared == pytest.approx(2 / 3)


def test_weight_zero_leaves_the_episode_advantages_unchanged() -> None:
    episode = [0.7, -0.7, 0.3, -0.3]
    credit = token_advantages(episode, scripted_group(), length=16, weight=0.0)
    assert (credit.advantages == np.array(episode)[:, None]).all()
    assert np.abs(credit.step_advantages).max() > 0  # computed (and logged) all the same


def test_step_advantages_stay_within_their_documented_ranges() -> None:
    rng = np.random.default_rng(0)
    for _ in range(50):
        size = int(rng.integers(2, 9))
        returns = rng.normal(size=size) * 3
        turns = [Turn("t", "s", 0, float(value)) for value in returns]
        scaled = step_advantages(turns)
        assert np.abs(scaled).max() <= (size - 1) / math.sqrt(size) + 1e-9
        raw = step_advantages(turns, scale=False)
        assert raw == pytest.approx(returns - returns.mean())
        assert raw.sum() == pytest.approx(0.0, abs=1e-9)


def test_discounted_returns_credit_the_final_reward_back_to_every_turn() -> None:
    assert discounted_returns([0.0, 0.0, 2.0], 1.0) == [2.0, 2.0, 2.0]
    assert discounted_returns([1.0, 0.0, 2.0], 0.5) == [1.5, 1.0, 2.0]
    with pytest.raises(ValueError, match="gamma"):
        discounted_returns([1.0], 1.5)


def test_state_key_reads_the_envs_state_and_ignores_the_working_set_order() -> None:
    info = {"task_id": "t0", "query": "q", "working_set_ids": ["a", "b"], "budget_left": 2.0, "step": 1, "x": 1}
    same = {**info, "working_set_ids": ["b", "a"], "x": 2, "parse_error": "bad id"}
    assert state_key("first text", info) == state_key("second text", same)
    for change in ({"query": "r"}, {"working_set_ids": ["a"]}, {"budget_left": 1.5}, {"step": 2}, {"task_id": "t1"}):
        assert state_key("first text", info) != state_key("first text", {**info, **change})
    assert state_key("obs", {"reward_components": {}}) == state_key("obs", {})  # no state fields: the text
    assert state_key("obs", {}) != state_key("other obs", {})


def test_walk_records_must_agree_and_rows_must_carry_the_turn_columns() -> None:
    with pytest.raises(ValueError, match="one of each per policy turn"):
        Walk("t", ["s"], [1.0, 0.0], [(0, 1)]).turns(1.0)
    with pytest.raises(KeyError, match="turn_credit_weight=0"):
        walks_from_rows([{"task_id": "t", "prompt": "p"}])
    with pytest.raises(ValueError, match="one per walk"):
        token_advantages([0.0, 1.0], [Walk("t", [], [], [])], length=1, weight=1.0)


class _Trainer:
    class args:
        temperature = 1.0

    class state:
        global_step = 0


def test_rollout_records_each_turns_state_reward_and_tokens(smol_tokenizer) -> None:
    actions = ['{"action": "expand", "ids": ["e1"]}', '{"action": "stop"}']
    settings = RolloutSettings(max_turns=3, max_new_tokens=64, max_completion_tokens=1024)
    player = EpisodePlayer(smol_tokenizer, initial_messages, settings)
    eos_id = end_of_turn_ids(smol_tokenizer, player.turn_format)[0]
    task = make_tasks(1)[0]
    envs = [ScriptedEnv(max_steps=3), ScriptedEnv(max_steps=3)]
    rollout = GRPORollout(player, ScriptedGenerator(smol_tokenizer, actions, eos_id), {task.question: task}, envs.pop)
    batch = rollout([task.question, task.question], _Trainer)
    for index, episode in enumerate(rollout.last_episodes):
        assert len(episode.turn_states) == len(episode.turn_rewards) == len(episode.turn_spans) == 2
        assert sum(episode.turn_rewards) == pytest.approx(episode.reward) and episode.turn_rewards[0] == 0.0
        policy = [i for start, end in episode.turn_spans for i in range(start, end)]
        assert policy == [i for i, bit in enumerate(episode.env_mask) if bit]
        assert batch["turn_spans"][index] == episode.turn_spans
    first, second = rollout.last_episodes
    assert first.turn_states == second.turn_states  # same task, same actions: same states turn by turn
    assert first.turn_states[0] != first.turn_states[1]
    walks = walks_from_rows([{key: batch[key][i] for key in batch} for i in range(2)])
    assert [walk.group for walk in walks] == [task.id, task.id]


def test_forced_stop_reward_goes_to_the_last_turn(smol_tokenizer) -> None:
    settings = RolloutSettings(max_turns=2, max_new_tokens=64, max_completion_tokens=1024)
    player = EpisodePlayer(smol_tokenizer, initial_messages, settings)
    eos_id = end_of_turn_ids(smol_tokenizer, player.turn_format)[0]
    task = make_tasks(1)[0]
    generator = ScriptedGenerator(smol_tokenizer, ['{"action": "expand", "ids": ["e1"]}'], eos_id)
    rollout = GRPORollout(player, generator, {task.question: task}, lambda: ScriptedEnv(max_steps=5))
    rollout([task.question], _Trainer)
    (episode,) = rollout.last_episodes
    assert episode.forced_stop and episode.reward > 0
    assert episode.turn_rewards == [0.0, pytest.approx(episode.reward)]


def fake_trainer(monkeypatch, weight: float, advantages, completion_width: int):
    """A `MemoraGRPOTrainer` without a model whose parent scoring returns fixed advantages."""
    import torch
    from trl import GRPOTrainer

    from memora_rl.training.trainer import memora_trainer_class

    output = {"advantages": torch.tensor(advantages), "completion_ids": torch.zeros(len(advantages), completion_width)}
    monkeypatch.setattr(GRPOTrainer, "_generate_and_score_completions", lambda self, inputs: dict(output))
    cls = memora_trainer_class()
    trainer = cls.__new__(cls)
    trainer.args = SimpleNamespace(turn_credit_weight=weight, turn_gamma=1.0)
    trainer.accelerator = SimpleNamespace(num_processes=1)
    trainer.model = SimpleNamespace(training=True)
    trainer.scale_rewards = "none"
    trainer._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}
    return trainer, output


def rows_of(walks: list[Walk]) -> list[dict]:
    return [
        {"task_id": w.group, "turn_states": w.states, "turn_rewards": w.rewards, "turn_spans": w.spans} for w in walks
    ]


def test_trainer_hook_adds_step_credit_per_token_and_is_a_no_op_at_weight_zero(monkeypatch) -> None:
    import torch

    trainer, output = fake_trainer(monkeypatch, 0.0, [0.5, -0.5, 0.0, 0.0], completion_width=16)
    plain = trainer._generate_and_score_completions(rows_of(scripted_group()))
    assert plain["advantages"] is output["advantages"] and not trainer._metrics["train"]

    trainer, _output = fake_trainer(monkeypatch, 1.0, [0.5, -0.5, 0.0, 0.0], completion_width=16)
    credited = trainer._generate_and_score_completions(rows_of(scripted_group()))["advantages"]
    assert credited.shape == (4, 16) and credited.dtype == torch.float32
    # unscaled (scale_rewards=none): turn 1 from s1 gets +-0.5 on top of the episode's +-0.5
    assert credited[0, 10:14].tolist() == [1.0] * 4 and credited[1, 10:14].tolist() == [-1.0] * 4
    assert credited[2, 10:14].tolist() == [0.0] * 4
    assert credited[0, 4:10].tolist() == [0.5] * 6
    assert trainer._metrics["train"]["turn_credit/shared_turns"] == [pytest.approx(6 / 8)]


def test_trainer_hook_refuses_several_processes(monkeypatch) -> None:
    from memora_rl.errors import ConfigError

    trainer, _output = fake_trainer(monkeypatch, 1.0, [0.5, -0.5, 0.0, 0.0], completion_width=16)
    trainer.accelerator = SimpleNamespace(num_processes=2)
    with pytest.raises(ConfigError, match="one training process"):
        trainer._generate_and_score_completions(rows_of(scripted_group()))


def test_config_reaches_trls_arguments() -> None:
    from memora_rl.config import load_config
    from memora_rl.training.config import TrainConfig
    from memora_rl.training.trainer import build_grpo_config

    config = load_config(TrainConfig, None, ["grpo.turn_credit_weight=0.5", "grpo.turn_gamma=0.9"])
    args = build_grpo_config(config, [1.0], "cpu")
    assert (args.turn_credit_weight, args.turn_gamma) == (0.5, 0.9)
    default = build_grpo_config(load_config(TrainConfig, None, []), [1.0], "cpu")
    assert (default.turn_credit_weight, default.turn_gamma) == (0.0, 1.0)
    with pytest.raises(Exception, match="turn_gamma"):
        load_config(TrainConfig, None, ["grpo.turn_gamma=1.5"])


def one_real_step(tmp_path, name: str, weight: float) -> dict[str, float]:
    """Logs of one GRPO step (real SmolLM2 + LoRA, G=4) on test_logprobs' fixed group, with turn columns added."""
    from datasets import Dataset

    from memora_rl.config import load_config
    from memora_rl.training.config import TrainConfig
    from memora_rl.training.rewards import make_component_rewards
    from memora_rl.training.trainer import StepSettings, build_grpo_config, build_policy, build_trainer

    from .test_logprobs import FixedRollout

    rollout = FixedRollout(4)
    for key in ("task_id", "turn_states", "turn_rewards", "turn_spans"):
        rollout.batch[key] = []
    for index, (mask, components) in enumerate(
        zip(rollout.batch["env_mask"], rollout.batch["reward_components"], strict=True)
    ):
        starts = [i for i, bit in enumerate(mask) if bit and (i == 0 or not mask[i - 1])]
        ends = [i + 1 for i, bit in enumerate(mask) if bit and (i + 1 == len(mask) or not mask[i + 1])]
        turns = len(starts)
        rollout.batch["task_id"].append("task")
        rollout.batch["turn_states"].append(["s0", *[f"s{turn}" for turn in range(1, turns)]])  # walks 1, 2 share s1
        rollout.batch["turn_rewards"].append([0.0] * (turns - 1) + [components["correctness"]])
        rollout.batch["turn_spans"].append(list(zip(starts, ends, strict=True)))
        assert turns == 1 + index % 3
    overrides = ["grpo.num_generations=4", "grpo.per_device_batch_size=4", "grpo.max_steps=1", "save_steps=1000",
                 "logging.wandb=disabled", f"output_root={tmp_path}", f"run_name={name}",
                 f"grpo.turn_credit_weight={weight}"]  # fmt: skip
    config = load_config(TrainConfig, None, overrides)
    model, tokenizer, lora = build_policy(config, "cpu")
    funcs, weights = make_component_rewards({"correctness": 1.0, "total": 0.0})
    step = StepSettings(None, False, False)
    args = build_grpo_config(config, weights, "cpu", step)
    dataset = Dataset.from_list([{"prompt": "task"}])
    trainer = build_trainer(model, lora, tokenizer, args, dataset, funcs, rollout, [], step.share_prompt_prefix)
    compute_loss, shapes = trainer._compute_loss, []

    def recording_loss(model, inputs):
        shapes.append(tuple(inputs["advantages"].shape))
        return compute_loss(model, inputs)

    trainer._compute_loss = recording_loss
    trainer.train()
    return {**trainer.state.log_history[0], "advantage_shapes": shapes}


@pytest.mark.slow
def test_a_real_grpo_step_trains_on_per_token_advantages(tmp_path) -> None:
    """TRL's loss takes the (B, T) advantages of the hook and trains on them."""
    logs = one_real_step(tmp_path, "credited", 1.0)
    assert logs["turn_credit/shared_turns"] == pytest.approx(6 / 7)  # 4 turns from s0, 2 from s1, 1 alone
    assert len(logs["advantage_shapes"]) == 1 and len(logs["advantage_shapes"][0]) == 2
    assert logs["advantage_shapes"][0][0] == 4
    assert math.isfinite(logs["loss"]) and logs["grad_norm"] > 0
