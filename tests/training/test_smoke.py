"""Tiny end-to-end GRPO runs on the synthetic env with the real SmolLM2 model.

Each run is 2 optimizer steps of 4 episodes (one task, G=4), one turn of at most 24 tokens
(room for a whole `{"action": "stop"}` so rewards differ within a group), so a step costs a
few forward/backward passes over ~3k tokens on CPU.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from transformers import TrainerCallback

from memora_rl.config import load_config
from memora_rl.training.config import TrainConfig

REPO_ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = REPO_ROOT / "configs" / "grpo" / "tiny.yaml"
TINY = [
    "grpo.max_steps=2",
    "grpo.num_generations=4",
    "grpo.per_device_batch_size=4",
    "grpo.max_turns=1",
    "grpo.max_new_tokens=24",
    "grpo.max_completion_tokens=32",
    "grpo.learning_rate=1e-3",
    "max_tasks=8",
    "save_steps=1",
    "logging.wandb=disabled",
    "logging.sample_every=0",
]


def tiny_config(root: Path, *overrides: str) -> TrainConfig:
    return load_config(TrainConfig, QUICKSTART, [*TINY, f"output_root={root}", *overrides])


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def data_order(run_dir: Path) -> dict[int, list[str]]:
    """Step -> task ids of its generation batch (a resumed run's record wins)."""
    return {record["step"]: record["task_ids"] for record in read_jsonl(run_dir / "data_order.jsonl")}


def check_trained(result, seeded: bool = True) -> None:
    """Two logged steps with a finite loss and every judge component, and LoRA B moved off zero.

    An unseeded sampler (the vLLM server) can give a group of G identical rewards, hence no
    advantage and no gradient at all; then only steps whose groups had reward variance must
    have a gradient, and the adapter must have moved exactly when some step had one.
    """
    from safetensors.torch import load_file

    records = read_jsonl(result.metrics_path)
    assert [r["step"] for r in records] == [1, 2]
    assert all(math.isfinite(r["train/loss"]) for r in records)
    assert all({"reward/correctness", "reward/format", "reward/cost", "reward/total"} <= set(r) for r in records)
    for record in records:
        if record["train/frac_reward_zero_std"] < 1.0:
            assert record["train/grad_norm"] > 0, record
    learned = any(r["train/grad_norm"] > 0 for r in records)
    if seeded:
        assert learned  # the seeded in-process sampler gives this run reward variance
    weights = load_file(str(result.adapter_dir / "adapter_model.safetensors"))
    lora_b = [tensor for name, tensor in weights.items() if "lora_B" in name]
    assert lora_b
    assert any(tensor.abs().max().item() > 0 for tensor in lora_b) == learned  # B starts at exactly 0


@pytest.fixture(scope="module")
def trl_rewards() -> list[dict[str, Any]]:
    """Per step of `transformers_run`: TRL's reward matrix, its weights and the rollout's `judge_reward` (J)."""
    return []


@pytest.fixture(scope="module")
def transformers_run(tmp_path_factory, trl_rewards):
    """The two-step run; TRL's `_calculate_rewards` is wrapped to record each step's rewards in `trl_rewards`."""
    from trl import GRPOTrainer

    from memora_rl.training.run import run

    captured = trl_rewards
    original = GRPOTrainer._calculate_rewards

    def capture(self: Any, inputs: list[dict], *args: Any, **kwargs: Any) -> Any:
        rewards_per_func = original(self, inputs, *args, **kwargs)  # (B, F)
        captured.append({
            "rewards_per_func": rewards_per_func.detach().cpu().clone(),
            "weights": self.reward_weights.detach().cpu().clone(),  # (F,)
            "names": list(self.reward_func_names),
            "judge_reward": [row["judge_reward"] for row in inputs],
        })  # fmt: skip
        return rewards_per_func

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(GRPOTrainer, "_calculate_rewards", capture)
        return run(tiny_config(tmp_path_factory.mktemp("runs"), "backend=transformers", "run_name=tf"))


@pytest.mark.slow
def test_transformers_backend_trains_two_steps(transformers_run):
    assert transformers_run.final_step == 2
    check_trained(transformers_run)
    run_dir = transformers_run.run_dir
    assert (run_dir / "checkpoint-2" / "config.yaml").is_file()
    assert (run_dir / "checkpoint-2" / "data_split.json").is_file()
    assert (run_dir / "checkpoint-2" / "optimizer.pt").is_file()
    assert read_jsonl(run_dir / "samples.jsonl")[0]["reward_components"]


@pytest.mark.slow
def test_trls_weighted_reward_sum_is_the_envs_j_on_real_rollouts(transformers_run, trl_rewards):
    """TRL's weighted sum (`rewards_per_func @ reward_weights`) equals the env's J row by row on real
    rollouts, and the `reward` TRL logs (the batch mean of that sum) equals the mean J."""
    import torch

    assert len(trl_rewards) == 2  # one generation batch per optimizer step
    logged = read_jsonl(transformers_run.metrics_path)
    for batch, record in zip(trl_rewards, logged, strict=True):
        judge = torch.tensor(batch["judge_reward"], dtype=torch.float32)  # (B,) the env's J per episode
        trl_sum = (batch["rewards_per_func"] * batch["weights"].unsqueeze(0)).nansum(dim=1)  # (B,) TRL's formula
        assert judge.numel() == 4 and not torch.isnan(batch["rewards_per_func"]).any()
        torch.testing.assert_close(trl_sum, judge, atol=1e-5, rtol=0)
        total_column = batch["rewards_per_func"][:, batch["names"].index("total")]  # logged only, weight 0
        torch.testing.assert_close(total_column, judge, atol=1e-6, rtol=0)
        assert batch["weights"][batch["names"].index("total")] == 0.0
        assert record["train/reward"] == pytest.approx(judge.mean().item(), abs=1e-5)  # TRL's own logged sum


class _Interrupt(Exception):
    """Stands in for the process being killed."""


class _KillAfterFirstCheckpoint(TrainerCallback):
    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step == 1:  # checkpoint-1 is on disk; step 2 has not started
            raise _Interrupt


@pytest.mark.slow
def test_resume_reaches_the_same_step_with_the_same_data_order(transformers_run, tmp_path):
    """Killed after checkpoint-1 and resumed: same steps, data order and wandb run; wandb gets metrics.jsonl's keys."""
    from wandb.sdk.wandb_run import Run

    from memora_rl.training.run import run

    logged: list[tuple[int | None, dict[str, Any]]] = []
    original_log = Run.log

    def spy(self: Run, data: dict[str, Any], step: int | None = None, **kwargs: Any) -> None:
        logged.append((step, dict(data)))
        original_log(self, data, step=step, **kwargs)

    config = tiny_config(tmp_path, "backend=transformers", "run_name=resumed", "logging.wandb=offline")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Run, "log", spy)
        with pytest.raises(_Interrupt):
            run(config, callbacks=[_KillAfterFirstCheckpoint()])
        assert (config.output_dir / "checkpoint-1").is_dir() and not (config.output_dir / "final").exists()
        wandb_id = (config.output_dir / "wandb_id").read_text().strip()
        result = run(config.model_copy(update={"resume": True}))
    assert result.final_step == 2
    assert (config.output_dir / "wandb_id").read_text().strip() == wandb_id  # one wandb run across the resume
    offline_runs = sorted((config.output_dir / "wandb").glob("offline-run-*"))
    assert len(offline_runs) == 2 and all(path.name.endswith(wandb_id) for path in offline_runs)
    jsonl = read_jsonl(result.metrics_path)
    assert [step for step, _ in logged] == [r["step"] for r in jsonl] == [1, 2]
    for (_, data), record in zip(logged, jsonl, strict=True):
        assert data == {key: value for key, value in record.items() if key != "step"}  # one name per metric
        assert "reward/total" in data and "train/loss" in data and not any(k.startswith("rewards/") for k in data)
    assert data_order(result.run_dir) == data_order(transformers_run.run_dir)
    resumed, straight = jsonl, read_jsonl(transformers_run.metrics_path)
    assert [r["step"] for r in resumed] == [1, 2]
    # step 1 moved the adapter away from the reference; a resume that lost it would show KL == 0 again
    assert straight[0]["train/grad_norm"] > 0 and straight[1]["train/kl"] > 0
    assert resumed[1]["train/kl"] > 0


@pytest.mark.slow
@pytest.mark.vllm
def test_vllm_backend_trains_two_steps_with_adapter_hot_swap(tmp_path, vllm_server):
    from memora_rl.llm.server import list_served_models
    from memora_rl.training.run import run

    url = vllm_server.base_url
    result = run(tiny_config(tmp_path, "backend=vllm", f"server.url={url}", "run_name=vl"))
    assert result.final_step == 2
    check_trained(result, seeded=False)
    assert all(r["time/adapter_sync_mean_s"] < 10 for r in read_jsonl(result.metrics_path))
    served = [m["id"] for m in list_served_models(url)]
    assert not any(name.startswith("vl-policy_v") for name in served)  # every adapter of the run was unloaded
