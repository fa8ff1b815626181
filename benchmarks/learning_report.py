"""The learning benchmark's figures: per-policy metrics, their mean and spread over seeds, and the report.

Pure functions of the played episodes' judge components (no model, no env), so `benchmarks/learning.py`
stays about playing and training; `write_outputs` writes learning.json, learning.md and the PNG.
"""

from __future__ import annotations

import json
import shlex
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from learning_curve import interpolate_at, plot_recall_vs_tokens

ACTION_KINDS = ("expand", "refine", "stop", "invalid", "forced")
METRICS = ("evidence_recall", "recall_gain", "context_tokens", "steps", "valid_action_rate")
"""Per-policy means reported in the tables (plus `initial_recall`, `total` and the action mix)."""
BASE, WARM, GRPO = "prompted base", "warm start", "GRPO"
SEMANTIC, HEURISTIC, ORACLE = "semantic", "heuristic", "oracle"
CATEGORY_PREFIX = "recall/"
"""Metric key prefix of a policy's recall on one task category."""
CATEGORY_TOKENS_PREFIX = "tokens/"
"""Metric key prefix of a policy's mean context tokens on one task category."""


def action_mix(components: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Share of each action kind among all actions of the episodes (pooled counts; all 0 without actions).

    >>> action_mix([{"actions_expand": 1, "actions_stop": 1}, {"actions_stop": 1, "actions_invalid": 1}])["stop"]
    0.5
    """
    counts = {kind: sum(float(c.get(f"actions_{kind}", 0.0)) for c in components) for kind in ACTION_KINDS}
    total = sum(counts.values())
    return {kind: (count / total if total else 0.0) for kind, count in counts.items()}


def policy_metrics(components: Sequence[Mapping[str, float]], categories: Sequence[str] = ()) -> dict[str, float]:
    """Episode means of the judge's components, the action mix (`mix_<kind>`) and recall per task category.

    `categories` holds each episode's task category; with it, `recall/<category>` and `tokens/<category>` are
    that category's mean recall and context tokens.

    Raises:
        ValueError: no episode, or `categories` of another length than `components`.
    """
    if not components:
        raise ValueError("No episodes to summarise.")
    if categories and len(categories) != len(components):
        raise ValueError(f"{len(categories)} categories for {len(components)} episodes; pass one per episode.")
    names = (*METRICS, "initial_recall", "total")
    metrics = {name: statistics.fmean(float(c[name]) for c in components) for name in names}
    metrics.update({f"mix_{kind}": share for kind, share in action_mix(components).items()})
    for category in sorted(set(categories)):
        rows = [c for c, cat in zip(components, categories, strict=True) if cat == category]
        metrics[f"{CATEGORY_PREFIX}{category}"] = statistics.fmean(float(c["evidence_recall"]) for c in rows)
        metrics[f"{CATEGORY_TOKENS_PREFIX}{category}"] = statistics.fmean(float(c["context_tokens"]) for c in rows)
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


def equal_token_rows(
    policies: Mapping[str, Mapping[str, float]], curves: Mapping[str, Sequence[Mapping[str, float]]]
) -> dict[str, dict[str, Any]]:
    """For each policy (mean metrics), every curve's recall at the policy's mean tokens and the policy's margin."""
    rows: dict[str, dict[str, Any]] = {}
    for name, metrics in policies.items():
        tokens, recall = metrics["context_tokens"], metrics["evidence_recall"]
        row: dict[str, Any] = {"context_tokens": tokens, "evidence_recall": recall}
        for curve_name, points in curves.items():
            value, inside = interpolate_at([(p["context_tokens"], p["evidence_recall"]) for p in points], tokens)
            row[curve_name] = {"recall": value, "margin": recall - value, "in_range": inside,
                               "categories": category_margins(metrics, points)}  # fmt: skip
        rows[name] = row
    return rows


def category_margins(metrics: Mapping[str, float], points: Sequence[Mapping[str, float]]) -> dict[str, dict[str, Any]]:
    """Per task category: the curve's recall on that category read at the policy's tokens on it, and the margin.

    Only categories that the policy and every curve point have figures for (`recall/<c>`, `tokens/<c>`).
    """
    margins: dict[str, dict[str, Any]] = {}
    for key in sorted(k for k in metrics if k.startswith(CATEGORY_PREFIX)):
        category = key.removeprefix(CATEGORY_PREFIX)
        tokens_key = f"{CATEGORY_TOKENS_PREFIX}{category}"
        if tokens_key not in metrics or not all(key in p and tokens_key in p for p in points):
            continue
        value, inside = interpolate_at([(p[tokens_key], p[key]) for p in points], metrics[tokens_key])
        margins[category] = {"recall": value, "margin": metrics[key] - value, "in_range": inside}
    return margins


def _fmt(value: float | None, digits: int, std: float | None = None, sign: bool = False) -> str:
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
        cells = [_fmt(policy["mean"].get(key), 3, std.get(key)) for key in keys]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def category_margin_table(equal_tokens: Mapping[str, Mapping[str, Any]], curve_names: Sequence[str]) -> list[str]:
    """Markdown lines: per policy and category, recall - each curve's recall on that category at the same tokens."""
    pairs = sorted({(curve, category) for row in equal_tokens.values() for curve in curve_names
                    for category in row[curve].get("categories", {})})  # fmt: skip
    if not pairs:
        return []
    header = " | ".join(f"{category}: recall - {curve}" for curve, category in pairs)
    lines = ["", "By task category at equal context tokens (the category's own tokens and curve; * = outside it):", ""]
    lines += [f"| policy | {header} |", "|---|" + "---|" * len(pairs)]
    for name, row in equal_tokens.items():
        cells = []
        for curve, category in pairs:
            margin = row[curve].get("categories", {}).get(category)
            cells.append("n/a" if margin is None else f"{margin['margin']:+.3f}{'' if margin['in_range'] else '*'}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def markdown_report(report: Mapping[str, Any]) -> str:
    """The benchmark's tables (policies, equal-token comparison, GRPO gain, curves, per-seed runs) as Markdown."""
    lines = [f"`{report['command']}`", ""]
    lines.append(
        f"Env `{report['env']}`, split `{report['split']}`: {report['tasks']} tasks, G0 (recall after reset) "
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
        cells = [_fmt(mean[m], DIGITS[m], std.get(m)) for m in METRICS]
        cells += [_fmt(mean[f"mix_{kind}"], 2) for kind in ACTION_KINDS]
        lines.append(f"| {name} | {policy['seeds'] if policy['seeds'] else '-'} | " + " | ".join(cells) + " |")
    lines += category_table(report["policies"])
    lines += [
        "",
        "Recall at equal context tokens (each baseline curve read at the policy's mean tokens; "
        "* = outside the curve, its end point used):",
        "",
    ]
    curve_names = list(report["curves"])
    header = " | ".join(f"{c}@tokens | recall - {c}" for c in curve_names)
    lines += [f"| policy | context tokens | recall | {header} |", "|---|---|---|" + "---|---|" * len(curve_names)]
    for name, row in report["equal_tokens"].items():
        cells = [f"{row['context_tokens']:.1f}", f"{row['evidence_recall']:.3f}"]
        for curve in curve_names:
            star = "" if row[curve]["in_range"] else "*"
            cells += [f"{row[curve]['recall']:.3f}{star}", f"{row[curve]['margin']:+.3f}"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += category_margin_table(report["equal_tokens"], curve_names)
    gain = report.get("grpo_gain")
    if gain:
        lines += ["", f"GRPO over its starting policy ({gain['start']}), paired per seed:", ""]
        lines += ["| metric | GRPO | start | gain | gain std | gain / std |", "|---|---|---|---|---|---|"]
        for metric, row in gain["metrics"].items():
            digits = DIGITS.get(metric, 3)
            lines.append(
                f"| {HEADERS.get(metric, metric)} | {_fmt(row['after'], digits, row['after_std'])} | "
                f"{_fmt(row['before'], digits)} | {_fmt(row['gain'], digits, sign=True)} | "
                f"{_fmt(row['gain_std'], digits)} | {_fmt(row['ratio'], 2, sign=True)} |"
            )
        lines.append("")
        for curve in curve_names:
            row = report["equal_tokens"][GRPO][curve]
            lines.append(
                f"- GRPO recall - {curve}@same tokens: {row['margin']:+.3f}"
                + ("" if row["in_range"] else " (outside the curve)")
            )
    lines += ["", "Baseline curves (each point - semantic's curve at its tokens; * = outside it):", ""]
    lines += ["| curve | setting | context tokens | recall | recall - semantic |", "|---|---|---|---|---|"]
    semantic = [(point["context_tokens"], point["evidence_recall"]) for point in report["curves"].get(SEMANTIC, [])]
    for curve, points in report["curves"].items():
        for point in points:
            there, inside = interpolate_at(semantic, point["context_tokens"]) if semantic else (None, True)
            margin = "n/a" if there is None else f"{point['evidence_recall'] - there:+.3f}{'' if inside else '*'}"
            lines.append(
                f"| {curve} | {point['setting']} | {point['context_tokens']:.1f} | {point['evidence_recall']:.3f} "
                f"| {margin} |"
            )
    if report.get("timings"):
        lines += ["", "LLM evaluation time (wall):", ""]
        lines += [f"- {row['step']} ({row['generator']}): {row['s']:.0f} s" for row in report["timings"]]
    if report.get("training"):
        lines += ["", "Training runs:", "", "| seed | reused | train s | steps | s/step | reward first | reward last |"]
        lines.append("|---|---|---|---|---|---|---|")
        for run in report["training"]:
            lines.append(
                f"| {run['seed']} | {run['reused']} | {_fmt(run['train_s'], 0)} | {run['final_step']} | "
                f"{_fmt(run['step_s_mean'], 1)} | {_fmt(run['reward_first'], 3)} | {_fmt(run['reward_last'], 3)} |"
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
    return {"start": start, "metrics": metrics}


def summarize_policy(per_seed: Sequence[tuple[int | None, dict[str, float]]]) -> dict[str, Any]:
    """A policy's entry: per-seed metrics, mean and (across seeds) std; `seeds` empty for seed-independent ones."""
    seeds = [seed for seed, _ in per_seed if seed is not None]
    aggregated = aggregate_seeds([metrics for _, metrics in per_seed])
    return {
        "seeds": seeds,
        "per_seed": [{"seed": seed, **metrics} for seed, metrics in per_seed],
        "mean": {name: value["mean"] for name, value in aggregated.items()},
        "std": {name: value["std"] for name, value in aggregated.items()} if seeds else None,
    }


def command_line(argv: Sequence[str]) -> str:
    """The command that made the tables, as a shell would take it."""
    return shlex.join(["python", *argv])


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
    plot_recall_vs_tokens(curves, points, seed_points, out / "recall_vs_tokens.png", title)
    return markdown
