"""The embedder's caches: document vectors on disk (SQLite, shared across runs), query vectors in memory."""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from memora_rl.sqlite_wal import enable_wal


class EmbeddingCache:
    """A SQLite table of vectors keyed by (model, sha256 of text); safe to share across runs."""

    def __init__(self, path: Path) -> None:
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(path, check_same_thread=False, timeout=30)
        enable_wal(self._conn)
        # A cache: a write lost to a power cut is recomputed, so commits skip the fsync (WAL stays consistent).
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS vectors (model TEXT, key TEXT, vector BLOB, PRIMARY KEY (model, key))"
        )

    def get_many(self, model: str, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """Vectors found for `keys` (missing keys are simply absent)."""
        found: dict[str, np.ndarray] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                chunk = list(keys[start : start + 500])
                marks = ",".join("?" * len(chunk))
                rows = self._conn.execute(
                    f"SELECT key, vector FROM vectors WHERE model = ? AND key IN ({marks})", [model, *chunk]
                )
                for key, blob in rows:
                    found[key] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put_many(self, model: str, items: dict[str, np.ndarray]) -> None:
        """Store vectors in one transaction."""
        with self._lock, self._conn:
            self._conn.executemany(
                "INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)",
                [(model, key, vector.astype(np.float32).tobytes()) for key, vector in items.items()],
            )


class QueryCache:
    """A bounded in-process LRU of query vectors by text.

    Queries (questions, refines) are kept here, not on disk: a served process sees mostly new
    questions, and writing each one to the shared disk cache grew it by every question asked and
    made every query a write transaction. Documents (entries, episodes) still go to the disk cache.
    """

    def __init__(self, capacity: int = 4096) -> None:
        self.capacity = capacity
        self._lock = threading.Lock()
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()

    def get(self, text: str) -> np.ndarray | None:
        """The cached vector of `text` (now the most recently used), or None."""
        with self._lock:
            vector = self._vectors.get(text)
            if vector is not None:
                self._vectors.move_to_end(text)
            return vector

    def put_many(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        """Cache a read-only copy of one vector per text, dropping the least recently used beyond `capacity`."""
        with self._lock:
            for text, vector in zip(texts, vectors, strict=True):
                stored = np.array(vector, dtype=np.float32)
                stored.setflags(write=False)  # shared by every later caller: nobody may change it in place
                self._vectors[text] = stored
                self._vectors.move_to_end(text)
            while len(self._vectors) > self.capacity:
                self._vectors.popitem(last=False)

    def __len__(self) -> int:
        return len(self._vectors)


def text_key(text: str) -> str:
    """Cache key of a text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
