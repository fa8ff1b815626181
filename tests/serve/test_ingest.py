"""Ingest through a builder's own `build` (the Memora/NEMORI path) and a race with another writer, on real stores."""

from __future__ import annotations

from pathlib import Path

import pytest

from memora_rl.builders.extractive import ExtractiveBuilder
from memora_rl.memory import open_store
from memora_rl.serve.graphs import StoreHandle
from memora_rl.serve.ingest import IngestConflictError, batch_conversation, ingest_batch, next_session_index
from memora_rl.serve.schemas import IngestRequest, IngestTurn


def _handle(path: Path, embedder) -> StoreHandle:
    """A reader and a writer connection on one store file, as the service opens them."""
    reader, writer = open_store(path, embedder=embedder), open_store(path, embedder=embedder)
    return StoreHandle(location=str(path), reader=reader, writer=writer)


class BuildOnly:
    """The extractive builder seen only through the `Builder` protocol (no `plan`), as LLM builders are."""

    name = "build-only"

    def __init__(self, inner: ExtractiveBuilder) -> None:
        self.inner = inner

    def build(self, conversation, store, graph_id=None, progress=None):
        return self.inner.build(conversation, store, graph_id, progress)


def test_build_path_reports_created_then_merged_in_new_sessions(tmp_path: Path, embedder) -> None:
    path = tmp_path / "ingest.sqlite"
    handle = _handle(path, embedder)
    builder = BuildOnly(ExtractiveBuilder(embedder=embedder))
    turn = IngestTurn(speaker="Uma", text="I restore old sailing boats in a shed near Galway harbour.")
    first = ingest_batch(handle, builder, IngestRequest(graph="g", turns=[turn]))
    second = ingest_batch(handle, builder, IngestRequest(graph="g", turns=[turn]))
    assert (first.session_index, second.session_index) == (1, 2)
    assert len(first.created) == 1 and first.episodes == ["ep-s1-1"]
    assert second.created == [] and second.merged == first.created and second.episodes == ["ep-s2-1"]
    entry = handle.reader.entries("g")[0]
    assert entry.source_turn_ids == ["D1:1", "D2:1"]
    handle.writer.close()
    handle.reader.close()


class RacingPlanner:
    """The extractive builder, but another writer of the file adds a session while it plans.

    The other writer builds straight into its own connection, as `memora-rl graph build` would: it does
    not take serve-memory's ingest lock (serve-memory processes wait for each other on that lock instead).
    """

    def __init__(self, inner: ExtractiveBuilder, other: StoreHandle, turn: IngestTurn) -> None:
        self.inner, self.other, self.turn, self.raced = inner, other, turn, False
        self.decider = inner.decider

    def plan(self, conversation, graph_id):
        if not self.raced:
            self.raced = True
            request = IngestRequest(graph=graph_id, turns=[self.turn])
            racing = batch_conversation(request, next_session_index(self.other, graph_id))
            self.inner.build(racing, self.other.writer, graph_id)
        return self.inner.plan(conversation, graph_id)


def test_a_batch_planned_while_another_process_wrote_is_refused_whole_then_retried(tmp_path: Path, embedder) -> None:
    path = tmp_path / "race.sqlite"
    mine, other = _handle(path, embedder), _handle(path, embedder)
    extractive = ExtractiveBuilder(embedder=embedder)
    first = IngestTurn(speaker="Uma", text="I sail on Sundays.")
    ingest_batch(mine, extractive, IngestRequest(graph="g", turns=[first]))
    theirs = IngestTurn(speaker="Uma", text="My sister Ines bakes sourdough bread in Porto.")
    racing = RacingPlanner(extractive, other, theirs)
    mine_turn = IngestTurn(speaker="Uma", text="I restore old sailing boats in a shed near Galway harbour.")
    with pytest.raises(IngestConflictError, match="added session 2 while this batch was prepared as session 2"):
        ingest_batch(mine, racing, IngestRequest(graph="g", turns=[mine_turn]))
    assert [e.id for e in mine.reader.episodes("g")] == ["ep-s1-1", "ep-s2-1"]  # the other's session only
    assert not any("Galway" in entry.value for entry in mine.reader.entries("g"))
    retried = ingest_batch(mine, racing, IngestRequest(graph="g", turns=[mine_turn]))
    assert retried.session_index == 3 and retried.turn_ids == ["D3:1"]
    assert any("Galway" in entry.value for entry in mine.reader.entries("g"))
    assert mine.writer.check_integrity().ok
    for handle in (mine, other):
        handle.writer.close()
        handle.reader.close()
