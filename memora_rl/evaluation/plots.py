"""PNG plots of evaluation runs: per-category bars, recall against context tokens, latency CDF."""

from __future__ import annotations

from collections.abc import Sequence
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


def _save(figure: Figure, axes: Axes, path: Path) -> Path:
    """Add the legend, write the PNG and free the figure (pyplot keeps every open figure alive)."""
    axes.legend()
    figure.tight_layout()
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
    return _save(figure, axes, path)


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
    return _save(figure, axes, path)


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
    return _save(figure, axes, path)
