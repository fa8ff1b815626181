"""How closely an LLM policy walks like the rule its warm start imitates: per task, its expands against the rule's.

The policy table's means hide the shape of an imitation's errors: a policy can match its teacher's mean expands
while stopping after one expand on most tasks and never stopping on the rest. Pairing each task's expand count
with the teacher's shows which way it departs and what each departure cost in recall.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

from memora_rl.experiments.learning.margins import task_recalls
from memora_rl.experiments.records import ResultTable

EXPANDS_PREFIX = "expands/"
"""Metric key prefix of one task's count of expand actions (a policy's per-seed metrics hold them)."""


def task_expands(metrics: Mapping[str, Any]) -> dict[str, float]:
    """Per-task expand counts held in a policy's metrics (`expands/<id>` keys), by task id.

    >>> task_expands({"expands/q1": 2.0, "task/q1": 0.5})
    {'q1': 2.0}
    """
    return {key.removeprefix(EXPANDS_PREFIX): float(v) for key, v in metrics.items() if key.startswith(EXPANDS_PREFIX)}


def compare_walks(policy: Mapping[str, Any], teacher: Mapping[str, Any]) -> dict[str, Any]:
    """Tasks where `policy` made as many, more or fewer expands than `teacher`, and its recall minus the teacher's.

    Both are one seed's metrics holding `expands/<id>` and `task/<id>` keys; tasks are those both hold.

    >>> p = {"expands/a": 1.0, "task/a": 0.5, "expands/b": 3.0, "task/b": 1.0}
    >>> t = {"expands/a": 2.0, "task/a": 1.0, "expands/b": 3.0, "task/b": 1.0}
    >>> out = compare_walks(p, t)
    >>> out["tasks"], out["same"]["tasks"], out["fewer"]["tasks"], out["fewer"]["recall_delta"]
    (2, 1, 1, -0.5)
    """
    mine, theirs = task_expands(policy), task_expands(teacher)
    my_recall, their_recall = task_recalls(policy), task_recalls(teacher)
    shared = [t for t in mine if t in theirs and t in my_recall and t in their_recall]
    if not shared:
        raise ValueError("No task holds both walks' expand counts and recalls: were the metrics built with task ids?")
    groups: dict[str, list[str]] = {"same": [], "more": [], "fewer": []}
    for task in shared:
        gap = mine[task] - theirs[task]
        groups["same" if gap == 0 else "more" if gap > 0 else "fewer"].append(task)
    out: dict[str, Any] = {"tasks": len(shared)}
    for name, tasks in groups.items():
        delta = statistics.fmean(my_recall[t] - their_recall[t] for t in tasks) if tasks else None
        out[name] = {"tasks": len(tasks), "recall_delta": delta}
    return out


def imitation_rows(report: Mapping[str, Any], teacher_name: str) -> list[dict[str, Any]]:
    """Each trained policy's `compare_walks` against `teacher_name`, one row per seed (none without the teacher)."""
    policies = report["policies"]
    if teacher_name not in policies:
        return []
    teacher = policies[teacher_name]["per_seed"][0]
    if not task_expands(teacher):
        return []
    rows = []
    for name, policy in policies.items():
        if name == teacher_name or not policy["seeds"]:
            continue
        for metrics in policy["per_seed"]:
            rows.append({"policy": name, "seed": metrics["seed"], **compare_walks(metrics, teacher)})
    return rows


def group_cell(group: Mapping[str, Any], tasks: int) -> str:
    """`n of N (Δ recall ±x.xxx)`; no delta for an empty group.

    >>> group_cell({"tasks": 3, "recall_delta": -0.1}, 10)
    '3 of 10 (-0.100)'
    """
    delta = group["recall_delta"]
    return f"{group['tasks']} of {tasks}" + (f" ({delta:+.3f})" if delta is not None else "")


IMITATION_COLUMNS = ["policy", "seed", "as many expands", "more expands (Δ recall)", "fewer expands (Δ recall)"]


def imitation_table(report: Mapping[str, Any], teacher_name: str) -> ResultTable | None:
    """Per task, each trained policy's expands against `teacher_name`'s, one row per seed (None without it)."""
    rows = [
        [row["policy"], str(row["seed"]), *[group_cell(row[g], row["tasks"]) for g in ("same", "more", "fewer")]]
        for row in imitation_rows(report, teacher_name)
    ]
    title = f"Walk lengths against the {teacher_name}, per task (Δ recall: the policy's minus the rule's there)"
    return ResultTable(title=title, columns=IMITATION_COLUMNS, rows=rows) if rows else None
