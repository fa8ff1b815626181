"""A random LoRA adapter for tests that need outputs to change when an adapter is served."""

from __future__ import annotations

from pathlib import Path


def make_random_adapter(model_dir: Path, out_dir: Path) -> Path:
    """A rank-8 LoRA on the attention projections with random, non-zero lora_B, saved to `out_dir`."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    config = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])
    model = get_peft_model(base, config)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(std=0.2)
    model.save_pretrained(out_dir)
    return out_dir
