"""Fixtures for the memory-store tests: the real embedder and fresh stores."""

from __future__ import annotations

from pathlib import Path

import pytest

from memora_rl.embedding import Embedder, get_embedder
from memora_rl.memory import SQLiteGraphStore, StoreConfig


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    return get_embedder()


@pytest.fixture
def store(tmp_path: Path, embedder: Embedder) -> SQLiteGraphStore:
    opened = SQLiteGraphStore(tmp_path / "graph.sqlite", embedder=embedder)
    yield opened
    opened.close()


@pytest.fixture
def vector_store(tmp_path: Path) -> SQLiteGraphStore:
    """A store that never needs the embedder (every write passes vectors)."""
    opened = SQLiteGraphStore(tmp_path / "vectors.sqlite", config=StoreConfig(bm25=False))
    yield opened
    opened.close()
