"""Offline policy evaluation script: the same options as `memora-rl eval`, calling the same library function.

python eval/offline.py --env synthetic --policy heuristic --split test --limit 20
"""

from __future__ import annotations

import typer

from memora_rl.cli import run
from memora_rl.evaluation.cli import evaluate

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
app.command()(evaluate)

if __name__ == "__main__":
    run(app)
