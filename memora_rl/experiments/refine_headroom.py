"""Is an env's headroom learnable? The oracle's refine gain against refines chosen without the evidence.

The oracle (`memora-rl env stats`) tries the refine queries drawn from visible text
(`memora_rl.env.oracle.visible_queries`) and keeps the one that finds evidence: its *choice* uses the
gold evidence. A policy sees the same queries, not the evidence. For every task of a split this
plays one refine with each visible query, then a stop, on the real env, and reports at equal context
tokens against semantic search (`initial_top_k` in `--semantic-k`):

- a fixed choice: always the query at position i (a rule a policy can learn from the layout alone);
- a uniform choice: the mean over a task's queries (a choice that carries no information);
- the gold choice: the best of a task's queries (what the oracle's first refine reaches).

Where the gold choice is far above the uniform one and the fixed ones lie on semantic's curve, the
oracle's refine headroom is a lottery among rephrasings that a policy cannot learn to win. It also
counts the tasks where some query gains and the share of their queries that do.

A second table asks what stopping early could buy with a smaller first search: the gold-chosen
number of semantic hits per task at the mean tokens of `--adaptive-at`'s k (an upper bound), and
a visible rule (stop at `a` hits when every content word of the question is shown, else take `b`).

    memora-rl experiment refine-headroom --env locomo --split validation

The env's settings come from `--config`'s `env` and `env_overrides` (the trained policy's), context
tokens are counted with its model's tokenizer, as the learning experiment counts them.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import fmean
from typing import Any

from rich.progress import track

from memora_rl.experiments.learning.margins import dominating_point

logger = logging.getLogger(__name__)
STOP = '{"action": "stop"}'
_QUESTION_WORDS = frozenset({"what", "when", "who", "whom", "which", "how", "why", "where", "did", "does", "do", "has"})


@dataclass
class TaskProbe:
    """One task's recalls and context tokens: after reset, after one refine with each visible query."""

    task_id: str
    category: str
    question: str
    initial: tuple[float, int]
    refines: list[tuple[str, float, int]] = field(default_factory=list)
    """(query, recall, context tokens) for each visible query, in `visible_queries` order."""


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The experiment's options."""
    parser = argparse.ArgumentParser(
        prog="memora-rl experiment refine-headroom",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", type=Path, default=Path("configs/grpo/hard.yaml"), help="Training config.")
    parser.add_argument("--env", default=None, help="Env name instead of the config's (memora-rl env list).")
    parser.add_argument("--split", default="test", help="Task split: train, validation, test or all.")
    parser.add_argument("--limit", type=int, default=None, help="Only the first N tasks of the split.")
    parser.add_argument("--max-queries", type=int, default=8, help="Visible queries per task (the oracle's).")
    parser.add_argument("--fixed", type=int, default=3, help="Fixed query positions reported (1..N).")
    parser.add_argument("--semantic-k", type=int, nargs="+", default=[2, 3, 4, 5, 6, 7, 8, 10, 12])
    parser.add_argument("--adaptive-at", type=int, default=5, help="Semantic k whose tokens the stop table matches.")
    parser.add_argument("--rules", nargs="+", default=["3:8", "3:10"], help="Stop rules a:b (hits when shown:else).")
    parser.add_argument("--out", type=Path, default=None, help="Also write the report (every task's probe) as JSON.")
    args = parser.parse_args(argv)
    if args.max_queries < 1 or args.fixed < 1:
        parser.error("--max-queries and --fixed must be at least 1.")
    if args.adaptive_at not in args.semantic_k:
        parser.error(f"--adaptive-at {args.adaptive_at} must be one of --semantic-k {args.semantic_k}.")
    try:
        args.rules = [tuple(int(part) for part in rule.split(":")) for rule in args.rules]
    except ValueError:
        parser.error(f"--rules {args.rules}: write each rule as a:b, e.g. 3:8.")
    if any(len(rule) != 2 or not 1 <= rule[0] < rule[1] for rule in args.rules):
        parser.error(f"--rules {args.rules}: each needs 1 <= a < b, e.g. 3:8.")
    if any(k not in args.semantic_k for rule in args.rules for k in rule):
        parser.error(f"--rules: every k must be one of --semantic-k {args.semantic_k}.")
    return args


def stop_outcome(env: Any) -> tuple[float, int]:
    """Stop the env's episode: (evidence recall, context tokens) of its final working set."""
    from memora_rl.judge.graders import evidence_recall

    trajectory = env.step(STOP)[-1]["trajectory"]
    return evidence_recall(trajectory), trajectory.context_tokens


def probe_task(env: Any, task: Any, max_queries: int) -> TaskProbe:
    """One refine with each visible query of the state after reset (then a stop), from the same snapshot."""
    from memora_rl.core.parse import RefineAction, format_action
    from memora_rl.env.oracle import visible_queries

    env.reset(options={"task": task})
    start = env.snapshot()
    probe = TaskProbe(task.id, task.category, task.question, stop_outcome(env))
    for query in visible_queries(start, task.question, max_queries):
        env.restore(start)
        if env.step(format_action(RefineAction(query=query)))[-1]["parse_error"] is None:
            probe.refines.append((query, *stop_outcome(env)))
    return probe


def semantic_runs(env: Any, tasks: Sequence[Any], ks: Sequence[int]) -> dict[int, list[tuple[float, int]]]:
    """Per task (recall, tokens) of semantic search at each k: {k: [(recall, tokens), ...]} in task order.

    The env is re-configured per k (`initial_top_k`), its store and tasks kept, then restored.
    """
    original = env.config
    runs: dict[int, list[tuple[float, int]]] = {}
    try:
        for k in ks:
            env.config = original.model_copy(update={"initial_top_k": k})
            outcomes = []
            for task in tasks:
                env.reset(options={"task": task})
                outcomes.append(stop_outcome(env))
            runs[k] = outcomes
    finally:
        env.config = original
    return runs


def choice_points(probes: Sequence[TaskProbe], fixed: int) -> dict[str, tuple[float, float]]:
    """(mean recall, mean tokens) of each way to choose the refine; a task without queries keeps its reset state."""

    def mean_point(pick: Any) -> tuple[float, float]:
        points = [pick(p) if p.refines else p.initial for p in probes]
        return fmean(r for r, _ in points), fmean(t for _, t in points)

    rows = {"after reset (G0), stop": mean_point(lambda p: p.initial)}
    for i in range(fixed):
        rows[f"refine with visible query #{i + 1}"] = mean_point(
            lambda p, i=i: p.refines[i][1:] if len(p.refines) > i else p.initial
        )
    rows["refine, uniform choice (mean over queries)"] = mean_point(
        lambda p: (fmean(r for _, r, _ in p.refines), fmean(t for _, _, t in p.refines))
    )
    rows["refine, gold choice (best query, then fewest tokens)"] = mean_point(
        lambda p: max(p.refines, key=lambda q: (q[1], -q[2]))[1:]
    )
    return rows


def lottery_counts(probes: Sequence[TaskProbe]) -> dict[str, float]:
    """Tasks where some visible query gains recall, and the mean share of their queries that gain."""
    shares = [
        sum(r > p.initial[0] for _, r, _ in p.refines) / len(p.refines)
        for p in probes
        if p.refines and any(r > p.initial[0] for _, r, _ in p.refines)
    ]
    return {
        "tasks": len(probes),
        "with_a_winning_query": len(shares),
        "winning_share": fmean(shares) if shares else 0.0,
    }


def gold_adaptive(runs: dict[int, list[tuple[float, int]]], tokens: float) -> tuple[float, float]:
    """Best mean recall choosing k per task (knowing the evidence) at mean tokens <= `tokens`: a Lagrangian bound.

    Each task takes the k maximising recall - lam * tokens; lam is bisected so the mean tokens fit.

    >>> gold_adaptive({1: [(0.0, 10), (1.0, 10)], 2: [(1.0, 20), (1.0, 20)]}, 15.0)
    (1.0, 15.0)
    """
    ks = sorted(runs)
    n = len(runs[ks[0]])

    def pick(lam: float) -> tuple[float, float]:
        chosen = [max((runs[k][i] for k in ks), key=lambda rt: (rt[0] - lam * rt[1], -rt[1])) for i in range(n)]
        return fmean(r for r, _ in chosen), fmean(t for _, t in chosen)

    low, high = 0.0, 1.0
    while pick(high)[1] > tokens and high < 1e6:
        high *= 2
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if pick(middle)[1] > tokens else (low, middle)
    return pick(high)


def content_words(question: str) -> list[str]:
    """The question's lower-cased content words of three or more letters (no stopwords or question words)."""
    from memora_rl.data.synthetic import STOPWORDS

    words = re.findall(r"[a-z]+", question.lower())
    return [word for word in words if len(word) > 2 and word not in STOPWORDS and word not in _QUESTION_WORDS]


def rule_point(
    runs: dict[int, list[tuple[float, int]]],
    shown_texts: Sequence[str],
    questions: Sequence[str],
    rule: tuple[int, int],
) -> tuple[float, float]:
    """Mean (recall, tokens) of a stop rule: `a` hits when every content word of the question shows, else `b`.

    A word shows when its first five letters are in the text (so "moved" matches "moves").
    """
    small, large = rule
    points = []
    for i, (text, question) in enumerate(zip(shown_texts, questions, strict=True)):
        shown = all(word[:5] in text for word in content_words(question))
        points.append(runs[small if shown else large][i])
    return fmean(r for r, _ in points), fmean(t for _, t in points)


def shown_text(env: Any, task: Any) -> str:
    """The lower-cased abstractions and values the env shows after reset."""
    env.reset(options={"task": task})
    return " ".join(f"{entry.abstraction} {entry.value}" for entry in env.snapshot().working).lower()


def table(rows: dict[str, tuple[float, float]], curve: list[tuple[float, float]]) -> list[str]:
    """Markdown rows: recall, tokens, and the margin over semantic's cheapest point with at least those tokens."""
    points = [{"context_tokens": tokens, "evidence_recall": recall} for tokens, recall in curve]
    lines = ["| choice | recall | context tokens | semantic at >= its tokens | margin |", "|---|---|---|---|---|"]
    for name, (recall, tokens) in rows.items():
        point = dominating_point(points, tokens)
        if point is None:
            lines.append(f"| {name} | {recall:.3f} | {tokens:.1f} | n/a (add a larger k) | n/a |")
            continue
        semantic = point["evidence_recall"]
        lines.append(
            f"| {name} | {recall:.3f} | {tokens:.1f} | {semantic:.3f} at {point['context_tokens']:.0f} "
            f"| {recall - semantic:+.3f} |"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Probe every task and return (and optionally write) the report; its `table` is the Markdown to show."""
    args = parse_args(argv)
    from memora_rl.config import load_config
    from memora_rl.env.registry import make_env
    from memora_rl.llm.registry import load_tokenizer
    from memora_rl.training.config import TrainConfig

    config = load_config(TrainConfig, args.config, [f"env={args.env}"] if args.env else [])
    tokenizer = load_tokenizer(config.model)
    env, tasks = make_env(config.env, args.split, overrides=config.env_overrides, tokenizer=tokenizer)
    tasks = list(tasks)[: args.limit]
    if not tasks:
        raise SystemExit(f"env {config.env!r} has no {args.split} tasks; pick another --split.")
    probes = [probe_task(env, task, args.max_queries) for task in track(tasks, description="refine probes")]
    runs = semantic_runs(env, tasks, sorted(set(args.semantic_k)))
    curve = [(fmean(t for _, t in runs[k]), fmean(r for r, _ in runs[k])) for k in sorted(runs)]
    counts = lottery_counts(probes)
    choices = choice_points(probes, args.fixed)
    small = min(rule[0] for rule in args.rules)
    env.config = env.config.model_copy(update={"initial_top_k": small})
    texts = [shown_text(env, task) for task in tasks]
    at_tokens = curve[sorted(runs).index(args.adaptive_at)][0]
    stops = {f"gold k per task (at most semantic k={args.adaptive_at}'s tokens)": gold_adaptive(runs, at_tokens)}
    for rule in args.rules:
        stops[f"k={rule[0]} when every question word shows, else k={rule[1]}"] = rule_point(
            runs, texts, [task.question for task in tasks], rule
        )
    lines = [
        f"{config.env} ({args.split}, {len(tasks)} tasks, up to {args.max_queries} visible queries a task)",
        "semantic: "
        + ", ".join(f"k={k} {r:.3f} at {t:.0f} tokens" for k, (t, r) in zip(sorted(runs), curve, strict=True)),
        "",
        *table(choices, curve),
        "",
        f"tasks where some visible query gains recall: {counts['with_a_winning_query']} of {counts['tasks']}; "
        f"share of their queries that gain: {counts['winning_share']:.2f}",
        "",
        *table(stops, curve),
    ]
    report = {
        "table": "\n".join(lines),
        "env": config.env,
        "split": args.split,
        "semantic": {str(k): {"tokens": t, "recall": r} for k, (t, r) in zip(sorted(runs), curve, strict=True)},
        "choices": {name: {"recall": r, "tokens": t} for name, (r, t) in choices.items()},
        "stops": {name: {"recall": r, "tokens": t} for name, (r, t) in stops.items()},
        "lottery": counts,
        "probes": [vars(probe) for probe in probes],
    }
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1))
    return report
