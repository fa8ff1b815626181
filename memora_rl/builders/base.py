"""The builder contract: turn one conversation into (part of) a memory graph in a store."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from pydantic import BaseModel

from memora_rl.data.records import Conversation, Turn
from memora_rl.embedding import Embedder, get_embedder
from memora_rl.memory.records import EntryCandidate, Episode
from memora_rl.memory.store import Decider, GraphStore, SimilarBy

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


ReportT = TypeVar("ReportT", bound=BuildReport)


def new_report(report_type: type[ReportT], conversation: Conversation, graph_id: str, turns: int) -> ReportT:
    """The report of a build about to start: not skipped, every counter and the time at zero."""
    return report_type(
        graph_id=graph_id, conversation_id=conversation.id, skipped=False, turns=turns, statements=0,
        entries_created=0, entries_merged=0, episodes_added=0, seconds=0.0,
    )  # fmt: skip


def raw_text(turns: Sequence[Turn]) -> str:
    """The turns as "Speaker: text" lines (the raw episodic memory)."""
    return "\n".join(f"{turn.speaker}: {turn.text}" for turn in turns)


def episode_from_turns(graph_id: str, episode_id: str, turns: Sequence[Turn], text: str, title: str) -> Episode:
    """An episode over `turns`: their ids and time span, with the given text and title."""
    times = [turn.time for turn in turns if turn.time is not None]
    return Episode(
        id=episode_id,
        graph_id=graph_id,
        text=text,
        title=title,
        source_turn_ids=[turn.id for turn in turns],
        start_time=min(times) if times else None,
        end_time=max(times) if times else None,
    )


def covered_turn_ids(store: GraphStore, graph_id: str) -> set[str]:
    """Turn ids already covered by an episode of the graph (what a resumed build may skip)."""
    if graph_id not in store.graph_ids():
        return set()
    return {turn_id for episode in store.episodes(graph_id) for turn_id in episode.source_turn_ids}


def stored_statements(store: GraphStore, graph_id: str) -> set[tuple[str, str]]:
    """(source turn id, value) of every stored value, current or historical (what a resumed build may skip).

    History versions count, so a statement that was merged into an older entry is still stored.
    """
    if graph_id not in store.graph_ids():
        return set()
    done: set[tuple[str, str]] = set()
    for entry in store.entries(graph_id):
        done.update((turn_id, entry.value) for turn_id in entry.source_turn_ids)
        for version in entry.history:
            done.update((turn_id, version.value) for turn_id in version.source_turn_ids)
    return done


class LazyEmbedder:
    """Mixin for builders: an `embedder` property loading the model named by `config.embedder` on first use."""

    _embedder: Embedder | None
    config: BaseModel

    @property
    def embedder(self) -> Embedder:
        """The embedder, loaded on first use."""
        if self._embedder is None:
            self._embedder = get_embedder(self.config.embedder)  # type: ignore[attr-defined]
        return self._embedder


def upsert_counted(
    store: GraphStore,
    graph_id: str,
    candidate: EntryCandidate,
    decider: Decider,
    report: BuildReport,
    similar_by: SimilarBy = "abstraction",
    receipt: str | None = None,
) -> None:
    """Create-or-update one entry candidate through `store` and count the outcome in `report`."""
    result = store.upsert_entry(graph_id, candidate, decider, similar_by=similar_by, receipt=receipt)
    report.entries_created += int(result.created)
    report.entries_merged += int(not result.created)
