"""`memora-rl train`: run GRPO training from a YAML config plus `key=value` overrides."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

console = Console()


def train(
    config: Annotated[Path, typer.Option("--config", "-c", help="Training YAML, e.g. configs/grpo/quickstart.yaml.")],
    overrides: Annotated[
        list[str] | None, typer.Argument(help="key=value overrides, e.g. grpo.max_steps=5 backend=transformers.")
    ] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue from the run's latest checkpoint.")] = False,
) -> None:
    """Train the retrieval policy with GRPO (the same as `accelerate launch train/grpo.py`)."""
    from memora_rl.training.run import run

    result = run(load_train_config(config, overrides or [], resume))
    console.print(f"[green]done[/]: {result.final_step} steps; adapter at {result.adapter_dir}")


def load_train_config(path: Path, overrides: list[str], resume: bool):  # noqa: ANN201 - lazy import of the type
    """Load a `TrainConfig` from YAML + overrides; `--resume` becomes `resume=true`."""
    from memora_rl.config import load_config
    from memora_rl.training.config import TrainConfig

    return load_config(TrainConfig, path, [*overrides, *(["resume=true"] if resume else [])])
