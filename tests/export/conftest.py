"""A tiny training run folder made with peft on SmolLM2 (two checkpoints, random non-zero LoRA weights)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.export.warm_runs import make_adapter

PROMPT = [{"role": "user", "content": "Question: where does Alice work? Answer with one JSON action."}]
"""Fixed chat used to compare greedy generations of a checkpoint and its export."""
NEW_TOKENS = 12


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> Path:
    """`checkpoints/tiny/` as `memora_rl.training.run` lays it out: config, split, metrics, checkpoint-1 and -2."""
    from memora_rl.config import dump_config
    from memora_rl.training.config import TrainConfig

    run_dir = tmp_path_factory.mktemp("checkpoints") / "tiny"
    run_dir.mkdir()
    dump_config(TrainConfig(run_name="tiny", env="synthetic", backend="transformers"), run_dir / "config.yaml")
    split = {"env": "synthetic", "split": "train", "task_ids": ["synth-0-000/q0000", "synth-0-000/q0001"]}
    (run_dir / "data_split.json").write_text(json.dumps(split))
    (run_dir / "metrics.jsonl").write_text(json.dumps({"step": 2, "reward/total": 0.42, "train/loss": 0.01}) + "\n")
    for step in (1, 2):
        make_adapter(tiny_model_dir, run_dir / f"checkpoint-{step}", seed=step)
    return run_dir


def greedy_text(model, tokenizer, messages=PROMPT, new_tokens: int = NEW_TOKENS) -> str:
    """Greedy continuation of `messages` (special tokens removed)."""
    import torch

    inputs = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=True, return_tensors="pt")
    with torch.inference_mode():
        output = model.generate(
            **inputs, max_new_tokens=new_tokens, do_sample=False, pad_token_id=tokenizer.eos_token_id
        )
    return tokenizer.decode(output[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)


@pytest.fixture(scope="session")
def greedy():
    """`greedy_text(model, tokenizer, messages=PROMPT)` for tests (conftest helpers are not importable)."""
    return greedy_text


@pytest.fixture(scope="session")
def checkpoint_text(tiny_run: Path, tiny_model_dir: Path) -> str:
    """Greedy text of the run's latest checkpoint (base + adapter in float32) for the fixed prompt."""
    from peft import PeftModel

    from memora_rl.llm.registry import load_causal_lm, load_tokenizer

    base = load_causal_lm(str(tiny_model_dir), dtype="float32")
    model = PeftModel.from_pretrained(base, str(tiny_run / "checkpoint-2")).eval()
    return greedy_text(model, load_tokenizer(str(tiny_model_dir)))


@pytest.fixture(scope="session")
def fixed_prompt() -> tuple[list[dict[str, str]], int]:
    """The fixed chat and the number of greedy tokens compared across loads."""
    return PROMPT, NEW_TOKENS
