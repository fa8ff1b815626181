"""The `info` dict the retrieval env returns from `reset` and `step`, key by key."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from memora_rl.core.state import FrontierView
from memora_rl.core.trajectory import ActionKind, StopReason, Trajectory
from memora_rl.memory.records import FrontierLink


class FrontierInfo(TypedDict):
    """One frontier entry offered to the policy."""

    id: str
    """Entry id the policy may name in an expand."""
    anchor: str
    """Text of the link to the working set: the shared cue anchor, the episode cue, or the abstraction
    of the working-set entry it is similar to or neighbours by turn (see `via`)."""
    via: FrontierLink
    """The kind of link (`anchor` unless `EnvConfig.frontier_links` adds `episode`, `similar` or `turn`)."""


class StepInfo(TypedDict):
    """Structured state after `reset` or `step` (a fresh dict every call; every key always present)."""

    task_id: str
    """Id of the task (question) being played."""
    query: str
    """The current search query (the question until a refine replaces it)."""
    working_set_ids: list[str]
    """Entry ids retrieved so far, in the order they were added."""
    frontier: list[FrontierInfo]
    """Entries the policy may expand next, best first."""
    budget_left: float
    """Budget units left."""
    step: int
    """Policy actions taken so far (0 after reset; a `forced` stop is not counted)."""
    costs: dict[str, float]
    """Budget units spent so far by kind: `expand`, `refine`, `invalid`, and `total`."""
    action: ActionKind | None
    """Kind of the action just taken (`invalid` when it did not parse or was not allowed, `forced` when the
    caller ended the episode with `force_stop`); None after reset."""
    parse_error: str | None
    """Why the action just taken was invalid (parse or rule error, or a turn cut at the token limit), else None."""
    stop_reason: StopReason | None
    """On the final step: `stop` (terminated), `budget`, `max_steps` or `forced` (truncated); else None."""
    reward_components: dict[str, float]
    """On the final step: the judge's components (G, R, C, ... by name); empty before."""
    trajectory: Trajectory | None
    """On the final step: the finished `Trajectory` the judge scored; None before."""


def frontier_info(frontier: Sequence[FrontierView]) -> list[FrontierInfo]:
    """What `info` says of each frontier item, best first: its id, link text and link kind."""
    return [FrontierInfo(id=item.entry_id, anchor=item.anchor, via=item.via) for item in frontier]
