"""A SQLite graph store whose writes can be grouped into one transaction (one ingest batch).

`SQLiteGraphStore` runs every mutation in its own transaction. An ingest batch (episodes plus
many create-or-update calls) must land whole or not at all, so `batch()` opens one
`BEGIN IMMEDIATE` transaction and, on the thread that opened it, the store's per-mutation
transactions join it instead of starting their own. Any error inside the batch rolls the whole
batch back, and the store drops its in-memory views so they reload from disk.

The store has no public hook for this yet, so this class wraps its connection's
`transaction()` (checked at construction; `tests/serve/test_batch_store.py` fails if the seam
moves). A public `SQLiteGraphStore.batch()` in `memora_rl.memory` would replace this module.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from memora_rl.errors import GraphError
from memora_rl.memory.config import StoreConfig
from memora_rl.memory.sqlite_store import SQLiteGraphStore

if TYPE_CHECKING:
    from memora_rl.embedding import Embedder


class BatchSQLiteStore(SQLiteGraphStore):
    """`SQLiteGraphStore` plus `batch()`: every write made inside it commits or rolls back together."""

    def __init__(self, path: str | Path, embedder: Embedder | None = None, config: StoreConfig | None = None) -> None:
        super().__init__(path, embedder=embedder, config=config)
        db = getattr(self, "_db", None)
        views = getattr(self, "_views", None)
        if db is None or views is None or not hasattr(db, "transaction") or not hasattr(views, "transaction"):
            raise GraphError(
                "SQLiteGraphStore no longer has the `_db.transaction` / `_views.transaction` seam that "
                "memora_rl.serve.batch_store wraps; update BatchSQLiteStore (or use a public store batch API)."
            )
        self._batch_thread: int | None = None
        self._open_transaction: Callable[[], AbstractContextManager[sqlite3.Connection]] = db.transaction
        db.transaction = self._joining_transaction

    @contextmanager
    def _joining_transaction(self) -> Iterator[sqlite3.Connection]:
        """Join the open batch on its own thread; otherwise a transaction of its own, as usual."""
        if self._batch_thread == threading.get_ident():
            yield self._db.conn
            return
        with self._open_transaction() as conn:
            yield conn

    @contextmanager
    def batch(self) -> Iterator[None]:
        """One transaction around everything written inside the block (other threads' writes wait for it).

        Raises:
            GraphError: a batch is already open on this thread (batches do not nest).
        """
        if self._batch_thread == threading.get_ident():
            raise GraphError("batch() is already open on this thread; batches do not nest.")
        with self._views.transaction():
            self._batch_thread = threading.get_ident()
            try:
                yield
            finally:
                self._batch_thread = None
