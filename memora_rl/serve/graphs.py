"""Which graph lives in which store: a reader and a writer connection per store file, found by graph id.

Reads (retrieve, search, pages) share one `SQLiteGraphStore` per file; ingest writes through a
second one (a `batch()` per ingest), serialised by a lock, so a batch in progress is never
visible to readers (SQLite WAL isolation) and readers reload their views after it commits. The
lock is a thread lock plus a file lock beside the store, so the worker processes of
`serve-memory --workers N` (and other serve-memory processes on the same file) take turns too.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from filelock import FileLock
from filelock import Timeout as FileLockTimeout

from memora_rl.embedding import Embedder
from memora_rl.errors import GraphError
from memora_rl.memory.sqlite_store import SQLiteGraphStore, open_store
from memora_rl.serve.schemas import GraphSummary

logger = logging.getLogger(__name__)


class UnknownGraphError(GraphError):
    """A request named a graph no served store holds (HTTP 404)."""


@dataclass
class StoreHandle:
    """One store file: its read connection, its write connection, and the locks that serialise ingests."""

    path: Path
    reader: SQLiteGraphStore
    writer: SQLiteGraphStore
    _thread_lock: threading.Lock = field(default_factory=threading.Lock)

    @contextmanager
    def ingest_lock(self, timeout_s: float | None = None) -> Iterator[None]:
        """Hold the store's ingest lock: one ingest at a time among this process's threads and every process.

        Args:
            timeout_s: longest wait for the lock (None, or past `threading.TIMEOUT_MAX`: as long as it takes).

        Raises:
            TimeoutError: the lock was not free within `timeout_s` (another ingest held it).
        """
        wait_s = -1.0 if timeout_s is None or timeout_s >= threading.TIMEOUT_MAX else max(0.0, timeout_s)
        busy = f"the ingest lock of {self.path.name} stayed held for {wait_s:g} s"
        if not self._thread_lock.acquire(timeout=wait_s):
            raise TimeoutError(busy)
        try:
            file_lock = FileLock(f"{self.path}.ingest.lock", timeout=wait_s, poll_interval=0.01)
            try:
                file_lock.acquire()
            except FileLockTimeout as error:
                raise TimeoutError(busy) from error
            try:
                yield
            finally:
                file_lock.release()
        finally:
            self._thread_lock.release()


class GraphRegistry:
    """The served store files, looked up by graph id.

    Args:
        paths: store files (created when missing); a graph id held by two of them is an error.
        embedder: the one embedder every connection shares (its cache then serves all of them);
            None: the process-wide default one, loaded on first use.
    """

    def __init__(self, paths: list[Path], embedder: Embedder | None) -> None:
        self.handles = [
            StoreHandle(path=Path(p), reader=open_store(p, embedder=embedder), writer=open_store(p, embedder=embedder))
            for p in paths
        ]
        self._check_unique_ids()

    def _check_unique_ids(self) -> None:
        """Refuse two stores holding the same graph id (a request could not say which one it means)."""
        owner: dict[str, Path] = {}
        for handle in self.handles:
            for graph_id in handle.reader.graph_ids():
                if graph_id in owner:
                    raise GraphError(
                        f"Graph {graph_id!r} is in both {owner[graph_id]} and {handle.path}; "
                        "serve one of them, or export one graph under another id (memora-rl graph export/import)."
                    )
                owner[graph_id] = handle.path

    def graph_ids(self) -> list[str]:
        """Every served graph id, sorted."""
        return sorted(graph_id for handle in self.handles for graph_id in handle.reader.graph_ids())

    def find(self, graph_id: str) -> StoreHandle:
        """The store holding `graph_id`.

        Raises:
            UnknownGraphError: no served store holds it; the message lists the served ids.
        """
        for handle in self.handles:
            if graph_id in handle.reader.graph_ids():
                return handle
        served = self.graph_ids()
        raise UnknownGraphError(
            f"Graph {graph_id!r} is not served; served graphs: {served or 'none'}. "
            "Use one of those ids, ingest turns into a new graph with POST /v1/ingest, "
            "or restart serve-memory with --store pointing at the store that holds it."
        )

    def find_or_first(self, graph_id: str) -> StoreHandle:
        """The store holding `graph_id`, or the first store (where ingest creates new graphs)."""
        try:
            return self.find(graph_id)
        except UnknownGraphError:
            return self.handles[0]

    def summary(self, graph_id: str) -> GraphSummary:
        """Counts of one graph and its store's file name (404 when unknown)."""
        handle = self.find(graph_id)
        counts = handle.reader.stats(graph_id)
        return GraphSummary(
            id=graph_id,
            store=handle.path.name,
            entries=counts["entries"],
            anchors=counts["anchors"],
            episodes=counts["episodes"],
        )

    def close(self) -> None:
        """Close every connection (the writer first, so its WAL content is on disk for the reader)."""
        for handle in self.handles:
            handle.writer.close()
            handle.reader.close()
