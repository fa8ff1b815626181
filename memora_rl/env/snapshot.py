"""`EnvSnapshot`: a `RetrievalEnv` episode's state, saved so a planner (the oracle) can try an action and go back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memora_rl.core.state import FrontierView
from memora_rl.core.trajectory import ActionRecord
from memora_rl.memory.records import MemoryEntry


@dataclass(frozen=True)
class EnvSnapshot:
    """A `RetrievalEnv` episode's mutable state (entries and records are shared, never mutated)."""

    done: bool
    step: int
    budget_left: float
    costs: dict[str, float]
    actions: list[ActionRecord]
    last_error: str | None
    working: list[MemoryEntry]
    frontier: list[FrontierView]
    query: str
    query_vector: Any
    observation: str

    @property
    def turn_ids(self) -> set[str]:
        """Source turn ids covered by the working set (what evidence recall counts)."""
        return {turn_id for entry in self.working for turn_id in entry.source_turn_ids}
