"""A PostgreSQL server with pgvector for the tests of any folder, and fresh store locations on it.

Registered for the whole suite by `tests/conftest.py` (`pytest_plugins`), so the memory store's
contract tests, the `memora-rl graph` CLI tests and the benchmark smoke tests share one server.

The server is one embedded server per test session (PyPI `pgserver`, PostgreSQL 16 with
pgvector, in a temp folder; as root it runs the server as the unprivileged user `pgserver`,
which it creates), or the one `MEMORA_RL_TEST_POSTGRES_URL` names (any server with pgvector).
Each store gets its own schema (`fresh_store_url`), so tests never see each other's graphs.
Without pgserver or psycopg, the tests that ask for `postgres_url` are skipped with the command
that installs what they need.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

POSTGRES_URL_ENV = "MEMORA_RL_TEST_POSTGRES_URL"
INSTALL_HINT = "pip install pgserver 'psycopg[binary]'"

_SCHEMAS = itertools.count()
_RUN = uuid.uuid4().hex[:8]
"""Names this process's schemas apart from other workers' and earlier runs' on a shared server."""


def with_schema(url: str, schema: str) -> str:
    """`url` whose connections use `schema` (created beforehand) as their current schema.

    >>> with_schema("postgresql://u@h/db", "s1")
    'postgresql://u@h/db?options=-csearch_path%3Ds1'
    """
    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"


def fresh_store_url(server_url: str, name: str) -> str:
    """The URL of a new, empty schema on the server, named after `name` (a store location for one test)."""
    import psycopg

    schema = f"t{_RUN}_{next(_SCHEMAS)}_{name.replace('-', '_')}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    return with_schema(server_url, schema)


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
