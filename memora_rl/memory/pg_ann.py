"""The PostgreSQL store's approximate search: a view's large vector tables search pgvector's HNSW indexes.

On SQLite, a view's `VectorTable` builds a usearch HNSW index in memory once it holds
`StoreConfig.ann_threshold` live rows (and saves it beside the file). On PostgreSQL a view's table
searches its rows in memory exactly until it holds `StoreConfig.pgvector_threshold` live rows (a
round trip to pgvector costs more below that); then the index lives in the database: the first
process to need it creates it (`pg_schema.ensure_hnsw_index`),
every later write keeps it up to date in its own transaction, and every process shares it. The
table's index is then a `PgVectorIndex`, which asks the database for the nearest rows of the graph. As with usearch,
the table re-scores the candidates exactly from its float32 rows, drops filtered ones, and falls
back to an exact search when too few remain (pgvector 0.6 filters by graph after the index scan,
so a graph that is a small share of a big store may get few candidates).

Below both thresholds, searches are exact numpy products over the view on both backends, so a
small graph ranks alike on either.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from memora_rl.memory import pg_schema
from memora_rl.memory.config import StoreConfig
from memora_rl.memory.graph_cache import GraphCache
from memora_rl.memory.sql_io import blob

if TYPE_CHECKING:
    from memora_rl.memory.pg_connection import PgStoreConnection

_TABLES: dict[str, tuple[str, str, str]] = {
    "abstractions": ("entries", "abstraction_vector", "entry_row"),
    "values": ("entries", "value_vector", "entry_row"),
    "anchors": ("anchors", "vector", "anchor_row"),
    "episodes": ("episodes", "vector", "episode_row"),
}
"""View table -> (database table, vector column, the view's id -> row map)."""


class Matches:
    """What `VectorTable` reads of a search: the rows found, best first."""

    def __init__(self, keys: np.ndarray) -> None:
        self.keys = keys


class PgVectorIndex:
    """Stands in for a view table's usearch index: searches the database's HNSW index of one vector column.

    Args:
        db: the store's database (its connection and lock).
        graph_id: the view's graph.
        table: the database table (`entries`, `anchors`, `episodes`).
        column: its vector column.
        rows: the view's map of ids to rows of this table (read at each search, so it follows the view).
    """

    def __init__(
        self, db: PgStoreConnection, graph_id: str, table: str, column: str, rows: Callable[[], Mapping[str, int]]
    ) -> None:
        self._db = db
        self._graph_id = graph_id
        self._sql = f"SELECT id FROM {table} WHERE graph_id = ? ORDER BY {column} <=> ? LIMIT ?"
        self._rows = rows

    def add(self, *_: Any, **__: Any) -> None:
        """Nothing to do: the write that added the vector updated the database's index."""

    def remove(self, *_: Any) -> None:
        """Nothing to do: the write that removed or replaced the vector updated the database's index."""

    def search(self, query: np.ndarray, count: int) -> Matches:
        """The view rows of the `count` nearest vectors of the graph (fewer when pgvector finds fewer)."""
        rows = self._rows()
        with self._db.lock:
            found = self._db.conn.execute(self._sql, (self._graph_id, blob(query), int(count))).fetchall()
        keys = [rows[entry_id] for (entry_id,) in found if entry_id in rows]  # newer than the view: not in it
        return Matches(np.asarray(keys, dtype=np.int64))


def pgvector_views(db: PgStoreConnection, config: StoreConfig) -> Callable[[GraphCache, str], None]:
    """The PostgreSQL store's view hook: every vector table of a loaded view searches pgvector past its threshold."""

    def prepare(view: GraphCache, graph_id: str) -> None:
        for name, (table, column, rows) in _TABLES.items():
            vectors = getattr(view, name)
            vectors.ann_rows = config.pgvector_threshold
            vectors.ann_factory = lambda t=table, c=column, r=rows: _index(db, config, graph_id, view, t, c, r)

    return prepare


def _index(
    db: PgStoreConnection, config: StoreConfig, graph_id: str, view: GraphCache, table: str, column: str, rows: str
) -> PgVectorIndex:
    """The pgvector index of one view table, created in the database first if it is not there yet."""
    with db.lock:
        assert db.dim is not None  # a table past the threshold holds vectors, so the dimension is recorded
        pg_schema.ensure_hnsw_index(db.raw, table, column, db.dim, config)
    return PgVectorIndex(db, graph_id, table, column, lambda: getattr(view, rows))
