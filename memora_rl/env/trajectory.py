"""What one retrieval episode did: the record the env produces and the judge scores."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from memora_rl.data.records import Task
from memora_rl.memory.records import MemoryEntry

ActionKind = Literal["expand", "refine", "stop", "invalid"]
StopReason = Literal["stop", "budget", "max_steps"]


class ActionRecord(BaseModel):
    """One policy turn: the raw text, how it parsed, and what it cost."""

    step: int
    text: str
    """The policy's raw output for this turn."""
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
    """Tokens of retrieved context handed to an answerer (policy tokenizer, or whitespace words)."""

    @property
    def refines(self) -> int:
        """Number of refine actions."""
        return sum(action.kind == "refine" for action in self.actions)

    @property
    def invalid_actions(self) -> int:
        """Number of actions that did not parse or were not allowed."""
        return sum(action.kind == "invalid" for action in self.actions)

    @property
    def retrieved_turn_ids(self) -> set[str]:
        """Union of the source turn ids of the retrieved entries (provenance)."""
        return {turn_id for entry in self.retrieved for turn_id in entry.source_turn_ids}
