"""Fixtures for the memory-store tests: the real embedder, and fresh stores of each backend.

The store contract runs on both backends: `stores` (and `store`, `vector_store` built on it) is
parametrized over SQLite and PostgreSQL. PostgreSQL is the session's server (`postgres_url`,
from `tests/postgres_fixtures.py`: embedded pgserver, or `MEMORA_RL_TEST_POSTGRES_URL`) with a
fresh schema per store. Without either, the PostgreSQL cases are skipped with the command that
installs what they need.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memora_rl.embedding import Embedder, get_embedder
from memora_rl.memory import StoreConfig
from tests.memory.helpers import StoreFactory

BACKENDS = ["sqlite", "postgres"]


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    return get_embedder()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The store backend of this test case."""
    return request.param


@pytest.fixture
def stores(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[StoreFactory]:
    """Fresh stores of this case's backend (`stores.open(name, ...)`)."""
    url = request.getfixturevalue("postgres_url") if backend == "postgres" else None
    factory = StoreFactory(backend, tmp_path, url)
    yield factory
    factory.close_all()


@pytest.fixture
def store(stores: StoreFactory, embedder: Embedder) -> Any:
    return stores.open("graph", embedder=embedder)


@pytest.fixture
def vector_store(stores: StoreFactory) -> Any:
    """A store that never needs the embedder (every write passes vectors)."""
    return stores.open("vectors", config=StoreConfig(bm25=False))


@pytest.fixture
def pg_stores(tmp_path: Path, postgres_url: str) -> Iterator[StoreFactory]:
    """Fresh PostgreSQL stores (for tests of what only that backend has)."""
    factory = StoreFactory("postgres", tmp_path, postgres_url)
    yield factory
    factory.close_all()


@pytest.fixture
def sqlite_stores(tmp_path: Path) -> Iterator[StoreFactory]:
    """Fresh SQLite stores (beside `pg_stores`, for tests comparing the backends)."""
    factory = StoreFactory("sqlite", tmp_path, None)
    yield factory
    factory.close_all()
