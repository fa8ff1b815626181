"""Step semantics of RetrievalEnv on a hand-filled graph: expand, refine, stop, invalid actions, truncation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from memora_rl.core.parse import ExpandAction, format_action
from memora_rl.env.info import StepInfo
from memora_rl.env.retrieval import CUT_TURN_ERROR, RetrievalEnv
from memora_rl.errors import ConfigError, GraphError, RolloutError

MANAGER_TASK = {"task_id": "t2"}  # "What does Alma's manager do on Saturdays?"

EnvFactory = Callable[..., RetrievalEnv]


def start(make_hand_env: EnvFactory, task_index: int = 1, **config: Any) -> tuple[RetrievalEnv, str, StepInfo]:
    env = make_hand_env(**config)
    observation, info = env.reset(seed=0, options={"task": env.tasks[task_index]})
    return env, observation, info


def expand(*ids: str) -> str:
    return format_action(ExpandAction(ids=list(ids)))


def test_reset_retrieves_top_k_and_frontier(make_hand_env: EnvFactory, hand_store: Any) -> None:
    env, observation, info = start(make_hand_env)
    question = env.tasks[1].question
    hits = [hit.entry_id for hit in hand_store.search("conv-test", question, k=2)]
    assert info["working_set_ids"] == hits
    frontier = hand_store.frontier("conv-test", hits, hits, question, limit=4)
    assert [item["id"] for item in info["frontier"]] == [item.entry_id for item in frontier]
    assert info["frontier"][0]["anchor"] == frontier[0].anchor_text
    assert (info["step"], info["budget_left"], info["action"], info["trajectory"]) == (0, 8.0, None, None)
    assert observation.startswith(f"Question: {question}")
    assert set(info) == set(StepInfo.__annotations__)


def test_expand_adds_frontier_ids_and_charges_per_id(make_hand_env: EnvFactory) -> None:
    env, _, info = start(make_hand_env)
    target = info["frontier"][0]["id"]
    observation, reward, terminated, truncated, info = env.step(expand(target, target))  # duplicate charged once
    assert info["working_set_ids"][-1] == target
    assert target not in [item["id"] for item in info["frontier"]]
    assert info["costs"] == {"expand": 1.0, "refine": 0.0, "invalid": 0.0, "total": 1.0}
    assert (reward, terminated, truncated, info["step"], info["action"]) == (0.0, False, False, 1, "expand")
    assert f"[{target}]" in observation and info["parse_error"] is None


@pytest.mark.parametrize(
    ("action", "fragment"),
    [
        (expand("e99"), "e99 not in the frontier"),
        ("please stop", "no JSON object"),
        ('{"action": "expand", "ids": []}', "Invalid expand action"),
        ('{"action": "fly"}', "Unknown action"),
    ],
)
def test_invalid_action_costs_a_step_and_is_recorded(make_hand_env: EnvFactory, action: str, fragment: str) -> None:
    env, _, before = start(make_hand_env, invalid_cost=0.5)
    observation, reward, terminated, truncated, info = env.step(action)
    assert info["action"] == "invalid" and fragment in (info["parse_error"] or "")
    assert info["working_set_ids"] == before["working_set_ids"] and info["frontier"] == before["frontier"]
    assert (info["step"], info["budget_left"], info["costs"]["invalid"]) == (1, 7.5, 0.5)
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert "Your last action was invalid" in observation and fragment in observation
    observation, *_, info = env.step('{"action": "stop"}')
    assert "Your last action was invalid" not in observation  # shown once
    record = info["trajectory"].actions[0]
    assert (record.kind, record.text, record.cost) == ("invalid", action, 0.5)
    assert fragment in (record.error or "")
    assert info["reward_components"]["invalid_actions"] == 1.0


def test_expand_of_working_set_id_is_invalid(make_hand_env: EnvFactory) -> None:
    env, _, info = start(make_hand_env)
    *_, info = env.step(expand(info["working_set_ids"][0]))
    assert info["action"] == "invalid" and "not in the frontier" in (info["parse_error"] or "")


def test_expand_limits_ids_per_turn_and_budget(make_hand_env: EnvFactory) -> None:
    env, _, info = start(make_hand_env, task_index=2, max_ids_per_expand=1)
    ids = [item["id"] for item in info["frontier"]]
    *_, info = env.step(expand(*ids[:2]))
    assert info["action"] == "invalid" and "at most 1" in (info["parse_error"] or "")
    env, _, info = start(make_hand_env, task_index=2, budget=1.5, expand_cost_per_id=1.0, refine_cost=1.0)
    frontier_ids = [item["id"] for item in info["frontier"]]
    *_, info = env.step(expand(*frontier_ids[:2]))
    assert info["action"] == "invalid" and "only 1.5 budget" in (info["parse_error"] or "")


def test_refine_searches_again_and_adds_new_hits(make_hand_env: EnvFactory, hand_store: Any) -> None:
    env, _, before = start(make_hand_env)
    *_, info = env.step('{"action": "refine", "query": "Bruno plays the cello"}')
    assert info["action"] == "refine" and info["query"] == "Bruno plays the cello"
    hits = [hit.entry_id for hit in hand_store.search("conv-test", "Bruno plays the cello", k=2)]
    expected = before["working_set_ids"] + [i for i in hits if i not in before["working_set_ids"]]
    assert info["working_set_ids"] == expected
    assert "e8" in info["working_set_ids"]
    assert info["costs"]["refine"] == 1.0 and info["budget_left"] == 7.0
    assert not set(info["working_set_ids"]) & {item["id"] for item in info["frontier"]}


def test_refine_new_entries_adds_k_entries_the_working_set_lacks(make_hand_env: EnvFactory, hand_store: Any) -> None:
    """A refine whose best hit is already retrieved adds the next best instead (`refine_new_entries`)."""
    query = "Alma works at Bluefin Analytics"
    for new_entries in (False, True):
        env, _, before = start(make_hand_env, refine_new_entries=new_entries)
        *_, info = env.step(f'{{"action": "refine", "query": "{query}"}}')
        retrieved = set(before["working_set_ids"])
        ranked = [hit.entry_id for hit in hand_store.search("conv-test", query, k=12)]
        assert set(ranked[:2]) & retrieved, "the test needs a query whose top 2 hold a retrieved entry"
        fresh = [entry_id for entry_id in ranked if entry_id not in retrieved]
        added = info["working_set_ids"][len(before["working_set_ids"]) :]
        assert added == (fresh[:2] if new_entries else [i for i in ranked[:2] if i not in retrieved])
        assert len(added) == 2 or not new_entries


def test_refine_top_k_sets_how_many_entries_a_refine_adds(make_hand_env: EnvFactory, hand_store: Any) -> None:
    """`refine_top_k` caps a refine's additions while the first search keeps `initial_top_k`."""
    query = "Alma works at Bluefin Analytics"
    env, _, before = start(make_hand_env, refine_new_entries=True, refine_top_k=1)
    assert len(before["working_set_ids"]) == env.config.initial_top_k == 2
    *_, info = env.step(f'{{"action": "refine", "query": "{query}"}}')
    fresh = [hit.entry_id for hit in hand_store.search("conv-test", query, k=12)]
    fresh = [entry_id for entry_id in fresh if entry_id not in before["working_set_ids"]]
    assert info["working_set_ids"] == [*before["working_set_ids"], fresh[0]]
    assert info["costs"]["refine"] == env.config.refine_cost


def test_stop_terminates_with_the_judge_reward(make_hand_env: EnvFactory, judge: Any) -> None:
    env, _, info = start(make_hand_env)
    env.step(expand(info["frontier"][0]["id"]))
    _observation, reward, terminated, truncated, info = env.step('```json\n{"action": "stop"}\n```')
    assert (terminated, truncated, info["stop_reason"]) == (True, False, "stop")
    trajectory = info["trajectory"]
    assert trajectory is not None and trajectory.stop_reason == "stop"
    assert [entry.id for entry in trajectory.retrieved] == info["working_set_ids"]
    assert [a.kind for a in trajectory.actions] == ["expand", "stop"]
    assert trajectory.budget_spent == 1.0 and trajectory.graph_id == "conv-test"
    assert trajectory.context_tokens > 0
    expected = judge.score(trajectory)
    assert reward == pytest.approx(expected.total) and info["reward_components"] == expected.components
    assert info["reward_components"]["evidence_recall"] == 1.0  # D1:3 and D2:2 both retrieved
    with pytest.raises(RolloutError, match="reset"):
        env.step('{"action": "stop"}')


def test_force_stop_ends_the_episode_without_a_policy_action(make_hand_env: EnvFactory, judge: Any) -> None:
    env, _, info = start(make_hand_env)
    env.step("nonsense")
    _observation, reward, terminated, truncated, info = env.force_stop()
    assert (terminated, truncated, info["stop_reason"], info["action"], info["parse_error"]) == (
        False, True, "forced", "forced", None,
    )  # fmt: skip
    trajectory = info["trajectory"]
    assert [(a.kind, a.cost) for a in trajectory.actions] == [("invalid", 1.0), ("forced", 0.0)]
    assert trajectory.stop_reason == "forced" and info["step"] == 1 and info["budget_left"] == 7.0
    expected = judge.score(trajectory)
    assert reward == pytest.approx(expected.total) and info["reward_components"] == expected.components
    parts = info["reward_components"]
    assert parts["format"] == 0.0  # the one policy action was invalid; a forced `stop` used to make F = 0.5
    assert (parts["steps"], parts["actions_forced"], parts["actions_stop"]) == (1.0, 1.0, 0.0)
    with pytest.raises(RolloutError, match="reset"):
        env.force_stop()


def test_force_stop_charges_a_cut_turn_as_invalid(make_hand_env: EnvFactory) -> None:
    env, _, info = start(make_hand_env, invalid_cost=0.5)
    env.step(expand(info["frontier"][0]["id"]))
    *_, truncated, info = env.force_stop(cut_text='{"action": "exp')
    cut, forced = info["trajectory"].actions[1:]
    assert (cut.kind, cut.text, cut.error, cut.cost, cut.step) == ("invalid", '{"action": "exp', CUT_TURN_ERROR, 0.5, 1)
    assert (forced.kind, forced.text, forced.cost) == ("forced", "", 0.0)
    assert truncated and info["parse_error"] == CUT_TURN_ERROR and info["step"] == 2
    assert info["costs"] == {"expand": 1.0, "refine": 0.0, "invalid": 0.5, "total": 1.5}
    assert info["reward_components"]["format"] == 0.5 and info["reward_components"]["actions_invalid"] == 1.0
    env, _, info = start(make_hand_env, budget=3.0, invalid_cost=2.0)
    for _ in range(2):
        *_, info = env.step(expand(info["frontier"][0]["id"]))
    *_, info = env.force_stop(cut_text="{")
    assert info["trajectory"].actions[2].cost == 1.0 and info["budget_left"] == 0.0  # at most the budget left
    with pytest.raises(RolloutError, match="str"):
        start(make_hand_env)[0].force_stop(cut_text=7)  # type: ignore[arg-type]


def test_trajectory_records_the_initial_working_set(make_hand_env: EnvFactory, hand_store: Any) -> None:
    env, _, info = start(make_hand_env)
    initial = sorted({turn for entry in hand_store.get_entries("conv-test", info["working_set_ids"])
                      for turn in entry.source_turn_ids})  # fmt: skip
    env.step(expand(info["frontier"][0]["id"]))
    *_, info = env.step('{"action": "stop"}')
    assert info["trajectory"].initial_turn_ids == initial
    assert len(info["trajectory"].retrieved_turn_ids) > len(initial)


def test_budget_runs_out_truncates(make_hand_env: EnvFactory) -> None:
    env, _, info = start(make_hand_env, budget=2.0, invalid_cost=1.0)
    *_, info = env.step("nonsense")
    _observation, reward, terminated, truncated, info = env.step(expand(info["frontier"][0]["id"]))
    assert (terminated, truncated, info["stop_reason"], info["budget_left"]) == (False, True, "budget", 0.0)
    assert info["trajectory"] is not None and info["trajectory"].stop_reason == "budget"
    assert reward == pytest.approx(info["reward_components"]["total"])


def test_budget_below_cheapest_action_truncates(make_hand_env: EnvFactory) -> None:
    env, _, info = start(make_hand_env, budget=1.5, invalid_cost=0.75)
    *_, truncated, info = env.step("?")
    assert truncated and info["stop_reason"] == "budget" and info["budget_left"] == 0.75


def test_max_steps_truncates(make_hand_env: EnvFactory) -> None:
    env, *_ = start(make_hand_env, max_steps=2, invalid_cost=0.0)
    assert env.step("x")[3] is False
    _observation, _reward, terminated, truncated, info = env.step("y")
    assert (terminated, truncated, info["stop_reason"], info["step"]) == (False, True, "max_steps", 2)
    assert [a.kind for a in info["trajectory"].actions] == ["invalid", "invalid"]


def test_stop_on_the_last_step_is_termination(make_hand_env: EnvFactory) -> None:
    env, *_ = start(make_hand_env, max_steps=1)
    *_, terminated, truncated, info = env.step('{"action": "stop"}')
    assert (terminated, truncated, info["stop_reason"]) == (True, False, "stop")


def test_reset_errors_name_the_fix(make_hand_env: EnvFactory) -> None:
    env = make_hand_env()
    env.tasks = []
    with pytest.raises(ConfigError, match="options\\['task'\\]"):
        env.reset(seed=0)
    stranger = make_hand_env().tasks[0].model_copy(update={"conversation_id": "missing"})
    with pytest.raises(GraphError, match="missing"):
        env.reset(options={"task": stranger})
    with pytest.raises(RolloutError):
        make_hand_env().step('{"action": "stop"}')


def test_reset_without_task_draws_from_tasks_with_the_seed(make_hand_env: EnvFactory) -> None:
    env = make_hand_env()
    drawn = [env.reset(seed=seed)[1]["task_id"] for seed in range(12)]
    again = [env.reset(seed=seed)[1]["task_id"] for seed in range(12)]
    assert drawn == again and len(set(drawn)) > 1
