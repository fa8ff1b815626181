"""Baselines read by dominance: the point with at least the policy's tokens, paired intervals by task id, bracketing."""

from __future__ import annotations

from typing import Any

import pytest

import memora_rl.experiments.learning.experiment as experiment
from memora_rl.experiments.learning.margins import (
    bracket_settings,
    dominating_point,
    is_bracketed,
    margin_over,
    paired_interval,
)


def _point(setting: str, tokens: float, recall: float, **tasks: float) -> dict[str, Any]:
    return {"setting": setting, "context_tokens": tokens, "evidence_recall": recall,
            **{f"task/{task_id}": value for task_id, value in tasks.items()}}  # fmt: skip


def test_a_gap_in_a_concave_curve_flatters_interpolation_but_not_dominance():
    # Semantic rises fast then flattens: a straight line from k=1 to k=20 runs far under the curve between them.
    curve = [_point("k=1", 100.0, 0.30), _point("k=20", 800.0, 0.80)]
    policy = {"context_tokens": 300.0, "evidence_recall": 0.55}
    interpolated = 0.30 + (0.80 - 0.30) * (300.0 - 100.0) / (800.0 - 100.0)
    assert policy["evidence_recall"] - interpolated > 0.1  # the straight line would call this a clear win
    entry = margin_over(policy, curve)
    assert entry["setting"] == "k=20" and entry["margin"] == pytest.approx(-0.25)  # at no more tokens: a loss
    assert entry["bracketed"] is False  # and the report says the grid is too coarse there
    curve.append(_point("k=6", 310.0, 0.50))  # a point measured near the policy is the one read
    entry = margin_over(policy, curve)
    assert (entry["setting"], entry["point_tokens"]) == ("k=6", 310.0)
    assert entry["margin"] == pytest.approx(0.05) and entry["bracketed"] is False  # nothing within 15% below
    curve.append(_point("k=5", 270.0, 0.47))
    assert margin_over(policy, curve)["bracketed"] is True


def test_no_point_with_enough_tokens_gives_no_margin():
    entry = margin_over({"context_tokens": 900.0, "evidence_recall": 0.9}, [_point("k=20", 800.0, 0.8)])
    assert entry["setting"] is None and entry["margin"] is None
    assert dominating_point([_point("k=1", 10.0, 0.1)], 10.0)["setting"] == "k=1"  # equal tokens dominate


def test_the_bootstrap_pairs_tasks_by_id_not_by_position():
    policy = {"a": 1.0, "b": 0.0, "c": 1.0}
    baseline = {"b": 0.0, "a": 1.0, "c": 1.0}  # the same figures listed in another order
    assert paired_interval(policy, baseline) == (0.0, 0.0, 0.0)
    by_position = paired_interval(dict(zip("abc", policy.values(), strict=True)),
                                  dict(zip("abc", baseline.values(), strict=True)))  # fmt: skip
    assert by_position[2] - by_position[1] > 0.5  # pairing by position would mix up the tasks
    with pytest.raises(ValueError, match="No paired figure for 1 task"):
        paired_interval({"a": 1.0, "z": 0.0}, baseline)


def test_margin_over_carries_a_paired_interval_over_tasks():
    curve = [_point("b=2", 120.0, 0.5, a=0.0, b=1.0, c=0.5, d=0.5)]
    policy = {"context_tokens": 110.0, "evidence_recall": 0.75, "task/a": 1.0, "task/b": 1.0, "task/c": 0.5,
              "task/d": 0.5}  # fmt: skip
    entry = margin_over(policy, curve)
    assert entry["margin"] == pytest.approx(0.25)
    low, high = entry["interval"]
    assert 0.0 <= low <= 0.25 <= high <= 1.0


def test_bracket_settings_bisect_toward_the_policys_tokens():
    assert bracket_settings([(1, 50.0), (10, 400.0)], 200.0, integer=True) == [5.0]
    assert bracket_settings([(4, 190.0), (5, 210.0)], 200.0, integer=True) == []  # already bracketed
    assert bracket_settings([(4, 150.0), (5, 260.0)], 200.0, integer=True) == []  # neighbours: nothing between
    assert bracket_settings([(2.0, 100.0), (6.0, 300.0)], 200.0, integer=False) == [4.0]
    assert bracket_settings([(2.0, 100.0)], 200.0, integer=False) == []  # beyond the curve: the caller extends it
    assert is_bracketed([{"context_tokens": 180.0}, {"context_tokens": 220.0}], 200.0)


def test_bracket_curves_measures_until_points_lie_within_15_percent(monkeypatch: pytest.MonkeyPatch):
    measured: list[tuple[str, float]] = []

    def measure(ctx: object, curve: str, value: float) -> dict[str, Any]:
        measured.append((curve, value))
        return {"setting": f"{curve}={value:g}", "value": value, "context_tokens": 40.0 * value,
                "evidence_recall": 0.1}  # fmt: skip

    monkeypatch.setattr(experiment, "measure_point", measure)
    curves = {"semantic": [measure(None, "semantic", k) for k in (1.0, 2.0, 20.0)],
              "heuristic": [measure(None, "heuristic", b) for b in (1.0, 3.0)]}  # fmt: skip
    measured.clear()
    experiment.bracket_curves(None, curves, [330.0], rounds=6)  # type: ignore[arg-type]
    assert is_bracketed(curves["semantic"], 330.0)  # k=8 (320) and k=9 (360)
    assert is_bracketed(curves["heuristic"], 330.0)  # extended past b=3 (120) first, then bisected
    assert ("heuristic", 6.0) in measured
    assert all(float(value).is_integer() for curve, value in measured if curve == "semantic")
