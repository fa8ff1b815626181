"""When to stop: can a learner of what the policy sees tell that the rule's walk has found what it will find?

On LoCoMo the heuristic's walk (expand the frontier's first id) stopped where it stops gaining, per task,
reads far above the heuristic at the same tokens (`memora-rl experiment choice-headroom`'s stop oracle), but
that stop uses the evidence. This measures what a learner of the stop gets from the observation alone:

- **states**: every state of the training split's heuristic walks (up to `--max-budget` expands), each with
  features of what the observation shows (the working set's cover of the question, the frontier's entries
  as `choice_features.Featurizer` reads them, the step) and the label "a later expand of this walk still
  finds evidence".
- **stop-scorer walks**: a gradient-boosted classifier of that label walks each held-out task along the
  rule's walk, one id a step (the heuristic with `env.max_ids_per_expand=1`; the baseline names up to three
  ids an expand), and stops at the first state whose probability is under a threshold (`--thresholds`).
- `--likelihood` adds what an answerer would sense: the policy's base LLM's query likelihood of the question
  given each working-set entry, over that without it (`memora_rl.env.query_likelihood`), best and
  newest. It is zero-shot, so the training states need no cross-fitting.

Margins against semantic search and the heuristic are read by dominance at no more tokens with a paired 95%
interval over tasks, baselines bracketed as in `memora-rl experiment learning`.

    memora-rl experiment stop-headroom --config configs/grpo/smollm-locomo-choose.yaml
    memora-rl experiment stop-headroom --likelihood --out runs/stop-likelihood
"""

from __future__ import annotations

import argparse
import shlex
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.progress import track

from memora_rl.env.choice_features import Featurizer, Relevance, content_words, entry_text
from memora_rl.env.query_likelihood import shared_likelihood
from memora_rl.env.ranker import fit_scorer
from memora_rl.experiments.headroom import (
    STOP_ORACLE,
    auc,
    baseline_and_margin_tables,
    baselines_and_stop_oracle,
    headroom_parser,
    held_out_context,
    parse_held_out_args,
    write_outputs,
)
from memora_rl.policy.baselines import STOP_TEXT

STOP_SCORER = "stop scorer"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The experiment's options."""
    parser = headroom_parser("memora-rl experiment stop-headroom", __doc__, "runs/stop-headroom")
    parser.add_argument("--max-budget", type=int, default=10, help="Longest walk (expands) a stop scorer plays.")
    parser.add_argument("--thresholds", type=float, nargs="+", default=[0.5, 0.3, 0.2, 0.15, 0.1, 0.07, 0.05])
    parser.add_argument("--likelihood", action="store_true",
                        help="Add the working set's query likelihood (best, newest) to a state's row.")  # fmt: skip
    return parse_held_out_args(parser, argv)


def state_features(
    featurizer: Featurizer, snapshot: Any, question: str, likelihood: Relevance | None = None
) -> np.ndarray:
    """One row of what the observation shows at a state: the question's cover, the frontier's entries, the step.

    The frontier's rows (`Featurizer.rows`) enter as the first entry's (the one the rule expands next) and
    their column-wise maximum and mean; the working set as the share of the question's content words it holds
    and the cosine of its entries' values with the query (best and newest), and with `likelihood` its
    entries' scores for the question (best and newest).
    """
    _, rows = featurizer.rows(snapshot, question)
    query = np.asarray(snapshot.query_vector, dtype=np.float32).ravel()
    ids = [entry.id for entry in snapshot.working]
    cosines = featurizer.env.store.value_vectors(featurizer.env.graph_id, ids) @ query if ids else np.zeros(1)
    question_words = content_words(question)
    held = set().union(*(content_words(f"{e.abstraction} {e.value}") for e in snapshot.working))
    working = [len(question_words & held) / max(1, len(question_words)), float(cosines.max()), float(cosines[-1]),
               float(len(ids)), float(len(rows))]  # fmt: skip
    if likelihood is not None:
        scores = likelihood.score([question] * len(ids), [entry_text(entry) for entry in snapshot.working])
        working += [float(scores.max()), float(scores[-1])] if ids else [0.0, 0.0]
    return np.concatenate([rows[0], rows.max(axis=0), rows.mean(axis=0), np.asarray(working, dtype=np.float32)])


def recall_of(snapshot: Any, evidence: set[str]) -> float:
    """Evidence recall of the working set at a state (the judge's G)."""
    return len(evidence & snapshot.turn_ids) / max(1, len(evidence))


def later_gain_labels(recalls: Sequence[float]) -> list[bool]:
    """For each state but the last of a walk whose recall after t expands is `recalls[t]`: does a later one gain?

    >>> later_gain_labels([0.5, 0.5, 1.0, 1.0])
    [True, True, False]
    >>> later_gain_labels([0.0, 0.0])
    [False]
    """
    return [max(recalls[t + 1 :]) > recalls[t] for t in range(len(recalls) - 1)]


def walk_states(
    env: Any, tasks: Sequence[Any], featurizer: Featurizer, max_budget: int, likelihood: Relevance | None = None
) -> tuple[Any, Any]:
    """Feature rows and labels ("a later expand finds evidence") of every state of each task's heuristic walk."""
    from memora_rl.core.parse import ExpandAction, format_action

    rows, labels = [], []
    for task in track(tasks, description="heuristic walk states", transient=True):
        env.reset(options={"task": task})
        evidence = set(task.evidence)
        walk_rows, recalls = [], [recall_of(env.snapshot(), evidence)]
        for _ in range(max_budget):
            snapshot = env.snapshot()
            if snapshot.done or not snapshot.frontier:
                break
            walk_rows.append(state_features(featurizer, snapshot, task.question, likelihood))
            env.step(format_action(ExpandAction(ids=[snapshot.frontier[0].entry_id])))
            recalls.append(recall_of(env.snapshot(), evidence))
        rows += walk_rows
        labels += later_gain_labels(recalls)
    return np.stack(rows), np.asarray(labels)


def stop_scorer_walk(
    env: Any,
    tasks: Sequence[Any],
    featurizer: Featurizer,
    model: Any,
    threshold: float,
    likelihood: Relevance | None = None,
) -> list:
    """Judge components of each task's heuristic walk, stopped at the first state scored under `threshold`."""
    from memora_rl.core.parse import ExpandAction, format_action

    components = []
    for task in tasks:
        env.reset(options={"task": task})
        info: Mapping[str, Any] = {}
        while not (snapshot := env.snapshot()).done and snapshot.frontier:
            features = state_features(featurizer, snapshot, task.question, likelihood)[None, :]
            if model.predict_proba(features)[0, 1] < threshold:
                break
            *_, info = env.step(format_action(ExpandAction(ids=[snapshot.frontier[0].entry_id])))
        if not env.snapshot().done:
            *_, info = env.step(STOP_TEXT)
        components.append(dict(info["reward_components"]))
    return components


def build_report(args: argparse.Namespace, argv: Sequence[str]) -> dict[str, Any]:
    """Measure the baselines, the stop oracle and the stop-scorer walks on the held-out split; return the report."""
    from memora_rl.env.registry import make_env
    from memora_rl.experiments.learning.experiment import bracket_curves, point_from
    from memora_rl.experiments.learning.margins import dominance_rows

    started = time.perf_counter()
    config, ctx = held_out_context(args)
    tokenizer, overrides = ctx.tokenizer, ctx.env_overrides
    curves, oracle = baselines_and_stop_oracle(ctx, args.semantic_k, args.budgets)

    budget = [f"env.budget={args.max_budget}", f"env.max_steps={args.max_budget + 1}"]
    train_env, train_tasks = make_env(config.env, split="train", overrides=[*overrides, *budget], tokenizer=tokenizer)
    train_tasks = list(train_tasks)[: args.train_tasks] if args.train_tasks else list(train_tasks)
    likelihood = shared_likelihood(config.model) if args.likelihood else None
    rows, labels = walk_states(train_env, train_tasks, Featurizer(train_env, "shown"), args.max_budget, likelihood)
    model = fit_scorer(rows, labels, args.seed)
    (walk_env,) = ctx.envs(budget)
    featurizer = Featurizer(walk_env, "shown")
    held_rows, held_labels = walk_states(walk_env, ctx.tasks, featurizer, args.max_budget, likelihood)
    scorer = {"train_states": len(labels), "positive_share": float(labels.mean()),
              "auc": auc(held_labels, model.predict_proba(held_rows)[:, 1])}  # fmt: skip
    walks = []
    for threshold in track(args.thresholds, description="stop-scorer walks", transient=True):
        components = stop_scorer_walk(walk_env, ctx.tasks, featurizer, model, threshold, likelihood)
        walks.append(point_from(ctx, f"p>={threshold:g}", threshold, components))
    policies = {f"{STOP_ORACLE} {p['setting']}": p for p in oracle}
    policies |= {f"{STOP_SCORER} {p['setting']}": p for p in walks}
    bracket_curves(ctx, curves, sorted({round(p["context_tokens"]) for p in policies.values()}), args.bracket_rounds)
    for points in curves.values():
        points.sort(key=lambda point: float(point["value"]))
    return {
        "command": shlex.join(["memora-rl", "experiment", "stop-headroom", *argv]),
        "config": str(args.config), "env": config.env, "split": args.split, "tasks": len(ctx.tasks),
        "train_tasks": len(train_tasks), "curves": curves, "stop_oracle": oracle, "walks": walks, "scorer": scorer,
        "margins": dominance_rows(policies, curves), "seconds": time.perf_counter() - started,
    }  # fmt: skip


def report_tables(report: Mapping[str, Any]) -> list[Any]:
    """The record's tables: the baselines, each walk's margins by dominance, and what the stop scorer learned."""
    from memora_rl.experiments.records import ResultTable

    scorer = report["scorer"]
    return [
        *baseline_and_margin_tables(report),
        ResultTable(
            title="The stop scorer on held-out heuristic-walk states (AUC of 'a later expand finds evidence')",
            columns=["training states", "positive share", "AUC"],
            rows=[[str(scorer["train_states"]), f"{scorer['positive_share']:.3f}", f"{scorer['auc']:.3f}"]],
        ),
    ]


def plot(report: Mapping[str, Any], path: Path) -> Path:
    """Baseline curves, the stop oracle and the stop scorer's walks, recall against context tokens."""
    from memora_rl.evaluation.plots import plot_policies_on_curves

    def line(points: Sequence[Mapping[str, Any]], labelled: bool = True) -> list[tuple[float, float, str]]:
        return [(p["context_tokens"], p["evidence_recall"], p["setting"] if labelled else "") for p in points]

    curves = {name: line(points) for name, points in report["curves"].items()}
    curves |= {STOP_ORACLE: line(report["stop_oracle"]), STOP_SCORER: line(report["walks"], labelled=False)}
    title = f"{report['env']} {report['split']} ({report['tasks']} tasks): learning when to stop"
    return plot_policies_on_curves(curves, {}, {}, path, title)


def main(argv: Sequence[str]) -> dict[str, Any]:
    """Run the experiment; write report.json, report.md and the plot (and the record with --record)."""
    args = parse_args(argv)
    report = build_report(args, argv)
    title = f"What a learner of when to stop gains on {report['env']} ({report['split']})"
    return write_outputs(args, report, report_tables(report), plot, "stop_headroom.png", title)
