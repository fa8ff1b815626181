"""Which graph lives in which store: a reader and a writer connection per store, found by graph id.

A store is a SQLite file or a PostgreSQL database (a `postgresql://` URL). Reads (retrieve,
search, pages) share one store object per SQLite file, or `read_connections` of them, taken in
turn, per PostgreSQL store; ingest writes through another one (a
`batch()` per ingest), serialised by a lock, so a batch in progress is never visible to readers
and readers reload their views after it commits. On SQLite the lock is a thread lock plus a file
lock beside the store, so the worker processes of `serve-memory --workers N` (and other
serve-memory processes on the same file) take turns too. On PostgreSQL it is the thread lock
alone: the store's `batch()` already holds the database's write lock (a row lock) from its
first statement to its commit, for every process on every machine, and ingest's session check
inside the batch catches a batch another replica wrote meanwhile (`memora_rl.serve.ingest`).

A store shows by name only (`store_name`): a file by its file name, a PostgreSQL store by its
database (and schema), never its host, user, password or folder.
"""

from __future__ import annotations

import itertools
import logging
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from filelock import FileLock
from filelock import Timeout as FileLockTimeout

from memora_rl.embedding import Embedder
from memora_rl.errors import GraphError
from memora_rl.memory import BaseGraphStore, is_postgres_url, open_store
from memora_rl.serve.idempotency import IngestKeyLog, ingest_key_log
from memora_rl.serve.schemas import GraphSummary

logger = logging.getLogger(__name__)

_SEARCH_PATH = re.compile(r"search_path\s*=\s*([^\s,]+)")


class UnknownGraphError(GraphError):
    """A request named a graph no served store holds (HTTP 404)."""


def store_name(location: str) -> str:
    """How the service shows a store: a file's name, or `postgresql:<database>[.<schema>]` for a URL.

    Clients see this name only (`/v1/graphs`, the page, error texts): no folder, host, user or password.

    >>> store_name("/srv/memory/team.sqlite")
    'team.sqlite'
    >>> store_name("postgresql://ann:secret@db.lan:5432/memory?options=-csearch_path%3Dteam")
    'postgresql:memory.team'
    """
    if not is_postgres_url(location):
        return Path(location).name
    parts = urlsplit(location)
    database = parts.path.lstrip("/") or dict(parse_qsl(parts.query)).get("dbname", "")
    schema = _SEARCH_PATH.search(dict(parse_qsl(parts.query)).get("options", ""))
    return f"postgresql:{database or 'default'}" + (f".{schema.group(1)}" if schema else "")


class StoreHandle:
    """One store: its read connections, its write connection, the locks that serialise ingests, its ingest keys.

    Args:
        location: the store's file, or its URL without the password (`BaseGraphStore.location`).
        reader: a store object reads go through.
        writer: the store object ingest writes through (one `batch()` per ingest).
        key_log: where the first answers of keyed ingests live (`keys`); None: made from `location`, which must
            then need no password.
        more_readers: further read store objects of the same store, taken in turn with `reader` (a store
            object runs one statement at a time on its one connection: on PostgreSQL, where a read is a
            round trip to the server, concurrent retrieves would otherwise queue on it).
    """

    def __init__(
        self,
        location: str,
        reader: BaseGraphStore,
        writer: BaseGraphStore,
        key_log: IngestKeyLog | None = None,
        more_readers: Sequence[BaseGraphStore] = (),
    ) -> None:
        self.location = str(location)
        self.writer = writer
        self.keys: IngestKeyLog = key_log or ingest_key_log(self.location)
        """The first answers of keyed ingests into this store (`memora_rl.serve.idempotency`)."""
        self.readers = [reader, *more_readers]
        self._turns = itertools.count()
        self._thread_lock = threading.Lock()

    @property
    def reader(self) -> BaseGraphStore:
        """A read store object: the next of `readers` in turn (take it once per request, e.g. for a whole walk)."""
        return self.readers[next(self._turns) % len(self.readers)]

    @property
    def name(self) -> str:
        """The store as clients see it (`store_name`)."""
        return store_name(self.location)

    @property
    def shared_writers(self) -> bool:
        """True when other processes ingest without taking this process's ingest lock (PostgreSQL replicas).

        Their batches are serialised by the database's write lock instead, so a batch planned
        before taking it may find that another replica added a session meanwhile.
        """
        return is_postgres_url(self.location)

    @contextmanager
    def ingest_lock(self, timeout_s: float | None = None) -> Iterator[None]:
        """Hold the store's ingest lock: one ingest at a time among this process's threads (and, on SQLite, processes).

        Args:
            timeout_s: longest wait for the lock (None, or past `threading.TIMEOUT_MAX`: as long as it takes).

        Raises:
            TimeoutError: the lock was not free within `timeout_s` (another ingest held it).
        """
        wait_s = -1.0 if timeout_s is None or timeout_s >= threading.TIMEOUT_MAX else max(0.0, timeout_s)
        busy = f"the ingest lock of {self.name} stayed held for {wait_s:g} s"
        if not self._thread_lock.acquire(timeout=wait_s):
            raise TimeoutError(busy)
        try:
            if self.shared_writers:  # the database's write lock serialises the batches themselves
                yield
                return
            file_lock = FileLock(f"{self.location}.ingest.lock", timeout=wait_s, poll_interval=0.01)
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

    def close(self) -> None:
        """Close the writer first (on SQLite its WAL content is then on disk for the readers), the readers, the keys."""
        self.writer.close()
        for reader in self.readers:
            reader.close()
        self.keys.close()


def _open_handle(location: str, embedder: Embedder | None, read_connections: int) -> StoreHandle:
    """Open a store's readers and writer (and its ingest keys); the full location, password included, stays here.

    A PostgreSQL store gets `read_connections` readers, a SQLite store one (its reads are in-process and short).
    """
    count = read_connections if is_postgres_url(location) else 1
    opened: list[BaseGraphStore] = []
    try:
        for _ in range(count + 1):
            opened.append(open_store(location, embedder=embedder))
    except BaseException:
        for store in opened:
            store.close()
        raise
    writer, reader, *more = opened
    return StoreHandle(writer.location, reader, writer, ingest_key_log(location), more)


class GraphRegistry:
    """The served stores, looked up by graph id.

    Args:
        locations: store files or `postgresql://` URLs (created when missing); a graph id held by two of them is an
            error.
        embedder: the one embedder every connection shares (its cache then serves all of them);
            None: the process-wide default one, loaded on first use.
        read_connections: read store objects (one connection each) per PostgreSQL store.
    """

    def __init__(self, locations: list[str], embedder: Embedder | None, read_connections: int = 1) -> None:
        self.handles: list[StoreHandle] = []
        try:
            for location in map(str, locations):
                self.handles.append(_open_handle(location, embedder, read_connections))
            self._check_unique_ids()
        except BaseException:  # a bad store: close the ones already open, then say which one failed
            self.close()
            raise

    def _check_unique_ids(self) -> None:
        """Refuse two stores holding the same graph id (a request could not say which one it means)."""
        owner: dict[str, str] = {}
        for handle in self.handles:
            for graph_id in handle.reader.graph_ids():
                if graph_id in owner:
                    raise GraphError(
                        f"Graph {graph_id!r} is in both {owner[graph_id]} and {handle.location}; "
                        "serve one of them, or export one graph under another id (memora-rl graph export/import)."
                    )
                owner[graph_id] = handle.location

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
        """Counts of one graph and its store's name (404 when unknown)."""
        handle = self.find(graph_id)
        counts = handle.reader.stats(graph_id)
        return GraphSummary(
            id=graph_id,
            store=handle.name,
            entries=counts["entries"],
            anchors=counts["anchors"],
            episodes=counts["episodes"],
        )

    def close(self) -> None:
        """Close every store's connections."""
        for handle in self.handles:
            handle.close()
