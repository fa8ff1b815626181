"""The learning experiment's figures: per-policy metrics, their mean and spread over seeds, and the report.

Pure functions of the played episodes' judge components (no model, no env), so `experiment.py` stays
about playing and training; `write_outputs` writes learning.json, learning.md and the PNG.
"""

from __future__ import annotations

import json
import shlex
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from memora_rl.evaluation.plots import plot_policies_on_curves
from memora_rl.experiments.learning.imitation import EXPANDS_PREFIX, imitation_table
from memora_rl.experiments.learning.margins import (
    CATEGORY_PREFIX,
    CATEGORY_TOKENS_PREFIX,
    TASK_PREFIX,
    dominating_point,
    paired_interval,
    task_recalls,
)
from memora_rl.experiments.records import table_lines

ACTION_KINDS = ("expand", "refine", "stop", "invalid", "forced")
METRICS = ("evidence_recall", "recall_gain", "context_tokens", "steps", "valid_action_rate")
"""Per-policy means reported in the tables (plus `initial_recall`, `total` and the action mix)."""
BASE, WARM, GRPO = "prompted base", "warm start", "GRPO"
SEMANTIC, HEURISTIC, ORACLE = "semantic", "heuristic", "oracle"
TEACHER = "ranker teacher"
"""The rule a `warm_start.teacher: ranker` warm start imitates, played on the held-out tasks."""


def action_mix(components: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Share of each action kind among all actions of the episodes (pooled counts; all 0 without actions).

    >>> action_mix([{"actions_expand": 1, "actions_stop": 1}, {"actions_stop": 1, "actions_invalid": 1}])["stop"]
    0.5
    """
    counts = {kind: sum(float(c.get(f"actions_{kind}", 0.0)) for c in components) for kind in ACTION_KINDS}
    total = sum(counts.values())
    return {kind: (count / total if total else 0.0) for kind, count in counts.items()}


def policy_metrics(
    components: Sequence[Mapping[str, float]], categories: Sequence[str] = (), task_ids: Sequence[str] = ()
) -> dict[str, float]:
    """Episode means of the judge's components, the action mix (`mix_<kind>`), recall per category and per task.

    `categories` holds each episode's task category; with it, `recall/<category>` and `tokens/<category>` are
    that category's mean recall and context tokens. `task_ids` holds each episode's task id; with it,
    `task/<id>` is that task's recall (what a paired interval over tasks reads) and `expands/<id>` its expand
    count (what the imitation table pairs with the teacher's).

    Raises:
        ValueError: no episode, or `categories` / `task_ids` of another length than `components`.
    """
    if not components:
        raise ValueError("No episodes to summarise.")
    for name, values in (("categories", categories), ("task ids", task_ids)):
        if values and len(values) != len(components):
            raise ValueError(f"{len(values)} {name} for {len(components)} episodes; pass one per episode.")
    names = (*METRICS, "initial_recall", "total")
    metrics = {name: statistics.fmean(float(c[name]) for c in components) for name in names}
    metrics.update({f"mix_{kind}": share for kind, share in action_mix(components).items()})
    for category in sorted(set(categories)):
        rows = [c for c, cat in zip(components, categories, strict=True) if cat == category]
        metrics[f"{CATEGORY_PREFIX}{category}"] = statistics.fmean(float(c["evidence_recall"]) for c in rows)
        metrics[f"{CATEGORY_TOKENS_PREFIX}{category}"] = statistics.fmean(float(c["context_tokens"]) for c in rows)
    for task_id, component in zip(task_ids, components, strict=False):
        metrics[f"{TASK_PREFIX}{task_id}"] = float(component["evidence_recall"])
        metrics[f"{EXPANDS_PREFIX}{task_id}"] = float(component.get("actions_expand", 0.0))
    metrics["episodes"] = float(len(components))
    return metrics


def mean_std(values: Sequence[float]) -> tuple[float, float | None]:
    """Mean and sample standard deviation (None with fewer than two values).

    >>> mean_std([1.0, 3.0])
    (2.0, 1.4142135623730951)
    >>> mean_std([0.5])
    (0.5, None)
    """
    if not values:
        raise ValueError("mean_std needs at least one value.")
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else None)


def aggregate_seeds(rows: Sequence[Mapping[str, float]]) -> dict[str, dict[str, float | None]]:
    """Per metric, the mean and std over seeds of per-seed metric dicts (metrics every row holds).

    >>> round(aggregate_seeds([{"r": 0.2}, {"r": 0.4}])["r"]["mean"], 6)
    0.3
    """
    names = [name for name in rows[0] if all(name in row for row in rows)] if rows else []
    out: dict[str, dict[str, float | None]] = {}
    for name in names:
        mean, std = mean_std([float(row[name]) for row in rows])
        out[name] = {"mean": mean, "std": std}
    return out


def paired_gain(after: Sequence[float], before: Sequence[float]) -> dict[str, float | None]:
    """Gain after - before paired per seed: its mean, its std over seeds, and mean / std (None when undefined).

    >>> round(paired_gain([0.5, 0.7], [0.4, 0.4])["gain"], 6)
    0.2
    """
    if len(after) != len(before) or not after:
        raise ValueError(f"paired_gain needs equal, non-empty lists, got {len(after)} and {len(before)} values.")
    gains = [a - b for a, b in zip(after, before, strict=True)]
    gain, std = mean_std(gains)
    after_mean, after_std = mean_std(list(after))
    before_mean, _ = mean_std(list(before))
    ratio = gain / std if std else None
    return {
        "after": after_mean,
        "after_std": after_std,
        "before": before_mean,
        "gain": gain,
        "gain_std": std,
        "ratio": ratio,
    }


def fmt_cell(value: float | None, digits: int, std: float | None = None, sign: bool = False) -> str:
    """A table cell: value (with ± std when given), or n/a."""
    if value is None:
        return "n/a"
    text = f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"
    return f"{text} ± {std:.{digits}f}" if std is not None else text


DIGITS = {"evidence_recall": 3, "recall_gain": 3, "context_tokens": 1, "steps": 2, "valid_action_rate": 2}
HEADERS = {
    "evidence_recall": "recall",
    "recall_gain": "gain over G0",
    "context_tokens": "context tokens",
    "steps": "steps",
    "valid_action_rate": "valid actions",
}


def category_table(policies: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Markdown lines of each policy's recall per task category ([] when no policy has per-category figures)."""
    keys = sorted({key for policy in policies.values() for key in policy["mean"] if key.startswith(CATEGORY_PREFIX)})
    if not keys:
        return []
    names = [key.removeprefix(CATEGORY_PREFIX) for key in keys]
    lines = ["", "Recall by task category:", "", "| policy | " + " | ".join(names) + " |", "|---|" + "---|" * len(keys)]
    for name, policy in policies.items():
        std = policy.get("std") or {}
        cells = [fmt_cell(policy["mean"].get(key), 3, std.get(key)) for key in keys]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def margin_cell(entry: Mapping[str, Any]) -> str:
    """A margin over a curve's dominating point, with its paired 95% interval and the point it is read against."""
    if entry.get("margin") is None:
        return "n/a (no point at >= its tokens)"
    interval = entry.get("interval")
    ci = f" [{interval[0]:+.3f}, {interval[1]:+.3f}]" if interval else ""
    return f"{entry['margin']:+.3f}{ci} vs {entry['setting']} ({entry['point_tokens']:.0f} tok)"


def category_margin_table(margins: Mapping[str, Mapping[str, Any]], curve_names: Sequence[str]) -> list[str]:
    """Markdown lines: per policy and category, the margin over each curve's dominating point on that category."""
    pairs = sorted({(curve, category) for row in margins.values() for curve in curve_names
                    for category in row[curve].get("categories", {})})  # fmt: skip
    if not pairs:
        return []
    header = " | ".join(f"{category}: recall - {curve}" for curve, category in pairs)
    lines = ["", "By task category (each category's own tokens, recall and dominating point):", ""]
    lines += [f"| policy | {header} |", "|---|" + "---|" * len(pairs)]
    for name, row in margins.items():
        cells = []
        for curve, category in pairs:
            entry = row[curve].get("categories", {}).get(category)
            cells.append("n/a" if entry is None else margin_cell(entry))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def dominance_table(margins: Mapping[str, Mapping[str, Any]], curve_names: Sequence[str]) -> list[str]:
    """Markdown lines: each policy's margin over each curve's cheapest point with at least its tokens."""
    lines = [
        "",
        "Recall over each baseline at no more context (margin over the curve's cheapest measured point with at "
        "least the policy's tokens, paired 95% interval over tasks; bracketed = points within 15% on both sides):",
        "",
    ]
    header = " | ".join(f"recall - {c} | {c} bracketed" for c in curve_names)
    lines += [f"| policy | context tokens | recall | {header} |", "|---|---|---|" + "---|---|" * len(curve_names)]
    for name, row in margins.items():
        cells = [f"{row['context_tokens']:.1f}", f"{row['evidence_recall']:.3f}"]
        for curve in curve_names:
            cells += [margin_cell(row[curve]), "yes" if row[curve].get("bracketed") else "no"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def gain_table(gain: Mapping[str, Any]) -> list[str]:
    """Markdown lines: GRPO against its own start, paired per seed and (recall) paired over tasks."""
    lines = ["", f"GRPO over its starting policy ({gain['start']}), paired per seed:", ""]
    lines += ["| metric | GRPO | start | gain | gain std | gain / std |", "|---|---|---|---|---|---|"]
    for metric, row in gain["metrics"].items():
        digits = DIGITS.get(metric, 3)
        lines.append(
            f"| {HEADERS.get(metric, metric)} | {fmt_cell(row['after'], digits, row['after_std'])} | "
            f"{fmt_cell(row['before'], digits)} | {fmt_cell(row['gain'], digits, sign=True)} | "
            f"{fmt_cell(row['gain_std'], digits)} | {fmt_cell(row['ratio'], 2, sign=True)} |"
        )
    tasks = gain.get("task_interval")
    if tasks:
        lines += [
            "",
            f"- Recall gain paired over tasks (seed means): {tasks[0]:+.3f} [{tasks[1]:+.3f}, {tasks[2]:+.3f}]",
        ]
    return lines


CURVE_TITLE = "Baseline curves (each point - semantic's cheapest point with at least its tokens)"
CURVE_COLUMNS = ["curve", "setting", "context tokens", "recall", "recall - semantic"]


def curve_rows(curves: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[list[str]]:
    """Every measured baseline point (`CURVE_COLUMNS`), against semantic's cheapest point with at least its tokens."""
    semantic = curves.get(SEMANTIC, [])
    rows = []
    for curve, points in curves.items():
        for point in sorted(points, key=lambda p: float(p["context_tokens"])):
            there = dominating_point(semantic, float(point["context_tokens"]))
            margin = "n/a" if there is None else f"{point['evidence_recall'] - there['evidence_recall']:+.3f}"
            tokens, recall = f"{point['context_tokens']:.1f}", f"{point['evidence_recall']:.3f}"
            rows.append([curve, str(point["setting"]), tokens, recall, margin])
    return rows


def curve_table(curves: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[str]:
    """Markdown lines of `curve_rows`."""
    lines = ["", f"{CURVE_TITLE}:", "", "| " + " | ".join(CURVE_COLUMNS) + " |", "|---|---|---|---|---|"]
    return lines + ["| " + " | ".join(row) + " |" for row in curve_rows(curves)]


def markdown_report(report: Mapping[str, Any]) -> str:
    """The experiment's tables (policies, margins by dominance, GRPO gain, curves, per-seed runs) as Markdown."""
    lines = [f"`{report['command']}`", ""]
    split = report["split"]
    read = {"test": " (the recipe's one final read of the test split)", "validation": " (choices are made here)"}
    lines.append(
        f"Env `{report['env']}`, split `{split}`{read.get(split, '')}: {report['tasks']} tasks, "
        f"G0 (recall after reset) "
        f"{report['initial_recall']:.3f}, {report['max_turns']} env steps, {report['llm_turns']} LLM turns "
        f"(greedy{', ' + report['generator'] if report.get('generator') else ''}, "
        f"{report['max_new_tokens']} new tokens a turn); "
        f"seeds {report['seeds'] or 'none (no training)'}."
    )
    lines += [
        "",
        "| policy | seeds | "
        + " | ".join(HEADERS[m] for m in METRICS)
        + " | expand | refine | stop | invalid | forced |",
    ]
    lines.append("|---|---|" + "---|" * (len(METRICS) + len(ACTION_KINDS)))
    for name, policy in report["policies"].items():
        mean, std = policy["mean"], policy.get("std") or {}
        cells = [fmt_cell(mean[m], DIGITS[m], std.get(m)) for m in METRICS]
        cells += [fmt_cell(mean[f"mix_{kind}"], 2) for kind in ACTION_KINDS]
        lines.append(f"| {name} | {policy['seeds'] if policy['seeds'] else '-'} | " + " | ".join(cells) + " |")
    lines += category_table(report["policies"])
    curve_names = list(report["curves"])
    lines += dominance_table(report["margins"], curve_names)
    lines += category_margin_table(report["margins"], curve_names)
    if report.get("grpo_gain"):
        lines += gain_table(report["grpo_gain"])
    if (imitation := imitation_table(report, TEACHER)) is not None:
        lines += ["", f"{imitation.title}:", "", *table_lines(imitation)]
    lines += curve_table(report["curves"])
    if report.get("timings"):
        lines += ["", "LLM evaluation time (wall):", ""]
        lines += [f"- {row['step']} ({row['generator']}): {row['s']:.0f} s" for row in report["timings"]]
    if report.get("training"):
        lines += ["", "Training runs:", "", "| seed | reused | train s | steps | s/step | reward first | reward last |"]
        lines.append("|---|---|---|---|---|---|---|")
        for run in report["training"]:
            lines.append(
                f"| {run['seed']} | {run['reused']} | {fmt_cell(run['train_s'], 0)} | {run['final_step']} | "
                f"{fmt_cell(run['step_s_mean'], 1)} | {fmt_cell(run['reward_first'], 3)} | "
                f"{fmt_cell(run['reward_last'], 3)} |"
            )
    return "\n".join(lines) + "\n"


def grpo_gain(policies: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """GRPO's gain over its starting policy (the warm start, else the prompted base) on each metric, paired per seed.

    A seed-independent start (one prompted base) is paired with every seed's GRPO.
    """
    start = WARM if WARM in policies else BASE
    before = {row["seed"]: row for row in policies[start]["per_seed"]}
    metrics = {}
    for metric in METRICS:
        after = [row[metric] for row in policies[GRPO]["per_seed"]]
        prior = [before.get(seed, policies[start]["per_seed"][0])[metric] for seed in policies[GRPO]["seeds"]]
        metrics[metric] = paired_gain(after, prior)
    gain: dict[str, Any] = {"start": start, "metrics": metrics}
    after_tasks, before_tasks = task_recalls(policies[GRPO]["mean"]), task_recalls(policies[start]["mean"])
    if after_tasks and set(after_tasks) <= set(before_tasks):
        gain["task_interval"] = list(paired_interval(after_tasks, before_tasks))
    return gain


def summarize_policy(per_seed: Sequence[tuple[int | None, dict[str, float]]]) -> dict[str, Any]:
    """A policy's entry: per-seed metrics, mean and (across seeds) std; `seeds` empty for seed-independent ones."""
    seeds = [seed for seed, _ in per_seed if seed is not None]
    aggregated = aggregate_seeds([metrics for _, metrics in per_seed])
    return {
        "seeds": seeds,
        "per_seed": [{"seed": seed, **metrics} for seed, metrics in per_seed],
        "mean": {name: value["mean"] for name, value in aggregated.items()},
        "std": {
            name: value["std"]
            for name, value in aggregated.items()
            if not name.startswith((TASK_PREFIX, EXPANDS_PREFIX))
        }
        if seeds
        else None,
    }


COMMAND = ("memora-rl", "experiment", "learning")
"""The command that runs this experiment."""


def command_line(argv: Sequence[str]) -> str:
    """The command that made the tables (its arguments `argv`), as a shell would take it."""
    return shlex.join([*COMMAND, *argv])


def write_outputs(report: Mapping[str, Any], out: Path) -> str:
    """learning.json, learning.md and recall_vs_tokens.png into `out`; returns the Markdown."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "learning.json").write_text(json.dumps(report, indent=1))
    markdown = markdown_report(report)
    (out / "learning.md").write_text(markdown)
    curves = {
        f"{name} ({'initial_top_k' if name == SEMANTIC else 'budget'})": [
            (p["context_tokens"], p["evidence_recall"], p["setting"]) for p in points
        ]
        for name, points in report["curves"].items()
    }
    points = {}
    seed_points = {}
    for name, policy in report["policies"].items():
        mean, std = policy["mean"], policy.get("std") or {}
        points[name] = (
            mean["context_tokens"],
            mean["evidence_recall"],
            std.get("context_tokens"),
            std.get("evidence_recall"),
        )
        seed_points[name] = [(row["context_tokens"], row["evidence_recall"]) for row in policy["per_seed"]]
    title = f"{report['env']} {report['split']} ({report['tasks']} tasks): evidence recall vs context tokens"
    plot_policies_on_curves(curves, points, seed_points, out / "recall_vs_tokens.png", title)
    return markdown
