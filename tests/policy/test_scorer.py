"""The scorer teacher: walks chosen by a scorer that never saw the walked conversation's labels."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from memora_rl.core.parse import ExpandAction, format_action
from memora_rl.env.choice_features import Featurizer
from memora_rl.policy import scorer
from memora_rl.policy.baselines import STOP_TEXT

HARD = ["env.compact=true", "env.frontier_value_tokens=12"]


@pytest.fixture(scope="module")
def hard_train():
    from memora_rl.env.registry import make_env

    env, tasks = make_env("synthetic-hard", split="train", overrides=HARD)
    with env:
        yield env, random.Random(0).sample(list(tasks), 24)  # tasks of several conversations


def test_each_task_is_walked_by_the_scorer_fit_on_the_other_folds_conversations(hard_train, monkeypatch) -> None:
    env, tasks = hard_train
    assert len({task.conversation_id for task in tasks}) > 1, "the test needs tasks of several conversations"
    fit, walk = scorer.fit_scorer, scorer.scorer_walk
    walked_by: dict[str, object] = {}

    def fit_and_remember(rows, labels, seed):
        model = fit(rows, labels, seed)
        model.train_rows = {row.tobytes() for row in rows}
        return model

    def walk_and_remember(env, task, featurizer, model, threshold, max_expands):
        walked_by[task.id] = model
        return walk(env, task, featurizer, model, threshold, max_expands)

    monkeypatch.setattr(scorer, "fit_scorer", fit_and_remember)
    monkeypatch.setattr(scorer, "scorer_walk", walk_and_remember)
    walks = scorer.cross_fitted_walks(env, tasks, threshold=0.1, max_expands=2, seed=0)

    assert set(walked_by) == {task.id for task in tasks} and len({id(m) for m in walked_by.values()}) == 2
    featurizer = Featurizer(env, "shown")
    for task in tasks:
        own = scorer.heuristic_walk_states(env, [task], featurizer, steps=3).rows
        assert not any(row.tobytes() in walked_by[task.id].train_rows for row in own), task.id
        other = next(t for t in tasks if walked_by[t.id] is not walked_by[task.id])  # the other fold's
        assert other.conversation_id != task.conversation_id
        other_rows = scorer.heuristic_walk_states(env, [other], featurizer, steps=3).rows
        assert all(row.tobytes() in walked_by[task.id].train_rows for row in other_rows)
    for actions in walks:
        assert actions[-1] == STOP_TEXT and len(actions) <= 3
        assert all(json.loads(action)["action"] == "expand" for action in actions[:-1])
    assert any(len(actions) > 1 for actions in walks), "the scorer should expand somewhere"
    monkeypatch.undo()
    assert scorer.cross_fitted_walks(env, tasks[:4], seed=0, pool=tasks) == walks[:4]  # the pool's folds and fits
    with pytest.raises(ValueError, match="must be in the scorer's pool"):
        scorer.cross_fitted_walks(env, tasks, pool=tasks[:4])


def test_a_scorer_walk_expands_the_best_scored_entry_while_it_clears_the_threshold(hard_train) -> None:
    env, tasks = hard_train
    featurizer = Featurizer(env, "shown")

    class LastIsBest:
        """Scores the frontier's last entry highest, at `top`."""

        def __init__(self, top: float) -> None:
            self.top = top

        def predict_proba(self, rows: np.ndarray) -> np.ndarray:
            scores = np.linspace(0.0, self.top, len(rows))
            return np.column_stack([1 - scores, scores])

    task = tasks[0]
    env.reset(options={"task": task})
    last = env.snapshot().frontier[-1].entry_id
    actions, info = scorer.scorer_walk(env, task, featurizer, LastIsBest(0.9), threshold=0.5, max_expands=2)
    assert json.loads(actions[0]) == {"action": "expand", "ids": [last]} and len(actions) == 3
    assert "reward_components" in info
    never, _ = scorer.scorer_walk(env, task, featurizer, LastIsBest(0.4), threshold=0.5, max_expands=2)
    assert never == [STOP_TEXT]


def test_cross_fitting_needs_two_tasks(hard_train) -> None:
    env, tasks = hard_train
    with pytest.raises(ValueError, match="at least 2 tasks"):
        scorer.cross_fitted_walks(env, tasks[:1])


def test_ranker_walks_expand_the_first_entry_while_its_shown_hint_clears_the_threshold() -> None:
    from memora_rl.env.registry import make_env

    env, tasks = make_env("synthetic-hard", split="validation", overrides=[*HARD, "env.frontier_ranker=learned"])
    with env:
        walks = scorer.ranker_walks(env, tasks[:12], threshold=0.05, max_expands=2)
        for task, actions in zip(tasks[:12], walks, strict=True):
            env.reset(options={"task": task})
            for action in actions[:-1]:  # each expand names the first entry, whose hint clears the threshold
                first = env.snapshot().frontier[0]
                assert json.loads(action) == {"action": "expand", "ids": [first.entry_id]} and first.hint >= 0.05
                env.step(action)
            assert actions[-1] == STOP_TEXT and len(actions) <= 3
            frontier = env.snapshot().frontier
            assert len(actions) == 3 or not frontier or frontier[0].hint < 0.05  # it stopped for a reason
        assert any(len(actions) > 1 for actions in walks), "the ranker should expand somewhere"
    plain, plain_tasks = make_env("synthetic-hard", split="validation", overrides=HARD)
    with plain, pytest.raises(ValueError, match="frontier_ranker=learned"):
        scorer.ranker_walks(plain, plain_tasks[:1])


def test_the_ranker_teacher_labels_a_state_with_the_rest_of_its_own_walk() -> None:
    """From reset its walk is `ranker_walks`'; after a policy's off-rule expand it walks on by the rule with the
    expands left; once the policy spent them the label is stop (DAgger's labeller for the ranker teacher)."""
    from memora_rl.env.registry import make_env

    env, tasks = make_env("synthetic-hard", split="validation", overrides=[*HARD, "env.frontier_ranker=learned"])
    with env:
        labeller = scorer.RankerTeacher(env.sibling(), threshold=0.05, max_expands=2)
        tasks = tasks[:12]
        for task, walk in zip(tasks, scorer.ranker_walks(env, tasks, threshold=0.05, max_expands=2), strict=True):
            env.reset(options={"task": task})
            assert labeller.walk_from(task, env.snapshot()).actions == walk
        task = next(t for t in tasks if env.reset(options={"task": t}) and len(env.snapshot().frontier) > 2)
        last = env.snapshot().frontier[-1].entry_id  # the rule would expand the first, not the last
        env.step(format_action(ExpandAction(ids=[last])))
        state = env.snapshot()
        walk = labeller.walk_from(task, state)
        first = state.frontier[0]
        rest = [format_action(ExpandAction(ids=[first.entry_id]))] if first.hint >= 0.05 else []
        assert walk.actions[: len(rest) + 1] == [*rest, STOP_TEXT] and len(walk.actions) == len(rest) + 1
        assert walk.initial_recall <= walk.recall and walk.refines == 0
        env.step(format_action(ExpandAction(ids=[state.frontier[0].entry_id])))
        eager = scorer.RankerTeacher(env.sibling(), threshold=1e-9, max_expands=2)  # it would expand any entry ...
        assert eager.walk_from(task, env.snapshot()).actions == [STOP_TEXT]  # ... but two expands are made


def test_dagger_labels_with_the_ranker_teacher_where_it_teaches_else_the_oracle() -> None:
    from memora_rl.env.oracle import Oracle
    from memora_rl.env.registry import make_env
    from memora_rl.training.config import WarmStartSettings
    from memora_rl.training.dagger import dagger_labeller

    env, _tasks = make_env("synthetic-hard", split="validation", overrides=[*HARD, "env.frontier_ranker=learned"])
    with env:
        ranker = dagger_labeller(env, WarmStartSettings(teacher="ranker", scorer_threshold=0.2, scorer_max_expands=3))
        assert isinstance(ranker, scorer.RankerTeacher) and (ranker.threshold, ranker.max_expands) == (0.2, 3)
        assert isinstance(dagger_labeller(env, WarmStartSettings(teacher="oracle")), Oracle)
