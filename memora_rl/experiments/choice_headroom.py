"""How much of a walk's choice can be learned from what the policy sees? Learners of it against the baselines.

The oracle knows the evidence; a policy only reads the observation. This measures, beside semantic search
(at each `--semantic-k`) and the heuristic (at each `--budgets`), two things a learned policy could do:

- **stop oracle**: the heuristic's own walk, stopped at the first budget after which it gains nothing on
  that task. It uses the evidence, so it bounds what learning *when* to stop along the rule's walk can buy.
- **scorer walks**: a gradient-boosted classifier, fit on the states of the training split's heuristic walks
  to tell which frontier entry holds missing evidence, walks greedily: expand the best-scored entry while
  its probability clears a threshold (`--thresholds`), at most `--max-expands` times, then stop. `shown`
  features read only the observation's text; `full` add each entry's whole value (a longer observation).

Baseline settings are added until points bracket each walk's tokens (as `memora-rl experiment learning` does), and
margins are read by dominance against the cheapest measured baseline point with at least the walk's tokens,
with a paired 95% interval over tasks (`memora_rl.experiments.learning.margins`). A scorer fit on thousands of
labelled states is a strong learner of its features: where its best walk gains little over the heuristic,
a policy reading the same observation has little to gain by choosing better, and the headroom lies in what
the observation shows, not in the learner.

    memora-rl experiment choice-headroom --config configs/grpo/smollm-locomo-choose.yaml
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.progress import track

from memora_rl.experiments.choice_features import FEATURE_SETS, Featurizer, evidence_labels

logger = logging.getLogger(__name__)
SEMANTIC, HEURISTIC, STOP_ORACLE = "semantic", "heuristic", "stop oracle"
STOP = '{"action": "stop"}'


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The experiment's options."""
    from memora_rl.experiments.learning.options import record_name

    parser = argparse.ArgumentParser(
        prog="memora-rl experiment choice-headroom",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--config",
        type=Path,
        default=Path("configs/grpo/smollm-locomo-choose.yaml"),
        help="Training config: its env, env_overrides and model (tokenizer) are used.",
    )
    parser.add_argument("--split", default="validation", choices=["validation", "test"], help="Held-out split.")
    parser.add_argument("--final", action="store_true", help="Required with --split test: the recipe's one read.")
    parser.add_argument("--semantic-k", type=int, nargs="+", default=[1, 2, 3, 5, 8, 10, 15])
    parser.add_argument(
        "--budgets",
        type=float,
        nargs="+",
        default=[1, 2, 3, 4, 5, 6, 8, 10],
        help="Heuristic budgets (env.budget); the stop oracle stops along these.",
    )
    parser.add_argument("--thresholds", type=float, nargs="+", default=[0.2, 0.1, 0.07, 0.05, 0.035, 0.025])
    parser.add_argument("--max-expands", type=int, nargs="+", default=[2, 6])
    parser.add_argument("--train-tasks", type=int, default=None, help="Training tasks to fit on (default: all).")
    parser.add_argument("--walk-steps", type=int, default=3, help="States per training walk the scorer sees.")
    parser.add_argument(
        "--bracket-rounds",
        type=int,
        default=2,
        help="Extra baseline settings measured per walk until points lie within 15%% of its tokens.",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("runs/choice-headroom"), help="report.json, .md, .png")
    parser.add_argument("--record", type=record_name, default=None, metavar="NAME",
                        help="Also write the tables as the result record NAME (with the plot).")  # fmt: skip
    parser.add_argument("--results-dir", type=Path, default=Path("docs/results"), help="Where --record writes.")
    args = parser.parse_args(argv)
    if args.split == "test" and not args.final:
        parser.error("--split test is a recipe's one final read: add --final (choices are made on validation).")
    return args


def heuristic_walk_states(env: Any, tasks: Sequence[Any], featurizer: Featurizer, steps: int) -> tuple[Any, Any]:
    """Feature rows and evidence labels of every frontier entry at the first `steps` states of each heuristic walk."""
    from memora_rl.core.parse import ExpandAction, format_action

    rows, labels = [], []
    for task in track(tasks, description=f"states ({featurizer.features})", transient=True):
        env.reset(options={"task": task})
        for _ in range(steps):
            snapshot = env.snapshot()
            if snapshot.done:
                break
            ids, features = featurizer.rows(snapshot, task.question)
            if not ids:
                break
            rows.append(features)
            labels += evidence_labels(env, ids, set(task.evidence) - snapshot.turn_ids)
            env.step(format_action(ExpandAction(ids=[ids[0]])))
    return np.concatenate(rows), np.asarray(labels)


def fit_scorer(rows: Any, labels: Any, seed: int) -> Any:
    """A gradient-boosted classifier of 'this entry holds missing evidence' (deterministic for a seed)."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    model = HistGradientBoostingClassifier(
        max_iter=200, learning_rate=0.05, max_leaf_nodes=15, early_stopping=False, random_state=seed
    )
    return model.fit(rows, labels)


def scorer_walk(
    env: Any, tasks: Sequence[Any], featurizer: Featurizer, model: Any, threshold: float, max_expands: int
) -> list[dict[str, float]]:
    """Judge components of each task's greedy walk: expand the best-scored entry while it clears `threshold`."""
    from memora_rl.core.parse import ExpandAction, format_action

    components = []
    for task in tasks:
        env.reset(options={"task": task})
        info: Mapping[str, Any] = {}
        for _ in range(max_expands):
            snapshot = env.snapshot()
            ids, features = featurizer.rows(snapshot, task.question) if not snapshot.done else ([], None)
            if not ids:
                break
            scores = model.predict_proba(features)[:, 1]
            best = int(np.argmax(scores))
            if scores[best] < threshold:
                break
            *_, info = env.step(format_action(ExpandAction(ids=[ids[best]])))
        if not env.snapshot().done:
            *_, info = env.step(STOP)
        components.append(dict(info["reward_components"]))
    return components


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


def build_report(args: argparse.Namespace, argv: Sequence[str]) -> dict[str, Any]:
    """Measure the baselines, the stop oracle and the scorer walks on the held-out split; return the report."""
    from memora_rl.config import load_config
    from memora_rl.env.registry import make_env
    from memora_rl.experiments.learning.experiment import bracket_curves, point_from
    from memora_rl.experiments.learning.margins import dominance_rows
    from memora_rl.experiments.learning.play import EvalContext
    from memora_rl.llm.registry import load_tokenizer
    from memora_rl.training.config import TrainConfig

    started = time.perf_counter()
    config = load_config(TrainConfig, args.config)
    tokenizer = load_tokenizer(config.model)
    overrides = list(config.env_overrides)
    env, tasks = make_env(config.env, split=args.split, overrides=overrides, tokenizer=tokenizer)
    ctx = EvalContext(env, list(tasks), tokenizer, config.env, overrides, env.config.max_steps, 0, 1)
    logger.info("%d %s tasks of %s", len(ctx.tasks), args.split, config.env)

    curves, oracle = baselines_and_stop_oracle(ctx, args.semantic_k, args.budgets)

    (walk_env,) = ctx.envs([f"env.budget={max(args.max_expands)}"])
    train_env, train_tasks = make_env(config.env, split="train", overrides=overrides, tokenizer=tokenizer)
    train_tasks = list(train_tasks)[: args.train_tasks] if args.train_tasks else list(train_tasks)
    scorers: dict[str, Any] = {}
    walks: dict[str, list[dict[str, Any]]] = {}
    for features in FEATURE_SETS:
        rows, labels = heuristic_walk_states(train_env, train_tasks, Featurizer(train_env, features), args.walk_steps)
        model = fit_scorer(rows, labels, args.seed)
        featurizer = Featurizer(walk_env, features)
        held_rows, held_labels = heuristic_walk_states(walk_env, ctx.tasks, featurizer, args.walk_steps)
        scorers[features] = {
            "train_states": len(labels),
            "positive_share": float(labels.mean()),
            "auc": auc(held_labels, model.predict_proba(held_rows)[:, 1]),
            "auc_position": auc(held_labels, -held_rows[:, 2]),
            "auc_cosine": auc(held_labels, held_rows[:, 0]),
        }
        for threshold in args.thresholds:
            for cap in args.max_expands:
                label = f"p>={threshold:g}, <={cap}"
                components = scorer_walk(walk_env, ctx.tasks, featurizer, model, threshold, cap)
                walks.setdefault(features, []).append(point_from(ctx, label, threshold, components))
        logger.info("%s scorer: AUC %.3f on held-out states", features, scorers[features]["auc"])

    policies = {f"{STOP_ORACLE} {p['setting']}": p for p in oracle}
    policies |= {f"{features} scorer {p['setting']}": p for features, points in walks.items() for p in points}
    bracket_curves(ctx, curves, sorted({round(p["context_tokens"]) for p in policies.values()}), args.bracket_rounds)
    for points in curves.values():
        points.sort(key=lambda point: float(point["value"]))
    margins = dominance_rows(policies, curves)
    return {
        "command": shlex.join(["memora-rl", "experiment", "choice-headroom", *argv]),
        "config": str(args.config),
        "env": config.env,
        "split": args.split,
        "tasks": len(ctx.tasks),
        "train_tasks": len(train_tasks),
        "curves": curves,
        "stop_oracle": oracle,
        "walks": walks,
        "scorers": scorers,
        "margins": margins,
        "seconds": time.perf_counter() - started,
    }


def report_tables(report: Mapping[str, Any]) -> list[Any]:
    """The record's tables: the baselines, each walk's margins by dominance, and what the scorers learned."""
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
    scorer_rows = [
        [features, str(s["train_states"]), f"{s['positive_share']:.3f}", f"{s['auc']:.3f}",
         f"{s['auc_position']:.3f}", f"{s['auc_cosine']:.3f}"]
        for features, s in report["scorers"].items()
    ]  # fmt: skip
    return [
        ResultTable(title="Baselines", columns=["curve", "setting", "tokens", "recall"], rows=baseline_rows),
        ResultTable(
            title="Walks against the baselines at no more tokens (margin [paired 95% interval] vs setting)",
            columns=["walk", "tokens", "recall", "vs semantic", "vs heuristic", "both bracketed (15%)"],
            rows=margin_rows,
        ),
        ResultTable(
            title="The scorers on held-out heuristic-walk states (AUC of 'holds missing evidence')",
            columns=["features", "training states", "positive share", "AUC", "AUC of list position", "AUC of cosine"],
            rows=scorer_rows,
        ),
    ]


def plot(report: Mapping[str, Any], path: Path) -> Path:
    """Baseline curves, the stop oracle and each scorer's walks, recall against context tokens."""
    from memora_rl.evaluation.plots import plot_policies_on_curves

    def line(points: Sequence[Mapping[str, Any]], short: bool = False) -> list[tuple[float, float, str]]:
        return [(p["context_tokens"], p["evidence_recall"], "" if short else p["setting"]) for p in points]

    curves = {name: line(points) for name, points in report["curves"].items()}
    curves[STOP_ORACLE] = line(report["stop_oracle"])
    curves |= {f"{features} scorer": line(points, short=True) for features, points in report["walks"].items()}
    title = f"{report['env']} {report['split']} ({report['tasks']} tasks): learners of the frontier's choice"
    return plot_policies_on_curves(curves, {}, {}, path, title)


def main(argv: Sequence[str]) -> dict[str, Any]:
    """Run the experiment; write report.json, report.md and the plot (and the record with --record)."""
    from memora_rl.experiments.records import markdown_tables, new_record, write_record

    args = parse_args(argv)
    report = build_report(args, argv)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "report.json").write_text(json.dumps(report, indent=1))
    tables = report_tables(report)
    markdown = markdown_tables(tables)
    (args.out / "report.md").write_text(markdown)
    figure = plot(report, args.out / "choice_headroom.png")
    if args.record:
        title = f"What a learner of the frontier's choice gains on {report['env']} ({report['split']})"
        record = new_record(args.record, title, report["command"], tables, split=args.split)
        write_record(record, args.results_dir, figure=figure)
    report["table"] = markdown
    return report
