"""`memora-rl experiment ...`: each experiment keeps its own options (`memora-rl experiment NAME --help`)."""

from __future__ import annotations

import logging

import typer

experiment_app = typer.Typer(
    help="Experiments: train seeds and compare every policy with the baselines at no more context tokens.",
    no_args_is_help=True,
)
PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}
"""Every argument, `--help` included, goes to the experiment's own parser."""
logger = logging.getLogger(__name__)


@experiment_app.command("learning", context_settings=PASS_THROUGH, add_help_option=False)
def learning(context: typer.Context) -> None:
    """Train seeds (warm start + GRPO) and compare every policy with semantic search and the heuristic."""
    from memora_rl.experiments.learning.experiment import main

    report, markdown = main(list(context.args))
    typer.echo(markdown)
    out = report["args"]["out"]
    logger.info("wrote %s/learning.json, learning.md, recall_vs_tokens.png", out)


@experiment_app.command("refine-headroom", context_settings=PASS_THROUGH, add_help_option=False)
def refine_headroom(context: typer.Context) -> None:
    """Is the oracle's refine headroom learnable? Refines chosen without the evidence against semantic search."""
    from memora_rl.experiments.refine_headroom import main

    typer.echo(main(list(context.args))["table"])


@experiment_app.command("exploration", context_settings=PASS_THROUGH, add_help_option=False)
def exploration(context: typer.Context) -> None:
    """How often a policy's sampled walks find evidence its greedy walk misses (what GRPO can learn from)."""
    from memora_rl.experiments.exploration import main

    typer.echo(main(list(context.args))["table"])
