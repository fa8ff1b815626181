"""The `memora-rl` command line: one typer app, each sub-package contributing its commands."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.logging import RichHandler

from memora_rl.errors import MemoraError

console = Console(stderr=True)

app = typer.Typer(
    name="memora-rl",
    help="Train memory-retrieval policies for LLM agents over a harmonic memory graph.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def main(verbose: bool = typer.Option(False, "--verbose", "-v", help="Log at DEBUG level.")) -> None:
    """Set up logging for every command."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(message)s",
        handlers=[RichHandler(console=console, show_path=False)],
    )
    for noisy in ("httpx", "httpcore"):  # one INFO line per HTTP request drowns the progress output
        logging.getLogger(noisy).setLevel(logging.DEBUG if verbose else logging.WARNING)


def _register_subcommands() -> None:
    """Attach each sub-package's typer app; imports stay light so `--help` is fast."""
    from memora_rl.builders.cli import graph_app
    from memora_rl.data.cli import data_app
    from memora_rl.env.cli import env_app
    from memora_rl.evaluation.cli import eval_app
    from memora_rl.experiments.cli import experiment_app
    from memora_rl.export.cli import export
    from memora_rl.llm.cli import models_app, serve
    from memora_rl.serve.cli import serve_memory
    from memora_rl.serve.tokens_cli import tokens_app
    from memora_rl.training.cli import TRAIN_EPILOG, train

    app.add_typer(models_app, name="models")
    app.command("serve")(serve)
    app.add_typer(data_app, name="data")
    app.command("export")(export)
    app.add_typer(eval_app, name="eval")
    app.add_typer(graph_app, name="graph")
    app.add_typer(env_app, name="env")
    app.command("train", epilog=TRAIN_EPILOG)(train)
    app.add_typer(experiment_app, name="experiment")
    app.command("quickstart")(quickstart)
    app.command("serve-memory")(serve_memory)
    app.add_typer(tokens_app, name="tokens")


def quickstart(
    out: Annotated[Path, typer.Option(help="Folder for the export, eval runs and comparison.")] = Path(
        "runs/quickstart"
    ),
    eval_limit: Annotated[int, typer.Option(help="Held-out test questions per evaluated policy.")] = 16,
    train_config: Annotated[Path, typer.Option(help="Training config (warm start + GRPO); its env is used.")] = Path(
        "configs/grpo/quickstart.yaml"
    ),
    override: Annotated[
        list[str] | None, typer.Option("--set", help="Training override key=value (repeatable).")
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option(help="A running server of the base model (.../v1) for the prompted baseline; default: start one."),
    ] = None,
    latency_questions: Annotated[
        int, typer.Option(min=0, help="Questions each evaluation times one at a time (0: all at once, fastest).")
    ] = 0,
) -> None:
    """Run the pipeline end to end: data -> graph -> baselines -> warm start + GRPO -> export -> evaluation."""
    from memora_rl.quickstart import QuickstartConfig, run_quickstart

    config = QuickstartConfig(
        out=out,
        eval_limit=eval_limit,
        train_config=train_config,
        train_overrides=override or [],
        base_url=base_url,
        latency_questions=latency_questions,
    )
    run_quickstart(config, Console())


_register_subcommands()


def run(entry: Callable[..., Any] = app) -> None:
    """Run the CLI, turning a MemoraError into one clear red line and exit code 1."""
    try:
        entry()
    except MemoraError as error:
        console.print(f"[bold red]error:[/] {error}", soft_wrap=True)
        sys.exit(1)


if __name__ == "__main__":
    run()
