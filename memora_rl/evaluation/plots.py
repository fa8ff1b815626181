"""PNG plots of evaluation runs: per-category bars, recall against context tokens, latency CDF, policies on curves."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from memora_rl.evaluation.metrics import ordered_categories
from memora_rl.evaluation.records import QuestionRecord
from memora_rl.judge.answer import is_abstention


def save_figure(figure: Figure, axes: Axes, path: Path, **legend: object) -> Path:
    """Add the legend (when anything is labelled; `legend`: its options), write the PNG, free the figure.

    pyplot keeps every figure alive until it is closed, so each plot of a long run ends here.
    """
    if axes.get_legend_handles_labels()[0]:  # e.g. a latency plot of runs that timed nothing has no line
        axes.legend(**legend)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def plot_category_bars(runs: dict[str, dict[str, dict]], metric: str, path: Path) -> Path:
    """Grouped bars of `metric` per category (in table order), one bar colour per run.

    A category no run has a value for (e.g. abstention's evidence recall) gets no bar group.
    """
    named = ordered_categories({c for metrics in runs.values() for c in metrics})
    categories = [c for c in named if any(metrics.get(c, {}).get(metric) is not None for metrics in runs.values())]
    width = 0.8 / max(len(runs), 1)
    figure, axes = plt.subplots(figsize=(max(6, 1.4 * len(categories)), 4))
    positions = np.arange(len(categories))
    for index, (name, metrics) in enumerate(runs.items()):
        values = [metrics.get(c, {}).get(metric) or 0.0 for c in categories]
        axes.bar(positions + index * width, values, width, label=name)
    axes.set_xticks(positions + width * (len(runs) - 1) / 2, categories, rotation=20)
    axes.set_ylabel(metric.replace("_", " "))
    axes.set_title(f"{metric.replace('_', ' ')} per category")
    return save_figure(figure, axes, path)


def plot_recall_vs_tokens(runs: dict[str, Sequence[QuestionRecord]], path: Path) -> Path:
    """Mean evidence recall against mean context tokens, one point per run (with per-question cloud).

    Abstention questions are left out: their evidence recall means nothing (see `memora_rl.evaluation.metrics`).
    """
    figure, axes = plt.subplots(figsize=(6, 4))
    for name, all_records in runs.items():
        records = [r for r in all_records if not is_abstention(r.category)]
        if not records:
            continue
        tokens = np.array([r.context_tokens for r in records], dtype=float)
        recall = np.array([r.evidence_recall for r in records], dtype=float)
        points = axes.scatter(tokens, recall, s=8, alpha=0.25)
        axes.scatter(
            [tokens.mean()],
            [recall.mean()],
            s=90,
            marker="D",
            color=points.get_facecolor()[0][:3],
            edgecolors="black",
            label=name,
        )
    axes.set_xlabel("context tokens")
    axes.set_ylabel("evidence recall")
    axes.set_title("evidence recall vs context tokens (diamond = mean)")
    return save_figure(figure, axes, path)


def plot_latency_cdf(runs: dict[str, Sequence[QuestionRecord]], path: Path) -> Path:
    """Empirical CDF of end-to-end latency per question played alone (`in_flight == 1`), one line per run."""
    figure, axes = plt.subplots(figsize=(6, 4))
    for name, records in runs.items():
        latency = np.sort([r.total_latency_s for r in records if r.in_flight == 1])
        if latency.size:
            axes.step(latency * 1000.0, np.arange(1, latency.size + 1) / latency.size, where="post", label=name)
    axes.set_xscale("symlog")
    axes.set_xlabel("end-to-end latency per question, played alone (ms)")
    axes.set_ylabel("share of questions")
    axes.set_title("latency CDF")
    return save_figure(figure, axes, path)


def plot_policies_on_curves(
    curves: Mapping[str, Sequence[tuple[float, float, str]]],
    points: Mapping[str, tuple[float, float, float | None, float | None]],
    seed_points: Mapping[str, Sequence[tuple[float, float]]],
    path: Path,
    title: str,
) -> Path:
    """Baseline curves (lines, each point labelled with its setting) and one marker per policy.

    Args:
        curves: name -> [(tokens, recall, label)] (e.g. "k=3", "b=6").
        points: policy -> (mean tokens, mean recall, tokens std or None, recall std or None).
        seed_points: policy -> per-seed (tokens, recall), drawn small behind the mean.
        path: The PNG to write.
        title: Figure title.
    """
    figure, axes = plt.subplots(figsize=(7.5, 5))
    for name, curve in curves.items():
        ordered = sorted(curve)
        line = axes.plot([p[0] for p in ordered], [p[1] for p in ordered], marker="o", ms=4, lw=1.2, label=name)[0]
        for x, y, label in ordered:
            axes.annotate(label, (x, y), textcoords="offset points", xytext=(3, -9), fontsize=7, color=line.get_color())
    markers = iter("DsP^v*Xh<>")
    for name, (x, y, x_std, y_std) in points.items():
        marker = next(markers, "D")
        if x_std is not None or y_std is not None:
            drawn = axes.errorbar(
                [x], [y], xerr=[x_std or 0.0], yerr=[y_std or 0.0], fmt=marker, ms=8, mec="black", capsize=3, label=name
            )
            colour = drawn[0].get_color()
        else:
            colour = axes.plot([x], [y], marker, ms=8, mec="black", label=name)[0].get_color()
        seeds = seed_points.get(name, ())
        if len(seeds) > 1:
            axes.scatter([p[0] for p in seeds], [p[1] for p in seeds], s=14, alpha=0.45, color=colour)
    axes.set_xlabel("mean context tokens")
    axes.set_ylabel("mean evidence recall")
    axes.set_title(title, fontsize=10)
    axes.grid(alpha=0.3)
    return save_figure(figure, axes, path, fontsize=8, loc="lower right")
