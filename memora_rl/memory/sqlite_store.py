"""`SQLiteGraphStore`, the embedded `GraphStore` backend (one SQLite file, several graphs), and `open_store`.

What the SQLite store adds to the shared facade (`memory.base_store`): its connection
(`memory.connection`: WAL, `BEGIN IMMEDIATE` write transactions), the FTS5 index that BM25
reads (`bm25.Fts5Keywords`), HNSW indexes saved beside the file (`memory.ann_files`), and
SQLite's own integrity checks.

`open_store` is where every caller opens a store: a file path opens SQLite, a
`postgresql://` URL opens `PostgresGraphStore` (`memory.postgres_store`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, overload

from memora_rl.errors import GraphError
from memora_rl.memory import ann_files
from memora_rl.memory.base_store import BaseGraphStore
from memora_rl.memory.bm25 import Fts5Keywords
from memora_rl.memory.config import StoreConfig
from memora_rl.memory.connection import StoreConnection
from memora_rl.memory.graph_cache import GraphCache
from memora_rl.memory.integrity import run_integrity_checks
from memora_rl.memory.store import IntegrityReport

if TYPE_CHECKING:
    from memora_rl.embedding import Embedder

logger = logging.getLogger(__name__)

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
"""URL prefixes that open a PostgreSQL store; anything else is a SQLite file path."""
_MANGLED_URL = re.compile(r"^postgres(ql)?:/[^/]")


class SQLiteGraphStore(BaseGraphStore):
    """A collection of memory graphs in one SQLite file, with in-memory vector search.

    Args:
        path: the store file (created if missing).
        embedder: encodes texts; defaults to `memora_rl.embedding.get_embedder()`, created on first need,
            so read-only uses with vector queries never load a model.
        config: store settings (`StoreConfig` defaults when None).
    """

    def __init__(self, path: str | Path, embedder: Embedder | None = None, config: StoreConfig | None = None) -> None:
        self.path = Path(path)
        config = config or StoreConfig()
        super().__init__(StoreConnection(self.path), embedder, config, Fts5Keywords(), self._prepare_view)

    def _prepare_view(self, view: GraphCache, graph_id: str) -> None:
        """Point a freshly loaded view's HNSW indexes at the `.ann` folder (with `ann_persist`)."""
        if self.config.ann_persist:
            view.save_ann_in(self.ann_dir, graph_id)

    @property
    def ann_dir(self) -> Path:
        """Folder of the saved HNSW indexes (`<store file>.ann`); safe to delete, they are rebuilt."""
        return ann_files.ann_dir(self.path)

    def close(self) -> None:
        """Save changed HNSW indexes, then close the database (WAL content is checkpointed by SQLite)."""
        with self._db.lock:
            self._views.save_and_drop_all()
            self._db.conn.close()

    def check_integrity(self) -> IntegrityReport:
        """`PRAGMA integrity_check`, foreign keys, FTS index and graph invariants."""
        with self._db.lock:
            return IntegrityReport(problems=run_integrity_checks(self._db.conn, self._db.dim))


def is_postgres_url(location: str | Path) -> bool:
    """True when `location` names a PostgreSQL store (`postgresql://...` or `postgres://...`).

    Raises:
        GraphError: a URL that went through `pathlib.Path`, which turned its `//` into `/`.
    """
    text = str(location)
    if isinstance(location, Path) and _MANGLED_URL.match(text):
        raise GraphError(
            f"Store location {text!r} looks like a PostgreSQL URL turned into a file path (its '//' became '/'). "
            "Pass the URL as a string, e.g. open_store('postgresql://user@host/db')."
        )
    return text.startswith(POSTGRES_SCHEMES)


def store_exists(location: str | Path) -> bool:
    """True when `location` holds a graph store: an existing file, or a PostgreSQL schema with the store's tables.

    Opening a store creates it; commands that only read ask here first, so that reading never
    creates a store at a mistyped location.

    Raises:
        GraphError: a PostgreSQL server that cannot be reached (as `open_store` would), or a mangled URL.
    """
    if is_postgres_url(location):
        from memora_rl.memory.pg_connection import pg_store_exists

        return pg_store_exists(str(location))
    return Path(location).is_file()


@overload
def open_store(
    location: Path, embedder: Embedder | None = None, config: StoreConfig | Mapping | None = None
) -> SQLiteGraphStore: ...


@overload
def open_store(
    location: str, embedder: Embedder | None = None, config: StoreConfig | Mapping | None = None
) -> BaseGraphStore: ...


def open_store(
    location: str | Path, embedder: Embedder | None = None, config: StoreConfig | Mapping | None = None
) -> BaseGraphStore:
    """Open (or create) a graph store: a SQLite file at a path, or a PostgreSQL store at a `postgresql://` URL.

    Args:
        location: a file path (SQLite, the embedded default) or a URL `postgresql://user:password@host:port/db`
            (tables in the connection's current schema; `?options=-csearch_path%3Dname` picks another one).
        embedder: encodes texts (loaded on first need when None).
        config: store settings, or a mapping of them.
    """
    if isinstance(config, Mapping):
        config = StoreConfig.model_validate(dict(config))
    if is_postgres_url(location):
        from memora_rl.memory.postgres_store import PostgresGraphStore

        return PostgresGraphStore(str(location), embedder=embedder, config=config)
    return SQLiteGraphStore(location, embedder=embedder, config=config)
