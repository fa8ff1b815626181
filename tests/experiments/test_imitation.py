"""The imitation table: each task's expands by a trained policy against the ranker teacher's, and what it cost."""

from __future__ import annotations

import pytest

from memora_rl.experiments.learning.imitation import compare_walks, imitation_rows, task_expands
from memora_rl.experiments.learning.record import learning_record
from memora_rl.experiments.learning.report import (
    ACTION_KINDS,
    SEMANTIC,
    TEACHER,
    WARM,
    markdown_report,
    policy_metrics,
    summarize_policy,
)

TASKS = ["t0", "t1", "t2", "t3"]


def episode(recall: float, expands: int) -> dict[str, float]:
    """Judge components of one walk: `expands` expands then a stop, 40 tokens an expand."""
    row = {
        "evidence_recall": recall,
        "initial_recall": 0.2,
        "recall_gain": recall - 0.2,
        "context_tokens": 100.0 + 40.0 * expands,
        "steps": expands + 1.0,
        "valid_action_rate": 1.0,
        "total": recall,
    }
    row.update({f"actions_{kind}": 0.0 for kind in ACTION_KINDS})
    row.update(actions_expand=float(expands), actions_stop=1.0)
    return row


def metrics(walks: list[tuple[float, int]]) -> dict[str, float]:
    return policy_metrics([episode(r, n) for r, n in walks], ["single-hop"] * len(walks), TASKS)


TEACHER_WALKS = [(1.0, 2), (0.5, 0), (1.0, 1), (0.5, 3)]
# t0: one expand fewer and half the recall; t1: two expands more, same recall; t2 as the teacher; t3 one fewer
POLICY_WALKS = [(0.5, 1), (0.5, 2), (1.0, 1), (0.0, 2)]


def report() -> dict:
    warm_seeds = [(0, metrics(POLICY_WALKS)), (1, metrics(TEACHER_WALKS))]
    policies = {
        WARM: summarize_policy(warm_seeds),
        SEMANTIC: summarize_policy([(None, metrics(POLICY_WALKS))]),
        TEACHER: summarize_policy([(None, metrics(TEACHER_WALKS))]),
    }
    return {"policies": policies}


def test_policy_metrics_keep_each_tasks_expand_count() -> None:
    assert task_expands(metrics(POLICY_WALKS)) == {"t0": 1.0, "t1": 2.0, "t2": 1.0, "t3": 2.0}


def test_each_task_is_grouped_by_its_expands_against_the_teachers_with_the_recall_it_cost() -> None:
    out = compare_walks(metrics(POLICY_WALKS), metrics(TEACHER_WALKS))
    assert out["tasks"] == 4
    assert out["same"] == {"tasks": 1, "recall_delta": 0.0}
    assert out["more"] == {"tasks": 1, "recall_delta": 0.0}
    assert out["fewer"]["tasks"] == 2 and out["fewer"]["recall_delta"] == pytest.approx(-0.5)


def test_a_walk_without_task_ids_cannot_be_compared() -> None:
    bare = policy_metrics([episode(1.0, 1)])
    with pytest.raises(ValueError, match="task ids"):
        compare_walks(bare, metrics(TEACHER_WALKS))


def test_each_seed_of_a_trained_policy_is_a_row_and_the_baselines_are_not() -> None:
    rows = imitation_rows(report(), TEACHER)
    assert [(row["policy"], row["seed"]) for row in rows] == [(WARM, 0), (WARM, 1)]
    assert rows[1]["same"] == {"tasks": 4, "recall_delta": 0.0}  # seed 1 walks exactly as the teacher
    without = {"policies": {k: v for k, v in report()["policies"].items() if k != TEACHER}}
    assert imitation_rows(without, TEACHER) == []


def test_the_spread_over_seeds_leaves_out_per_task_figures() -> None:
    std = report()["policies"][WARM]["std"]
    assert "evidence_recall" in std and not any(key.startswith(("task/", "expands/")) for key in std)


def test_the_record_and_the_report_show_the_table() -> None:
    base = {
        "command": "memora-rl experiment learning",
        "env": "locomo",
        "split": "validation",
        "tasks": 4,
        "initial_recall": 0.2,
        "max_turns": 6,
        "llm_turns": 6,
        "max_new_tokens": 40,
        "seeds": [0, 1],
        "curves": {},
        "margins": {},
        "config": "c.yaml",
    }
    full = {**base, **report()}
    table = learning_record(full, "imitation").tables[-1]  # no curves measured: no curve table after it
    assert table.title.startswith("Walk lengths against the ranker teacher")
    assert table.rows[0] == ["warm start", "0", "1 of 4 (+0.000)", "1 of 4 (+0.000)", "2 of 4 (-0.500)"]
    assert table.rows[1][2:] == ["4 of 4 (+0.000)", "0 of 4", "0 of 4"]
    assert "| warm start | 0 | 1 of 4 (+0.000) | 1 of 4 (+0.000) | 2 of 4 (-0.500) |" in markdown_report(full)
