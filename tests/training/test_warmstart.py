"""Warm start: oracle walks played as rollout token streams, SFT rows, and a tiny real run merged into a model."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from memora_rl.env.config import EnvConfig
from memora_rl.env.oracle import Oracle
from memora_rl.env.retrieval import RetrievalEnv
from memora_rl.policy.baselines import STOP_TEXT
from memora_rl.training.config import WarmStartSettings
from memora_rl.training.rollout import RolloutSettings
from memora_rl.training.warmstart import (
    ScriptedGenerator,
    fallback_budget,
    fallback_walk,
    heuristic_actions,
    limit_bare_stops,
    scripted_episodes,
    sft_rows,
)
from tests.env.conftest import ENTRIES, GRAPH_ID, TASKS
from tests.graph_fixtures import HandGraphStore


@pytest.fixture(scope="module")
def hand_env() -> RetrievalEnv:
    store = HandGraphStore(GRAPH_ID, ENTRIES, anchor_choice="walk")
    config = EnvConfig(initial_top_k=1, frontier_limit=4, budget=4.0, max_steps=4)
    return RetrievalEnv(store, config, tasks=TASKS, embedder=store.embedder)


def test_scripted_episodes_are_the_rollout_token_streams(hand_env: RetrievalEnv, smol_tokenizer) -> None:
    settings = RolloutSettings(max_turns=4, max_new_tokens=48, max_completion_tokens=2048)
    oracle = Oracle(hand_env)
    walks = [oracle.walk(task) for task in TASKS]
    episodes = scripted_episodes(hand_env, TASKS, smol_tokenizer, settings, walks)
    for walk, episode in zip(walks, episodes, strict=True):
        assert not episode.forced_stop and episode.done
        assert [json.loads(action) for action in episode.actions] == [json.loads(a) for a in walk.actions]
        assert episode.reward_components["evidence_recall"] == pytest.approx(walk.recall)
        policy_ids = [t for t, m in zip(episode.completion_ids, episode.env_mask, strict=True) if m]
        end = smol_tokenizer.convert_tokens_to_ids("<|im_end|>")
        assert policy_ids.count(end) == len(walk.actions)  # every scripted turn closes with the end-of-turn token
    rows = sft_rows(episodes)
    for row, episode in zip(rows, episodes, strict=True):
        assert len(row["input_ids"]) == len(row["assistant_masks"])
        assert sum(row["assistant_masks"]) == sum(episode.env_mask) > 0
        assert row["assistant_masks"][: len(episode.prompt_ids)] == [0] * len(episode.prompt_ids)


def test_bare_stops_are_capped_at_their_share_and_acting_walks_all_kept() -> None:
    from types import SimpleNamespace

    walks = [SimpleNamespace(task_id=f"t{i}", actions=["stop"] if i % 4 else ["expand", "stop"]) for i in range(12)]
    assert limit_bare_stops(walks, 1.0) == walks  # 3 acting walks, 9 bare stops
    assert [w.task_id for w in limit_bare_stops(walks, 0.0)] == ["t0", "t4", "t8"]
    kept = limit_bare_stops(walks, 0.5)
    assert [w.task_id for w in kept] == ["t0", "t1", "t2", "t3", "t4", "t8"]  # the first 3 bare stops, in order
    assert len(limit_bare_stops(walks, 0.7)) == 3 + 7  # 7 stops of 10 walks


def test_heuristic_fallback_walk_is_the_heuristic_within_its_budget(hand_env: RetrievalEnv, smol_tokenizer) -> None:
    """The warm start's fallback for a bare stop: the heuristic's walk in an env whose whole budget is 2,
    replayed in the env's own budget of 4 as a valid rollout that ends with a stop."""
    import asyncio

    from memora_rl.core.parse import parse_action
    from memora_rl.policy.baselines import HeuristicPolicy

    store = HandGraphStore(GRAPH_ID, ENTRIES, anchor_choice="walk")
    config = hand_env.config.model_copy(update={"budget": 2.0})
    small = RetrievalEnv(store, config, tasks=TASKS, embedder=store.embedder)
    policy = HeuristicPolicy()
    settings = RolloutSettings(max_turns=4, max_new_tokens=48, max_completion_tokens=2048)
    expands = 0
    for task in TASKS:
        actions = heuristic_actions(hand_env, task, budget=2.0)
        expands += len(actions) - 1
        _obs, info = small.reset(options={"task": task})
        expected, done = [], False
        while not done:
            expected.append(asyncio.run(policy.act([], info)))
            _obs, _reward, terminated, truncated, info = small.step(expected[-1])
            done = terminated or truncated
        assert actions[:-1] == [action for action in expected if action != STOP_TEXT]  # the small env ends when spent
        assert sum(len(parse_action(a).ids) for a in actions[:-1]) <= 2 and actions[-1] == STOP_TEXT
        (episode,) = scripted_episodes(hand_env, [task], smol_tokenizer, settings, [SimpleNamespace(actions=actions)])
        assert episode.done and not episode.forced_stop and episode.reward_components["valid_action_rate"] == 1.0
    assert expands > 0


def test_varied_fallback_walks_stay_within_their_drawn_budgets(hand_env: RetrievalEnv) -> None:
    """`stop_fallback_varied`: each bare stop becomes the heuristic's walk within the budget drawn for its task."""
    from memora_rl.core.parse import parse_action

    settings = WarmStartSettings(stop_fallback_budget=3.0, stop_fallback_varied=True)
    named = {}
    for seed in range(4):
        for task in TASKS:
            bare_stop = Oracle(hand_env).walk(task).model_copy(update={"actions": [STOP_TEXT]})
            walk = fallback_walk(hand_env, task, bare_stop, settings, seed)
            drawn = fallback_budget(3.0, True, seed, task.id)
            assert walk.actions == heuristic_actions(hand_env, task, drawn)
            named[seed, task.id] = sum(len(parse_action(action).ids) for action in walk.actions[:-1])
            assert 0 < named[seed, task.id] <= drawn
    assert len(set(named.values())) > 1  # the walks differ in how far they expand


def test_env_prompt_format_reaches_the_rollout_chat(smol_tokenizer) -> None:
    """`env.compact` / `env.few_shot` decide the observation layout and the chat every player opens with."""
    from memora_rl.core import prompts
    from memora_rl.policy.chat import chat_opener

    store = HandGraphStore(GRAPH_ID, ENTRIES, anchor_choice="walk")
    settings = RolloutSettings(max_turns=4, max_new_tokens=48, max_completion_tokens=2048)
    lengths = {}
    for compact, few_shot in [(False, True), (True, True), (True, False)]:
        limits = {"initial_top_k": 1, "frontier_limit": 4, "budget": 4.0, "max_steps": 4}
        config = EnvConfig(**limits, compact=compact, few_shot=few_shot)
        env = RetrievalEnv(store, config, tasks=TASKS, embedder=store.embedder)
        observation, _ = env.reset(seed=0, options={"task": TASKS[0]})
        assert observation.startswith("Q: ") == compact  # the compact layout opens with "Q: "
        messages = chat_opener(env.config)(observation)
        assert messages[0]["content"] == (prompts.COMPACT_SYSTEM_PROMPT if compact else prompts.SYSTEM_PROMPT)
        assert len(messages) == (2 + 2 * len(prompts.FEW_SHOT_EPISODE) if few_shot else 2)
        episode = scripted_episodes(env, TASKS[:1], smol_tokenizer, settings, [Oracle(env).walk(TASKS[0])])[0]
        assert smol_tokenizer.decode(episode.prompt_ids).count("<|im_start|>user") == len(messages) // 2
        lengths[compact, few_shot] = len(episode.prompt_ids) + len(episode.completion_ids)
    assert lengths[False, True] > lengths[True, True] > lengths[True, False]


def test_scripted_generator_refuses_batches_and_overruns(smol_tokenizer) -> None:
    generator = ScriptedGenerator(smol_tokenizer, ['{"action": "stop"}'], end_id=2)
    with pytest.raises(ValueError, match="one episode"):
        generator.generate([[1], [2]], 10, 1.0)
    assert generator.generate([[1]], 10, 1.0)[0].token_ids[-1] == 2
    with pytest.raises(ValueError, match="no turn left"):
        generator.generate([[1]], 10, 1.0)


def test_sft_precision_follows_the_setting_and_the_hardware(tmp_path) -> None:
    """bf16 autocast on CPU only when asked and the CPU computes bf16 natively; GRPO's precision is untouched."""
    from memora_rl.training.config import TrainConfig
    from memora_rl.training.trainer import build_grpo_config, cpu_has_bf16
    from memora_rl.training.warmstart import sft_config

    def config(bf16_on_cpu: bool) -> TrainConfig:
        return TrainConfig(output_root=tmp_path, warm_start={"enabled": True, "bf16_on_cpu": bf16_on_cpu})

    assert not sft_config(config(False), tmp_path, "cpu").bf16  # float32 by default: earlier runs reproduce
    assert sft_config(config(True), tmp_path, "cpu").bf16 == cpu_has_bf16()
    assert sft_config(config(True), tmp_path, "cpu", max_steps=3).max_steps == 3
    assert not build_grpo_config(config(True), [1.0], "cpu").bf16  # the trainer matches the float32 sampler


@pytest.mark.slow
def test_warm_start_trains_and_merges_a_model(tmp_path) -> None:
    """Two oracle episodes of the real synthetic env, one epoch: a merged model that differs from the base;
    a run killed after its first checkpoint resumes from it to the same merged weights."""
    import shutil

    import torch

    from memora_rl.llm.registry import load_causal_lm
    from memora_rl.training.config import TrainConfig, WarmStartSettings
    from memora_rl.training.stage_one import warm_start
    from memora_rl.training.trainer import cpu_has_bf16
    from memora_rl.training.warmstart import DONE_FILE

    config = TrainConfig(
        run_name="warm",
        env="synthetic",
        output_root=tmp_path,
        backend="transformers",
        grpo={"max_turns": 4, "max_completion_tokens": 1024, "per_device_batch_size": 4},
        warm_start=WarmStartSettings(
            enabled=True, max_tasks=2, epochs=1, gradient_accumulation=1, save_steps=1, bf16_on_cpu=True
        ),
        logging={"wandb": "disabled"},
    )
    model_dir = warm_start(config, "cpu")
    record = json.loads((model_dir / DONE_FILE).read_text())
    assert record["episodes"] == 2 and record["train_loss"] > 0 and record["teacher"] == "oracle"
    assert 0.0 <= record["components"]["evidence_recall"] <= 1.0  # what the teacher's walks reached
    assert record["bf16"] == cpu_has_bf16()  # autocast where this CPU computes bf16 in hardware
    merged = load_causal_lm(str(model_dir), dtype="float32")
    base = load_causal_lm("smollm2-135m-instruct", dtype="float32")
    name = "model.layers.0.self_attn.q_proj.weight"
    merged_weight, base_weight = merged.state_dict()[name], base.state_dict()[name]
    assert not torch.allclose(merged_weight, base_weight)
    assert warm_start(config, "cpu") == model_dir  # finished: reused, not retrained

    trainer_dir = model_dir.parent / "trainer"
    assert sorted(path.name for path in trainer_dir.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]
    shutil.rmtree(model_dir)  # killed after step 1's checkpoint: step 2 and the merge are lost
    shutil.rmtree(trainer_dir / "checkpoint-2")
    warm_start(config, "cpu")
    resumed = load_causal_lm(str(model_dir), dtype="float32").state_dict()[name]
    torch.testing.assert_close(resumed, merged_weight, atol=1e-5, rtol=0)


def test_a_warm_started_run_names_the_merged_model_where_export_reads_it(tmp_path) -> None:
    """The run's config.yaml (copied into checkpoints, read by export) names the warm start, not the base."""
    from memora_rl.config import load_config, read_yaml
    from memora_rl.training.config import TrainConfig
    from memora_rl.training.run import with_warm_start
    from memora_rl.training.warmstart import DONE_FILE

    config = TrainConfig(run_name="warm", output_root=tmp_path, warm_start={"enabled": True})
    model_dir = tmp_path / "warm" / "warmstart" / "model"
    model_dir.mkdir(parents=True)
    (model_dir / DONE_FILE).write_text("{}")  # a finished stage one: reused, not retrained
    updated = with_warm_start(config, "cpu")
    assert updated.model == str(model_dir.resolve()) and config.model == "smollm2-135m-instruct"
    assert read_yaml(tmp_path / "warm" / "config.yaml")["model"] == str(model_dir.resolve())
    reloaded = load_config(TrainConfig, tmp_path / "warm" / "config.yaml")  # what export and learning.py read
    assert reloaded.model == reloaded.server.model == str(model_dir.resolve())


def _teacher_episodes(tokenizer, tmp_path, overrides: list[str], settings: dict) -> tuple[list, tuple]:
    """Stage one's episodes for a warm start of `settings` on synthetic-hard, and the env's training tasks."""
    from memora_rl.env.registry import make_env
    from memora_rl.training.config import TrainConfig
    from memora_rl.training.warmstart import warm_start_episodes

    config = TrainConfig(env="synthetic-hard", env_overrides=overrides, output_root=tmp_path, warm_start=settings,
                         grpo={"max_turns": 4, "max_completion_tokens": 1280})  # fmt: skip
    episodes = warm_start_episodes(config, tokenizer)
    env, tasks = make_env("synthetic-hard", split="train", overrides=overrides, tokenizer=tokenizer)
    return episodes, (env, tasks)


def test_the_scorer_teacher_episodes_are_its_cross_fitted_walks_played(smol_tokenizer, tmp_path) -> None:
    """`warm_start.teacher=scorer`: stage one imitates the scorer's walks (expands and a stop), token-exact."""
    from memora_rl.policy.scorer import cross_fitted_walks
    from memora_rl.training.warmstart import warm_start_tasks

    settings = {"teacher": "scorer", "max_tasks": 16, "scorer_threshold": 0.1, "scorer_max_expands": 2}
    overrides = ["env.compact=true", "env.frontier_value_tokens=12"]
    episodes, (env, tasks) = _teacher_episodes(smol_tokenizer, tmp_path, overrides, settings)
    with env:
        drawn = warm_start_tasks(tasks, 16, seed=0)
        walks = cross_fitted_walks(env, drawn, threshold=0.1, max_expands=2, seed=0, pool=tasks)
    assert len(episodes) == len(walks) == 16
    for walk, episode in zip(walks, episodes, strict=True):
        assert [json.loads(action) for action in episode.actions] == [json.loads(action) for action in walk]
    kinds = {json.loads(action)["action"] for episode in episodes for action in episode.actions}
    assert kinds == {"expand", "stop"}


def test_the_ranker_teacher_episodes_are_its_walks_by_the_shown_hints(smol_tokenizer, tmp_path) -> None:
    """`warm_start.teacher=ranker`: stage one imitates the walks the env's shown ranker scores make."""
    from memora_rl.policy.scorer import ranker_walks
    from memora_rl.training.warmstart import warm_start_tasks

    settings = {"teacher": "ranker", "max_tasks": 12, "scorer_threshold": 0.05, "scorer_max_expands": 2}
    overrides = ["env.compact=true", "env.frontier_value_tokens=12", "env.frontier_ranker=learned"]
    episodes, (env, tasks) = _teacher_episodes(smol_tokenizer, tmp_path, overrides, settings)
    with env:
        walks = ranker_walks(env, warm_start_tasks(tasks, 12, seed=0), threshold=0.05, max_expands=2)
    assert [[json.loads(a) for a in episode.actions] for episode in episodes] == [
        [json.loads(a) for a in walk] for walk in walks
    ]
    assert any("%)" in observation for episode in episodes for observation in episode.observations)  # the hints shown


def test_the_ranker_teacher_walks_each_task_once_per_hint_scale(smol_tokenizer, tmp_path) -> None:
    """`warm_start.hint_scales`: per scale, the teacher's walks in an env showing its hints times it, token-exact;
    a larger scale walks each task at least as far."""
    from memora_rl.env.registry import make_env
    from memora_rl.policy.scorer import ranker_walks
    from memora_rl.training.warmstart import warm_start_tasks

    settings = {"teacher": "ranker", "max_tasks": 8, "scorer_threshold": 0.2, "scorer_max_expands": 2,
                "hint_scales": [0.5, 4.0]}  # fmt: skip
    overrides = ["env.compact=true", "env.frontier_value_tokens=12", "env.frontier_ranker=learned"]
    episodes, (env, tasks) = _teacher_episodes(smol_tokenizer, tmp_path, overrides, settings)
    env.close()
    drawn = warm_start_tasks(tasks, 8, seed=0)
    assert len(episodes) == 2 * len(drawn)
    walked = []
    for scale, played in zip((0.5, 4.0), (episodes[:8], episodes[8:]), strict=True):
        scaled, _ = make_env("synthetic-hard", split="train", overrides=[*overrides, f"env.hint_scale={scale}"])
        with scaled:
            walks = ranker_walks(scaled, drawn, threshold=0.2, max_expands=2)
        assert [[json.loads(a) for a in e.actions] for e in played] == [[json.loads(a) for a in w] for w in walks]
        walked.append([sum(json.loads(a)["action"] == "expand" for a in walk) for walk in walks])
    assert all(short <= long for short, long in zip(*walked, strict=True)) and sum(walked[1]) > sum(walked[0])


def test_hint_scales_need_the_ranker_teacher_and_positive_factors() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=r"needs warm_start\.teacher=ranker"):
        WarmStartSettings(teacher="oracle", hint_scales=[0.5, 1.0])
    with pytest.raises(ValidationError, match="must all be above 0"):
        WarmStartSettings(teacher="ranker", hint_scales=[0.0, 1.0])
    assert WarmStartSettings(teacher="ranker", hint_scales=[0.5, 2.0]).hint_scales == [0.5, 2.0]
