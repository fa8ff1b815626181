"""CLI help is written once: `--help` of `train` and `eval` shows the config fields' docstrings and defaults."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

from memora_rl.cli import app
from memora_rl.cli_options import field_help
from memora_rl.evaluation.config import EvalConfig
from memora_rl.llm.server import ServerConfig
from memora_rl.training.config import TrainConfig

REPO = Path(__file__).resolve().parents[1]
WIDE = {"COLUMNS": "200", "TERMINAL_WIDTH": "200"}
EVAL_OPTION_FIELDS = [
    "env",
    "policy",
    "split",
    "limit",
    "out",
    "base_url",
    "answerer_base_url",
    "answerer_model",
    "judge_model",
    "concurrency",
    "latency_questions",
    "seed",
    "shard",
    "restart",
    "env_overrides",
]
"""The `EvalConfig` fields `memora-rl eval` sets from options (`env_overrides` is `--set`)."""


def flat(text: str) -> str:
    """Help output without colour codes, box drawing and line wrapping."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    return " ".join(re.sub("[│╭╮╰╯─]", " ", text).split())


def help_of(*command: str) -> str:
    result = CliRunner().invoke(app, [*command, "--help"], env=WIDE)
    assert result.exit_code == 0, result.output
    return flat(result.output)


def models_of(model: type[BaseModel]) -> list[type[BaseModel]]:
    """`model` and the section models of its fields."""
    sections = [f.annotation for f in model.model_fields.values() if isinstance(f.annotation, type)]
    return [model, *(section for section in sections if issubclass(section, BaseModel))]


@pytest.mark.parametrize("model", [*models_of(TrainConfig), EvalConfig, ServerConfig], ids=lambda m: m.__name__)
def test_every_config_field_has_a_docstring(model):
    for name in model.model_fields:
        assert field_help(model, name)  # raises naming the field when its docstring is missing


def test_train_help_lists_every_train_config_key_with_its_docstring():
    text = help_of("train")
    for name in TrainConfig.model_fields:
        assert field_help(TrainConfig, name) in text, name
    for section in ("lora", "grpo", "server", "logging", "warm_start"):
        keys = ", ".join(getattr(TrainConfig(), section).__class__.model_fields)
        assert f"{section}.*: {field_help(TrainConfig, section)} Keys: {keys}." in text
    assert f"--resume <bool> {field_help(TrainConfig, 'resume')}" in text
    assert "seed (default 0): Seed" in text


def test_eval_help_shows_the_eval_config_docstrings_and_defaults():
    text = help_of("eval")
    for name in EVAL_OPTION_FIELDS:
        assert field_help(EvalConfig, name) in text, name
    for name in ("split", "concurrency", "seed"):
        assert f"{field_help(EvalConfig, name)} [default: {EvalConfig.model_fields[name].default}]" in text
    assert "--set <list[str]> " + field_help(EvalConfig, "env_overrides") in text


def test_train_script_is_the_train_command():
    """`train/grpo.py` (for `accelerate launch`) parses and documents exactly like `memora-rl train`."""
    script = subprocess.run(
        [sys.executable, "train/grpo.py", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **WIDE},
    )
    assert script.returncode == 0, script.stderr
    text = flat(script.stdout)
    script_help, command_help = text.split("Options", 1)[1], help_of("train").split("Options", 1)[1]
    assert script_help == command_help and "--config" in text and "overrides" in text


def test_unset_eval_options_take_the_config_defaults(monkeypatch):
    seen = []

    def fake_run_eval(config):
        seen.append(config)
        raise RuntimeError("stop")

    monkeypatch.setattr("memora_rl.evaluation.offline.run_eval", fake_run_eval)
    monkeypatch.delenv("MEMORA_RL_VLLM_URL", raising=False)
    CliRunner().invoke(app, ["eval", "--env", "synthetic", "--policy", "heuristic"])
    options = "--split validation --limit 5 --concurrency 3 --latency-questions 2 --seed 2 --shard 1/2 --restart"
    options += " --set env.budget=4 --set env.max_steps=5"
    CliRunner().invoke(app, ["eval", "--env", "synthetic", "--policy", "heuristic", *options.split()])
    assert seen[0] == EvalConfig(env="synthetic", policy="heuristic")
    assert seen[1] == EvalConfig(
        env="synthetic",
        policy="heuristic",
        split="validation",
        limit=5,
        concurrency=3,
        latency_questions=2,
        seed=2,
        shard="1/2",
        restart=True,
        env_overrides=["env.budget=4", "env.max_steps=5"],
    )


def test_train_passes_config_overrides_and_resume(monkeypatch):
    seen = []

    def fake_run(config):
        seen.append(config)
        return types.SimpleNamespace(final_step=0, adapter_dir="nowhere")

    monkeypatch.setitem(sys.modules, "memora_rl.training.run", types.SimpleNamespace(run=fake_run))
    result = CliRunner().invoke(app, ["train", "-c", "configs/grpo/tiny.yaml", "--resume", "grpo.max_steps=2"])
    assert result.exit_code == 0, result.output
    assert seen[0].resume and seen[0].grpo.max_steps == 2 and seen[0].run_name.startswith("tiny")
