"""A learned non-LLM chooser of frontier entries: a gradient-boosted scorer of "holds missing evidence".

It is fit on the frontier entries of the heuristic's walks (`heuristic_walk_states`, labels from the
evidence) and walks greedily: expand the best-scored entry while its probability clears a threshold, at
most `max_expands` times, then stop (`scorer_walk`). With the `shown` features it reads only what the
observation shows, so its walks are a teacher a policy can imitate: `cross_fitted_walks` plays each task
with a scorer fit on the other half of the conversations, as it would walk a conversation it never saw.
`memora-rl experiment choice-headroom` measures its walks; the warm start may imitate them
(`warm_start.teacher: scorer`).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
from rich.progress import track

from memora_rl.policy.baselines import STOP_TEXT
from memora_rl.policy.choice_features import FeatureSet, Featurizer, entry_text, evidence_labels


class WalkStates(NamedTuple):
    """Feature rows and labels of walk states' frontier entries, with each row's question, entry text and task."""

    rows: np.ndarray
    labels: np.ndarray
    questions: list[str]
    texts: list[str]
    conversations: list[str]
    tasks: list[str]


def heuristic_walk_states(env: Any, tasks: Sequence[Any], featurizer: Featurizer, steps: int) -> WalkStates:
    """Rows and evidence labels of every frontier entry at the first `steps` states of each heuristic walk.

    Each row carries its task's conversation and id (what cross-fitting splits by).
    """
    from memora_rl.core.parse import ExpandAction, format_action

    rows, labels, questions, texts, conversations, task_ids = [], [], [], [], [], []
    for task in track(tasks, description=f"states ({featurizer.features})", transient=True):
        env.reset(options={"task": task})
        for _ in range(steps):
            snapshot = env.snapshot()
            if snapshot.done:
                break
            ids, features = featurizer.rows(snapshot, task.question)
            if not ids:
                break
            rows.append(features)
            labels += evidence_labels(env, ids, set(task.evidence) - snapshot.turn_ids)
            questions += [task.question] * len(ids)
            texts += [entry_text(item) for item in snapshot.frontier]
            conversations += [task.conversation_id] * len(ids)
            task_ids += [task.id] * len(ids)
            env.step(format_action(ExpandAction(ids=[ids[0]])))
    return WalkStates(np.concatenate(rows), np.asarray(labels), questions, texts, conversations, task_ids)


def fit_scorer(rows: Any, labels: Any, seed: int) -> Any:
    """A gradient-boosted classifier of the label from feature rows (deterministic for a seed)."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    model = HistGradientBoostingClassifier(
        max_iter=200, learning_rate=0.05, max_leaf_nodes=15, early_stopping=False, random_state=seed
    )
    return model.fit(rows, labels)


def scorer_walk(
    env: Any, task: Any, featurizer: Featurizer, model: Any, threshold: float, max_expands: int
) -> tuple[list[str], Mapping[str, Any]]:
    """One task's greedy walk and its final info: expand the best-scored entry while it clears `threshold`.

    The walk ends with a stop unless the env ended it first (then the stop is not an action of it).
    """
    from memora_rl.core.parse import ExpandAction, format_action

    _obs, info = env.reset(options={"task": task})
    actions: list[str] = []
    for _ in range(max_expands):
        snapshot = env.snapshot()
        ids, features = featurizer.rows(snapshot, task.question) if not snapshot.done else ([], None)
        if not ids:
            break
        scores = model.predict_proba(features)[:, 1]
        best = int(np.argmax(scores))
        if scores[best] < threshold:
            break
        actions.append(format_action(ExpandAction(ids=[ids[best]])))
        *_, info = env.step(actions[-1])
    if not env.snapshot().done:
        actions.append(STOP_TEXT)
        *_, info = env.step(STOP_TEXT)
    return actions, info


def two_folds(groups: Sequence[str], seed: int) -> list[int]:
    """Each item's fold (0 or 1), whole groups to a fold, groups shuffled with `seed` and dealt alternately.

    >>> folds = two_folds(["a", "a", "b", "c", "c", "d"], seed=0)
    >>> folds[0] == folds[1] and folds[3] == folds[4], sorted(set(folds))
    (True, [0, 1])
    """
    names = sorted(set(groups))
    random.Random(seed).shuffle(names)
    fold = {name: i % 2 for i, name in enumerate(names)}
    return [fold[group] for group in groups]


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
