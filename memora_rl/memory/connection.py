"""The database side of a `SQLiteGraphStore`: one shared connection, its lock, the recorded vector size."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Generic, TypeVar

from memora_rl.errors import GraphError
from memora_rl.memory.schema import connect

Conn = TypeVar("Conn")
"""What a store connection's transactions hand out: a `sqlite3.Connection`, or `PgConn` on PostgreSQL."""


class BatchingConnection(Generic[Conn]):
    """`batch()` over a connection's `transaction()`: the part SQLite's and PostgreSQL's store connections share."""

    lock: threading.RLock
    _batch_thread: int | None
    """The thread whose `batch` is open, if any (its `transaction`s join the batch)."""

    def transaction(self) -> AbstractContextManager[Conn]:
        """One write transaction under the lock (each backend's own)."""
        raise NotImplementedError

    @contextmanager
    def batch(self) -> Iterator[Conn]:
        """One write transaction around every write this thread makes inside the block (all or nothing).

        Raises:
            GraphError: a batch is already open on this thread (batches do not nest).
        """
        with self.lock:
            if self._batch_thread == threading.get_ident():
                raise GraphError("batch() is already open on this thread; batches do not nest.")
            with self.transaction() as conn:
                self._batch_thread = threading.get_ident()
                try:
                    yield conn
                finally:
                    self._batch_thread = None


class StoreConnection(BatchingConnection[sqlite3.Connection]):
    """One SQLite connection shared by all threads of a store, and the lock that serialises its use.

    The lock (reentrant) is held around everything that must not interleave with another
    thread's work on this connection or on the in-memory views read from it:

    - a write transaction, from `BEGIN IMMEDIATE` to `COMMIT` or `ROLLBACK`;
    - loading, dropping and saving the views (`GraphViews`);
    - vector search and frontier ranking over a view (numpy tables and usearch indexes);
    - integrity checks and closing.

    Plain reads (`SELECT`s of entries, episodes, anchors) run without it: SQLite serialises
    statements on one connection, and WAL gives each statement a consistent snapshot. A read
    of several statements that must agree (a view load) takes the lock and a `snapshot`.

    Args:
        path: the store file (created if missing).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn = connect(path)
        self.lock = threading.RLock()
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'dim'").fetchone()
        self.dim: int | None = int(row[0]) if row else None
        """Vector dimension recorded on the store's first vector write; None while it holds no vectors."""
        self._commits = 0  # transactions committed through this connection (any thread)
        self._batch_thread: int | None = None  # the thread whose `batch` is open, if any

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction under the lock: committed on success, rolled back on any error.

        Inside this thread's open `batch` it joins the batch, whose end commits or rolls back.
        """
        with self.lock:
            if self._batch_thread == threading.get_ident():
                yield self.conn
                return
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
                self.conn.execute("COMMIT")
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self._commits += 1

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """A read transaction under the lock: its statements all see one committed state.

        Inside a write transaction it is that transaction (already one state).
        """
        with self.lock:
            if self.conn.in_transaction:
                yield self.conn
                return
            self.conn.execute("BEGIN")
            try:
                yield self.conn
            finally:
                self.conn.execute("COMMIT")  # read-only: ends the snapshot

    def write_token(self) -> tuple[int, int]:
        """Changes whenever anyone commits to the file: another connection (`data_version`) or this one.

        Read it before reading what a write will rest on, and again inside the write transaction:
        equal tokens mean nothing was committed in between.
        """
        with self.lock:
            return self.data_version(), self._commits

    def record_dim(self, conn: sqlite3.Connection, dim: int) -> None:
        """Record the store's vector dimension on its first vector write (inside a transaction)."""
        if self.dim is None:
            conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('dim', ?)", (str(dim),))
            self.dim = dim

    def data_version(self) -> int:
        """SQLite's `PRAGMA data_version`: changes when another connection commits to the file."""
        return self.conn.execute("PRAGMA data_version").fetchone()[0]

    def graph_ids(self) -> list[str]:
        """Ids of the graphs held, sorted."""
        return [row[0] for row in self.conn.execute("SELECT graph_id FROM graphs ORDER BY graph_id")]

    def has_graph(self, graph_id: str) -> bool:
        """True when the store holds a graph with this id."""
        return self.conn.execute("SELECT 1 FROM graphs WHERE graph_id = ?", (graph_id,)).fetchone() is not None
