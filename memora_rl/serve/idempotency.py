"""Idempotent ingest: the first answer of each `idempotency_key`, kept beside the graphs, replayed on a retry.

An `IngestRequest` may carry `idempotency_key` (any client-chosen string, e.g. a UUID per batch). The
answer of the first request with that key for a graph is kept with the store; a later request with
the same key and the same batch writes nothing and gets that answer again (`replayed: true`). The same
key with a different batch is refused (422), since a key names one batch. Where the answers live:

- **SQLite store**: a small SQLite file beside it (`<store>.ingest-keys.sqlite`, shared by every
  serve-memory process of the store). Keys are looked up and recorded under the store's ingest lock
  (a file lock), so concurrent retries cannot both write.
- **PostgreSQL store**: the table `serve_ingest_keys` in the store's schema, shared by every replica on
  every machine. There is no cross-process ingest lock, so a claim holds a lock on its key instead (a
  transaction-scoped advisory lock, taken before the batch and released after the answer is recorded):
  the same batch sent to two replicas at once is written by one, and the other waits and replays it.

Either way the answer is recorded just after the batch commits: a crash between the two (rare) lets
one retry write the batch again.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from memora_rl.errors import ConfigError
from memora_rl.memory import is_postgres_url
from memora_rl.serve.schemas import IngestRequest, IngestResponse

_TABLE = (
    "CREATE TABLE IF NOT EXISTS {name} (graph_id TEXT NOT NULL, key TEXT NOT NULL, digest TEXT NOT NULL, "
    "response TEXT NOT NULL, PRIMARY KEY (graph_id, key))"
)
PG_TABLE = "serve_ingest_keys"
"""The PostgreSQL table of the first answers, in the store's schema beside the graph tables."""


def batch_digest(request: IngestRequest) -> str:
    """SHA-256 of the request without its key: the same batch sent again has the same digest."""
    return hashlib.sha256(request.model_dump_json(exclude={"idempotency_key"}).encode()).hexdigest()


def _replay(row: tuple[str, str] | None, request: IngestRequest) -> IngestResponse | None:
    """The stored first answer (marked replayed) of a `(digest, response)` row, or None without a row.

    Raises:
        ConfigError: the key was first sent with a different batch (names the field and the fix).
    """
    if row is None:
        return None
    if row[0] != batch_digest(request):
        raise ConfigError(
            f"idempotency_key: {request.idempotency_key!r} was first sent with a different batch into graph "
            f"{request.graph!r}; send a new key for a new batch (a key names one batch, retried unchanged)."
        )
    return IngestResponse.model_validate_json(row[1]).model_copy(update={"replayed": True})


@dataclass
class KeyClaim:
    """What a claim on a request's key found, and where the answer of a new batch goes."""

    replayed: IngestResponse | None
    """The first answer to this key and batch (replayed: write nothing), or None: write the batch."""
    record: Callable[[IngestResponse], None]
    """Keep the answer of the batch just written (nothing happens for a request without a key)."""


class IngestKeyLog(Protocol):
    """The first answers of keyed ingest requests into one store."""

    def claim(self, request: IngestRequest, wait_s: float | None = None) -> AbstractContextManager[KeyClaim]:
        """Hold the request's key for the block: look its answer up, and record a new one with `KeyClaim.record`.

        Raises:
            ConfigError: the key was first sent with a different batch.
            TimeoutError: another ingest held the key for longer than `wait_s` seconds.
        """
        ...

    def close(self) -> None:
        """Release what the log holds open."""
        ...


class IdempotencyLog:
    """The first answers of keyed ingest requests into one SQLite store (claim with the store's ingest lock held).

    Args:
        store_path: the graph store file; the log lives beside it.
    """

    def __init__(self, store_path: Path) -> None:
        self.path = Path(f"{store_path}.ingest-keys.sqlite")

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=30)
        conn.execute(_TABLE.format(name="ingest_keys"))
        return conn

    def find(self, request: IngestRequest) -> IngestResponse | None:
        """The first answer to `request.idempotency_key` in its graph (marked replayed), or None.

        Raises:
            ConfigError: the key was first sent with a different batch (names the field and the fix).
        """
        if request.idempotency_key is None:
            return None
        with closing(self._connect()) as conn:
            row = conn.execute("SELECT digest, response FROM ingest_keys WHERE graph_id = ? AND key = ?",
                               (request.graph, request.idempotency_key)).fetchone()  # fmt: skip
        return _replay(row, request)

    def record(self, request: IngestRequest, response: IngestResponse) -> None:
        """Keep `response` as the answer to `request.idempotency_key` (nothing when the request has no key)."""
        if request.idempotency_key is None:
            return
        with closing(self._connect()) as conn, conn:
            conn.execute("INSERT OR REPLACE INTO ingest_keys VALUES (?, ?, ?, ?)",
                         (request.graph, request.idempotency_key, batch_digest(request),
                          response.model_dump_json()))  # fmt: skip

    @contextmanager
    def claim(self, request: IngestRequest, wait_s: float | None = None) -> Iterator[KeyClaim]:
        """Look the key up and record a new answer; the store's ingest lock (held by the caller) guards the key."""
        yield KeyClaim(self.find(request), lambda response: self.record(request, response))

    def close(self) -> None:
        """Nothing stays open (each look-up opens and closes the file)."""


class PgIngestKeys:
    """The first answers of keyed ingest requests into one PostgreSQL store, shared by every replica.

    Args:
        url: the store's `postgresql://` URL (the table goes in its current schema); connected on the first
            keyed request, so a service that gets none never touches the table.
    """

    def __init__(self, url: str) -> None:
        self._url = url
        self._conn: Any = None
        self._lock = threading.Lock()

    def _connection(self) -> Any:
        """The log's own autocommit connection, (re)opened when needed, with the table created once."""
        if self._conn is None or self._conn.closed:
            from memora_rl.memory.pg_connection import open_connection, redact

            conn = open_connection(self._url, redact(self._url), application_name="memora-rl serve")
            with conn.transaction():  # replicas starting at once create the table once
                conn.execute("SELECT pg_advisory_xact_lock(hashtext('memora_rl:' || current_schema() || %s))",
                             (PG_TABLE,))  # fmt: skip
                conn.execute(_TABLE.format(name=PG_TABLE))
            self._conn = conn
        return self._conn

    @contextmanager
    def claim(self, request: IngestRequest, wait_s: float | None = None) -> Iterator[KeyClaim]:
        """Hold the key's advisory lock (every replica's) for the block; the answer commits with the lock's release.

        Raises:
            ConfigError: the key was first sent with a different batch.
            TimeoutError: another replica held the key (ingesting the same batch) for longer than `wait_s` seconds.
        """
        key = request.idempotency_key
        if key is None:
            yield KeyClaim(None, lambda _: None)
            return
        with self._lock:
            conn = self._connection()
            conn.execute("BEGIN")
            try:
                self._lock_key(conn, request.graph, key, wait_s)
                row = conn.execute(f"SELECT digest, response FROM {PG_TABLE} WHERE graph_id = %s AND key = %s",
                                   (request.graph, key)).fetchone()  # fmt: skip
                answers: list[IngestResponse] = []
                yield KeyClaim(_replay(row, request), answers.append)
                for response in answers[-1:]:
                    conn.execute(
                        f"INSERT INTO {PG_TABLE} VALUES (%s, %s, %s, %s) ON CONFLICT (graph_id, key) "
                        "DO UPDATE SET digest = EXCLUDED.digest, response = EXCLUDED.response",
                        (request.graph, key, batch_digest(request), response.model_dump_json()),
                    )
                conn.execute("COMMIT")
            except BaseException:
                self._rollback(conn)
                raise

    @staticmethod
    def _rollback(conn: Any) -> None:
        """End a failed claim's transaction; a broken connection has lost it already (reopened on the next claim)."""
        from memora_rl.memory.pg_schema import load_psycopg

        try:
            conn.execute("ROLLBACK")
        except load_psycopg().Error:
            conn.close()

    @staticmethod
    def _lock_key(conn: Any, graph_id: str, key: str, wait_s: float | None) -> None:
        """Take the key's transaction-scoped advisory lock, waiting at most `wait_s` seconds (None: no limit).

        Raises:
            TimeoutError: the lock stayed held (another replica is ingesting this key's batch).
        """
        from memora_rl.memory.pg_schema import load_psycopg

        if wait_s is not None and wait_s < float("inf"):
            conn.execute(f"SET LOCAL lock_timeout = '{max(1, int(wait_s * 1000))}ms'")  # 0 would mean no limit
        try:
            named = json.dumps([graph_id, key])  # one string per (graph, key), whatever they hold
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(current_schema() || ' ' || %s, 0))", (named,))
        except load_psycopg().errors.LockNotAvailable as error:
            raise TimeoutError(f"idempotency_key {key!r} stayed held by another ingest for {wait_s:g} s") from error
        conn.execute("SET LOCAL lock_timeout = 0")

    def close(self) -> None:
        """Close the log's connection (an open claim's transaction is rolled back by the server)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()


def ingest_key_log(location: str) -> IngestKeyLog:
    """The key log of a store location: a file beside a SQLite store, a table of a PostgreSQL one."""
    return PgIngestKeys(location) if is_postgres_url(location) else IdempotencyLog(Path(location))
