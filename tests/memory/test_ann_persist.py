"""Saved HNSW indexes: reused when the vectors are unchanged, rebuilt when they are not or the file is bad."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from memora_rl.memory import EntryCandidate, SQLiteGraphStore, StoreConfig, always_create
from memora_rl.memory.vectors import VectorTable
from tests.memory.helpers import perturb, random_unit

CONFIG = StoreConfig(bm25=False, ann_threshold=100)


def _add(store: SQLiteGraphStore, rng: np.random.Generator, count: int, start: int = 0) -> np.ndarray:
    vectors = random_unit(rng, count)
    cands = [
        EntryCandidate(abstraction=f"a{i}", value=f"v{i}", anchors=[f"anchor {i % 7}"])
        for i in range(start, start + count)
    ]
    anchors = {f"anchor {i}": vector for i, vector in enumerate(random_unit(rng, 7))}
    store.add_entries_bulk("g", cands, vectors, vectors, anchors)
    return vectors


def _top_abstraction(store: SQLiteGraphStore, query: np.ndarray) -> str:
    """The entry whose abstraction is nearest to `query`, through the HNSW index."""
    cache = store._cache("g")
    rows, _ = cache.abstractions.top_k(query, 1)
    assert cache.abstractions.uses_ann
    return cache.entry_ids[int(rows[0])]


def _saved(store: SQLiteGraphStore) -> list[Path]:
    return sorted(store.ann_dir.glob("*.usearch"))


def _refuse_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any HNSW build fail, so a search that works proves the index was loaded from disk."""
    monkeypatch.setattr(VectorTable, "build_ann", lambda self: pytest.fail("the HNSW index was rebuilt, not loaded"))


def test_saved_index_is_loaded_and_gives_the_same_hits(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    path = tmp_path / "s.sqlite"
    with SQLiteGraphStore(path, config=CONFIG) as store:
        vectors = _add(store, rng, 400)
        queries = perturb(rng, vectors[:20], noise=1.0)
        first = [store.search("g", query, k=10) for query in queries]
        assert store._cache("g").abstractions.uses_ann
        assert len(_saved(store)) == 2  # abstractions and values; 7 anchors stay exact
    _refuse_builds(monkeypatch)
    with SQLiteGraphStore(path, config=CONFIG) as store:
        again = [store.search("g", query, k=10) for query in queries]
        assert store._cache("g").abstractions.uses_ann
    assert again == first


def test_changed_vectors_rebuild_and_replace_the_saved_index(tmp_path):
    rng = np.random.default_rng(1)
    path = tmp_path / "s.sqlite"
    with SQLiteGraphStore(path, config=CONFIG) as store:
        _add(store, rng, 300)
        store.search("g", random_unit(rng, 1)[0], k=5)
        before = _saved(store)
    with SQLiteGraphStore(path, config=CONFIG) as other:  # another process adds entries, searching nothing
        _add(other, rng, 50, start=300)
    with SQLiteGraphStore(path, config=CONFIG) as store:
        assert _top_abstraction(store, store.abstraction_vectors("g", ["e349"])[0]) == "e349"
        after = _saved(store)
    abstraction_files = [[file for file in files if "-abstractions." in file.name] for files in (before, after)]
    assert len(abstraction_files[1]) == 1 and abstraction_files[0] != abstraction_files[1]


def test_index_updated_in_process_is_saved_on_close(tmp_path, monkeypatch):
    rng = np.random.default_rng(2)
    path = tmp_path / "s.sqlite"
    with SQLiteGraphStore(path, config=CONFIG) as store:
        _add(store, rng, 300)
        store.search("g", random_unit(rng, 1)[0], k=5)  # builds and saves
        vectors = random_unit(rng, 40)
        for i, vector in enumerate(vectors):  # create-or-update keeps the index in memory in step
            candidate = EntryCandidate(abstraction=f"new {i}", value=f"v {i}", anchors=["anchor 0"])
            store.upsert_entry(
                "g",
                candidate,
                always_create,
                abstraction_vector=vector,
                value_vector=vector,
                anchor_vectors={"anchor 0": vector},
            )
    _refuse_builds(monkeypatch)
    with SQLiteGraphStore(path, config=CONFIG) as store:
        assert _top_abstraction(store, vectors[-1]) == "e339"
        assert len(_saved(store)) == 2


def test_deleted_rows_are_not_saved_and_reopen_rebuilds(tmp_path):
    rng = np.random.default_rng(3)
    path = tmp_path / "s.sqlite"
    with SQLiteGraphStore(path, config=CONFIG) as store:
        vectors = _add(store, rng, 300)
        store.search("g", vectors[0], k=5)
        victim = store.entries("g")[0].id
        store.delete_entry("g", victim)  # a tombstone: row numbers on reopen will differ
        saved = _saved(store)
    with SQLiteGraphStore(path, config=CONFIG) as store:
        hits = store.search("g", vectors[0], k=5)
        assert victim not in {hit.entry_id for hit in hits}
        assert _top_abstraction(store, vectors[1]) == "e1"
        assert _saved(store) != saved  # rebuilt over the 299 rows and saved under their fingerprint


def test_unreadable_saved_index_is_rebuilt(tmp_path, caplog):
    rng = np.random.default_rng(4)
    path = tmp_path / "s.sqlite"
    with SQLiteGraphStore(path, config=CONFIG) as store:
        vectors = _add(store, rng, 300)
        expected = [hit.entry_id for hit in store.search("g", vectors[5], k=3)]
        for file in _saved(store):
            file.write_bytes(b"not an index")
    with (
        caplog.at_level(logging.WARNING, logger="memora_rl.memory.vectors"),
        SQLiteGraphStore(path, config=CONFIG) as store,
    ):
        # the same entries in the same order; fused scores may differ in a low digit, as a rebuilt
        # HNSW graph can rank an ANN candidate one place differently
        assert [hit.entry_id for hit in store.search("g", vectors[5], k=3)] == expected
    assert "rebuilding" in caplog.text
    assert all(file.stat().st_size > 1000 for file in _saved(store))


def test_persistence_off_writes_nothing(tmp_path):
    rng = np.random.default_rng(5)
    with SQLiteGraphStore(tmp_path / "s.sqlite", config=CONFIG.model_copy(update={"ann_persist": False})) as store:
        store.search("g", _add(store, rng, 300)[0], k=3)
        assert store._cache("g").abstractions.uses_ann
        assert not store.ann_dir.exists()
