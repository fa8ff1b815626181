"""How much of a walk's choice can be learned from what the policy sees? Learners of it against the baselines.

The oracle knows the evidence; a policy only reads the observation. This measures, beside semantic search
(at each `--semantic-k`) and the heuristic (at each `--budgets`), two things a learned policy could do:

- **stop oracle**: the heuristic's own walk, stopped at the first budget after which it gains nothing on
  that task. It uses the evidence, so it bounds what learning *when* to stop along the rule's walk can buy.
- **scorer walks**: a gradient-boosted classifier, fit on the states of the training split's heuristic walks
  to tell which frontier entry holds missing evidence, walks greedily: expand the best-scored entry while
  its probability clears a threshold (`--thresholds`), at most `--max-expands` times, then stop. One scorer
  per `--feature-sets` (default `shown full`): `shown` features read only the observation's text; `full` add
  each entry's whole value (a longer observation); `twohop` add to `full` what expanding the entry would
  offer next (the best and mean query cosine of its own linked entries outside the working set and the
  frontier, and their count); `learned` add to `full` a cross-encoder's probability for (question, the
  entry's whole text), fine-tuned from the local MiniLM (`--relevance-epochs`). Its column on the training
  states is cross-fitted in two folds by conversation (no row scored by a model that saw its conversation);
  held-out rows read the two fold models' mean. `likelihood` add to `full` the policy's base LLM's query
  likelihood of the question given the entry's whole text, over that without it
  (`memora_rl.env.query_likelihood`), and its distance to the frontier's best: zero-shot, so
  nothing is cross-fitted. The scorers table gives each relevance model's own AUC too.

Baseline settings are added until points bracket each walk's tokens (as `memora-rl experiment learning` does), and
margins are read by dominance against the cheapest measured baseline point with at least the walk's tokens,
with a paired 95% interval over tasks (`memora_rl.experiments.learning.margins`). A scorer fit on thousands of
labelled states is a strong learner of its features: where its best walk gains little over the heuristic,
a policy reading the same observation has little to gain by choosing better, and the headroom lies in what
the observation shows, not in the learner.

    memora-rl experiment choice-headroom --config configs/grpo/smollm-locomo-choose.yaml
    memora-rl experiment choice-headroom --feature-sets full twohop learned --out runs/choice-learned
    memora-rl experiment choice-headroom --feature-sets full likelihood --out runs/choice-likelihood
"""

from __future__ import annotations

import argparse
import logging
import shlex
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memora_rl.env.choice_features import FEATURE_SETS, FeatureSet, Featurizer
from memora_rl.env.query_likelihood import QueryLikelihood, shared_likelihood
from memora_rl.env.ranker import WalkStates, fit_scorer, heuristic_walk_states
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
from memora_rl.policy.scorer import scorer_walk

logger = logging.getLogger(__name__)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The experiment's options."""
    parser = headroom_parser("memora-rl experiment choice-headroom", __doc__, "runs/choice-headroom")
    parser.add_argument("--thresholds", type=float, nargs="+", default=[0.2, 0.1, 0.07, 0.05, 0.035, 0.025])
    parser.add_argument("--max-expands", type=int, nargs="+", default=[2, 6])
    parser.add_argument("--walk-steps", type=int, default=3, help="States per training walk the scorer sees.")
    parser.add_argument("--feature-sets", nargs="+", choices=FEATURE_SETS, default=["shown", "full"],
                        help="One scorer per feature set (see above).")  # fmt: skip
    parser.add_argument("--relevance-epochs", type=int, default=2, help="Epochs of the `learned` relevance model.")
    return parse_held_out_args(parser, argv)


def training_states(
    env: Any,
    tasks: Sequence[Any],
    features: FeatureSet,
    args: argparse.Namespace,
    timing: dict[str, float],
    walked: dict[FeatureSet, WalkStates],
    likelihood: QueryLikelihood | None = None,
) -> tuple[WalkStates, Any, dict[str, float]]:
    """The training split's walk states for a feature set; with a relevance model, that model and its AUC.

    `learned` rows are `full` rows with the cross-fitted relevance column appended (where `Featurizer` puts
    it), so no training row's column comes from a model that saw the row's conversation (its task where the
    training tasks come from one conversation). `likelihood` rows are walked with the zero-shot `likelihood`
    model's columns. `walked` keeps each set's states, so `full`'s are walked once.
    """
    from memora_rl.experiments.relevance_model import MeanRelevance, out_of_fold_scores

    started = time.perf_counter()
    if features == "likelihood":
        states = heuristic_walk_states(env, tasks, Featurizer(env, features, relevance=likelihood), args.walk_steps)
        timing[f"{features}: training states (query likelihood of each pair)"] = time.perf_counter() - started
        return states, likelihood, {"relevance_auc_out_of_fold": auc(states.labels, states.rows[:, -2])}
    base: FeatureSet = "full" if features == "learned" else features
    if base not in walked:
        walked[base] = heuristic_walk_states(env, tasks, Featurizer(env, base), args.walk_steps)
    states = walked[base]
    timing[f"{features}: training states"] = time.perf_counter() - started
    if features != "learned":
        return states, None, {}
    started = time.perf_counter()
    groups = states.conversations if len(set(states.conversations)) > 1 else states.tasks
    column, models = out_of_fold_scores(states.questions, states.texts, states.labels, groups, args.seed,
                                        epochs=args.relevance_epochs)  # fmt: skip
    timing[f"{features}: relevance models (2 fits, out-of-fold scores)"] = time.perf_counter() - started
    out_of_fold = {"relevance_auc_out_of_fold": auc(states.labels, column)}
    return states._replace(rows=np.column_stack([states.rows, column])), MeanRelevance(models), out_of_fold


def build_report(args: argparse.Namespace, argv: Sequence[str]) -> dict[str, Any]:
    """Measure the baselines, the stop oracle and the scorer walks on the held-out split; return the report."""
    from memora_rl.env.registry import make_env
    from memora_rl.experiments.learning.experiment import bracket_curves, point_from
    from memora_rl.experiments.learning.margins import dominance_rows

    started = time.perf_counter()
    config, ctx = held_out_context(args)
    tokenizer, overrides = ctx.tokenizer, ctx.env_overrides
    logger.info("%d %s tasks of %s", len(ctx.tasks), args.split, config.env)

    curves, oracle = baselines_and_stop_oracle(ctx, args.semantic_k, args.budgets)

    (walk_env,) = ctx.envs([f"env.budget={max(args.max_expands)}"])
    train_env, train_tasks = make_env(config.env, split="train", overrides=overrides, tokenizer=tokenizer)
    train_tasks = list(train_tasks)[: args.train_tasks] if args.train_tasks else list(train_tasks)
    scorers: dict[str, Any] = {}
    walks: dict[str, list[dict[str, Any]]] = {}
    timing = {"envs, baselines and stop oracle": time.perf_counter() - started}
    walked: dict[FeatureSet, WalkStates] = {}
    likelihood = shared_likelihood(config.model) if "likelihood" in args.feature_sets else None
    for features in args.feature_sets:
        train, relevance, relevance_auc = training_states(train_env, train_tasks, features, args, timing, walked,
                                                          likelihood)  # fmt: skip
        phase = time.perf_counter()
        model = fit_scorer(train.rows, train.labels, args.seed)
        featurizer = Featurizer(walk_env, features, relevance=relevance)
        held = heuristic_walk_states(walk_env, ctx.tasks, featurizer, args.walk_steps)
        timing[f"{features}: scorer fit and held-out states"] = time.perf_counter() - phase
        scorers[features] = {
            "train_states": len(train.labels),
            "positive_share": float(train.labels.mean()),
            "auc": auc(held.labels, model.predict_proba(held.rows)[:, 1]),
            "auc_position": auc(held.labels, -held.rows[:, 2]),
            "auc_cosine": auc(held.labels, held.rows[:, 0]),
        }
        if relevance is not None:  # its score is the last column (`likelihood`: the last but one)
            column = held.rows[:, -2 if features == "likelihood" else -1]
            scorers[features] |= relevance_auc | {"relevance_auc": auc(held.labels, column)}
        phase = time.perf_counter()
        for threshold in args.thresholds:
            for cap in args.max_expands:
                label = f"p>={threshold:g}, <={cap}"
                walked_tasks = [scorer_walk(walk_env, task, featurizer, model, threshold, cap) for task in ctx.tasks]
                components = [dict(info["reward_components"]) for _actions, info in walked_tasks]
                walks.setdefault(features, []).append(point_from(ctx, label, threshold, components))
        timing[f"{features}: scorer walks"] = time.perf_counter() - phase
        logger.info("%s scorer: AUC %.3f on held-out states", features, scorers[features]["auc"])

    policies = {f"{STOP_ORACLE} {p['setting']}": p for p in oracle}
    policies |= {f"{features} scorer {p['setting']}": p for features, points in walks.items() for p in points}
    phase = time.perf_counter()
    bracket_curves(ctx, curves, sorted({round(p["context_tokens"]) for p in policies.values()}), args.bracket_rounds)
    timing["bracketing baselines"] = time.perf_counter() - phase
    for name, seconds in timing.items():
        logger.info("%s: %.0f s", name, seconds)
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
        "phase_seconds": timing,
    }


def report_tables(report: Mapping[str, Any]) -> list[Any]:
    """The record's tables: the baselines, each walk's margins by dominance, and what the scorers learned."""
    from memora_rl.experiments.records import ResultTable

    scorer_rows = [
        [features, str(s["train_states"]), f"{s['positive_share']:.3f}", f"{s['auc']:.3f}",
         f"{s['auc_position']:.3f}", f"{s['auc_cosine']:.3f}", relevance_cell(s)]
        for features, s in report["scorers"].items()
    ]  # fmt: skip
    return [
        *baseline_and_margin_tables(report),
        ResultTable(
            title="The scorers on held-out heuristic-walk states (AUC of 'holds missing evidence')",
            columns=["features", "training states", "positive share", "AUC", "AUC of list position", "AUC of cosine",
                     "AUC of relevance model: held-out (training, out-of-fold)"],
            rows=scorer_rows,
        ),
    ]  # fmt: skip


def relevance_cell(scorer: Mapping[str, Any]) -> str:
    """The relevance model's held-out AUC and its out-of-fold AUC on the training states; "-" without one.

    >>> relevance_cell({"relevance_auc": 0.71234, "relevance_auc_out_of_fold": 0.7}), relevance_cell({})
    ('0.712 (0.700)', '-')
    """
    if "relevance_auc" not in scorer:
        return "-"
    return f"{scorer['relevance_auc']:.3f} ({scorer['relevance_auc_out_of_fold']:.3f})"


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
    args = parse_args(argv)
    report = build_report(args, argv)
    title = f"What a learner of the frontier's choice gains on {report['env']} ({report['split']})"
    return write_outputs(args, report, report_tables(report), plot, "choice_headroom.png", title)
