"""A learned non-LLM chooser of frontier entries: a gradient-boosted scorer of "holds missing evidence".

It is fit on the frontier entries of the heuristic's walks (`heuristic_walk_states`, labels from the
evidence) and walks greedily: expand the best-scored entry while its probability clears a threshold, at
most `max_expands` times, then stop (`scorer_walk`). With the `shown` features it reads only what the
observation shows, so its walks are a teacher a policy can imitate: `cross_fitted_walks` plays each task
with a scorer fit on the other half of the conversations, as it would walk a conversation it never saw.
`memora-rl experiment choice-headroom` measures its walks; the warm start may imitate them
(`warm_start.teacher: scorer`). Where the env shows a learned ranker's scores (`env.frontier_ranker:
learned`), `ranker_walks` follow the shown number instead (`warm_start.teacher: ranker`), and `RankerTeacher`
labels any state with that rule's next action (DAgger's labeller for the ranker teacher).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from memora_rl.core.parse import ExpandAction, format_action
from memora_rl.env.choice_features import FeatureSet, Featurizer
from memora_rl.env.oracle import OracleWalk
from memora_rl.env.ranker import fit_scorer, heuristic_walk_states, two_folds
from memora_rl.judge.graders import turn_recall
from memora_rl.policy.baselines import STOP_TEXT


def greedy_walk(
    env: Any, task: Any, choose: Callable[[Any], str | None], max_expands: int
) -> tuple[list[str], Mapping[str, Any]]:
    """One task's walk and its final info: expand the id `choose(snapshot)` names, at most `max_expands` times.

    The walk stops when `choose` names none; it ends with a stop unless the env ended it first (then the stop
    is not an action of it).
    """
    _obs, info = env.reset(options={"task": task})
    return walk_on(env, choose, max_expands, info)


def walk_on(
    env: Any, choose: Callable[[Any], str | None], max_expands: int, info: Mapping[str, Any]
) -> tuple[list[str], Mapping[str, Any]]:
    """`greedy_walk` from the env's current state (whose info is `info`): at most `max_expands` more expands."""
    actions: list[str] = []
    while len(actions) < max_expands and not (snapshot := env.snapshot()).done:
        entry_id = choose(snapshot)
        if entry_id is None:
            break
        actions.append(format_action(ExpandAction(ids=[entry_id])))
        *_, info = env.step(actions[-1])
    if not env.snapshot().done:
        actions.append(STOP_TEXT)
        *_, info = env.step(STOP_TEXT)
    return actions, info


def scorer_walk(
    env: Any, task: Any, featurizer: Featurizer, model: Any, threshold: float, max_expands: int
) -> tuple[list[str], Mapping[str, Any]]:
    """One task's greedy walk by `model`: expand the best-scored entry while its probability clears `threshold`."""

    def best_scored(snapshot: Any) -> str | None:
        ids, features = featurizer.rows(snapshot, task.question)
        if not ids:
            return None
        scores = model.predict_proba(features)[:, 1]
        best = int(np.argmax(scores))
        return ids[best] if scores[best] >= threshold else None

    return greedy_walk(env, task, best_scored, max_expands)


def cross_fitted_walks(
    env: Any,
    tasks: Sequence[Any],
    features: FeatureSet = "shown",
    threshold: float = 0.1,
    max_expands: int = 2,
    walk_steps: int = 3,
    seed: int = 0,
    pool: Sequence[Any] | None = None,
) -> list[list[str]]:
    """Each task's scorer walk (actions), by a scorer fit on the other fold's heuristic-walk states.

    The scorers learn from `pool` (default: `tasks`; the whole split when only some tasks are walked), split
    in two folds by conversation (by task where all share one), so no walk is chosen by a model that saw its
    conversation's labels: the walks are what a learner of the observation makes of new data.
    """
    pool = list(pool) if pool is not None else list(tasks)
    if len(pool) < 2:
        raise ValueError(f"Cross-fitted scorer walks need at least 2 tasks to split in two folds; got {len(pool)}.")
    if missing := {task.id for task in tasks} - {task.id for task in pool}:
        raise ValueError(f"Walked tasks must be in the scorer's pool; {len(missing)} are not (e.g. {min(missing)}).")
    featurizer = Featurizer(env, features)
    groups = [task.conversation_id for task in pool]
    folds = two_folds(groups if len(set(groups)) > 1 else [task.id for task in pool], seed)
    fold_of_task = {task.id: fold for task, fold in zip(pool, folds, strict=True)}
    states = heuristic_walk_states(env, pool, featurizer, walk_steps)
    row_folds = np.asarray([fold_of_task[task_id] for task_id in states.tasks])
    walks: dict[str, list[str]] = {}
    for fold in (0, 1):
        train = row_folds != fold
        if not states.labels[train].any():
            raise ValueError(f"Fold {1 - fold} of the scorer's tasks holds no evidence entry to learn; use more tasks.")
        model = fit_scorer(states.rows[train], states.labels[train], seed)
        for task in tasks:
            if fold_of_task[task.id] == fold:
                walks[task.id] = scorer_walk(env, task, featurizer, model, threshold, max_expands)[0]
    return [walks[task.id] for task in tasks]


def first_if_hinted(threshold: float) -> Callable[[Any], str | None]:
    """The ranker teacher's choice: the frontier's first entry when its shown hint clears `threshold`, else none."""

    def choose(snapshot: Any) -> str | None:
        first = snapshot.frontier[0] if snapshot.frontier else None
        return first.entry_id if first is not None and first.hint is not None and first.hint >= threshold else None

    return choose


def ranker_walks(env: Any, tasks: Sequence[Any], threshold: float = 0.1, max_expands: int = 2) -> list[list[str]]:
    """Each task's walk by the env's learned ranker: expand the first entry while its shown hint clears `threshold`.

    At most `max_expands` expands, then a stop. The env's ranker is cross-fitted, so these walks are
    `cross_fitted_walks` read off the observation itself: a policy imitating them needs only what it is shown.
    """
    require_ranker(env)
    return [greedy_walk(env, task, first_if_hinted(threshold), max_expands)[0] for task in tasks]


def require_ranker(env: Any) -> None:
    """Raise unless `env` shows a learned ranker's hints (what the ranker teacher reads)."""
    if getattr(env, "ranker", None) is None:
        raise ValueError("Hint walks need an env that ranks its frontier: set env.frontier_ranker=learned.")


class RankerTeacher:
    """The ranker teacher as a DAgger labeller: from any state, the rest of the walk `ranker_walks` would play.

    The expands the state's episode already made count against `max_expands`, so a label never lets a walk
    expand more than the teacher's own walks do. `walk_from` answers as `Oracle.walk_from` does.
    """

    def __init__(self, env: Any, threshold: float, max_expands: int) -> None:
        require_ranker(env)
        self.env, self.threshold, self.max_expands = env, threshold, max_expands

    def walk_from(self, task: Any, start: Any) -> OracleWalk:
        """The teacher's walk of `task` from the snapshot `start` (of any env over the same store and config)."""
        if start.done:
            raise ValueError(f"The state of task {task.id!r} ends its episode; there is no next action to choose.")
        env = self.env
        env.reset(options={"task": task})
        env.restore(start)
        expanded = sum(record.kind == "expand" for record in start.actions)
        actions, _info = walk_on(env, first_if_hinted(self.threshold), max(0, self.max_expands - expanded), {})
        end = env.snapshot()
        return OracleWalk(
            task_id=task.id,
            category=task.category,
            initial_recall=turn_recall(task.evidence, start.turn_ids),
            recall=turn_recall(task.evidence, end.turn_ids),
            actions=actions,
            cost=start.budget_left - end.budget_left,
            refines=0,
        )
