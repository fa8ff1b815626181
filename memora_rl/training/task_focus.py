"""Which training tasks GRPO samples: all of them, or the ones the starting policy misses.

A task whose greedy walk already reaches full recall gives GRPO groups in which a sampled walk can
only tie or lose on recall, so they teach cost and format. `missed_tasks` plays the starting policy
greedily once (through the rollout server) and keeps the tasks it leaves below full recall, where a
sampled walk that finds more points away from the greedy choice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from memora_rl.data.records import Task
from memora_rl.policy.base import Policy
from memora_rl.policy.runner import run_episodes_sync

logger = logging.getLogger(__name__)


def recall_per_task(
    make_env: Callable[[], Any],
    tasks: Sequence[Task],
    policy: Policy,
    max_turns: int,
    concurrency: int = 8,
    progress: bool = True,
) -> dict[str, float]:
    """Evidence recall of `policy`'s walk on each task, by task id (one pass, `concurrency` episodes at once)."""
    results = run_episodes_sync(
        make_env, tasks, policy, concurrency=concurrency, max_turns=max_turns, progress=progress
    )
    return {task.id: result.reward_components["evidence_recall"] for task, result in zip(tasks, results, strict=True)}


def missed_tasks(
    make_env: Callable[[], Any], tasks: Sequence[Task], policy: Policy, max_turns: int, concurrency: int = 8
) -> tuple[list[Task], dict[str, float]]:
    """The tasks `policy` leaves below full evidence recall, in their order, and every task's recall.

    Args:
        make_env: Builds one env (the run's env with its overrides).
        tasks: The training tasks.
        policy: The starting policy, decoding greedily.
        max_turns: Safety bound on steps per episode.
        concurrency: Episodes played at once.
    """
    recall = recall_per_task(make_env, tasks, policy, max_turns, concurrency)
    kept = [task for task in tasks if recall[task.id] < 1.0]
    logger.info(
        "grpo.tasks=missed: the starting policy reaches full recall on %d of %d training tasks; GRPO trains on %d",
        len(tasks) - len(kept), len(tasks), len(kept),
    )  # fmt: skip
    return kept, recall
