"""The action grammar: table-driven cases plus 10,000+ random and adversarial strings (typed result every time)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memora_rl.core.parse import (
    ActionParseError,
    ExpandAction,
    RefineAction,
    StopAction,
    format_action,
    parse_action,
)

VALID_CASES = [
    ('{"action": "stop"}', StopAction()),
    ('{"action": "expand", "ids": ["e12", "e40"]}', ExpandAction(ids=["e12", "e40"])),
    ('{"action": "refine", "query": "Alma\'s employer"}', RefineAction(query="Alma's employer")),
    ('```json\n{"action": "stop"}\n```', StopAction()),
    ('```\n{"action":"expand","ids":["e1"]}\n```\nDone.', ExpandAction(ids=["e1"])),
    ('I will expand e3 now: {"action": "expand", "ids": ["e3"]} because it is linked.', ExpandAction(ids=["e3"])),
    ('Thinking {not json} then {"action": "stop"}', StopAction()),
    ('{"action": "refine", "query": "  où est Émile? 🙂 "}', RefineAction(query="où est Émile? 🙂")),
    ('{"action": "expand", "ids": [" e7 "]}', ExpandAction(ids=["e7"])),
    ('{"action": "stop"}{"action": "expand", "ids": ["e1"]}', StopAction()),
    ('  \n{"ids": ["e2"], "action": "expand"}  ', ExpandAction(ids=["e2"])),
]

INVALID_CASES = [
    ("", "empty"),
    ("   \n\t", "empty"),
    ("stop", "no_json"),
    ("expand e12 and e40", "no_json"),
    ('{"action": "stop"', "invalid_json"),
    ("{'action': 'stop'}", "invalid_json"),
    ('{"action": "expand", "ids": [e12]}', "invalid_json"),
    ("{}", "missing_action"),
    ('{"ids": ["e1"]}', "missing_action"),
    ('{"action": "jump"}', "unknown_action"),
    ('{"action": "STOP"}', "unknown_action"),
    ('{"action": 3}', "unknown_action"),
    ('{"action": null}', "unknown_action"),
    ('{"action": ["stop"]}', "unknown_action"),
    ('{"action": "expand"}', "schema"),
    ('{"action": "expand", "ids": []}', "schema"),
    ('{"action": "expand", "ids": [12, 40]}', "schema"),
    ('{"action": "expand", "ids": ["e1", null]}', "schema"),
    ('{"action": "expand", "ids": [""]}', "schema"),
    ('{"action": "expand", "ids": "e12"}', "schema"),
    ('{"action": "refine"}', "schema"),
    ('{"action": "refine", "query": ""}', "schema"),
    ('{"action": "refine", "query": "   "}', "schema"),
    ('{"action": "refine", "query": 5}', "schema"),
    ('{"action": "stop", "reason": "done"}', "schema"),
    ('{"action": "expand", "ids": ["e1"], "query": "x"}', "schema"),
    ('{"a": ' + "[" * 50_000, "invalid_json"),
    ('["action", "stop"]', "no_json"),
]


@pytest.mark.parametrize(("text", "expected"), VALID_CASES)
def test_valid_actions_parse(text: str, expected: object) -> None:
    assert parse_action(text) == expected


@pytest.mark.parametrize(("text", "reason"), INVALID_CASES)
def test_invalid_actions_give_typed_errors(text: str, reason: str) -> None:
    result = parse_action(text)
    assert isinstance(result, ActionParseError), result
    assert result.reason == reason
    assert '{"action": "stop"}' in result.message  # the message shows a valid form


def test_non_string_input_is_an_error_not_an_exception() -> None:
    assert isinstance(parse_action(None), ActionParseError)  # type: ignore[arg-type]
    assert isinstance(parse_action(b'{"action": "stop"}'), ActionParseError)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "action", [StopAction(), ExpandAction(ids=["e1", "e22"]), RefineAction(query='a "quoted" query\nwith newline')]
)
def test_format_action_round_trips(action: ExpandAction | RefineAction | StopAction) -> None:
    text = format_action(action)
    assert "\n" not in text
    assert json.loads(text)["action"] == action.action
    assert parse_action(text) == action


def test_format_action_is_canonical() -> None:
    assert format_action(ExpandAction(ids=["e12", "e40"])) == '{"action": "expand", "ids": ["e12", "e40"]}'
    assert format_action(StopAction()) == '{"action": "stop"}'


# ---- property tests ------------------------------------------------------------------------------

FRAGMENTS = [
    "{", "}", "[", "]", '"', ":", ",", " ", "\n", "```", "```json", "action", '"action"', '"expand"', '"refine"',
    '"stop"', '"ids"', '"query"', '"e1"', "e1", "null", "true", "0", "-1e999", "NaN", '"\\u00e9"', "\\", "'",
    '{"action": "expand", "ids": [', '{"action": "stop"}', '{"action": "refine", "query": ', "é", "🙂", "\x00",
]  # fmt: skip

adversarial_text = st.lists(st.sampled_from(FRAGMENTS), max_size=24).map("".join)
json_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(max_size=8),
    st.lists(st.text(max_size=5) | st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=2),
)
action_like = st.fixed_dictionaries(
    {"action": st.sampled_from(["expand", "refine", "stop", "other", ""]) | json_values},
    optional={"ids": json_values, "query": json_values, "extra": st.booleans()},
).map(json.dumps)
noisy_action = st.tuples(st.text(max_size=12), action_like, st.text(max_size=12)).map("".join)
any_text = st.text(max_size=200) | adversarial_text | action_like | noisy_action

valid_action = st.one_of(
    st.just(StopAction()),
    st.lists(st.text(min_size=1, max_size=8).filter(str.strip), min_size=1, max_size=4).map(
        lambda ids: ExpandAction(ids=[i.strip() for i in ids])
    ),
    st.text(min_size=1, max_size=40).filter(str.strip).map(lambda q: RefineAction(query=q.strip())),
)


@pytest.mark.slow
@settings(max_examples=3_000, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_text)
def test_parser_always_returns_a_typed_result(text: str) -> None:
    result = parse_action(text)
    assert isinstance(result, ExpandAction | RefineAction | StopAction | ActionParseError)
    if isinstance(result, ActionParseError):
        assert result.message
    else:
        assert parse_action(format_action(result)) == result  # an accepted action is canonicalisable


@settings(max_examples=500, deadline=None)
@given(valid_action, st.text(max_size=30).filter(lambda s: "{" not in s), st.text(max_size=30))
def test_actions_survive_surrounding_text(action: object, prefix: str, suffix: str) -> None:
    assert parse_action(f"{prefix}{format_action(action)}{suffix}") == action  # type: ignore[arg-type]
