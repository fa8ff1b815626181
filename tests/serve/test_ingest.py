"""Ingest through a builder's own `build` (the Memora/NEMORI path), on a real store with the extractive builder."""

from __future__ import annotations

from pathlib import Path

from memora_rl.builders.extractive import ExtractiveBuilder
from memora_rl.memory import open_store
from memora_rl.serve.batch_store import BatchSQLiteStore
from memora_rl.serve.graphs import StoreHandle
from memora_rl.serve.ingest import ingest_batch
from memora_rl.serve.schemas import IngestRequest, IngestTurn


class BuildOnly:
    """The extractive builder seen only through the `Builder` protocol (no `plan`), as LLM builders are."""

    name = "build-only"

    def __init__(self, inner: ExtractiveBuilder) -> None:
        self.inner = inner

    def build(self, conversation, store, graph_id=None, progress=None):
        return self.inner.build(conversation, store, graph_id, progress)


def test_build_path_reports_created_then_merged_in_new_sessions(tmp_path: Path, embedder) -> None:
    path = tmp_path / "ingest.sqlite"
    handle = StoreHandle(path=path, reader=open_store(path, embedder=embedder), writer=BatchSQLiteStore(path, embedder))
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
