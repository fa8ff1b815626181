"""The trainer's logprob pass and step settings leave GRPO's numbers unchanged (real SmolLM2 + LoRA)."""

from __future__ import annotations

import random

import pytest
import torch

from memora_rl.training.logprobs import completion_logps, group_rows
from memora_rl.training.trainer import micro_batching

PAD = 2
PROMPTS = [[5, 17, 300, 42, 99, 1000, 7], [7, 8, 9]]
COMPLETIONS = [[11, 12, 13, 14], [21, 22], [31, 32, 33, 34, 35, 36], [41], [51, 52, 53]]
WHICH = [0, 1, 0, 1, 0]
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def padded_batch() -> tuple[torch.Tensor, torch.Tensor, int]:
    """TRL's layout: left-padded prompts, then right-padded completions; returns ids, mask, completion width."""
    width_p = max(len(p) for p in PROMPTS)
    width_c = max(len(c) for c in COMPLETIONS)
    ids, mask = [], []
    for which, completion in zip(WHICH, COMPLETIONS, strict=True):
        prompt = PROMPTS[which]
        ids.append([PAD] * (width_p - len(prompt)) + prompt + completion + [PAD] * (width_c - len(completion)))
        mask.append(
            [0] * (width_p - len(prompt)) + [1] * (len(prompt) + len(completion)) + [0] * (width_c - len(completion))
        )
    return torch.tensor(ids), torch.tensor(mask), width_c


def test_group_rows_by_unpadded_prompt() -> None:
    ids, mask, width = padded_batch()
    groups = group_rows(ids[:, :-width], mask[:, :-width], mask[:, -width:])
    assert [group.rows for group in groups] == [[0, 2, 4], [1, 3]]
    assert groups[0].prompt.tolist() == PROMPTS[0] and groups[1].prompt.tolist() == PROMPTS[1]
    assert [group.lengths for group in groups] == [[4, 6, 3], [2, 1]]


def test_micro_batching_keeps_the_generation_batch() -> None:
    assert micro_batching(8, 1, 2) == (2, 4)
    assert micro_batching(8, 2, 4) == (4, 4)
    assert micro_batching(4, 1, None) == (4, 1)
    assert micro_batching(6, 1, 4) == (6, 1)  # 4 does not divide 6: whole batches


@pytest.fixture(scope="module")
def lora_model():
    """SmolLM2-135M (float32) with a LoRA adapter whose B matrices are random, so the adapter matters."""
    from peft import LoraConfig, get_peft_model

    from memora_rl.llm.registry import load_causal_lm

    torch.manual_seed(0)
    base = load_causal_lm("smollm2-135m-instruct", dtype="float32")
    model = get_peft_model(base, LoraConfig(r=8, lora_alpha=16, target_modules=LORA_TARGETS, task_type="CAUSAL_LM"))
    for name, parameter in model.named_parameters():
        if "lora_B" in name:
            parameter.data.normal_(0, 0.02)
    return model.train()


def _grads(model, loss: torch.Tensor) -> torch.Tensor:
    params = [p for p in model.parameters() if p.requires_grad]
    return torch.cat([g.flatten() for g in torch.autograd.grad(loss, params)])


def test_completion_logps_match_trls_fused_head(lora_model) -> None:
    """Shared-prompt and per-row passes give TRL's logprobs, entropies and gradients (fp32 rounding)."""
    from trl.trainer.utils import add_fused_lm_head

    base = lora_model.get_base_model()
    ids, mask, width = padded_batch()
    labels = ids.masked_fill(mask == 0, -100)
    labels[:, :-width] = -100
    add_fused_lm_head(base, temperature=0.7, outputs=("log_probs", "entropy"))
    reference = lora_model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
    ref_logps, ref_entropy = reference.log_probs[:, -width:], reference.entropy[:, -width:]
    ref_grads = _grads(lora_model, ref_logps.sum())
    for share in (True, False):
        logps, entropy = completion_logps(
            base.base_model, base.get_output_embeddings(), ids, mask, width, 0.7, share, True
        )
        assert logps.shape == entropy.shape == (len(COMPLETIONS), width)
        assert torch.allclose(logps, ref_logps, atol=1e-4), share
        assert torch.allclose(entropy, ref_entropy, atol=1e-4), share
        assert (logps[mask[:, -width:] == 0] == 0).all()
        grads = _grads(lora_model, logps.sum())
        assert (grads - ref_grads).norm() / ref_grads.norm() < 1e-3, share


class FixedRollout:
    """Serves one fixed group of episodes for every prompt batch (a stand-in for the env rollout)."""

    def __init__(self, group_size: int) -> None:
        rng = random.Random(0)
        prompt = [rng.randrange(100, 40_000) for _ in range(40)]
        self.batch = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": [], "reward_components": []}
        for index in range(group_size):
            completion, env_mask = [], []
            for turn in range(1 + index % 3):  # 1 to 3 turns: rows of different lengths
                action = [rng.randrange(100, 40_000) for _ in range(5 + index)] + [2]
                completion += action
                env_mask += [1] * len(action)
                if turn < index % 3:
                    observation = [rng.randrange(100, 40_000) for _ in range(20)]
                    completion += observation
                    env_mask += [0] * len(observation)
            self.batch["prompt_ids"].append(prompt)
            self.batch["completion_ids"].append(completion)
            self.batch["logprobs"].append([-0.5] * len(completion))
            self.batch["env_mask"].append(env_mask)
            self.batch["reward_components"].append({"correctness": float(index % 2), "total": 0.0})

    def __call__(self, prompts, trainer):
        return {key: list(values) for key, values in self.batch.items()}


def first_step_logs(tmp_path, name: str, step, fast: bool = True) -> dict[str, float]:
    """Loss and grad norm of one GRPO step (G=4) on `FixedRollout` with the given `StepSettings`."""
    from datasets import Dataset

    from memora_rl.config import load_config
    from memora_rl.training.config import TrainConfig
    from memora_rl.training.rewards import make_component_rewards
    from memora_rl.training.trainer import build_grpo_config, build_policy, build_trainer

    overrides = ["grpo.num_generations=4", "grpo.per_device_batch_size=4", "grpo.max_steps=1", "save_steps=1000",
                 "logging.wandb=disabled", f"output_root={tmp_path}", f"run_name={name}"]  # fmt: skip
    config = load_config(TrainConfig, None, overrides)
    model, tokenizer, lora = build_policy(config, "cpu")
    funcs, weights = make_component_rewards({"correctness": 1.0, "total": 0.0})
    args = build_grpo_config(config, weights, "cpu", step)
    dataset = Dataset.from_list([{"prompt": "task"}])
    trainer = build_trainer(model, lora, tokenizer, args, dataset, funcs, FixedRollout(4), [], step.share_prompt_prefix)
    trainer.fast_logprobs = fast
    generator = torch.Generator().manual_seed(1)
    for parameter_name, parameter in trainer.model.named_parameters():
        if "lora_B" in parameter_name:  # B starts at 0 (policy = reference); move it so the KL term is live
            parameter.data.copy_(torch.randn(parameter.shape, generator=generator) * 0.02)
    trainer.train()
    return {**trainer.state.log_history[0], "checkpointing": trainer.model.is_gradient_checkpointing}


@pytest.mark.slow
def test_step_loss_unchanged_by_checkpointing_micro_batches_and_prefix_sharing(tmp_path) -> None:
    """One fixed batch: TRL's pass over the whole batch, ours with micro-batches + shared prompt, ours checkpointed."""
    from memora_rl.training.trainer import StepSettings

    trl = first_step_logs(tmp_path, "trl", StepSettings(None, False, False), fast=False)
    shared = first_step_logs(tmp_path, "shared", StepSettings(2, True, False))
    checkpointed = first_step_logs(tmp_path, "checkpointed", StepSettings(2, True, True))
    assert checkpointed["checkpointing"] and not shared["checkpointing"]
    assert abs(trl["loss"]) > 1e-3 and trl["grad_norm"] > 0
    for logs in (shared, checkpointed):
        assert logs["loss"] == pytest.approx(trl["loss"], abs=1e-4)
        assert logs["grad_norm"] == pytest.approx(trl["grad_norm"], rel=1e-3)
    # TRL logs the KL as a mean of per-micro-batch means, so only equal micro-batching logs equal values
    assert checkpointed["kl"] == pytest.approx(shared["kl"], abs=1e-5)
