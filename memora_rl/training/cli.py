"""`memora-rl train` (and `train/grpo.py`): run GRPO training from a YAML config plus `key=value` overrides."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from memora_rl.cli_options import config_option, override_keys_help
from memora_rl.training.config import TrainConfig

console = Console()

TRAIN_EPILOG = override_keys_help(TrainConfig)
"""`--help` text after the options: every `TrainConfig` key an override can set, with its docstring."""


def train(
    config: Annotated[
        Path,
        typer.Option(
            "--config",
            "-c",
            help="Training YAML: configs/grpo/quickstart.yaml, or a recipe of docs/learning.md "
            "(smollm-synthetic-hard.yaml, smollm-locomo.yaml).",
        ),
    ],
    overrides: Annotated[
        list[str] | None,
        typer.Argument(help="key=value overrides (keys below), e.g. grpo.max_steps=5 backend=transformers."),
    ] = None,
    resume: Annotated[bool, config_option(TrainConfig, "resume", "--resume")] = False,
) -> None:
    """Train the retrieval policy with GRPO (the same as `accelerate launch train/grpo.py`)."""
    from memora_rl.training.distributed import is_main_process
    from memora_rl.training.run import run

    result = run(load_train_config(config, overrides or [], resume))
    if is_main_process():
        console.print(f"[green]done[/]: {result.final_step} steps; adapter at {result.adapter_dir}")


def train_app() -> typer.Typer:
    """A one-command app running `train`, for scripts such as `train/grpo.py` (same options, same help)."""
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command(epilog=TRAIN_EPILOG)(train)
    return app


def load_train_config(path: Path, overrides: list[str], resume: bool) -> TrainConfig:
    """Load a `TrainConfig` from YAML + overrides; `--resume` becomes `resume=true` (a flag only turns it on)."""
    from memora_rl.config import load_config

    return load_config(TrainConfig, path, [*overrides, *(["resume=true"] if resume else [])])
