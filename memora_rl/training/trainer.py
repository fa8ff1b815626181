"""Build the peft policy, TRL's `GRPOConfig` and the `GRPOTrainer` from a `TrainConfig`."""

from __future__ import annotations

import logging
import os
from pathlib import Path
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


def resolve_device(config: TrainConfig) -> str:
    """`cuda` or `cpu` for `device=auto`; an explicit `cuda` without a GPU is a config error."""
    import torch

    if config.device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device=cuda but no CUDA GPU is visible; use device=auto or device=cpu.")
    if config.device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return config.device


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


def wandb_report_to(config: TrainConfig) -> list[str]:
    """`report_to` for TRL; sets WANDB_MODE=offline unless the user is logged in (mode `auto`)."""
    mode = config.logging.wandb
    if mode == "disabled":
        return []
    if mode == "auto":
        logged_in = bool(os.environ.get("WANDB_API_KEY")) or "api.wandb.ai" in _netrc_text()
        mode = "online" if logged_in else "offline"
    os.environ.setdefault("WANDB_MODE", mode)
    os.environ.setdefault("WANDB_PROJECT", config.logging.wandb_project)
    os.environ.setdefault("WANDB_DIR", str(config.output_dir))
    return ["wandb"]


def _netrc_text() -> str:
    """Contents of ~/.netrc (where `wandb login` stores the key), or ''."""
    path = Path.home() / ".netrc"
    return path.read_text() if path.is_file() else ""


def build_grpo_config(config: TrainConfig, reward_weights: list[float], device: str) -> GRPOConfig:
    """Map `TrainConfig` onto TRL's `GRPOConfig` (the settings verified in DESIGN §6a)."""
    from trl import GRPOConfig

    grpo = config.grpo
    return GRPOConfig(
        output_dir=str(config.output_dir),
        run_name=config.run_name,
        seed=config.seed,
        data_seed=config.seed,
        use_cpu=device == "cpu",
        bf16=device == "cuda",
        gradient_checkpointing=False,
        per_device_train_batch_size=grpo.per_device_batch_size,
        gradient_accumulation_steps=grpo.gradient_accumulation,
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
        logging_steps=1,
        save_strategy="steps",
        save_steps=config.save_steps,
        save_total_limit=config.save_total_limit,
        report_to=wandb_report_to(config),
        dataloader_num_workers=0,
        remove_unused_columns=False,
        disable_tqdm=True,
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
) -> GRPOTrainer:
    """The `GRPOTrainer` over our rollout; TRL wraps `model` with `lora` (KL reference = adapter disabled)."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from transformers import set_seed
    from trl import GRPOTrainer

    set_seed(args.seed)  # TRL initialises the LoRA weights before the Trainer seeds itself

    return GRPOTrainer(
        model=model,
        reward_funcs=reward_funcs,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=lora,
        rollout_func=rollout_func,
        callbacks=callbacks,
    )
