"""Fixtures for the memory-store tests: the real embedder, and fresh stores of each backend.

The store contract runs on both backends: `stores` (and `store`, `vector_store` built on it) is
parametrized over SQLite and PostgreSQL. PostgreSQL comes from one embedded server per test
session (PyPI `pgserver`, PostgreSQL 16 with pgvector, in a temp folder; as root it runs the
server as the unprivileged user `pgserver`, which it creates) with a fresh schema per store, or
from `MEMORA_RL_TEST_POSTGRES_URL` (any server with pgvector; each store gets its own schema).
Without either, the PostgreSQL cases are skipped with the command that installs what they need.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memora_rl.embedding import Embedder, get_embedder
from memora_rl.memory import StoreConfig
from tests.memory.helpers import StoreFactory

BACKENDS = ["sqlite", "postgres"]
POSTGRES_URL_ENV = "MEMORA_RL_TEST_POSTGRES_URL"
INSTALL_HINT = "pip install pgserver 'psycopg[binary]'"


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    return get_embedder()


def _start_server(pgserver: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """An embedded server in a new temp folder; a failed start is tried once more in another folder.

    On a failure the server's log is in the report (pgserver's `pg_ctl` call has a 10 s limit).
    """
    for attempt in range(2):
        data = tmp_path_factory.mktemp("postgres") / "data"
        try:
            return pgserver.get_server(data, cleanup_mode="delete")
        except subprocess.SubprocessError as error:
            log = (data / "log").read_text() if (data / "log").is_file() else "(no log)"
            if attempt:
                pytest.fail(f"pgserver could not start PostgreSQL in {data}: {error}\n{log}")
    raise AssertionError("unreachable")


@pytest.fixture(scope="session")
def postgres_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a PostgreSQL server with pgvector for this session (embedded unless the env names one)."""
    given = os.environ.get(POSTGRES_URL_ENV)
    if given:
        yield given
        return
    pgserver = pytest.importorskip("pgserver", reason=f"PostgreSQL store tests need pgserver: {INSTALL_HINT}")
    psycopg = pytest.importorskip("psycopg", reason=f"PostgreSQL store tests need psycopg: {INSTALL_HINT}")
    server = _start_server(pgserver, tmp_path_factory)
    url = server.get_uri()
    with psycopg.connect(url, autocommit=True) as conn:
        for setting in ("fsync", "synchronous_commit", "full_page_writes"):  # a throw-away server: speed over safety
            conn.execute(f"ALTER SYSTEM SET {setting} = off")
        conn.execute("SELECT pg_reload_conf()")
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    yield url
    server.cleanup()


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
