"""The database side of a `PostgresGraphStore`: one psycopg connection, its lock, transactions, change tokens.

It gives the shared store parts (`memory.database.StoreDatabase`) what `StoreConnection` gives
them on SQLite, with the same guarantees:

- **One writer at a time.** A write transaction starts by locking the store's `commits` row in
  `meta` (`SELECT ... FOR UPDATE`), as SQLite's `BEGIN IMMEDIATE` takes the file's write lock:
  writers of every process queue there, and a create-or-update that planned before another
  writer committed plans again inside its transaction (`write_token`), so no two writers both
  create one entry or merge into a stale one. Transactions run at READ COMMITTED, so what a
  writer reads after taking the lock is everything committed before it.
- **All or nothing.** Each write is one transaction; a process killed inside it leaves the
  server to roll it back when its connection drops (the row lock goes with it).
- **Change tokens.** Each commit adds one to `commits` in its own transaction, so the counter
  minus this connection's own commits changes exactly when another connection committed: the
  views reload then (`data_version`, as SQLite's `PRAGMA data_version`).
- **Snapshots.** A view loads inside one REPEATABLE READ READ ONLY transaction.
"""

from __future__ import annotations

import logging
import struct
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import cache, lru_cache
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import numpy as np

from memora_rl.errors import GraphError
from memora_rl.memory import pg_schema
from memora_rl.memory.config import StoreConfig
from memora_rl.memory.connection import BatchingConnection
from memora_rl.memory.pg_schema import load_psycopg
from memora_rl.memory.sql_io import VectorBytes

if TYPE_CHECKING:
    import psycopg

logger = logging.getLogger(__name__)

LOCK_TIMEOUT_S = 30
"""Longest wait for another writer's transaction, as SQLite's busy timeout in `memory.schema.connect`."""
_MAX_EF_SEARCH = 1000
"""pgvector's largest `hnsw.ef_search`."""


def redact(url: str) -> str:
    """The URL without its password (in the user part or a `password=` parameter), for messages and logs.

    >>> redact("postgresql://ann:secret@db.example:5432/memory?password=x&sslmode=require")
    'postgresql://ann@db.example:5432/memory?sslmode=require'
    """
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        user, host = netloc.rsplit("@", 1)
        netloc = f"{user.split(':', 1)[0]}@{host}"
    query = urlencode([(key, value) for key, value in parse_qsl(parts.query) if key != "password"], safe="/,=")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


@cache
def _vector_adapters() -> tuple[type, type]:
    """Psycopg's dumper and loader classes for pgvector's binary form (made once psycopg is loaded)."""
    from psycopg.adapt import Dumper, Loader
    from psycopg.pq import Format

    class VectorDumper(Dumper):
        """`VectorBytes` (native float32) -> pgvector's binary form (dim, unused, big-endian float32s)."""

        format = Format.BINARY

        def dump(self, obj: bytes) -> bytes:
            values = np.frombuffer(obj, dtype=np.float32)
            return struct.pack(">HH", values.size, 0) + values.astype(">f4").tobytes()

    class VectorLoader(Loader):
        """pgvector's binary form -> native float32 bytes, as SQLite returns a vector BLOB."""

        format = Format.BINARY

        def load(self, data: Any) -> bytes:
            dim = int.from_bytes(bytes(data[:2]), "big")
            return np.frombuffer(data, dtype=">f4", count=dim, offset=4).astype(np.float32).tobytes()

    return VectorDumper, VectorLoader


@lru_cache(maxsize=1024)
def _translate(sql: str) -> str:
    """The store's portable SQL in psycopg's placeholder style (`?` -> `%s`, a literal `%` doubled)."""
    return sql.replace("%", "%%").replace("?", "%s")


class PgConn:
    """A psycopg connection that runs the store's portable SQL (see `memory.database`).

    Statements take `?` placeholders, results come in binary (vectors as native float32 bytes).

    Args:
        raw: an autocommit psycopg connection with the vector adapters registered.
    """

    def __init__(self, raw: psycopg.Connection) -> None:
        self.raw = raw

    def execute(self, sql: str, parameters: Sequence[Any] = ()) -> psycopg.Cursor:
        """Run one statement; returns its cursor."""
        return self.raw.execute(_translate(sql), list(parameters), binary=True)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run one statement once per parameter row."""
        rows = list(rows)
        if rows:
            with self.raw.cursor(binary=True) as cursor:
                cursor.executemany(_translate(sql), rows)

    def close(self) -> None:
        """Close the connection."""
        self.raw.close()


def open_connection(url: str, label: str, application_name: str = "memora-rl") -> psycopg.Connection:
    """A plain autocommit connection to the store's server (`label`: the URL as messages may show it).

    Raises:
        GraphError: psycopg is missing, or the server is unreachable or refuses the login.
    """
    psycopg = load_psycopg()
    try:
        return psycopg.connect(url, autocommit=True, application_name=application_name)
    except psycopg.Error as error:  # unreachable server, refused login, malformed URL
        raise GraphError(
            f"Could not connect to the PostgreSQL store {label}: {str(error).strip()}. Check the URL's host, port, "
            "user, password and database (postgresql://user:password@host:port/db), and that the server is running."
        ) from error


def pg_store_exists(url: str) -> bool:
    """True when the URL's current schema holds a graph store's tables (reading it first creates nothing).

    Opening a store creates its tables in an empty schema; read-only commands ask here first,
    so that looking at a wrong URL reports it instead of leaving empty tables behind.

    Raises:
        GraphError: psycopg is missing, or the server is unreachable or refuses the login.
    """
    with open_connection(url, redact(url)) as raw:
        found = raw.execute(
            "SELECT 1 FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'meta'"
        ).fetchone()
    return found is not None


def _connect(url: str, label: str, config: StoreConfig) -> psycopg.Connection:
    """An autocommit connection with pgvector on the path, the tables checked and the vector adapters on."""
    raw = open_connection(url, label)
    try:
        schema = pg_schema.store_schema(raw, label)
        pg_schema.ensure_pgvector(raw, label)
        pg_schema.create_or_check(raw, schema, label)
        oid = raw.execute("SELECT 'vector'::regtype::oid").fetchone()[0]
        dumper, loader = _vector_adapters()
        raw.adapters.register_dumper(VectorBytes, type("VectorBytesDumper", (dumper,), {"oid": oid}))
        raw.adapters.register_loader(oid, loader)
        raw.execute(f"SET lock_timeout = '{LOCK_TIMEOUT_S}s'")
        raw.execute(f"SET hnsw.ef_search = {min(config.ann_expansion_search, _MAX_EF_SEARCH)}")
    except BaseException:
        raw.close()
        raise
    return raw


class PgStoreConnection(BatchingConnection[PgConn]):
    """One psycopg connection shared by all threads of a store, and the lock that serialises its use.

    The lock (reentrant) is held around the same work as `StoreConnection`'s: write transactions,
    view loads and saves, vector search and frontier ranking over a view, integrity checks, closing.

    Args:
        url: `postgresql://user:password@host:port/database[?options=-csearch_path%3D<schema>]`.
        config: store settings (`ann_expansion_search`, pgvector's `hnsw.ef_search`).
    """

    def __init__(self, url: str, config: StoreConfig) -> None:
        self.path = redact(url)
        self._raw = _connect(url, self.path, config)
        self.conn = PgConn(self._raw)
        self.lock = threading.RLock()
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'dim'").fetchone()
        self.dim: int | None = int(row[0]) if row else None
        """Vector dimension recorded on the store's first vector write; None while it holds no vectors."""
        self._commits = 0  # transactions committed through this connection (any thread)
        self._batch_thread: int | None = None  # the thread whose `batch` is open, if any

    @contextmanager
    def transaction(self) -> Iterator[PgConn]:
        """One write transaction under the lock and the store's write lock: committed on success, else rolled back.

        Inside this thread's open `batch` it joins the batch, whose end commits or rolls back.
        """
        with self.lock:
            if self._batch_thread == threading.get_ident():
                yield self.conn
                return
            dim_before = self.dim
            self._raw.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
            try:
                self._raw.execute("SELECT value FROM meta WHERE key = 'commits' FOR UPDATE")  # the write lock
                yield self.conn
                self._raw.execute("UPDATE meta SET value = (value::bigint + 1)::text WHERE key = 'commits'")
                self._raw.execute("COMMIT")
            except BaseException:
                self.dim = dim_before  # a rolled-back first write recorded no dimension (nor its columns)
                self._rollback()
                raise
            self._commits += 1

    @property
    def raw(self) -> psycopg.Connection:
        """The psycopg connection itself (`%s` placeholders), for PostgreSQL-only statements."""
        return self._raw

    def _rollback(self) -> None:
        """Roll back the open transaction; a broken connection has lost it already."""
        try:
            self._raw.execute("ROLLBACK")
        except load_psycopg().Error as error:
            logger.warning(
                "rollback on %s failed (%s); the server ends the transaction with the connection", self.path, error
            )

    @contextmanager
    def snapshot(self) -> Iterator[PgConn]:
        """A read transaction under the lock: its statements all see one committed state.

        Inside a write transaction it is that transaction (already one state, its own writes included).
        """
        with self.lock:
            if self._raw.info.transaction_status != load_psycopg().pq.TransactionStatus.IDLE:
                yield self.conn
                return
            self._raw.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                yield self.conn
            finally:
                self._raw.execute("COMMIT")  # read-only: ends the snapshot (a failed one is rolled back)

    def write_token(self) -> int:
        """The store's commit counter: changes whenever anyone commits (this connection or another).

        Read it before reading what a write will rest on, and again inside the write transaction
        (after its write lock): equal tokens mean nothing was committed in between.
        """
        with self.lock:
            return int(self.conn.execute("SELECT value FROM meta WHERE key = 'commits'").fetchone()[0])

    def data_version(self) -> int:
        """Commits by other connections (the counter less this connection's own); changes when another commits."""
        with self.lock:
            return self.write_token() - self._commits

    def record_dim(self, conn: PgConn, dim: int) -> None:
        """Record the vector dimension on the store's first vector write and fix the vector columns to it.

        Raises:
            GraphError: another connection recorded another dimension first.
        """
        if self.dim is not None:
            return
        row = conn.execute("SELECT value FROM meta WHERE key = 'dim'").fetchone()
        if row is None:
            conn.execute("INSERT INTO meta(key, value) VALUES ('dim', ?)", (str(dim),))
            pg_schema.apply_dim(conn, dim)
        elif int(row[0]) != dim:
            raise GraphError(
                f"Store {self.path} holds {row[0]}-d vectors, this write has {dim}-d ones. Use the embedder that "
                "built the store."
            )
        self.dim = dim

    def graph_ids(self) -> list[str]:
        """Ids of the graphs held, sorted (by code point, as SQLite sorts them)."""
        return sorted(row[0] for row in self.conn.execute("SELECT graph_id FROM graphs"))

    def has_graph(self, graph_id: str) -> bool:
        """True when the store holds a graph with this id."""
        return self.conn.execute("SELECT 1 FROM graphs WHERE graph_id = ?", (graph_id,)).fetchone() is not None

    def close(self) -> None:
        """Close the connection (an open transaction is rolled back by the server)."""
        with self.lock:
            self.conn.close()
