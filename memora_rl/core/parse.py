"""The action grammar: parse a policy's text into a typed action, or a typed parse error.

One JSON object per turn:
`{"action": "expand", "ids": ["e12", "e40"]}` | `{"action": "refine", "query": "..."}` |
`{"action": "stop"}`. The parser is tolerant of what surrounds the object (code fences,
a sentence before or after: the first JSON object in the text is the action) and strict
about the object itself (unknown action, extra keys, empty or non-string ids, empty
query are errors). It never raises and never maps an invalid action to another one.
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr, TypeAdapter, ValidationError

MAX_ACTION_CHARS = 16_384
"""Only this many leading characters of a policy turn are searched for the action."""
MAX_JSON_STARTS = 64
"""At most this many `{` positions are tried as the start of the action object."""

ParseErrorReason = Literal["empty", "no_json", "invalid_json", "missing_action", "unknown_action", "schema"]
"""Why a text is not an action: nothing written, no `{`, no decodable object, no `action` key,
an action name outside expand/refine/stop, or fields that break the action's schema."""


class _ActionModel(BaseModel):
    """Shared settings: unknown keys are errors, strings are stripped of surrounding spaces."""

    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)


class ExpandAction(_ActionModel):
    """Add frontier entries to the working set: `{"action": "expand", "ids": ["e12"]}`."""

    action: Literal["expand"] = "expand"
    ids: list[Annotated[StrictStr, Field(min_length=1)]] = Field(min_length=1)
    """Entry ids taken from the frontier, as shown in the observation (at least one)."""


class RefineAction(_ActionModel):
    """Search again with a new query: `{"action": "refine", "query": "Alice's employer"}`."""

    action: Literal["refine"] = "refine"
    query: StrictStr = Field(min_length=1)
    """The new search query (non-empty after stripping spaces)."""


class StopAction(_ActionModel):
    """End the episode with the current working set: `{"action": "stop"}`."""

    action: Literal["stop"] = "stop"


Action = Annotated[ExpandAction | RefineAction | StopAction, Field(discriminator="action")]
"""A parsed action; `action` is the discriminator."""

ACTION_NAMES: tuple[str, ...] = ("expand", "refine", "stop")

_ACTION_ADAPTER: TypeAdapter[ExpandAction | RefineAction | StopAction] = TypeAdapter(Action)


class ActionParseError(BaseModel):
    """A typed parse failure (a result, not an exception): a reason code and a message for the policy."""

    model_config = ConfigDict(frozen=True)

    reason: ParseErrorReason
    message: str
    """One sentence saying what was wrong and what a valid action looks like."""


_EXAMPLE = '{"action": "expand", "ids": ["e12"]}, {"action": "refine", "query": "..."} or {"action": "stop"}'


def _error(reason: ParseErrorReason, problem: str) -> ActionParseError:
    """Build a parse error whose message ends with the valid forms."""
    return ActionParseError(reason=reason, message=f"{problem} Write one JSON object: {_EXAMPLE}.")


def first_json_object(text: str) -> dict[str, object] | None:
    r"""Return the first JSON object embedded in `text`, or None when there is none.

    >>> first_json_object('Sure. ```json\n{"action": "stop"}\n```')
    {'action': 'stop'}
    """
    decoder = json.JSONDecoder()
    start = text.find("{")
    tries = 0
    while start != -1 and tries < MAX_JSON_STARTS:
        tries += 1
        try:
            value, _ = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            value = None
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    return None


def _schema_problem(error: ValidationError) -> str:
    """Summarise a pydantic error as `field: reason` pairs."""
    parts = []
    for item in error.errors()[:3]:
        location = ".".join(str(part) for part in item["loc"][1:]) or "action"
        parts.append(f"{location}: {item['msg']}")
    return "; ".join(parts)


def parse_action(text: str) -> ExpandAction | RefineAction | StopAction | ActionParseError:
    """Parse one policy turn; returns an action or an `ActionParseError`, never raises.

    >>> parse_action('{"action": "expand", "ids": ["e1", "e2"]}')
    ExpandAction(action='expand', ids=['e1', 'e2'])
    >>> parse_action('{"action": "jump"}').reason
    'unknown_action'
    """
    if not isinstance(text, str) or not text.strip():
        return _error("empty", "The reply is empty.")
    head = text[:MAX_ACTION_CHARS]
    if "{" not in head:
        return _error("no_json", "The reply holds no JSON object.")
    payload = first_json_object(head)
    if payload is None:
        return _error("invalid_json", "The reply's JSON does not decode (check quotes, commas and braces).")
    if "action" not in payload:
        return _error("missing_action", 'The JSON object has no "action" key.')
    name = payload["action"]
    if not isinstance(name, str) or name not in ACTION_NAMES:
        shown = json.dumps(name, ensure_ascii=False)[:40]
        return _error("unknown_action", f"Unknown action {shown}; use expand, refine or stop.")
    try:
        return _ACTION_ADAPTER.validate_python(payload)
    except ValidationError as error:
        return _error("schema", f"Invalid {name} action ({_schema_problem(error)}).")


def format_action(action: ExpandAction | RefineAction | StopAction) -> str:
    """Write an action as its canonical one-line JSON (what few-shot examples and baselines emit).

    >>> format_action(ExpandAction(ids=["e12", "e40"]))
    '{"action": "expand", "ids": ["e12", "e40"]}'
    """
    return json.dumps(action.model_dump(), ensure_ascii=False)
