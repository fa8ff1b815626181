"""What one retrieval episode did: the record the env produces and the judge scores."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, Field

from memora_rl.core.state import ContextMode
from memora_rl.data.records import Task
from memora_rl.memory.records import Episode, MemoryEntry

ActionKind = Literal["expand", "refine", "stop", "invalid", "forced"]
"""`forced` is no policy action: the caller (a rollout out of turns or tokens) ended the episode."""
StopReason = Literal["stop", "budget", "max_steps", "forced"]
ACTION_KINDS: tuple[ActionKind, ...] = get_args(ActionKind)
"""Every action kind: the policy's four, then `forced`."""


class ActionRecord(BaseModel):
    """One policy turn (or the caller's forced stop): the raw text, how it parsed, and what it cost."""

    step: int
    text: str
    """The policy's raw output for this turn (empty for a `forced` stop)."""
    kind: ActionKind
    ids: list[str] = Field(default_factory=list)
    """Entry ids asked for by an expand (as written by the policy)."""
    query: str | None = None
    """The new query of a refine."""
    error: str | None = None
    """Why the text did not parse or was not allowed (kind == "invalid")."""
    cost: float = 0.0
    """Budget units this action spent."""


class Trajectory(BaseModel):
    """A finished (or truncated) episode over one task."""

    task: Task
    graph_id: str
    actions: list[ActionRecord] = Field(default_factory=list)
    retrieved: list[MemoryEntry] = Field(default_factory=list)
    """The final working set, in the order entries were added."""
    budget: float
    """Budget units available for the episode."""
    budget_spent: float = 0.0
    stop_reason: StopReason | None = None
    context_tokens: int = 0
    """Tokens of retrieved context handed to an answerer (policy tokenizer, or 4 characters per token): in
    `factual` mode the entries' `abstraction: value` lines, in the episodic modes `core.context.build_context`."""
    initial_turn_ids: list[str] = Field(default_factory=list)
    """Source turn ids of the working set right after reset, before any action (sorted)."""
    context_mode: ContextMode = "factual"
    """How the answer context reads `retrieved` (`memora_rl.core.context`): the env's `context_mode`."""
    episodes: list[Episode] = Field(default_factory=list)
    """Stored episodes of the retrieved entries, first met first; filled only when `context_mode` reads them."""

    @property
    def policy_actions(self) -> list[ActionRecord]:
        """The policy's own actions: every action but a `forced` stop."""
        return [action for action in self.actions if action.kind != "forced"]

    def action_count(self, kind: ActionKind) -> int:
        """Number of actions of one kind."""
        return sum(action.kind == kind for action in self.actions)

    @property
    def refines(self) -> int:
        """Number of refine actions."""
        return self.action_count("refine")

    @property
    def invalid_actions(self) -> int:
        """Number of actions that did not parse, were not allowed, or were cut at the token limit."""
        return self.action_count("invalid")

    @property
    def retrieved_turn_ids(self) -> set[str]:
        """Union of the source turn ids of the retrieved entries (provenance)."""
        return {turn_id for entry in self.retrieved for turn_id in entry.source_turn_ids}
