"""What the backend-neutral parts of a store (views, writer, planner, search) ask of its database.

Two backends implement it: `StoreConnection` (`memory.connection`, one SQLite file) and
`PgStoreConnection` (`memory.pg_connection`, one PostgreSQL schema). The row-level SQL in
`memory.sql_io`, `memory.graph_cache` and `memory.writer` is written once, in the subset both
dialects read: `?` placeholders (the PostgreSQL connection rewrites them), `ON CONFLICT`,
`RETURNING`, and vectors passed and read as float32 bytes (`sql_io.VectorBytes`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol


class Cursor(Protocol):
    """The rows of one statement (sqlite3 and psycopg cursors both fit)."""

    def fetchone(self) -> Any:
        """The next row, or None."""
        ...

    def fetchall(self) -> list[Any]:
        """Every remaining row."""
        ...

    def __iter__(self) -> Iterator[Any]: ...


class SqlConnection(Protocol):
    """A connection that runs the store's portable SQL with `?` placeholders."""

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Cursor:
        """Run one statement."""
        ...

    def executemany(self, sql: str, rows: Any, /) -> Any:
        """Run one statement once per parameter row."""
        ...


class StoreDatabase(Protocol):
    """One store's database: its connection, the lock that serialises its use, and its transactions.

    Attributes:
        path: what names the store in messages (a file path, or a PostgreSQL URL without its password).
        conn: the connection every part of the store shares.
        lock: reentrant; held around write transactions, view loads and in-memory searches.
        dim: the vector dimension recorded on the first vector write; None while the store holds no vectors.
    """

    path: Any
    conn: Any
    lock: threading.RLock
    dim: int | None

    def transaction(self) -> AbstractContextManager[Any]:
        """One write transaction (joining this thread's open `batch`), committed or rolled back as a whole."""
        ...

    def batch(self) -> AbstractContextManager[Any]:
        """One write transaction around every write this thread makes inside the block."""
        ...

    def snapshot(self) -> AbstractContextManager[Any]:
        """A read transaction whose statements all see one committed state."""
        ...

    def write_token(self) -> object:
        """Changes whenever anyone commits to the store (this connection or another)."""
        ...

    def data_version(self) -> int:
        """Changes when another connection commits to the store (not on this connection's commits)."""
        ...

    def record_dim(self, conn: Any, dim: int) -> None:
        """Record the store's vector dimension on its first vector write (inside a transaction)."""
        ...

    def graph_ids(self) -> list[str]:
        """Ids of the graphs held, sorted."""
        ...

    def has_graph(self, graph_id: str) -> bool:
        """True when the store holds a graph with this id."""
        ...
