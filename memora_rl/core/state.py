"""What the policy is shown at one step: the env's state as plain records for the renderer."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from memora_rl.memory.records import MemoryEntry


class FrontierView(BaseModel):
    """A frontier entry as shown to the policy: its id, the anchor that brought it, its abstraction."""

    model_config = ConfigDict(frozen=True)

    entry_id: str
    anchor: str
    """Text of the cue anchor shared with the working set (or `search: <query>` for a refine hit)."""
    abstraction: str = ""
    """The entry's primary abstraction (what it is about), so the policy can choose without its value."""


class ObservationState(BaseModel):
    """Everything `render_observation` needs; pure data, built by the env at each step."""

    model_config = ConfigDict(frozen=True)

    question: str
    query: str
    """The current search query (the question until a refine replaces it)."""
    working_set: list[MemoryEntry] = Field(default_factory=list)
    """Retrieved entries, in the order they were added."""
    frontier: list[FrontierView] = Field(default_factory=list)
    """Entries the policy may expand, best first."""
    budget: float
    """Budget units of the whole episode."""
    budget_left: float
    step: int
    """Actions taken so far (0 right after reset)."""
    max_steps: int
    expand_cost_per_id: float
    refine_cost: float
    max_ids_per_expand: int
    last_error: str | None = None
    """Why the previous action was invalid, shown once so the policy can correct itself."""
