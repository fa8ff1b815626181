"""The JSON schema of the actions valid in one env state, for constrained (guided) decoding.

`action_schema` turns a state (frontier ids, budget left) and the env's limits into a JSON
schema that admits only actions `memora_rl.core.parse.parse_action` accepts *and* the env's
rules allow in that state: expand names 1 to k ids of the current frontier (k: the env's
`max_ids_per_expand`, lowered to what the budget left pays for), refine writes a non-blank
query of bounded length (when the budget pays for a refine), stop is always allowed. A
branch the state rules out (an empty frontier, an unaffordable refine) is left out.

The schema stays inside what vLLM's default structured-output backend (xgrammar) compiles:
`anyOf`, `const`, `enum`, `minItems`/`maxItems` and a string `pattern` (a `pattern` with
`minLength`/`maxLength` would send vLLM to another backend, so the query's bounds live in the
pattern). Whitespace between JSON tokens is the backend's choice; the parser ignores it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

QUERY_MAX_CHARS = 120
"""Longest refine query the schema admits by default (a query is a few words; oracle queries are a name and a word)."""
ACTION_OVERHEAD_TOKENS = 16
"""Tokens of a refine action around its query (`{"action": "refine", "query": "` ... `"}` and the end token,
12 to 13 with SmolLM2's tokenizer), so a query of `max_new_tokens - 16` ASCII characters always fits the limit."""
EPSILON = 1e-9
"""Slack in budget comparisons, as the env's ledger uses (costs are sums of floats)."""


class EnvLimits(Protocol):
    """The slice of `memora_rl.env.config.EnvConfig` that decides which actions are allowed."""

    max_ids_per_expand: int
    expand_cost_per_id: float
    refine_cost: float


@dataclass(frozen=True)
class ActionLimits:
    """The env's rules on actions, as the schema needs them (defaults: `EnvConfig`'s)."""

    max_ids_per_expand: int = 3
    """Most ids one expand may name."""
    expand_cost_per_id: float = 1.0
    """Budget units per expanded id (an expand of more ids than the budget left pays for is invalid)."""
    refine_cost: float = 1.0
    """Budget units of a refine (left out of the schema when the budget left cannot pay for it)."""
    max_query_chars: int = QUERY_MAX_CHARS
    """Longest refine query admitted (characters)."""

    def __post_init__(self) -> None:
        if self.max_ids_per_expand < 1 or self.max_query_chars < 1:
            raise ValueError(
                f"ActionLimits needs max_ids_per_expand >= 1 and max_query_chars >= 1, got "
                f"{self.max_ids_per_expand} and {self.max_query_chars}."
            )

    @classmethod
    def from_env_config(cls, config: EnvLimits, max_query_chars: int = QUERY_MAX_CHARS) -> ActionLimits:
        """The limits of an env config (`EnvConfig` or anything with its three fields)."""
        return cls(
            max_ids_per_expand=config.max_ids_per_expand,
            expand_cost_per_id=config.expand_cost_per_id,
            refine_cost=config.refine_cost,
            max_query_chars=max_query_chars,
        )

    def for_max_new_tokens(self, max_new_tokens: int) -> ActionLimits:
        """These limits with the query short enough that a refine fits `max_new_tokens` (at least 8 characters).

        >>> ActionLimits().for_max_new_tokens(64).max_query_chars
        48
        """
        fits = max(8, max_new_tokens - ACTION_OVERHEAD_TOKENS)
        return ActionLimits(self.max_ids_per_expand, self.expand_cost_per_id, self.refine_cost,
                            min(self.max_query_chars, fits))  # fmt: skip


def affordable_ids(budget_left: float | None, limits: ActionLimits) -> int:
    """Most ids an expand may name now: `max_ids_per_expand`, or fewer when the budget left pays for fewer.

    >>> affordable_ids(2.5, ActionLimits()), affordable_ids(None, ActionLimits()), affordable_ids(0.5, ActionLimits())
    (2, 3, 0)
    """
    if budget_left is None or limits.expand_cost_per_id <= 0:
        return limits.max_ids_per_expand
    return min(limits.max_ids_per_expand, math.floor((budget_left + EPSILON) / limits.expand_cost_per_id))


def query_pattern(max_chars: int) -> str:
    r"""The refine query's pattern: a non-space first character, then at most `max_chars - 1` more on one line.

    >>> query_pattern(48)
    '^\\S[^\\n]{0,47}$'
    """
    return rf"^\S[^\n]{{0,{max_chars - 1}}}$"


def _action(name: str, **fields: dict[str, Any]) -> dict[str, Any]:
    """One action's object schema: `action` fixed to `name`, the given fields required, no other key."""
    return {
        "type": "object",
        "properties": {"action": {"const": name}, **fields},
        "required": ["action", *fields],
        "additionalProperties": False,
    }


def action_schema(
    frontier_ids: Sequence[str] | None, budget_left: float | None = None, limits: ActionLimits | None = None
) -> dict[str, Any]:
    """The JSON schema of the actions valid in one state (a pure function of its arguments).

    Args:
        frontier_ids: The ids the env offers to expand now (`info["frontier"][*]["id"]`); None when the
            state is unknown: then expand admits any 1 to k non-blank ids of at most 64 characters.
        budget_left: Budget units left (`info["budget_left"]`); None: every action is affordable.
        limits: The env's limits (default `ActionLimits()`, the default env's).

    Returns:
        `{"anyOf": [expand, refine, stop]}` without the branches the state rules out (stop is always there).

    >>> [branch["properties"]["action"]["const"] for branch in action_schema([], 8.0)["anyOf"]]
    ['refine', 'stop']
    >>> action_schema(["e1", "e7"], 1.0)["anyOf"][0]["properties"]["ids"]
    {'type': 'array', 'items': {'enum': ['e1', 'e7']}, 'minItems': 1, 'maxItems': 1}
    """
    limits = limits or ActionLimits()
    branches: list[dict[str, Any]] = []
    most_ids = affordable_ids(budget_left, limits)
    ids = list(dict.fromkeys(frontier_ids)) if frontier_ids is not None else None
    if most_ids >= 1 and (ids is None or ids):
        item: dict[str, Any] = {"enum": ids} if ids is not None else {"type": "string", "pattern": r"^\S{1,64}$"}
        count = min(most_ids, len(ids)) if ids is not None else most_ids
        branches.append(_action("expand", ids={"type": "array", "items": item, "minItems": 1, "maxItems": count}))
    if budget_left is None or limits.refine_cost <= budget_left + EPSILON:
        branches.append(_action("refine", query={"type": "string", "pattern": query_pattern(limits.max_query_chars)}))
    branches.append(_action("stop"))
    return {"anyOf": branches}


def action_schema_for_info(info: Mapping[str, Any], limits: ActionLimits | None = None) -> dict[str, Any]:
    """`action_schema` of the state an env's `info` (`StepInfo`) describes: its frontier ids and budget left.

    An info without `frontier` (a caller that passes none) gives the state-free schema.
    """
    frontier = info.get("frontier")
    ids = [str(item["id"]) for item in frontier] if frontier is not None else None
    budget = info.get("budget_left")
    return action_schema(ids, float(budget) if budget is not None else None, limits)
