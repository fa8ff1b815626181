"""`sample_tasks` (what `eval --limit N` evaluates): seeded, stratified by category and conversation."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from memora_rl.data.records import Task
from memora_rl.data.sample import proportional_shares, sample_tasks

CATEGORIES = ("single-hop", "multi-hop", "temporal", "open-domain")


def file_ordered_tasks() -> list[Task]:
    """Tasks grouped by conversation as a file lists them; the first conversation has no single-hop question."""
    tasks = []
    for conversation in range(4):
        for index in range(30):
            category = CATEGORIES[index % 4] if conversation else CATEGORIES[1 + index % 3]
            tasks.append(Task(id=f"c{conversation}/q{index:02d}", conversation_id=f"c{conversation}",
                              question=f"question {index}?", answer="a", category=category))  # fmt: skip
    return tasks


def test_a_limited_sample_spans_every_category_and_conversation():
    tasks = file_ordered_tasks()
    chosen = sample_tasks(tasks, 20, seed=0)
    assert len(chosen) == 20 and len({task.id for task in chosen}) == 20
    assert {task.conversation_id for task in chosen} == {"c0", "c1", "c2", "c3"}  # the first 20 hold only c0
    assert {task.category for task in chosen} == set(CATEGORIES)  # the first 20 hold no single-hop
    counts = Counter(task.category for task in chosen)
    expected = {category: 20 * sum(t.category == category for t in tasks) / len(tasks) for category in CATEGORIES}
    assert all(abs(counts[category] - expected[category]) < 1 for category in CATEGORIES)  # proportional
    assert chosen == [task for task in tasks if task in chosen]  # input order kept


def test_the_sample_depends_on_the_seed_not_on_load_order():
    tasks = file_ordered_tasks()
    shuffled = random.Random(5).sample(tasks, len(tasks))
    ids = {task.id for task in sample_tasks(tasks, 12, seed=3)}
    assert ids == {task.id for task in sample_tasks(shuffled, 12, seed=3)}
    assert ids != {task.id for task in sample_tasks(tasks, 12, seed=4)}


@pytest.mark.parametrize("limit", [None, 120, 500])
def test_no_limit_or_a_limit_past_the_split_keeps_every_task(limit):
    tasks = file_ordered_tasks()
    assert sample_tasks(tasks, limit) == tasks


def test_shares_cover_small_groups_first_then_follow_sizes():
    rng = random.Random(0)
    assert proportional_shares({"a": 90, "b": 9, "c": 1}, 10, rng) == {"a": 8, "b": 1, "c": 1}
    assert sum(proportional_shares({"a": 2, "b": 2}, 3, rng).values()) == 3
    assert proportional_shares({"a": 1, "b": 1}, 9, rng) == {"a": 1, "b": 1}  # never more than a group holds


@pytest.mark.locomo
def test_locomo_test_limit_40_is_not_one_conversation(locomo_path: Path):
    from memora_rl.data.locomo import load_locomo
    from memora_rl.env.registry import get_env_spec, split_tasks

    tasks = split_tasks(get_env_spec("locomo"), load_locomo(locomo_path), "test")
    chosen = sample_tasks(tasks, 40, seed=0)
    assert len({task.conversation_id for task in chosen}) == len({task.conversation_id for task in tasks}) > 1
    assert {task.category for task in chosen} == {task.category for task in tasks}  # single-hop included


def test_eval_limit_uses_the_stratified_sample_with_the_eval_seed():
    from memora_rl.evaluation.config import EvalConfig
    from memora_rl.evaluation.offline import _limit

    tasks = file_ordered_tasks()
    chosen = _limit(tasks, EvalConfig(env="synthetic", policy="semantic", limit=20, seed=2))
    assert chosen == sample_tasks(tasks, 20, seed=2) and chosen != tasks[:20]  # old behaviour: the first 20
