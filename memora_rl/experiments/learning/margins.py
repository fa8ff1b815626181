"""A policy against a baseline curve, read by dominance: the cheapest measured point with at least its tokens.

A baseline curve is a list of measured points, one per setting (semantic at several `initial_top_k`,
heuristic at several budgets), each a dict with `context_tokens`, `evidence_recall`, per-category
figures (`recall/<c>`, `tokens/<c>`) and per-task recall (`task/<id>`). A policy's margin over a curve
is its recall minus the recall of the measured point with the fewest tokens among those using at
least as many tokens as the policy: no straight line across a gap flatters or hurts it, and a policy
that beats that point beats the baseline at no more context. The margin's 95% interval is a paired
bootstrap over tasks (`memora_rl.evaluation.compare.paired_bootstrap`), pairs matched by task id.

A point *brackets* the policy when it lies within `tolerance` (15%) of the policy's tokens; where
no point does on one side, `bracket_settings` names the settings to measure next.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memora_rl.evaluation.compare import paired_bootstrap

TASK_PREFIX = "task/"
"""Metric key prefix of one task's evidence recall (a policy's is its mean over seeds)."""
CATEGORY_PREFIX = "recall/"
"""Metric key prefix of a policy's recall on one task category."""
CATEGORY_TOKENS_PREFIX = "tokens/"
"""Metric key prefix of a policy's mean context tokens on one task category."""
BRACKET_TOLERANCE = 0.15
"""A measured point within this share of the policy's tokens (on either side) brackets it."""


def task_recalls(metrics: Mapping[str, Any]) -> dict[str, float]:
    """Per-task evidence recall held in a policy's or a point's metrics (`task/<id>` keys), by task id.

    >>> task_recalls({"task/q1": 0.5, "evidence_recall": 0.5})
    {'q1': 0.5}
    """
    return {key.removeprefix(TASK_PREFIX): float(v) for key, v in metrics.items() if key.startswith(TASK_PREFIX)}


def dominating_point(
    points: Sequence[Mapping[str, Any]], tokens: float, tokens_key: str = "context_tokens"
) -> Mapping[str, Any] | None:
    """The point with the fewest `tokens_key` among those with at least `tokens` (None when all use fewer).

    >>> dominating_point([{"context_tokens": 90.0}, {"context_tokens": 120.0}, {"context_tokens": 300.0}], 100.0)
    {'context_tokens': 120.0}
    >>> dominating_point([{"context_tokens": 90.0}], 100.0) is None
    True
    """
    above = [point for point in points if tokens_key in point and float(point[tokens_key]) >= tokens]
    return min(above, key=lambda point: float(point[tokens_key]), default=None)


def nearest_below(
    points: Sequence[Mapping[str, Any]], tokens: float, tokens_key: str = "context_tokens"
) -> Mapping[str, Any] | None:
    """The point with the most `tokens_key` among those with at most `tokens` (None when all use more)."""
    below = [point for point in points if tokens_key in point and float(point[tokens_key]) <= tokens]
    return max(below, key=lambda point: float(point[tokens_key]), default=None)


def is_bracketed(points: Sequence[Mapping[str, Any]], tokens: float, tolerance: float = BRACKET_TOLERANCE) -> bool:
    """True when a point lies within `tolerance` of `tokens` at or below it and another at or above it.

    >>> is_bracketed([{"context_tokens": 95.0}, {"context_tokens": 110.0}], 100.0)
    True
    >>> is_bracketed([{"context_tokens": 95.0}, {"context_tokens": 130.0}], 100.0)
    False
    """
    below, above = nearest_below(points, tokens), dominating_point(points, tokens)
    return (
        below is not None
        and above is not None
        and float(below["context_tokens"]) >= tokens * (1 - tolerance)
        and float(above["context_tokens"]) <= tokens * (1 + tolerance)
    )


def paired_interval(
    policy: Mapping[str, float], baseline: Mapping[str, float], task_ids: Sequence[str] | None = None
) -> tuple[float, float, float]:
    """Mean per-task margin policy - baseline over `task_ids` (default: the policy's), and its paired 95% interval.

    Pairs are matched by task id, never by position, so the two maps may list their tasks in any order.

    >>> paired_interval({"a": 1.0, "b": 0.5}, {"b": 0.5, "a": 0.0})
    (0.5, 0.0, 1.0)

    Raises:
        ValueError: the baseline has no figure for some of the tasks (the message names them).
    """
    ids = sorted(policy) if task_ids is None else list(task_ids)
    missing = [task_id for task_id in ids if task_id not in baseline or task_id not in policy]
    if missing:
        raise ValueError(
            f"No paired figure for {len(missing)} task(s) (e.g. {missing[:3]}): policy and baseline must be "
            "played on the same tasks."
        )
    return paired_bootstrap([baseline[i] for i in ids], [policy[i] for i in ids])


def margin_over(
    metrics: Mapping[str, Any],
    points: Sequence[Mapping[str, Any]],
    category: str | None = None,
    task_ids: Sequence[str] | None = None,
) -> dict[str, Any]:
    """A policy's recall margin over a curve's dominating point, overall or on one `category` (its `task_ids`).

    Returns the point's setting, tokens and recall, the margin, its paired interval (None without
    per-task figures) and whether the curve brackets the policy; `setting` None when no point uses
    at least the policy's tokens (measure a larger k or budget).
    """
    recall_key = "evidence_recall" if category is None else f"{CATEGORY_PREFIX}{category}"
    tokens_key = "context_tokens" if category is None else f"{CATEGORY_TOKENS_PREFIX}{category}"
    tokens, recall = float(metrics[tokens_key]), float(metrics[recall_key])
    row: dict[str, Any] = {"tokens": tokens, "recall": recall, "setting": None, "margin": None, "interval": None}
    if category is None:
        row["bracketed"] = is_bracketed(points, tokens)
    point = dominating_point(points, tokens, tokens_key)
    if point is None:
        return row
    row.update(setting=point.get("setting"), point_tokens=float(point[tokens_key]))
    row.update(point_recall=float(point[recall_key]), margin=recall - float(point[recall_key]))
    policy_tasks, point_tasks = task_recalls(metrics), task_recalls(point)
    ids = sorted(policy_tasks) if task_ids is None else [i for i in task_ids if i in policy_tasks]
    if ids and all(i in point_tasks for i in ids):
        _, low, high = paired_interval(policy_tasks, point_tasks, ids)
        row["interval"] = [low, high]
    return row


def dominance_rows(
    policies: Mapping[str, Mapping[str, Any]],
    curves: Mapping[str, Sequence[Mapping[str, Any]]],
    categories: Mapping[str, str] | None = None,
) -> dict[str, dict[str, Any]]:
    """For each policy (its mean metrics) and curve: the overall margin and, per task category, that category's.

    `categories` maps task id -> category; a category's interval pairs that category's tasks only.
    """
    by_category: dict[str, list[str]] = {}
    for task_id, category in (categories or {}).items():
        by_category.setdefault(category, []).append(task_id)
    rows: dict[str, dict[str, Any]] = {}
    for name, metrics in policies.items():
        row: dict[str, Any] = {
            "context_tokens": metrics["context_tokens"],
            "evidence_recall": metrics["evidence_recall"],
        }
        for curve, points in curves.items():
            entry = margin_over(metrics, points)
            entry["categories"] = {
                category: margin_over(metrics, points, category, ids)
                for category, ids in sorted(by_category.items())
                if f"{CATEGORY_PREFIX}{category}" in metrics
                and all(f"{CATEGORY_TOKENS_PREFIX}{category}" in point for point in points)
            }
            row[curve] = entry
        rows[name] = row
    return rows


def bracket_settings(
    measured: Sequence[tuple[float, float]], tokens: float, integer: bool, tolerance: float = BRACKET_TOLERANCE
) -> list[float]:
    """Settings to measure next so that points bracket `tokens`: the midpoint of the two settings around it.

    `measured` holds (setting, mean tokens) pairs of a curve whose tokens grow with its setting (k, budget).
    Returns [] when the curve already brackets `tokens`, or when no new setting lies between the
    neighbours (integer settings next to each other, or `tokens` beyond the curve's ends: widen the grid).

    >>> bracket_settings([(1, 50.0), (10, 400.0)], 200.0, integer=True)
    [5.0]
    >>> bracket_settings([(4, 190.0), (5, 210.0)], 200.0, integer=True)
    []
    """
    points = [{"setting": s, "context_tokens": t} for s, t in measured]
    if is_bracketed(points, tokens, tolerance):
        return []
    below, above = nearest_below(points, tokens), dominating_point(points, tokens)
    if below is None or above is None:
        return []
    low, high = float(below["setting"]), float(above["setting"])
    middle = (low + high) / 2
    if integer:
        middle = float(int(middle))
        return [] if middle in (low, high) else [middle]
    return [] if high - low < 1e-3 else [round(middle, 3)]
