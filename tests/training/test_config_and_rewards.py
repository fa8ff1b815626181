"""TrainConfig presets and checks; TRL's weighted reward sum equals the env's J, on table rows and real rollouts."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from memora_rl.config import load_config
from memora_rl.errors import ConfigError, RolloutError
from memora_rl.judge.config import JudgeConfig
from memora_rl.training.callbacks import metric_name
from memora_rl.training.config import TrainConfig
from memora_rl.training.rewards import ComponentReward, judge_weights, make_component_rewards

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


PRESETS = ["tiny", "quickstart", "hard", "locomo", "smollm-synthetic-hard", "smollm-synthetic-hard-scorer",
           "smollm-synthetic-hard-ranker", "smollm-synthetic-hard-ranker-context", "smollm-locomo"]  # fmt: skip


@pytest.mark.parametrize("name", PRESETS)
def test_presets_load(name):
    config = load_config(TrainConfig, CONFIGS / "grpo" / f"{name}.yaml")  # resolves its env and env overrides
    assert config.grpo.beta > 0 and config.grpo.num_generations == 4
    assert config.output_dir == Path("checkpoints") / config.run_name and config.run_name.startswith(name)


def test_cpu_presets_and_the_gpu_one():
    tiny = load_config(TrainConfig, CONFIGS / "grpo" / "tiny.yaml")
    assert tiny.model == "smollm2-135m-instruct" and tiny.env == "synthetic" and tiny.server.dtype == "float32"
    for name in ("quickstart", "hard"):  # headroom: an env whose first search misses evidence, a warm start
        config = load_config(TrainConfig, CONFIGS / "grpo" / f"{name}.yaml")
        assert config.env == "synthetic-hard" and config.warm_start.enabled and config.grpo.max_turns > 1
        assert {"env.compact=true", "env.few_shot=false"} <= set(config.env_overrides)
    locomo = load_config(TrainConfig, CONFIGS / "grpo" / "locomo.yaml")
    assert locomo.lora.r == 16 and locomo.lora.alpha == 32 and locomo.device == "cuda"


HARD_ENV = ["env.compact=true", "env.few_shot=false", "env.judge.cost_weight=0.1", "env.refine_new_entries=true",
            "env.refine_top_k=1", "env.frontier_value_tokens=12"]  # fmt: skip
RECIPES = {
    # The overrides of the commands that made the learning runs (docs/notebook/learning.md, sections 19 and 27):
    # `--steps 8` and `--warm-max-tasks 100` are the benchmark's flags for grpo.max_steps and warm_start.max_tasks.
    "smollm-synthetic-hard": [
        "grpo.max_steps=8", "grpo.learning_rate=3e-4", "warm_start.save_steps=10", f"env_overrides={HARD_ENV}",
    ],
    "smollm-locomo": [
        "grpo.max_steps=8", "warm_start.max_tasks=100", "env=locomo", "grpo.learning_rate=3e-4", "grpo.max_turns=6",
        "grpo.max_completion_tokens=1920", "grpo.gradient_accumulation=2", "warm_start.save_steps=10",
        "warm_start.max_stop_share=0.3", "warm_start.max_refines=0", "warm_start.stop_fallback_budget=8",
        f"env_overrides={[*HARD_ENV, 'env.frontier_links=[turn, similar]', 'env.frontier_order=interleave']}",
    ],
    "smollm-synthetic-hard-scorer": [
        "grpo.max_steps=8", "grpo.learning_rate=3e-4", "warm_start.save_steps=10", f"env_overrides={HARD_ENV}",
        "warm_start.teacher=scorer", "warm_start.bf16_on_cpu=true",
    ],
    "smollm-synthetic-hard-ranker": [
        "grpo.max_steps=8", "grpo.learning_rate=3e-4", "warm_start.save_steps=10",
        f"env_overrides={[*HARD_ENV, 'env.frontier_ranker=learned']}", "warm_start.teacher=ranker",
        "warm_start.scorer_threshold=0.05", "warm_start.bf16_on_cpu=true",
    ],
    "smollm-synthetic-hard-ranker-context": [
        "grpo.max_steps=8", "grpo.learning_rate=3e-4", "warm_start.save_steps=10",
        f"env_overrides={[*HARD_ENV, 'env.frontier_ranker=learned', 'env.judge.context_weight=0.1']}",
        "warm_start.teacher=ranker", "warm_start.scorer_threshold=0.05", "warm_start.bf16_on_cpu=true",
    ],
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_recipes_are_the_documented_runs(name):
    """A recipe file trains exactly the run its notebook table came from: hard.yaml plus that command's overrides."""
    recipe = load_config(TrainConfig, CONFIGS / "grpo" / f"{name}.yaml")
    documented = load_config(TrainConfig, CONFIGS / "grpo" / "hard.yaml", [*RECIPES[name], f"run_name={name}"])
    assert recipe.model_dump() == documented.model_dump()


def test_the_quickstart_plays_the_synthetic_recipes_env():
    """The quickstart trains on the env and teacher of the synthetic-hard ranker recipe: its policy reads the same."""
    quickstart = load_config(TrainConfig, CONFIGS / "grpo" / "quickstart.yaml")
    recipe = load_config(TrainConfig, CONFIGS / "grpo" / "smollm-synthetic-hard-ranker.yaml")
    assert (quickstart.env, quickstart.env_overrides) == (recipe.env, recipe.env_overrides)
    teacher = ("teacher", "scorer_threshold", "scorer_max_expands")
    assert [getattr(quickstart.warm_start, k) for k in teacher] == [getattr(recipe.warm_start, k) for k in teacher]


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("grpo.per_device_batch_size=6", "multiple of num_generations"),
        ("grpo.beta=0", "greater than 0"),
        ("run_name=../x", "plain folder name"),
        ("grpo.max_new_tokens=999", "exceeds max_completion_tokens"),
        ("backend=tensorrt", "backend"),
        ("grpo.unknown=1", "Extra inputs"),
        ("server.model=other-model", "always serves the policy's base model"),
        ("env=nope", "nope"),
        ("split=tset", "split"),
    ],
)
def test_bad_configs_name_the_problem(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(TrainConfig, CONFIGS / "grpo" / "tiny.yaml", [override])


@pytest.mark.parametrize(
    ("override", "hint"),
    [
        ("grpo.num_generation=4", "did you mean 'num_generations'?"),
        ("warm_start.max_task=3", "did you mean 'max_tasks'?"),
        ("nope=1", "valid keys: backend, device, env,"),
    ],
)
def test_unknown_keys_name_the_closest_valid_key(override, hint):
    with pytest.raises(ConfigError, match="Extra inputs") as error:
        load_config(TrainConfig, CONFIGS / "grpo" / "tiny.yaml", [override])
    assert "tiny.yaml" in str(error.value) and hint in str(error.value)


def test_weighted_component_rewards_sum_to_the_judge_total():
    weights = judge_weights(JudgeConfig())
    funcs, reward_weights = make_component_rewards(weights)
    components = [
        {"correctness": 1.0, "redundancy": 0.5, "cost": 0.25, "format": 1.0, "total": 0.0},
        {"correctness": 0.0, "redundancy": 0.0, "cost": 1.0, "format": 0.5, "total": 0.0},
    ]
    for row in components:
        row.update({name: 0.0 for name in weights if name not in row})
        row["total"] = sum(weights[name] * row[name] for name in weights)
    values = [f(prompts=["p", "p"], completions=["c", "c"], reward_components=components) for f in funcs]
    for index, row in enumerate(components):
        weighted = sum(w * v[index] for w, v in zip(reward_weights, values, strict=True))
        assert weighted == pytest.approx(row["total"])
    assert [f.__name__ for f in funcs][-1] == "total" and reward_weights[-1] == 0.0
    assert pickle.loads(pickle.dumps(funcs[0])).__name__ == funcs[0].__name__


def test_missing_component_is_an_error_not_a_zero():
    with pytest.raises(RolloutError, match="missing"):
        ComponentReward("cost")(prompts=["p"], completions=["c"], reward_components=[{"format": 1.0}])


def test_all_zero_weights_are_rejected():
    with pytest.raises(ConfigError, match="non-zero"):
        make_component_rewards({"correctness": 0.0})


def test_the_rollout_server_is_the_server_section_serving_the_policy(tmp_path):
    """One server config: the run's `server` section, with the policy's model and a LoRA rank that fits."""
    from memora_rl.llm.server import TRAINER_GPU_SHARE, VLLMServer
    from memora_rl.training.config import rollout_server_config

    config = load_config(TrainConfig, CONFIGS / "grpo" / "quickstart.yaml", ["model=/models/warm", "lora.r=32"])
    server = rollout_server_config(config)
    assert (server.model, server.max_lora_rank, server.dtype) == ("/models/warm", 32, "float32")
    assert server.max_model_len == config.server.max_model_len == 4096
    assert server.gpu_memory_utilization == TRAINER_GPU_SHARE
    command = VLLMServer(server).command("/models/warm", on_cuda=True)
    assert command[command.index("--gpu-memory-utilization") + 1] == f"{TRAINER_GPU_SHARE:g}"
    assert "--gpu-memory-utilization" not in VLLMServer(server).command("/models/warm", on_cuda=False)


def test_metric_names_are_namespaced():
    assert metric_name("rewards/format/std") == "reward/format_std"
    assert metric_name("kl") == "train/kl"


def test_env_overrides_are_checked_early_and_saved_with_the_run(tmp_path):
    from memora_rl.config import dump_config, read_yaml

    config = load_config(TrainConfig, CONFIGS / "grpo" / "tiny.yaml", ["env_overrides=[env.max_steps=5]"])
    assert config.env_overrides == ["env.max_steps=5"]
    dump_config(config, tmp_path / "config.yaml")
    assert read_yaml(tmp_path / "config.yaml")["env_overrides"] == ["env.max_steps=5"]  # export reads it back
    with pytest.raises(ConfigError, match=r"env\.nope"):  # checked at load, before any model loads
        load_config(TrainConfig, CONFIGS / "grpo" / "tiny.yaml", ["env_overrides=[env.nope=1]"])


def test_logged_only_episode_metrics_become_zero_weight_rewards():
    weights = judge_weights(JudgeConfig())
    new = ["initial_recall", "recall_gain", "valid_action_rate"] + [
        f"actions_{kind}" for kind in ("expand", "refine", "stop", "invalid", "forced")
    ]
    assert all(weights[name] == 0.0 for name in new)
    funcs, reward_weights = make_component_rewards(weights)
    names = [f.__name__ for f in funcs]
    assert all(reward_weights[names.index(name)] == 0.0 for name in new)
    assert metric_name("rewards/actions_forced/mean") == "reward/actions_forced"


def test_missed_tasks_need_the_rollout_server_and_a_resume_keeps_the_started_set(tmp_path):
    """`grpo.tasks`: `all` passes the tasks through; `missed` without a server fails; a resume reads its split."""
    import json

    from memora_rl.training.run import _focus_tasks
    from tests.training.conftest import make_tasks

    tasks = make_tasks(4)
    base = ["grpo.tasks=missed", f"output_root={tmp_path}"]
    config = load_config(TrainConfig, CONFIGS / "grpo" / "tiny.yaml", ["grpo.tasks=all"])
    assert _focus_tasks(config, tasks, None, None, 5) == tasks
    config = load_config(TrainConfig, CONFIGS / "grpo" / "tiny.yaml", base)
    with pytest.raises(ConfigError, match="use backend=vllm"):
        _focus_tasks(config, tasks, None, None, 5)
    config.output_dir.mkdir(parents=True)
    (config.output_dir / "data_split.json").write_text(json.dumps({"task_ids": ["t3", "t1"]}))
    resumed = load_config(TrainConfig, CONFIGS / "grpo" / "tiny.yaml", [*base, "resume=true"])
    assert [task.id for task in _focus_tasks(resumed, tasks, None, None, 5)] == ["t1", "t3"]
