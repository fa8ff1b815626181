"""The builder contract: turn one conversation into (part of) a memory graph in a store."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from pydantic import BaseModel

from memora_rl.data.records import Conversation
from memora_rl.memory.store import GraphStore

ProgressCallback = Callable[[int, int], None]
"""Called as `progress(done_turns, total_turns)` while a conversation is built."""


class BuildReport(BaseModel):
    """What one `build` call did to one graph."""

    graph_id: str
    conversation_id: str
    skipped: bool
    """True when the graph was already fully built and nothing was written."""
    turns: int
    statements: int
    """Salient statements found (each one is created as or merged into an entry)."""
    entries_created: int
    entries_merged: int
    episodes_added: int
    seconds: float
    """Wall-clock build time of this call."""


class Builder(Protocol):
    """Anything that builds a memory graph from a conversation (extractive, Memora, NEMORI)."""

    name: str
    """Registry name, e.g. "extractive"."""

    def build(
        self,
        conversation: Conversation,
        store: GraphStore,
        graph_id: str | None = None,
        progress: ProgressCallback | None = None,
    ) -> BuildReport:
        """Build (or resume building) the graph `graph_id` (default: the conversation id) in `store`."""
        ...
