"""Recall against context tokens for `benchmarks/learning.py`: reading a baseline curve at a token count, and the PNG.

A baseline curve is a list of (mean context tokens, mean evidence recall) points, one per
setting (semantic at several `initial_top_k`, heuristic at several budgets). A policy is
compared with a curve at the policy's own mean context tokens, by linear interpolation
between the two nearest points; outside the curve's range the end point is used (and
flagged), never an extrapolation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

CurvePoint = tuple[float, float]
"""(mean context tokens, mean evidence recall)."""


def interpolate_at(curve: Sequence[CurvePoint], tokens: float) -> tuple[float, bool]:
    """The curve's recall at `tokens` by linear interpolation, and whether `tokens` lies inside the curve's range.

    Points may come in any order; points at the same token count are averaged. Outside the range
    the nearest end's recall is returned with `False`.

    >>> interpolate_at([(100.0, 0.2), (300.0, 0.6)], 200.0)
    (0.4, True)
    >>> interpolate_at([(300.0, 0.6), (100.0, 0.2)], 50.0)
    (0.2, False)

    Raises:
        ValueError: the curve has no point, or `tokens` is not finite.
    """
    if not curve:
        raise ValueError("Cannot read an empty curve.")
    if tokens != tokens or tokens in (float("inf"), float("-inf")):
        raise ValueError(f"Cannot read a curve at {tokens!r} tokens.")
    merged: dict[float, list[float]] = {}
    for x, y in curve:
        merged.setdefault(float(x), []).append(float(y))
    xs = sorted(merged)
    ys = [sum(merged[x]) / len(merged[x]) for x in xs]
    if tokens <= xs[0]:
        return ys[0], tokens == xs[0]
    if tokens >= xs[-1]:
        return ys[-1], tokens == xs[-1]
    for (x0, y0), (x1, y1) in zip(zip(xs, ys, strict=True), zip(xs[1:], ys[1:], strict=True), strict=False):
        if x0 <= tokens <= x1:
            return y0 + (y1 - y0) * (tokens - x0) / (x1 - x0), True
    raise AssertionError("unreachable: tokens lies between the curve's ends")


def plot_recall_vs_tokens(
    curves: Mapping[str, Sequence[tuple[float, float, str]]],
    points: Mapping[str, tuple[float, float, float | None, float | None]],
    seed_points: Mapping[str, Sequence[CurvePoint]],
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
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
    axes.legend(fontsize=8, loc="lower right")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
