"""`PostgresGraphStore`: the `GraphStore` backend on PostgreSQL + pgvector, for stores several processes share.

Everything a caller sees is the shared facade (`memory.base_store`), so it answers exactly as
the SQLite store does; what differs is underneath:

- the database (`memory.pg_connection`): one psycopg connection per store object, write
  transactions serialised by a row lock (as SQLite's write lock), commit counting for views;
- the tables (`memory.pg_schema`): SQLite's, with pgvector columns and HNSW indexes;
- keyword statistics (`memory.pg_keywords`): rows beside the entries instead of FTS5,
  with FTS5's own terms, so BM25 ranks alike;
- approximate search (`memory.pg_ann`): the database's HNSW indexes instead of usearch
  indexes built per process.

Open one with `open_store("postgresql://user:password@host:port/db")`. The server needs the
pgvector extension (created on first use when the user may; else `CREATE EXTENSION vector;`
once as a superuser). For development, PyPI `pgserver` runs an embedded server with pgvector.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from memora_rl.memory.base_store import BaseGraphStore
from memora_rl.memory.config import StoreConfig
from memora_rl.memory.pg_ann import pgvector_views
from memora_rl.memory.pg_connection import PgStoreConnection
from memora_rl.memory.pg_keywords import PgKeywords
from memora_rl.memory.pg_schema import run_pg_integrity_checks
from memora_rl.memory.store import IntegrityReport

if TYPE_CHECKING:
    from memora_rl.embedding import Embedder

logger = logging.getLogger(__name__)


class PostgresGraphStore(BaseGraphStore):
    """A collection of memory graphs in one PostgreSQL schema, with in-memory vector search over per-graph views.

    Args:
        url: `postgresql://user:password@host:port/database`; the tables go in the connection's current
            schema (`?options=-csearch_path%3D<schema>` picks another, which must exist).
        embedder: encodes texts; defaults to `memora_rl.embedding.get_embedder()`, created on first need.
        config: store settings (`StoreConfig` defaults when None); `ann_persist` does not apply (the HNSW
            indexes live in the database).

    Raises:
        GraphError: psycopg is missing, the server is unreachable, has no pgvector, or the schema holds
            another application's tables or another schema version.
    """

    def __init__(self, url: str, embedder: Embedder | None = None, config: StoreConfig | None = None) -> None:
        config = config or StoreConfig()
        db = PgStoreConnection(url, config)
        self.path = db.path
        """The URL without its password (what names the store in messages)."""
        self._pg = db
        super().__init__(db, embedder, config, PgKeywords(), pgvector_views(db, config))

    def close(self) -> None:
        """Forget the views and close the connection."""
        with self._db.lock:
            self._views.save_and_drop_all()
            self._pg.close()

    def check_integrity(self) -> IntegrityReport:
        """Graph invariants, vector widths and the keyword index (constraints are enforced by the server)."""
        with self._db.lock, self._db.snapshot() as conn:
            return IntegrityReport(problems=run_pg_integrity_checks(conn, self._db.dim))
