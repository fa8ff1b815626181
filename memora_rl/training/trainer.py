"""Build the peft policy, TRL's `GRPOConfig` and the `GRPOTrainer` from a `TrainConfig`."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from memora_rl.data.records import Task
from memora_rl.errors import ConfigError
from memora_rl.training.config import TrainConfig

if TYPE_CHECKING:
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class StepSettings:
    """How one GRPO optimizer step is computed (time against memory); same gradient either way.

    Read from `config.grpo` when it has fields of these names (see `step_settings`), so they
    can become user-visible `GRPOSettings` fields without touching this module.
    """

    micro_batch_size: int | None = 2
    """Episodes per forward/backward pass; the rest of the generation batch is accumulated (None: all)."""
    share_prompt_prefix: bool = True
    """Run a prompt once for the episodes that share it (GRPO's group), through a repeated KV cache."""
    gradient_checkpointing: bool = False
    """Recompute layer activations in the backward pass (less memory, ~30% more compute; no prefix sharing)."""
    checkpoint_every_n_layers: int = 1
    """With gradient checkpointing: checkpoint only every n-th decoder layer (1: all)."""


def step_settings(config: TrainConfig) -> StepSettings:
    """`StepSettings` from the `config.grpo` fields of the same names, defaults where it has none."""
    defaults = StepSettings()
    values = {name: getattr(config.grpo, name, getattr(defaults, name)) for name in StepSettings.__dataclass_fields__}
    return StepSettings(**values)


def micro_batching(per_device_batch: int, accumulation: int, micro_batch: int | None) -> tuple[int, int]:
    """(per-pass batch, accumulation steps) that keep the generation batch `per_device_batch * accumulation`.

    >>> micro_batching(8, 1, 2), micro_batching(8, 2, None), micro_batching(6, 1, 4)
    ((2, 4), (8, 2), (6, 1))
    """
    if micro_batch is None or micro_batch >= per_device_batch or per_device_batch % micro_batch:
        if micro_batch is not None and micro_batch < per_device_batch:
            logger.warning(
                "micro_batch_size=%d does not divide per_device_batch_size=%d; using whole batches.",
                micro_batch,
                per_device_batch,
            )
        return per_device_batch, accumulation
    return micro_batch, accumulation * (per_device_batch // micro_batch)


def resolve_device(device: str) -> str:
    """`cuda` or `cpu` for `auto`; an explicit `cuda` without a GPU is a config error."""
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device=cuda but no CUDA GPU is visible; use device=auto or device=cpu.")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def cpu_has_bf16() -> bool:
    """True where this CPU computes bf16 in hardware (AVX512-BF16 or AMX tiles).

    Elsewhere bf16 autocast emulates the type: on an AVX-512 CPU without either, oneDNN still accepts bf16,
    and a warm-start step ran 2.6 times slower than in float32.
    """
    import torch

    return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())


def task_prompt(task: Task) -> str:
    """The dataset's `prompt` for a task: unique per task, so a prompt maps back to its task.

    The policy never sees this text; the rollout renders the env's observation instead.
    """
    return f"[{task.id}] {task.question}"


def tasks_dataset(tasks: list[Task]) -> tuple[Dataset, dict[str, Task]]:
    """A `datasets.Dataset` with `prompt` and `task_id` columns, and the prompt -> task table.

    Raises:
        ConfigError: for an empty task list or duplicate task ids.
    """
    from datasets import Dataset

    if not tasks:
        raise ConfigError("The env returned no training tasks; check env/split (and max_tasks).")
    table = {task_prompt(task): task for task in tasks}
    if len(table) != len(tasks):
        raise ConfigError("Training tasks have duplicate ids; each task needs a unique id.")
    rows = [{"prompt": prompt, "task_id": task.id} for prompt, task in table.items()]
    return Dataset.from_list(rows), table


def build_policy(config: TrainConfig, device: str) -> tuple[Any, Any, LoraConfig]:
    """Load the base model (fp32 on CPU, bf16 on GPU), its tokenizer, and the LoRA config TRL wraps it with.

    The trainer (not us) applies the adapter: a model handed over already wrapped in peft is
    treated by TRL as a pretrained adapter, which gets a frozen "ref" copy, and HF's resume
    then restores only that copy, not the trained adapter.
    """
    from peft import LoraConfig

    from memora_rl.llm.registry import load_causal_lm, load_tokenizer

    tokenizer = load_tokenizer(config.model)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    base = load_causal_lm(config.model, dtype="float32" if device == "cpu" else "bfloat16")
    lora = LoraConfig(
        r=config.lora.r,
        lora_alpha=config.lora.alpha,
        lora_dropout=config.lora.dropout,
        target_modules=list(config.lora.target_modules),
        task_type="CAUSAL_LM",
    )
    return base, tokenizer, lora


def build_grpo_config(
    config: TrainConfig, reward_weights: list[float], device: str, step: StepSettings | None = None
) -> GRPOConfig:
    """Map `TrainConfig` onto TRL's `GRPOConfig` (the settings in docs/architecture.md, "Rollouts and serving").

    One generation batch (`per_device_batch_size * gradient_accumulation` episodes) is played
    per optimizer step and trained in passes of `step.micro_batch_size` episodes.
    """
    from memora_rl.training.grpo_args import MemoraGRPOConfig

    grpo = config.grpo
    step = step or step_settings(config)
    batch, accumulation = micro_batching(grpo.per_device_batch_size, grpo.gradient_accumulation, step.micro_batch_size)
    checkpointing = {"use_reentrant": False, "every_n_layers": step.checkpoint_every_n_layers}
    return MemoraGRPOConfig(
        output_dir=str(config.output_dir),
        run_name=config.run_name,
        seed=config.seed,
        data_seed=config.seed,
        use_cpu=device == "cpu",
        bf16=device == "cuda",
        gradient_checkpointing=step.gradient_checkpointing,
        gradient_checkpointing_kwargs=checkpointing if step.gradient_checkpointing else None,
        per_device_train_batch_size=batch,
        gradient_accumulation_steps=accumulation,
        steps_per_generation=accumulation,
        num_generations=grpo.num_generations,
        max_steps=grpo.max_steps,
        learning_rate=grpo.learning_rate,
        lr_scheduler_type="constant_with_warmup",
        warmup_steps=grpo.warmup_steps,
        max_grad_norm=grpo.max_grad_norm,
        beta=grpo.beta,
        loss_type=grpo.loss_type,
        scale_rewards=grpo.scale_rewards,
        temperature=grpo.temperature,
        max_completion_length=grpo.max_completion_tokens,
        reward_weights=reward_weights,
        use_vllm=False,  # rollouts generate themselves (vLLM server or transformers), see rollout.py
        # In-process transformers sampling is the trainer's own model: nothing to correct (training/importance.py).
        vllm_importance_sampling_correction=config.backend == "vllm" and grpo.importance_sampling != "off",
        vllm_importance_sampling_mode=grpo.importance_sampling
        if grpo.importance_sampling != "off"
        else "token_truncate",
        vllm_importance_sampling_clip_max=grpo.importance_sampling_clip,
        logging_steps=1,
        save_strategy="steps",
        save_steps=config.save_steps,
        save_total_limit=config.save_total_limit,
        report_to=[],  # the run's wandb run is ours and logs metrics.jsonl's keys (training/tracking.py)
        dataloader_num_workers=0,
        ddp_find_unused_parameters=False,  # several processes: every LoRA weight takes part in each forward
        remove_unused_columns=False,
        disable_tqdm=True,
        turn_credit_weight=grpo.turn_credit_weight,
        turn_gamma=grpo.turn_gamma,
    )


def build_trainer(
    model: Any,
    lora: LoraConfig,
    tokenizer: Any,
    args: GRPOConfig,
    dataset: Dataset,
    reward_funcs: list[Any],
    rollout_func: Any,
    callbacks: list[TrainerCallback],
    share_prompt_prefix: bool = StepSettings.share_prompt_prefix,
) -> GRPOTrainer:
    """The `GRPOTrainer` over our rollout; TRL wraps `model` with `lora` (KL reference = adapter disabled)."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from transformers import set_seed

    from memora_rl.training.progress import show_loss_progress

    set_seed(args.seed)  # TRL initialises the LoRA weights before the Trainer seeds itself

    trainer = memora_trainer_class()(
        model=model,
        reward_funcs=reward_funcs,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=lora,
        rollout_func=rollout_func,
        callbacks=callbacks,
    )
    trainer.share_prompt_prefix = share_prompt_prefix
    from memora_rl.training.logprobs import route_forward

    route_forward(trainer.model)  # the DDP wrapper of a multi-process run wraps this model
    show_loss_progress(trainer, "GRPO")
    return trainer


@cache
def memora_trainer_class() -> type[GRPOTrainer]:
    """`GRPOTrainer` with the completion-only, prompt-sharing logprob pass (`memora_rl.training.logprobs`)."""
    from trl import GRPOTrainer

    class MemoraGRPOTrainer(GRPOTrainer):
        """TRL's trainer; text-only batches are scored by `completion_logps` (same values, less compute)."""

        share_prompt_prefix: bool = True
        """Run a shared prompt once per group (turned off automatically under gradient checkpointing)."""
        fast_logprobs: bool = True
        """Score with `completion_logps`; False keeps TRL's padded pass (benchmarks compare the two)."""

        def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
            """TRL's scored batch; with `turn_credit_weight` > 0 the advantages become (B, T) with step credit."""
            output = super()._generate_and_score_completions(inputs)
            weight = float(getattr(self.args, "turn_credit_weight", 0.0))
            if weight > 0.0:
                output["advantages"] = self._with_turn_credit(inputs, output, weight)
            return output

        def _with_turn_credit(self, inputs: list[dict[str, Any]], output: dict[str, Any], weight: float) -> Any:
            """Episode advantages (B,) plus `weight` * step advantages on each turn's tokens (`turn_credit`)."""
            import torch

            from memora_rl.training.turn_credit import token_advantages, walks_from_rows

            if self.accelerator.num_processes > 1:
                raise ConfigError("grpo.turn_credit_weight > 0 needs one training process (step groups span it).")
            advantages = output["advantages"]
            gamma = float(getattr(self.args, "turn_gamma", 1.0))
            walks = walks_from_rows(inputs)  # TRL merged the rollout's columns into its input rows
            scale = self.scale_rewards != "none"
            credit = token_advantages(
                advantages.tolist(), walks, output["completion_ids"].size(1), weight, gamma, scale
            )
            mode = "train" if self.model.training else "eval"
            self._metrics[mode]["turn_credit/shared_turns"].append(credit.shared)
            steps = credit.step_advantages
            self._metrics[mode]["turn_credit/step_advantage_abs"].append(
                float(abs(steps).mean()) if steps.size else 0.0
            )
            return torch.as_tensor(credit.advantages, dtype=advantages.dtype, device=advantages.device)

        def _get_per_token_logps_and_entropies(
            self,
            model: Any,
            input_ids: Any,
            attention_mask: Any,
            logits_to_keep: int,
            batch_size: int | None = None,
            compute_entropy: bool = False,
            compute_aux_loss: bool = False,
            **kwargs: Any,
        ) -> tuple[Any, Any, Any]:
            """TRL's signature; falls back to TRL for multimodal inputs, MoE aux losses and FSDP."""
            parts = self._fast_path_parts(model, compute_aux_loss, kwargs)
            if parts is None:
                return super()._get_per_token_logps_and_entropies(
                    model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy, compute_aux_loss,
                    **kwargs,
                )  # fmt: skip

            def scored() -> tuple[Any, Any]:
                return self._chunked_logps(
                    parts, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy
                )

            if self.accelerator.num_processes > 1 and model is not self.accelerator.unwrap_model(model):
                from memora_rl.training.logprobs import ROUTED

                return (*model(**{ROUTED: scored}), None)  # through the DDP wrapper, which all-reduces its grads
            return (*scored(), None)

        def _fast_path_parts(self, model: Any, compute_aux_loss: bool, kwargs: dict[str, Any]) -> tuple | None:
            """(backbone, lm_head) of `model` when our pass applies to this call, else None."""
            if not self.fast_logprobs or compute_aux_loss or any(value is not None for value in kwargs.values()):
                return None
            if self.args.cast_lm_head_to_fp32 or self.is_fsdp_enabled:
                return None  # TRL's fp32 head is not reproduced; FSDP shards the weights the pass reads
            unwrapped = self.accelerator.unwrap_model(model)
            base = unwrapped.get_base_model() if hasattr(unwrapped, "get_base_model") else unwrapped
            from memora_rl.training.logprobs import supports_fast_path

            backbone = getattr(base, "base_model", base)
            if backbone is base or base.get_output_embeddings() is None or not supports_fast_path(base.config):
                return None
            return backbone, base.get_output_embeddings()

        def _chunked_logps(
            self,
            parts: tuple,
            input_ids: Any,
            attention_mask: Any,
            logits_to_keep: int,
            batch_size: int | None,
            compute_entropy: bool,
        ) -> tuple[Any, Any]:
            """`completion_logps` over row chunks of `batch_size` (all rows at once when no gradient is taken)."""
            import torch

            from memora_rl.training.logprobs import completion_logps

            backbone, lm_head = parts
            grad = torch.is_grad_enabled()
            checkpointing = getattr(backbone, "is_gradient_checkpointing", False)
            share = self.share_prompt_prefix and not (grad and backbone.training and checkpointing)
            size = (batch_size or input_ids.size(0)) if grad else input_ids.size(0)
            logps, entropies = [], []
            for start in range(0, input_ids.size(0), size):
                end = start + size
                with self.accelerator.autocast():
                    chunk = completion_logps(
                        backbone, lm_head, input_ids[start:end], attention_mask[start:end], logits_to_keep,
                        self.temperature, share, compute_entropy,
                    )  # fmt: skip
                logps.append(chunk[0])
                entropies.append(chunk[1])
            return torch.cat(logps), (torch.cat(entropies) if compute_entropy else None)

    return MemoraGRPOTrainer
