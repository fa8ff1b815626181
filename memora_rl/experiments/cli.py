"""`memora-rl experiment ...`: each experiment keeps its own options (`memora-rl experiment NAME --help`)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

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


@experiment_app.command("choice-headroom", context_settings=PASS_THROUGH, add_help_option=False)
def choice_headroom(context: typer.Context) -> None:
    """What learners that read the observation gain by choosing: a stop oracle and scorer walks vs the baselines."""
    from memora_rl.experiments.choice_headroom import main

    typer.echo(main(list(context.args))["table"])


@experiment_app.command("stop-headroom", context_settings=PASS_THROUGH, add_help_option=False)
def stop_headroom(context: typer.Context) -> None:
    """What a learner of when to stop, reading the observation, gains along the rule's walk vs the baselines."""
    from memora_rl.experiments.stop_headroom import main

    typer.echo(main(list(context.args))["table"])


@experiment_app.command("exploration", context_settings=PASS_THROUGH, add_help_option=False)
def exploration(context: typer.Context) -> None:
    """How often a policy's sampled walks find evidence its greedy walk misses (what GRPO can learn from)."""
    from memora_rl.experiments.exploration import main

    typer.echo(main(list(context.args))["table"])


@experiment_app.command("results")
def results(
    check: Annotated[bool, typer.Option(help="Exit 1 when the page differs from its records; write nothing.")] = False,
    results_dir: Annotated[Path, typer.Option(help="Folder of the result records.")] = Path("docs/results"),
    page: Annotated[Path, typer.Option(help="The Markdown page rendered from them.")] = Path("docs/results.md"),
) -> None:
    """Render docs/results.md from the records in docs/results/, each written by the command that measured it."""
    from memora_rl.experiments.records import read_records, render_results

    records = read_records(results_dir)
    rendered = render_results(records)
    if check:
        if not page.is_file() or page.read_text() != rendered:
            typer.echo(f"{page} differs from what {results_dir}/*.json render; run `memora-rl experiment results`.")
            raise typer.Exit(1)
        typer.echo(f"{page} matches its {len(records)} records.")
        return
    page.write_text(rendered)
    typer.echo(f"wrote {page} from {results_dir}/*.json")


@experiment_app.command("hint-response", context_settings=PASS_THROUGH, add_help_option=False)
def hint_response(context: typer.Context) -> None:
    """Does a trained policy read the ranker's shown number? Its expand odds as the first hint is rewritten."""
    from memora_rl.experiments.hint_response import main

    typer.echo(main(list(context.args))["table"])
