"""The per-state action schema admits only actions the parser and the env accept, and rejects the rest."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from memora_rl.core.action_schema import (
    ActionLimits,
    action_schema,
    action_schema_for_info,
    affordable_ids,
    query_pattern,
)
from memora_rl.core.parse import ActionParseError, ExpandAction, RefineAction, StopAction, parse_action
from memora_rl.env.config import EnvConfig

FRONTIER = ["e2", "e7", "e11", "e40"]


def admits(schema: dict[str, Any], action: dict[str, Any]) -> bool:
    return Draft202012Validator(schema).is_valid(action)


def instances(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """Actions written by hand from each branch the schema holds: every id list, a few queries, stop."""
    written: list[dict[str, Any]] = []
    for branch in schema["anyOf"]:
        name = branch["properties"]["action"]["const"]
        if name == "expand":
            ids = branch["properties"]["ids"]
            for size in range(1, ids["maxItems"] + 1):
                written += [
                    {"action": "expand", "ids": list(c)} for c in itertools.product(ids["items"]["enum"], repeat=size)
                ]
        elif name == "refine":
            longest = int(branch["properties"]["query"]["pattern"].split(",")[1].split("}")[0]) + 1
            for query in ("Tomas", "Tomas's coworker weekends", "café Ümlaut 🙂", "x" * longest, "a  b "):
                written.append({"action": "refine", "query": query})
        else:
            written.append({"action": "stop"})
    return written


def test_schema_validates_as_a_json_schema():
    Draft202012Validator.check_schema(action_schema(FRONTIER, 8.0))
    Draft202012Validator.check_schema(action_schema(None))


@pytest.mark.parametrize("budget", [8.0, 2.0, 1.0, 0.5, None])
def test_every_admitted_action_parses_and_keeps_the_rules(budget):
    limits = ActionLimits(max_ids_per_expand=3)
    schema = action_schema(FRONTIER, budget, limits)
    written = instances(schema)
    assert written
    for action in written:
        assert admits(schema, action), action
        for text in (json.dumps(action), json.dumps(action, separators=(",", ":"))):
            parsed = parse_action(text)
            assert not isinstance(parsed, ActionParseError), (text, parsed)
        if isinstance(parsed, ExpandAction):
            assert set(parsed.ids) <= set(FRONTIER) and len(set(parsed.ids)) <= affordable_ids(budget, limits)
        if isinstance(parsed, RefineAction):
            assert budget is None or budget >= limits.refine_cost
    assert {"action": "stop"} in written


@pytest.mark.parametrize(
    "action",
    [
        {"action": "expand", "ids": ["e3"]},  # not in the frontier
        {"action": "expand", "ids": ["e2", "e99"]},  # one of two outside
        {"action": "expand", "ids": ["e2", "e7", "e11", "e40"]},  # more than max_ids_per_expand
        {"action": "expand", "ids": []},
        {"action": "expand", "ids": "e2"},
        {"action": "expand"},
        {"action": "refine", "query": ""},
        {"action": "refine", "query": "   "},
        {"action": "refine", "query": "x" * 121},
        {"action": "refine", "query": "two\nlines"},
        {"action": "refine"},
        {"action": "stop", "ids": ["e2"]},
        {"action": "jump"},
        {"ids": ["e2"]},
    ],
)
def test_the_schema_rejects_what_the_env_would_not_take(action):
    assert not admits(action_schema(FRONTIER, 8.0, ActionLimits()), action)


def test_budget_and_frontier_leave_branches_out():
    names = lambda schema: [b["properties"]["action"]["const"] for b in schema["anyOf"]]  # noqa: E731
    assert names(action_schema(FRONTIER, 8.0)) == ["expand", "refine", "stop"]
    assert names(action_schema([], 8.0)) == ["refine", "stop"]  # nothing to expand
    cheap_refine = ActionLimits(expand_cost_per_id=1.0, refine_cost=0.5)
    assert names(action_schema(FRONTIER, 0.5, cheap_refine)) == ["refine", "stop"]  # no id affordable
    dear_refine = ActionLimits(refine_cost=2.0)
    assert names(action_schema(FRONTIER, 1.5, dear_refine)) == ["expand", "stop"]
    assert action_schema(FRONTIER, 2.0)["anyOf"][0]["properties"]["ids"]["maxItems"] == 2  # budget pays for 2
    assert action_schema(["e2"], 8.0)["anyOf"][0]["properties"]["ids"]["maxItems"] == 1


def test_limits_follow_the_env_config_and_the_token_limit():
    limits = ActionLimits.from_env_config(EnvConfig(max_ids_per_expand=2, refine_cost=0.5))
    assert (limits.max_ids_per_expand, limits.refine_cost) == (2, 0.5)
    assert limits.for_max_new_tokens(48).max_query_chars == 32
    assert limits.for_max_new_tokens(4096).max_query_chars == limits.max_query_chars
    assert query_pattern(32) == r"^\S[^\n]{0,31}$"
    with pytest.raises(ValueError, match="max_ids_per_expand"):
        ActionLimits(max_ids_per_expand=0)


def test_info_gives_the_state():
    info = {"frontier": [{"id": "e7", "anchor": "a", "via": "anchor"}], "budget_left": 3.0}
    assert action_schema_for_info(info) == action_schema(["e7"], 3.0)
    free = action_schema_for_info({})
    assert admits(free, {"action": "expand", "ids": ["anything"]})
    assert not admits(free, {"action": "expand", "ids": [" "]})


def test_admitted_actions_are_valid_steps_of_the_real_env(embedder):
    """Every action the schema admits at a state is taken by `RetrievalEnv.step` without an error."""
    from memora_rl.env.retrieval import RetrievalEnv
    from memora_rl.judge import TrajectoryJudge
    from tests.policy.graph import TASKS, PolicyTestStore

    store = PolicyTestStore()
    config = EnvConfig(initial_top_k=2, frontier_limit=4, budget=2.0)
    env = RetrievalEnv(store, config, judge=TrajectoryJudge(config.judge, embedder=store.embedder),
                       embedder=store.embedder)  # fmt: skip
    for task in TASKS:
        _, info = env.reset(seed=0, options={"task": task})
        assert info["frontier"], "the test needs a state with a frontier"
        start = env.snapshot()
        schema = action_schema_for_info(info, ActionLimits.from_env_config(config))
        for action in instances(schema):
            env.restore(start)
            _, _, _, _, after = env.step(json.dumps(action))
            assert after["action"] != "invalid", (action, after["parse_error"])
        env.restore(start)
        outside = {"action": "expand", "ids": ["m-not-offered"]}
        assert not admits(schema, outside)
        assert env.step(json.dumps(outside))[4]["action"] == "invalid"
        assert isinstance(parse_action(json.dumps({"action": "stop"})), StopAction)
