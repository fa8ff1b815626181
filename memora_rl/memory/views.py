"""Cache coherence of a store: the per-graph in-memory views (`GraphCache`) and when they are trusted.

Search and frontier read a graph's view, never the database. The rules that keep a view equal
to the committed rows all live here:

1. A view is loaded on the first use of its graph (`get`).
2. A write commits first, then patches the loaded view (`loaded`), or drops it for bulk loads
   (`drop`); a graph never used is never loaded by a write.
3. A failed write transaction drops every view (`transaction`), so no view keeps half of it.
4. A commit by another connection (another process, another store object on the same file)
   changes `PRAGMA data_version`; the next `get` sees that and drops every view. A view is
   loaded in one read transaction, so a commit landing mid-load cannot tear it.
5. Each loaded view is handed to the backend's `prepare` hook before use: the SQLite store
   points its HNSW indexes at the store's `.ann` folder (with `StoreConfig.ann_persist`, see
   `memory.ann_files`; written out on `close`), the PostgreSQL store at its pgvector indexes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from memora_rl.errors import GraphError
from memora_rl.memory.config import StoreConfig
from memora_rl.memory.database import SqlConnection, StoreDatabase
from memora_rl.memory.graph_cache import GraphCache, load_graph_cache

ViewHook = Callable[[GraphCache, str], None]
"""Called with each freshly loaded view and its graph id, before the view is used."""


class GraphViews:
    """The loaded views of one store's graphs, kept coherent with its database.

    Args:
        db: the store's database; its lock guards the views too.
        config: store settings (ANN thresholds).
        dim: the store's vector dimension, asked only when a view is loaded (it may load the embedder).
        prepare: the backend's hook for a freshly loaded view (where its ANN indexes live); None does nothing.
    """

    def __init__(
        self, db: StoreDatabase, config: StoreConfig, dim: Callable[[], int], prepare: ViewHook | None = None
    ) -> None:
        self._db = db
        self._config = config
        self._dim = dim
        self._prepare = prepare
        self._views: dict[str, GraphCache] = {}
        self._data_version = db.data_version()

    def get(self, graph_id: str) -> GraphCache:
        """The view of a graph, (re)loaded when missing or after another connection's commit."""
        with self._db.lock:
            view = self._views.get(graph_id)
            if view is not None and self._db.data_version() == self._data_version:
                return view
            return self._load(graph_id)

    def _load(self, graph_id: str) -> GraphCache:
        """Drop stale views, then load the graph's view in one snapshot (no other commit mixed in)."""
        with self._db.snapshot():
            version = self._db.data_version()
            if version != self._data_version:
                self._views.clear()
                self._data_version = version
            view = self._views.get(graph_id)
            if view is None:
                if not self._db.has_graph(graph_id):
                    raise GraphError(
                        f"Graph {graph_id!r} is not in store {self._db.path}; "
                        f"it holds {self._db.graph_ids() or 'no graphs'}."
                    )
                view = load_graph_cache(self._db.conn, graph_id, self._dim(), self._config)
                if self._prepare is not None:
                    self._prepare(view, graph_id)
                self._views[graph_id] = view
            return view

    def loaded(self, graph_id: str) -> GraphCache | None:
        """The view of a graph if it is loaded (to patch after a commit), else None."""
        return self._views.get(graph_id)

    def drop(self, graph_id: str) -> None:
        """Forget one graph's view; it is reloaded on next use."""
        self._views.pop(graph_id, None)

    @contextmanager
    def transaction(self, batch: bool = False) -> Iterator[SqlConnection]:
        """A write transaction of the store; on any error it rolls back and drops every view.

        `batch`: a transaction that this thread's later writes join (`StoreDatabase.batch`).
        """
        with self._db.lock:
            try:
                with self._db.batch() if batch else self._db.transaction() as conn:
                    yield conn
            except BaseException:
                self._views.clear()
                raise

    def save_and_drop_all(self) -> None:
        """Save changed HNSW indexes, then forget every view (on close)."""
        with self._db.lock:
            for view in self._views.values():
                view.save_ann()
            self._views.clear()
