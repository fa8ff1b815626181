"""What the headroom experiments share: options, baselines and the stop oracle, the learner, tables, outputs.

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


def stop_oracle(
    budgets: Sequence[float], by_budget: Mapping[float, Sequence[Mapping[str, float]]]
) -> dict[float, list[Mapping[str, float]]]:
    """Per largest budget B: each task's components at the smallest budget (0 = no walk) reaching its recall at B.

    >>> walks = {0: [{"evidence_recall": 0.0}], 1: [{"evidence_recall": 1.0}], 2: [{"evidence_recall": 1.0}]}
    >>> [row[0]["evidence_recall"] for row in stop_oracle([1, 2], walks).values()]
    [1.0, 1.0]
    >>> stop_oracle([2], {0: [{"evidence_recall": 0.5}], 2: [{"evidence_recall": 0.5}]})[2][0] is not None
    True
    """
    ordered = [0.0, *sorted(budgets)]
    tasks = len(by_budget[0])
    out: dict[float, list[Mapping[str, float]]] = {}
    for largest in sorted(budgets):
        chosen = []
        for i in range(tasks):
            target = by_budget[largest][i]["evidence_recall"]
            first = next(b for b in ordered if by_budget[b][i]["evidence_recall"] >= target)
            chosen.append(by_budget[first][i])
        out[largest] = chosen
    return out


def baselines_and_stop_oracle(
    ctx: Any, semantic_k: Sequence[int], budgets: Sequence[float]
) -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]]]:
    """Semantic's and the heuristic's curves on the held-out tasks, and the stop oracle's point at each budget."""
    from memora_rl.experiments.learning.experiment import measure_point, point_from
    from memora_rl.experiments.learning.play import play_baseline

    # The heuristic's episodes are kept per task (the stop oracle picks among them); semantic needs points only.
    by_budget = {0.0: play_baseline(ctx, SEMANTIC)}
    by_budget |= {float(b): play_baseline(ctx, HEURISTIC, [f"env.budget={b:g}"]) for b in budgets}
    curves = {
        SEMANTIC: [measure_point(ctx, SEMANTIC, float(k)) for k in semantic_k],
        HEURISTIC: [point_from(ctx, f"b={b:g}", b, c) for b, c in by_budget.items() if b > 0],
    }
    oracle = [point_from(ctx, f"b<={b:g}", b, c) for b, c in stop_oracle(budgets, by_budget).items()]
    return curves, oracle


def auc(labels: Any, scores: Any) -> float:
    """Area under the ROC curve (0.5: the scores carry no information; nan when the labels are all one class)."""
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(labels, scores)) if len(set(labels.tolist())) == 2 else float("nan")


def held_out_parser(prog: str, description: str | None, out: str, config: str) -> argparse.ArgumentParser:
    """A parser with the options every experiment on a held-out split takes (config, split, seed, outputs)."""
    from memora_rl.experiments.learning.options import record_name

    parser = argparse.ArgumentParser(
        prog=prog, description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", type=Path, default=Path(config),
                        help="Training config: its env, env_overrides and model (tokenizer) are used.")  # fmt: skip
    parser.add_argument("--split", default="validation", choices=["validation", "test"], help="Held-out split.")
    parser.add_argument("--final", action="store_true", help="Required with --split test: the recipe's one read.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path(out), help="report.json, .md, .png")
    parser.add_argument("--record", type=record_name, default=None, metavar="NAME",
                        help="Also write the tables as the result record NAME (with the plot).")  # fmt: skip
    parser.add_argument("--results-dir", type=Path, default=Path("docs/results"), help="Where --record writes.")
    return parser


def headroom_parser(prog: str, description: str | None, out: str) -> argparse.ArgumentParser:
    """`held_out_parser` with the options every headroom experiment adds (baselines, training tasks)."""
    parser = held_out_parser(prog, description, out, "configs/grpo/smollm-locomo-choose.yaml")
    parser.add_argument("--semantic-k", type=int, nargs="+", default=[1, 2, 3, 5, 8, 10, 15])
    parser.add_argument("--budgets", type=float, nargs="+", default=[1, 2, 3, 4, 5, 6, 8, 10],
                        help="Heuristic budgets (env.budget); the stop oracle stops along these.")  # fmt: skip
    parser.add_argument("--train-tasks", type=int, default=None, help="Training tasks to fit on (default: all).")
    parser.add_argument("--bracket-rounds", type=int, default=2,
                        help="Extra baseline settings measured per walk to bracket its tokens (15%%).")  # fmt: skip
    return parser


def parse_held_out_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
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
