"""`memora-rl data ...`: dataset statistics and the synthetic conversation generator."""

from __future__ import annotations

import time
from datetime import date
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from memora_rl.data.synthetic import SynthConfig
from memora_rl.errors import ConfigError

data_app = typer.Typer(help="Inspect datasets (LoCoMo, LongMemEval, synthetic) and generate synthetic ones.")
console = Console()
_DEFAULTS = SynthConfig()
"""The generator's defaults (`SynthConfig` holds them; the options below only mirror them)."""


@data_app.command("stats")
def stats(
    path: Annotated[str, typer.Argument(help="A LoCoMo- or LongMemEval-shaped JSON file, or 'synthetic[:SEED]'.")],
    show_warnings: Annotated[bool, typer.Option("--warnings", help="List the tolerated data problems too.")] = False,
) -> None:
    """Print conversations, sessions, turns, tokens and questions per category of a dataset."""
    from memora_rl.data.load import load_corpus
    from memora_rl.data.stats import corpus_stats

    corpus = load_corpus(path)
    figures = corpus_stats(corpus)
    overview = Table(title=f"{figures.name}: corpus")
    overview.add_column("item")
    overview.add_column("count", justify="right")
    for label, value in (
        ("conversations", figures.conversations),
        ("sessions", figures.sessions),
        ("turns", figures.turns),
        ("tokens (whitespace words)", figures.tokens),
        ("questions", figures.questions),
        ("tolerated data problems", figures.warnings),
    ):
        overview.add_row(label, f"{value:,}")
    console.print(overview)
    by_category = Table(title=f"{figures.name}: questions per category")
    for column in ("category", "questions", "excluded", "mean evidence turns"):
        by_category.add_column(column, justify="left" if column == "category" else "right")
    for row in figures.categories:
        by_category.add_row(row.category, f"{row.questions:,}", f"{row.excluded:,}", f"{row.mean_evidence_turns:.2f}")
    console.print(by_category)
    if show_warnings:
        for warning in corpus.warnings:
            console.print(f"- {warning}")


@data_app.command("synth")
def synth(
    out: Annotated[Path, typer.Option("--out", help="Output JSON file (LoCoMo-shaped).")],
    seed: Annotated[
        int, typer.Option(help="Random seed; the same options give byte-identical files.")
    ] = _DEFAULTS.seed,
    conversations: Annotated[int, typer.Option(help="Number of conversations.")] = _DEFAULTS.conversations,
    sessions: Annotated[
        int, typer.Option(help="Sessions per conversation (>= 3).")
    ] = _DEFAULTS.sessions_per_conversation,
    turns: Annotated[int, typer.Option(help="Target turns per session.")] = _DEFAULTS.turns_per_session,
    questions: Annotated[
        int, typer.Option(help="Questions kept per conversation.")
    ] = _DEFAULTS.questions_per_conversation,
    start_date: Annotated[
        str, typer.Option(help="Day of the first session (YYYY-MM-DD).")
    ] = _DEFAULTS.start_date.isoformat(),
) -> None:
    """Generate synthetic multi-session conversations with verifiable questions."""
    from pydantic import ValidationError

    from memora_rl.data.synthetic import dumps, generate

    try:
        first_day = date.fromisoformat(start_date)
    except ValueError as error:
        raise ConfigError(
            f"--start-date {start_date!r} is not a date; write it as YYYY-MM-DD, e.g. 2023-01-09."
        ) from error
    try:
        config = SynthConfig(
            seed=seed,
            conversations=conversations,
            sessions_per_conversation=sessions,
            turns_per_session=turns,
            questions_per_conversation=questions,
            start_date=first_day,
        )
    except ValidationError as error:
        raise ConfigError(f"Invalid synth options: {error}") from error
    started = time.perf_counter()
    document = generate(config)
    text = dumps(document)
    elapsed_s = time.perf_counter() - started
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    question_count = sum(len(record["qa"]) for record in document)
    console.print(
        f"Wrote {out}: {len(document)} conversations, {question_count} questions, "
        f"{len(text.encode('utf-8')):,} bytes in {elapsed_s:.2f} s (seed {seed})."
    )
