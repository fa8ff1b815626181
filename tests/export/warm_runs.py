"""Tiny training runs for export tests: random LoRA adapters on the real SmolLM2, and a warm-started run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def make_adapter(base_dir: Path, out: Path, seed: int, **lora: Any) -> Any:
    """Save a LoRA adapter with random non-zero A and B, so it changes the base model's greedy text; return the model.

    `lora` overrides the LoraConfig (default r=8, alpha 16 on q_proj and v_proj).
    """
    import torch
    from peft import LoraConfig, get_peft_model

    from memora_rl.llm.registry import load_causal_lm

    torch.manual_seed(seed)
    base = load_causal_lm(str(base_dir), dtype="float32")
    options = {"r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj"], **lora}
    model = get_peft_model(base, LoraConfig(init_lora_weights=False, **options))
    model.save_pretrained(str(out))
    return model


WARM_LORA = {"r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj"]}
"""The fake warm start's LoRA (as the quickstart's: r=8, alpha 16)."""
GRPO_LORA = {"r": 8, "lora_alpha": 16, "use_rslora": True, "target_modules": ["q_proj", "k_proj"]}
"""The fake GRPO LoRA: rsLoRA scaling, and k_proj, which the warm start does not target (v_proj: only it does)."""


def make_warm_run(root: Path, base_dir: Path, keep_warm_adapter: bool = True) -> Path:
    """`<root>/warm/` as a warm-started run lays it out, with random LoRAs: the warm start's, merged, and GRPO's on it.

    `warmstart/adapter/` (dropped with `keep_warm_adapter=False`, as runs made before it was kept),
    `warmstart/model/` (base + that adapter merged, float32, tokenizer, `warmstart.json`), `config.yaml`
    naming the merged model as `with_warm_start` writes it, `final/` (GRPO's adapter), split and metrics.
    """
    import shutil

    from memora_rl.config import dump_config
    from memora_rl.llm.registry import load_tokenizer
    from memora_rl.training.config import TrainConfig, WarmStartSettings
    from memora_rl.training.warmstart import DONE_FILE, warm_start_adapter_dir, warm_start_model_dir

    run_dir = root / "warm"
    warm_adapter, warm_model = warm_start_adapter_dir(run_dir), warm_start_model_dir(run_dir)
    merged = make_adapter(base_dir, warm_adapter, seed=11, **WARM_LORA).merge_and_unload()
    merged.save_pretrained(str(warm_model))
    load_tokenizer(str(base_dir)).save_pretrained(str(warm_model))
    (warm_model / DONE_FILE).write_text(json.dumps({"episodes": 3, "train_loss": 0.5, "base": "smollm2-135m-instruct"}))
    config = TrainConfig(
        run_name="warm", env="synthetic", backend="transformers", warm_start=WarmStartSettings(enabled=True)
    )
    model = str(warm_model.resolve())
    config = config.model_copy(update={"model": model, "server": config.server.model_copy(update={"model": model})})
    dump_config(config, run_dir / "config.yaml")
    split = {"env": "synthetic", "split": "train", "task_ids": ["synth-0-000/q0000"]}
    (run_dir / "data_split.json").write_text(json.dumps(split))
    (run_dir / "metrics.jsonl").write_text(json.dumps({"step": 1, "reward/total": 0.5}) + "\n")
    make_adapter(warm_model, run_dir / "final", seed=12, **GRPO_LORA)
    if not keep_warm_adapter:
        shutil.rmtree(warm_adapter)
    return run_dir


def run_policy(run_dir: Path) -> Any:
    """The policy a warm-started run trained, as it trained it: GRPO's adapter on the merged warm start (float32)."""
    from peft import PeftModel

    from memora_rl.llm.registry import load_causal_lm
    from memora_rl.training.warmstart import warm_start_model_dir

    base = load_causal_lm(str(warm_start_model_dir(run_dir)), dtype="float32")
    return PeftModel.from_pretrained(base, str(run_dir / "final")).eval()
