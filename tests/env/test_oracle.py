"""The oracle and the headroom report on the hand-made graph: G0, oracle recall, visible-only refines."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from memora_rl.data.records import Task
from memora_rl.env.oracle import Oracle, visible_queries
from memora_rl.env.retrieval import RetrievalEnv
from memora_rl.env.stats import headroom
from memora_rl.judge.graders import turn_recall
from tests.env.conftest import GRAPH_ID

# "Pepper" appears only in e4's value: a refine with that visible name is the one way to e5 without anchors.
PET_VET = Task(id="t-vet", conversation_id=GRAPH_ID, question="Which city does Alma's cat see the vet in?",
               answer="Lisbon", evidence=["D2:5", "D3:1"], category="multi-hop")  # fmt: skip


def _replay(env: RetrievalEnv, task: Task, actions: list[str]) -> tuple[list[str], dict]:
    """Play `actions` after a reset; return the observations seen before each action and the final info."""
    observation, info = env.reset(options={"task": task})
    seen = []
    for action in actions:
        seen.append(observation)
        observation, _reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    return seen, dict(info)


def test_g0_is_the_recall_of_the_first_search(make_hand_env: Callable[..., RetrievalEnv], hand_tasks) -> None:
    env = make_hand_env(initial_top_k=1)
    for task in hand_tasks:
        _observation, info = env.reset(options={"task": task})
        turns = {t for e in env.store.get_entries(GRAPH_ID, info["working_set_ids"]) for t in e.source_turn_ids}
        assert Oracle(env).walk(task).initial_recall == pytest.approx(turn_recall(task.evidence, turns))


def test_oracle_walk_replays_to_its_recall_within_budget(
    make_hand_env: Callable[..., RetrievalEnv], hand_tasks
) -> None:
    env = make_hand_env(initial_top_k=1, budget=4.0, max_steps=4)
    for task in [*hand_tasks, PET_VET]:
        walk = Oracle(env).walk(task)
        assert walk.recall >= walk.initial_recall
        assert json.loads(walk.actions[-1]) == {"action": "stop"}
        _seen, info = _replay(make_hand_env(initial_top_k=1, budget=4.0, max_steps=4), task, walk.actions)
        assert info["reward_components"]["evidence_recall"] == pytest.approx(walk.recall)
        assert info["reward_components"]["invalid_actions"] == 0
        assert walk.cost <= 4.0


def test_refines_use_only_text_the_policy_saw(make_hand_env: Callable[..., RetrievalEnv]) -> None:
    env = make_hand_env(initial_top_k=1, budget=4.0, max_steps=4)
    walk = Oracle(env, max_refines=2).walk(PET_VET)
    seen, _info = _replay(make_hand_env(initial_top_k=1, budget=4.0, max_steps=4), PET_VET, walk.actions)
    for observation, action in zip(seen, walk.actions, strict=False):
        parsed = json.loads(action)
        if parsed["action"] == "refine":
            assert all(word in observation.lower() for word in parsed["query"].lower().split())
            assert parsed["query"] not in "Pepper sees a vet in Lisbon every spring."[len("Pepper") :]


def test_refines_reach_what_anchors_do_not(make_hand_env: Callable[..., RetrievalEnv]) -> None:
    """With no anchor links (frontier of 1, budget for one expand) the refine oracle must beat expand-only."""
    env = make_hand_env(initial_top_k=1, budget=2.0, max_steps=3, frontier_limit=1)
    expand_only = Oracle(env, max_refines=0).walk(PET_VET)
    with_refines = Oracle(env, max_refines=1).walk(PET_VET)
    assert with_refines.recall >= expand_only.recall
    assert with_refines.recall == 1.0


def test_where_an_expand_does_as_well_the_oracle_teaches_the_first_visible_refine(
    make_hand_env: Callable[..., RetrievalEnv],
) -> None:
    """Expanding the vet entry and the precise refine both reach full recall for one unit: the rule wins the tie."""
    env = make_hand_env(initial_top_k=1, budget=4.0, max_steps=4)
    env.reset(options={"task": PET_VET})
    first_query = visible_queries(env.snapshot(), PET_VET.question, 8)[0]
    assert first_query == "Pepper city see vet"  # a working-set name and the question's words its entry lacks
    expand_walk = Oracle(env, max_refines=0).walk(PET_VET)
    walk = Oracle(env, max_refines=2).walk(PET_VET)
    assert (expand_walk.recall, expand_walk.cost) == (walk.recall, walk.cost) == (1.0, 1.0)
    assert expand_walk.actions[0].startswith('{"action": "expand"')
    assert json.loads(walk.actions[0]) == {"action": "refine", "query": first_query}


def test_headroom_report_groups_by_category(make_hand_env: Callable[..., RetrievalEnv], hand_tasks) -> None:
    env = make_hand_env(initial_top_k=1, budget=4.0, max_steps=4)
    tasks = [*hand_tasks, PET_VET]
    report = headroom(env, tasks, "hand", "all")
    assert {row.group for row in report.rows} == {"single-hop", "multi-hop"}
    assert report.overall.tasks == len(tasks) == sum(row.tasks for row in report.rows)
    assert report.overall.oracle >= report.overall.expand_oracle >= report.overall.initial_recall
    g0 = [walk.initial_recall for walk in report.walks]
    assert report.overall.below_one == pytest.approx(sum(value < 1 for value in g0) / len(g0))
    assert report.trainable == (report.overall.below_one >= 0.7 and report.overall.oracle_full >= 0.9)
    with pytest.raises(ValueError, match="no tasks"):
        headroom(env, [], "hand", "test")
