"""`grpo.tasks=missed`: the tasks a starting policy leaves below full recall, played through the real env."""

from __future__ import annotations

from memora_rl.judge.graders import turn_recall
from memora_rl.policy.baselines import HeuristicPolicy, SemanticPolicy
from memora_rl.training.task_focus import missed_tasks


def test_missed_tasks_are_the_ones_the_policy_leaves_below_full_recall(make_hand_env, hand_tasks) -> None:
    env = make_hand_env()
    first_search = {}
    for task in hand_tasks:
        env.reset(options={"task": task})
        first_search[task.id] = turn_recall(task.evidence, env.snapshot().turn_ids)
    kept, recall = missed_tasks(make_hand_env, hand_tasks, SemanticPolicy(), max_turns=8, concurrency=2)
    assert recall == first_search  # the semantic policy stops at once: its recall is the first search's
    assert [task.id for task in kept] == [task.id for task in hand_tasks if first_search[task.id] < 1.0]
    assert 0 < len(kept) < len(hand_tasks)
    walked, walked_recall = missed_tasks(make_hand_env, hand_tasks, HeuristicPolicy(), max_turns=8, concurrency=2)
    assert all(walked_recall[task.id] >= first_search[task.id] for task in hand_tasks)
    assert any(walked_recall[task.id] > first_search[task.id] for task in hand_tasks)  # its walk finds more
    assert [task.id for task in walked] == [task.id for task in hand_tasks if walked_recall[task.id] < 1.0]
