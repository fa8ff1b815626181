"""What the headroom experiments share: their common options, the baseline and margin tables, the outputs.

`choice-headroom` and `stop-headroom` each fit a learner on the training split's walk states and walk the
held-out split with it; both read their walks against semantic search and the heuristic by dominance, and
write report.json, report.md, a plot and, with `--record`, a result record.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

SEMANTIC, HEURISTIC, STOP_ORACLE = "semantic", "heuristic", "stop oracle"


def headroom_parser(prog: str, description: str | None, out: str) -> argparse.ArgumentParser:
    """A parser with the options every headroom experiment takes (config, split, baselines, outputs)."""
    from memora_rl.experiments.learning.options import record_name

    parser = argparse.ArgumentParser(
        prog=prog, description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", type=Path, default=Path("configs/grpo/smollm-locomo-choose.yaml"),
                        help="Training config: its env, env_overrides and model (tokenizer) are used.")  # fmt: skip
    parser.add_argument("--split", default="validation", choices=["validation", "test"], help="Held-out split.")
    parser.add_argument("--final", action="store_true", help="Required with --split test: the recipe's one read.")
    parser.add_argument("--semantic-k", type=int, nargs="+", default=[1, 2, 3, 5, 8, 10, 15])
    parser.add_argument("--budgets", type=float, nargs="+", default=[1, 2, 3, 4, 5, 6, 8, 10],
                        help="Heuristic budgets (env.budget); the stop oracle stops along these.")  # fmt: skip
    parser.add_argument("--train-tasks", type=int, default=None, help="Training tasks to fit on (default: all).")
    parser.add_argument("--bracket-rounds", type=int, default=2,
                        help="Extra baseline settings measured per walk to bracket its tokens (15%%).")  # fmt: skip
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path(out), help="report.json, .md, .png")
    parser.add_argument("--record", type=record_name, default=None, metavar="NAME",
                        help="Also write the tables as the result record NAME (with the plot).")  # fmt: skip
    parser.add_argument("--results-dir", type=Path, default=Path("docs/results"), help="Where --record writes.")
    return parser


def parse_headroom_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse `argv`; the test split needs `--final` (choices are made on validation)."""
    args = parser.parse_args(argv)
    if args.split == "test" and not args.final:
        parser.error("--split test is a recipe's one final read: add --final (choices are made on validation).")
    return args


def held_out_context(args: argparse.Namespace) -> tuple[Any, Any]:
    """The training config of `args.config` and the `EvalContext` of its env's held-out `args.split`."""
    from memora_rl.config import load_config
    from memora_rl.env.registry import make_env
    from memora_rl.experiments.learning.play import EvalContext
    from memora_rl.llm.registry import load_tokenizer
    from memora_rl.training.config import TrainConfig

    config = load_config(TrainConfig, args.config)
    tokenizer = load_tokenizer(config.model)
    overrides = list(config.env_overrides)
    env, tasks = make_env(config.env, split=args.split, overrides=overrides, tokenizer=tokenizer)
    return config, EvalContext(env, list(tasks), tokenizer, config.env, overrides, env.config.max_steps, 0, 1)


def baseline_and_margin_tables(report: Mapping[str, Any]) -> list[Any]:
    """The baselines' points, then each walk's margins by dominance against both baselines."""
    from memora_rl.experiments.learning.report import margin_cell
    from memora_rl.experiments.records import ResultTable

    baseline_rows = [
        [curve, p["setting"], f"{p['context_tokens']:.0f}", f"{p['evidence_recall']:.3f}"]
        for curve, points in report["curves"].items()
        for p in points
    ]
    margin_rows = [
        [name, f"{row['context_tokens']:.0f}", f"{row['evidence_recall']:.3f}",
         margin_cell(row[SEMANTIC]), margin_cell(row[HEURISTIC]),
         "yes" if row[SEMANTIC]["bracketed"] and row[HEURISTIC]["bracketed"] else "no"]
        for name, row in report["margins"].items()
    ]  # fmt: skip
    return [
        ResultTable(title="Baselines", columns=["curve", "setting", "tokens", "recall"], rows=baseline_rows),
        ResultTable(
            title="Walks against the baselines at no more tokens (margin [paired 95% interval] vs setting)",
            columns=["walk", "tokens", "recall", "vs semantic", "vs heuristic", "both bracketed (15%)"],
            rows=margin_rows,
        ),
    ]


def write_outputs(
    args: argparse.Namespace,
    report: dict[str, Any],
    tables: Sequence[Any],
    plot: Callable[[Mapping[str, Any], Path], Path],
    figure_name: str,
    title: str,
) -> dict[str, Any]:
    """Write report.json, report.md and the plot (`figure_name`) under `args.out`, and the record with `--record`."""
    from memora_rl.experiments.records import markdown_tables, new_record, write_record

    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "report.json").write_text(json.dumps(report, indent=1))
    markdown = markdown_tables(tables)
    (args.out / "report.md").write_text(markdown)
    figure = plot(report, args.out / figure_name)
    if args.record:
        record = new_record(args.record, title, report["command"], list(tables), split=args.split)
        write_record(record, args.results_dir, figure=figure)
    report["table"] = markdown
    return report
