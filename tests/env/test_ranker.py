"""The learned frontier ranker: cross-fitted scores that order the frontier and are shown on each line."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from memora_rl.env import ranker as ranker_module
from memora_rl.env.ranker import LearnedRanker
from memora_rl.errors import ConfigError
from tests.relevance_stand_in import TextLength

HARD = ["env.compact=true", "env.frontier_value_tokens=12"]
HINT = re.compile(r" \((\d+)%\)$")


def test_a_training_conversation_is_scored_by_the_other_folds_model_and_others_by_the_whole_fit() -> None:
    ranker = LearnedRanker(
        fold_models=("fit on fold 0", "fit on fold 1"), whole_model="whole", fold_of={"a": 0, "b": 1}
    )
    assert ranker.model_for("a") == "fit on fold 1" and ranker.model_for("b") == "fit on fold 0"
    assert ranker.model_for("held-out") == "whole"


@pytest.fixture(scope="module")
def ranked_validation():
    from memora_rl.env.registry import make_env

    env, tasks = make_env("synthetic-hard", split="validation", overrides=[*HARD, "env.frontier_ranker=learned"])
    with env:
        yield env, tasks


def test_the_frontier_is_ordered_by_the_shown_probability(ranked_validation) -> None:
    env, tasks = ranked_validation
    seen_a_high_one = False
    for task in tasks[:8]:
        observation, _ = env.reset(options={"task": task})
        frontier = env.snapshot().frontier
        hints = [item.hint for item in frontier]
        assert all(hint is not None and 0.0 <= hint <= 1.0 for hint in hints)
        assert hints == sorted(hints, reverse=True), task.id
        shown = [int(match.group(1)) for line in observation.splitlines() if (match := HINT.search(line))]
        assert shown == [round(100 * hint) for hint in hints[: len(shown)]] and shown, task.id
        seen_a_high_one |= hints[0] >= 0.5
        env.step(f'{{"action": "expand", "ids": ["{frontier[0].entry_id}"]}}')
        after = [item.hint for item in env.snapshot().frontier]
        assert after == sorted(after, reverse=True)  # the new frontier is ranked again
    assert seen_a_high_one, "the ranker should be confident somewhere on synthetic-hard"


def test_held_out_scores_come_from_the_whole_fit_and_training_ones_from_the_other_fold(ranked_validation) -> None:
    from memora_rl.core.tokens import TokenMeter
    from memora_rl.env.choice_features import Featurizer
    from memora_rl.env.registry import make_env

    env, tasks = ranked_validation
    ranker = env.ranker
    assert not set(ranker.fold_of) & {task.conversation_id for task in tasks}  # validation is never a fold
    plain, train = make_env("synthetic-hard", split="train", overrides=HARD)
    with plain:
        task = train[0]
        plain.reset(options={"task": task})
        _, rows = Featurizer(plain, "shown", meter=TokenMeter()).rows(plain.snapshot(), task.question)
        fold = ranker.fold_of[task.conversation_id]
        expected = ranker.fold_models[1 - fold].predict_proba(rows)[:, 1]
        np.testing.assert_allclose(ranker.scores(plain, plain.snapshot(), task.question), expected, rtol=1e-6)
        assert not np.allclose(expected, ranker.fold_models[fold].predict_proba(rows)[:, 1])


def test_a_second_env_loads_the_cached_fit(ranked_validation, monkeypatch) -> None:
    from memora_rl.env.registry import make_env

    def refit(*_args, **_kwargs):
        raise AssertionError("the ranker was fit again")

    monkeypatch.setattr(ranker_module, "fit_ranker", refit)
    env, _ = make_env("synthetic-hard", split="test", overrides=[*HARD, "env.frontier_ranker=learned"])
    with env:
        cached, first = env.ranker, ranked_validation[0].ranker
        assert cached.fold_of == first.fold_of and type(cached.whole_model) is type(first.whole_model)


def shown_differently(monkeypatch: pytest.MonkeyPatch, override: str) -> Any:
    """The ranked validation env with one display `override`, made without fitting the ranker again."""
    from memora_rl.env.registry import make_env

    def refit(*_args, **_kwargs):
        raise AssertionError(f"the ranker was fit again for {override}")

    monkeypatch.setattr(ranker_module, "fit_ranker", refit)
    env, _ = make_env("synthetic-hard", split="validation", overrides=[*HARD, "env.frontier_ranker=learned", override])
    return env


def test_a_hint_scale_multiplies_the_shown_numbers_and_keeps_the_rankers_order(ranked_validation, monkeypatch) -> None:
    """`env.hint_scale`: the same frontier in the same order, each hint times the scale (capped at 1), one fit."""
    env, tasks = ranked_validation
    scaled = shown_differently(monkeypatch, "env.hint_scale=3")
    capped = False
    with scaled:
        for task in tasks[:6]:
            env.reset(options={"task": task})
            observation, _ = scaled.reset(options={"task": task})
            plain, tripled = env.snapshot().frontier, scaled.snapshot().frontier
            assert [item.entry_id for item in tripled] == [item.entry_id for item in plain], task.id
            assert [item.hint for item in tripled] == pytest.approx([min(1.0, 3 * item.hint) for item in plain])
            shown = [int(match.group(1)) for line in observation.splitlines() if (match := HINT.search(line))]
            assert shown == [round(100 * item.hint) for item in tripled[: len(shown)]]
            capped |= any(item.hint == 1.0 for item in tripled)
    assert capped, "a confident ranker's hint times 3 should reach the cap somewhere"


def test_a_hint_line_repeats_the_first_frontier_lines_number_last(ranked_validation, monkeypatch) -> None:
    """`env.hint_line`: the observation ends with the first frontier item's id and shown number; one fit."""
    from memora_rl.env.config import EnvConfig

    env, tasks = ranked_validation
    lined = shown_differently(monkeypatch, "env.hint_line=true")
    with lined:
        for task in tasks[:6]:
            plain, _ = env.reset(options={"task": task})
            observation, _ = lined.reset(options={"task": task})
            first = lined.snapshot().frontier[0]
            assert observation.splitlines()[-1] == f"Best linked: {first.entry_id} ({round(100 * first.hint)}%)"
            assert "Best linked" not in plain and observation.startswith(plain.rsplit("\n", 1)[0])
    with pytest.raises(ConfigError, match=r"env\.hint_line=true repeats the learned ranker"):
        EnvConfig(hint_line=True)


def test_a_learned_ranker_needs_two_training_conversations_and_a_ranker(monkeypatch) -> None:
    from memora_rl.env.config import EnvConfig
    from memora_rl.env.registry import make_env
    from memora_rl.env.retrieval import RetrievalEnv

    with pytest.raises(ConfigError, match="cross-fitted over two folds"):
        make_env("synthetic", overrides=["env.frontier_ranker=learned", "data.options.conversations=1"])
    with pytest.raises(ConfigError, match="needs a fitted ranker"):
        RetrievalEnv(":memory:", EnvConfig(frontier_ranker="learned"))


def test_a_likelihood_ranker_reads_the_whole_value_and_the_likelihood_columns(monkeypatch) -> None:
    from memora_rl.core.tokens import TokenMeter
    from memora_rl.env import query_likelihood
    from memora_rl.env.choice_features import Featurizer
    from memora_rl.env.registry import make_env

    monkeypatch.setattr(query_likelihood, "shared_likelihood", lambda *_: TextLength())
    env, tasks = make_env("synthetic-hard", split="train", overrides=[*HARD, "env.ranker_features=likelihood"])
    with env:
        ranker = ranker_module.fit_ranker(env, tasks)
        env.reset(options={"task": tasks[0]})
        snapshot = env.snapshot()
        _, full = Featurizer(env, "full", meter=TokenMeter()).rows(snapshot, tasks[0].question)
        assert ranker.features == "likelihood" and ranker.whole_model.n_features_in_ == full.shape[1] + 2
        scores = ranker.scores(env, snapshot, tasks[0].question)
        assert scores.shape == (len(snapshot.frontier),) and ((scores >= 0) & (scores <= 1)).all()
    old = LearnedRanker.__new__(LearnedRanker)  # as a ranker pickled before the field existed unpickles
    old.__dict__.update(fold_models=(None, None), whole_model=None, fold_of={})
    assert old.features == "shown"
