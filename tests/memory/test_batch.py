"""`batch()`: one transaction per batch on a real store of each backend (a failure leaves nothing)."""

from __future__ import annotations

import pytest

from memora_rl.errors import GraphError
from memora_rl.memory import EntryCandidate, Episode, always_create


def _candidate(text: str) -> EntryCandidate:
    return EntryCandidate(abstraction=f"fact {text}", value=f"The {text} is stored.", anchors=[f"fact + {text}"])


def test_failed_batch_rolls_back_everything(stores, embedder) -> None:
    store = stores.open("batch", embedder=embedder)
    store.upsert_entry("g", _candidate("kept"), always_create)
    with pytest.raises(RuntimeError, match="injected"), store.batch():
        store.add_episode(Episode(id="ep-1", graph_id="g", text="a half batch"))
        store.upsert_entry("g", _candidate("lost one"), always_create)
        store.upsert_entry("g", _candidate("lost two"), always_create)
        assert len(store.entries("g")) == 3  # visible inside the batch
        raise RuntimeError("injected failure mid-batch")
    assert [entry.value for entry in store.entries("g")] == ["The kept is stored."]
    assert store.episodes("g") == [] and [a.text for a in store.anchors("g")] == ["fact + kept"]
    assert store.search("g", "lost one", k=5)[0].entry_id == "e0"  # views reloaded without the rolled-back rows
    assert store.check_integrity().ok
    store.close()


def test_batch_commits_once_and_readers_see_it_only_after(stores, embedder) -> None:
    writer = stores.open("batch", embedder=embedder)
    writer.upsert_entry("g", _candidate("first"), always_create)
    reader = stores.open("batch", embedder=embedder)
    with writer.batch():
        writer.upsert_entry("g", _candidate("second"), always_create)
        writer.upsert_entry("g", _candidate("third"), always_create)
        assert len(reader.entries("g")) == 1  # another connection does not see a batch in progress
    assert len(reader.entries("g")) == 3
    assert reader.search("g", "third", k=1)[0].entry_id == "e2"
    with pytest.raises(GraphError, match="do not nest"), writer.batch(), writer.batch():
        pass
    writer.close()
    reader.close()
