"""The walk of one episode, step by step: what the policy saw and did (shown by the web page, kept in eval records).

Built from the env's `info` (`memora_rl.env.info.StepInfo`) by whoever plays the episode: the
service's retrieve and the episode runner both use `WalkLog`, so a live walk and an eval walk
have one shape. An env whose `info` lacks the working set, frontier or budget yields no walk.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

STATE_KEYS = ("working_set_ids", "frontier", "budget_left")
"""The `info` keys a walk step is built from."""


class FrontierNode(BaseModel):
    """A frontier entry the policy could expand at one step."""

    id: str
    anchor: str
    """What links it to the working set: the cue anchor's text, or the episode's or similar entry's label."""
    via: str = "anchor"
    """The link kind (`env.frontier_links`): anchor, episode, similar, turn or search."""


class WalkStep(BaseModel):
    """The state the policy saw at one step and the action it took there."""

    step: int
    observation: str
    """The rendered prompt text the policy saw."""
    working_set_ids: list[str]
    frontier: list[FrontierNode]
    budget_left: float
    action_text: str | None = None
    """The policy's raw action (None on the final state)."""
    action: str | None = None
    """Kind of the action: expand, refine, stop, invalid (None on the final state)."""
    error: str | None = None


def walk_state(step: int, observation: str, info: Mapping[str, Any]) -> WalkStep | None:
    """The walk step of the state an env `info` describes (None when it lacks a key of `STATE_KEYS`).

    >>> walk_state(0, "obs", {"working_set_ids": ["e1"], "frontier": [], "budget_left": 4}).budget_left
    4.0
    >>> walk_state(0, "obs", {"step": 0}) is None
    True
    """
    if any(key not in info for key in STATE_KEYS):
        return None
    return WalkStep(
        step=step,
        observation=observation,
        working_set_ids=list(info["working_set_ids"]),
        frontier=[
            FrontierNode(id=item["id"], anchor=item["anchor"], via=item.get("via", "anchor"))
            for item in info["frontier"]
        ],
        budget_left=float(info["budget_left"]),
    )


class WalkLog:
    """Collects one episode's walk as it is played: `seen` before each action, `acted` after it, `ended` at the end."""

    def __init__(self) -> None:
        self._steps: list[WalkStep | None] = []
        self._pending: WalkStep | None = None

    def seen(self, observation: str, info: Mapping[str, Any]) -> None:
        """Note the state the policy is about to act on."""
        self._pending = walk_state(len(self._steps), observation, info)

    def acted(self, action_text: str, info: Mapping[str, Any]) -> None:
        """Attach the action taken on the noted state and the kind the env parsed it as (from the step's `info`)."""
        state = self._pending
        update = {"action_text": action_text, "action": info.get("action"), "error": info.get("parse_error")}
        self._steps.append(None if state is None else state.model_copy(update=update))
        self._pending = None

    def ended(self, observation: str, info: Mapping[str, Any]) -> None:
        """Add the final state (no action taken on it)."""
        self._steps.append(walk_state(len(self._steps), observation, info))

    def walk(self) -> list[WalkStep] | None:
        """The steps so far, or None when some state could not be described (an env without state keys)."""
        if any(step is None for step in self._steps):
            return None
        return [step for step in self._steps if step is not None]
