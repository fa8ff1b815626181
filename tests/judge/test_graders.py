"""Table-driven tests of the pure graders."""

from __future__ import annotations

import numpy as np
import pytest

from memora_rl.errors import RolloutError
from memora_rl.judge import graders
from tests.judge.trajectories import build_trajectory, make_entry

ALICE = make_entry("e1", "Alice works at Nova as a backend engineer", ["D1:1"])
ALICE_COPY = make_entry("e2", "Alice works at Nova as a backend engineer", ["D2:3"])
HIKING = make_entry("e3", "Bob went hiking in the Alps last summer", ["D3:1"])
SUSHI = make_entry("e4", "Carol's favourite food is sushi", ["D4:2"])


@pytest.mark.parametrize(
    ("entries", "evidence", "expected"),
    [
        ([ALICE, ALICE_COPY], ["D1:1", "D2:3"], 1.0),  # perfect retrieval
        ([ALICE], ["D1:1", "D2:3"], 0.5),
        ([HIKING], ["D1:1", "D2:3"], 0.0),
        ([], ["D1:1"], 0.0),
        ([HIKING], [], 1.0),  # no evidence: nothing to miss
    ],
)
def test_evidence_recall(entries, evidence, expected):
    trajectory = build_trajectory(entries=entries, evidence=evidence)
    assert graders.evidence_recall(trajectory) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("rows", "delta", "expected"),
    [
        ([[1.0, 0.0]], 0.9, 0.0),  # one row: no pair
        ([[1.0, 0.0], [0.0, 1.0]], 0.9, 0.0),
        ([[1.0, 0.0], [1.0, 0.0]], 0.9, 1.0),
        ([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]], 0.9, 2 / 6),
        ([[1.0, 0.0], [0.6, 0.8]], 0.6, 1.0),  # cosine exactly at delta counts
        ([[1.0, 0.0], [0.6, 0.8]], 0.61, 0.0),
    ],
)
def test_pairwise_redundancy(rows, delta, expected):
    assert graders.pairwise_redundancy(np.array(rows), delta) == pytest.approx(expected)


def test_redundancy_rejects_misaligned_vectors():
    trajectory = build_trajectory(entries=[ALICE, HIKING])
    with pytest.raises(RolloutError, match="2 retrieved entries"):
        graders.redundancy(trajectory, np.eye(3, dtype=np.float32))


def test_redundancy_reward_with_real_embedder(embedder):
    reward = graders.make_redundancy_reward(embedder, delta=0.9)
    distinct = reward(build_trajectory(entries=[ALICE, HIKING, SUSHI]))
    duplicated = reward(build_trajectory(entries=[ALICE, ALICE_COPY, HIKING, SUSHI]))
    assert distinct == 0.0
    assert duplicated == pytest.approx(1 / 6)  # one duplicated pair out of 6
    assert reward(build_trajectory(entries=[ALICE])) == 0.0
    assert reward.__name__ == "redundancy"


def test_redundancy_factory_rejects_bad_delta(embedder):
    with pytest.raises(RolloutError, match="delta"):
        graders.make_redundancy_reward(embedder, delta=1.5)


@pytest.mark.parametrize(
    ("budget_spent", "kinds", "refine_cost", "expected"),
    [
        (0.0, ["stop"], 0.1, 0.0),
        (5.0, ["expand", "stop"], 0.1, 0.5),
        (10.0, ["expand", "expand"], 0.1, 1.0),
        (4.0, ["refine", "refine", "stop"], 0.1, 0.6),  # 0.4 spent + 2 refines
        (4.0, ["refine", "refine", "stop"], 0.0, 0.4),
    ],
)
def test_cost(budget_spent, kinds, refine_cost, expected):
    trajectory = build_trajectory(budget_spent=budget_spent, kinds=kinds)
    assert graders.make_cost_reward(refine_cost)(trajectory) == pytest.approx(expected)


def test_more_steps_cost_more():
    short = build_trajectory(budget_spent=2.0, kinds=["expand", "stop"])
    long = build_trajectory(budget_spent=6.0, kinds=["expand", "expand", "expand", "stop"])
    assert graders.cost(long) > graders.cost(short)


def test_cost_needs_positive_budget():
    with pytest.raises(RolloutError, match="positive budget"):
        graders.cost(build_trajectory(budget=0.0))


@pytest.mark.parametrize(
    ("kinds", "expected"),
    [
        (["expand", "stop"], 1.0),
        (["invalid", "stop"], 0.5),
        (["invalid", "invalid", "invalid", "expand"], 0.25),
        (["invalid"], 0.0),
        ([], 0.0),
        (["expand", "forced"], 1.0),  # the rollout's forced stop is not the policy's action...
        (["invalid", "forced"], 0.0),  # ...so it neither counts as valid nor dilutes an invalid turn
        (["forced"], 0.0),
    ],
)
def test_format_score_penalises_invalid_actions(kinds, expected):
    trajectory = build_trajectory(kinds=kinds) if kinds else build_trajectory().model_copy(update={"actions": []})
    assert graders.format_score(trajectory) == pytest.approx(expected)
    assert graders.valid_action_rate(trajectory) == pytest.approx(expected)


def test_episode_metrics_on_a_hand_made_trajectory():
    trajectory = build_trajectory(
        entries=[ALICE, ALICE_COPY, HIKING],
        evidence=["D1:1", "D2:3"],
        kinds=["expand", "refine", "expand", "invalid", "invalid", "forced"],
    ).model_copy(update={"initial_turn_ids": ["D1:1", "D3:1"]})
    metrics = {name: fn(trajectory) for name, fn in graders.EPISODE_METRICS.items()}
    assert metrics["initial_recall"] == 0.5 and graders.evidence_recall(trajectory) == 1.0
    assert metrics["recall_gain"] == 0.5
    assert metrics["valid_action_rate"] == pytest.approx(3 / 5)
    assert (metrics["steps"], metrics["refines"], metrics["invalid_actions"]) == (5.0, 1.0, 2.0)
    counts = {kind: metrics[f"actions_{kind}"] for kind in ("expand", "refine", "stop", "invalid", "forced")}
    assert counts == {"expand": 2.0, "refine": 1.0, "stop": 0.0, "invalid": 2.0, "forced": 1.0}
    assert graders.EPISODE_METRICS["actions_forced"].__name__ == "actions_forced"


def test_initial_recall_of_a_task_without_evidence_is_one():
    trajectory = build_trajectory(entries=[HIKING], evidence=[])
    assert (graders.initial_recall(trajectory), graders.recall_gain(trajectory)) == (1.0, 0.0)


@pytest.mark.parametrize(
    ("prediction", "gold", "expected"),
    [
        ("Nova", "Nova", 1.0),
        ("nova.", "Nova", 1.0),  # case and punctuation
        ("The Nova", "Nova", 1.0),  # articles
        ("at Nova", "Nova", 2 / 3),  # P=1/2, R=1
        ("7 May 2023", "May 7, 2023", 1.0),  # order does not matter
        ("Berlin", "Nova", 0.0),
        ("", "Nova", 0.0),
        ("the", "a", 1.0),  # both normalise to nothing
        ("cat cat", "cat", 2 / 3),  # multiset overlap: P=1/2, R=1
    ],
)
def test_token_f1(prediction, gold, expected):
    assert graders.token_f1(prediction, gold) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("prediction", "gold", "expected"),
    [
        ("Nova", "nova!", 1.0),
        ("works at Nova", "Nova", 1 / 3),  # longer than gold: no brevity penalty
        ("Nova", "Nova Berlin", float(np.exp(-1.0))),  # brevity penalty exp(1 - 2/1)
        ("cat cat cat", "cat", 1 / 3),  # clipped counts
        # clipping and brevity together: 3 of 4 predicted unigrams clip into the gold, BP = exp(1 - 5/4)
        ("the cat sat on cat", "a cat sat on the mat today", 0.75 * float(np.exp(-0.25))),
        ("", "Nova", 0.0),
        ("an", "the", 1.0),
    ],
)
def test_bleu1(prediction, gold, expected):
    assert graders.bleu1(prediction, gold) == pytest.approx(expected)


def test_normalize_answer_strips_curly_quotes_and_articles():
    assert graders.normalize_answer("“An Apple’s” pie") == ["apples", "pie"]


@pytest.mark.parametrize(
    ("context_tokens", "token_unit", "expected"),
    [
        (0, 100, 0.0),  # nothing retrieved: no context cost
        (250, 100, 2.5),
        (100, 100, 1.0),
        (37, 1, 37.0),  # one token per unit
        (1000, 400, 2.5),
    ],
)
def test_context_cost(context_tokens, token_unit, expected):
    trajectory = build_trajectory(context_tokens=context_tokens)
    assert graders.context_cost(trajectory, token_unit) == pytest.approx(expected)
    reward = graders.make_context_cost_reward(token_unit)
    assert reward(trajectory) == pytest.approx(expected)
    assert reward.__name__ == "context_cost"


def test_context_cost_reward_pickles_and_rejects_a_unit_below_one_token():
    import pickle

    reward = pickle.loads(pickle.dumps(graders.make_context_cost_reward(50)))
    assert (reward.__name__, reward.token_unit) == ("context_cost", 50)
    assert reward(build_trajectory(context_tokens=75)) == pytest.approx(1.5)
    with pytest.raises(RolloutError, match="token_unit"):
        graders.make_context_cost_reward(0)
    with pytest.raises(RolloutError, match="token_unit"):
        graders.context_cost(build_trajectory(context_tokens=10), 0)
