"""Idempotent ingest: the first answer of each `idempotency_key`, kept beside the store, replayed on a retry.

An `IngestRequest` may carry `idempotency_key` (any client-chosen string, e.g. a UUID per batch). The
answer of the first request with that key for a graph is kept in a small SQLite file beside the store
(`<store>.ingest-keys.sqlite`, shared by every serve-memory process of the store); a later request with
the same key and the same batch writes nothing and gets that answer again (`replayed: true`). The same
key with a different batch is refused (422), since a key names one batch. Keys are looked up and
recorded under the store's ingest lock, so concurrent retries cannot both write. The record is written
just after the batch commits: a crash between the two (rare) lets one retry write the batch again.
"""

from __future__ import annotations

import hashlib
import sqlite3
from contextlib import closing
from pathlib import Path

from memora_rl.errors import ConfigError
from memora_rl.serve.schemas import IngestRequest, IngestResponse

_TABLE = (
    "CREATE TABLE IF NOT EXISTS ingest_keys (graph_id TEXT NOT NULL, key TEXT NOT NULL, digest TEXT NOT NULL, "
    "response TEXT NOT NULL, PRIMARY KEY (graph_id, key))"
)


def batch_digest(request: IngestRequest) -> str:
    """SHA-256 of the request without its key: the same batch sent again has the same digest."""
    return hashlib.sha256(request.model_dump_json(exclude={"idempotency_key"}).encode()).hexdigest()


class IdempotencyLog:
    """The first answers of keyed ingest requests into one store (call with the store's ingest lock held).

    Args:
        store_path: the graph store file; the log lives beside it.
    """

    def __init__(self, store_path: Path) -> None:
        self.path = Path(f"{store_path}.ingest-keys.sqlite")

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=30)
        conn.execute(_TABLE)
        return conn

    def find(self, request: IngestRequest) -> IngestResponse | None:
        """The first answer to `request.idempotency_key` in its graph (marked replayed), or None.

        Raises:
            ConfigError: the key was first sent with a different batch (names the field and the fix).
        """
        if request.idempotency_key is None:
            return None
        with closing(self._connect()) as conn:
            row = conn.execute("SELECT digest, response FROM ingest_keys WHERE graph_id = ? AND key = ?",
                               (request.graph, request.idempotency_key)).fetchone()  # fmt: skip
        if row is None:
            return None
        if row[0] != batch_digest(request):
            raise ConfigError(
                f"idempotency_key: {request.idempotency_key!r} was first sent with a different batch into graph "
                f"{request.graph!r}; send a new key for a new batch (a key names one batch, retried unchanged)."
            )
        return IngestResponse.model_validate_json(row[1]).model_copy(update={"replayed": True})

    def record(self, request: IngestRequest, response: IngestResponse) -> None:
        """Keep `response` as the answer to `request.idempotency_key` (nothing when the request has no key)."""
        if request.idempotency_key is None:
            return
        with closing(self._connect()) as conn, conn:
            conn.execute("INSERT OR REPLACE INTO ingest_keys VALUES (?, ?, ?, ?)",
                         (request.graph, request.idempotency_key, batch_digest(request),
                          response.model_dump_json()))  # fmt: skip
