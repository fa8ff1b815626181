"""A growable in-memory matrix of unit vectors with exact top-k and an automatic usearch HNSW index."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

import numpy as np

from memora_rl.memory import ann_files
from memora_rl.memory.config import StoreConfig

logger = logging.getLogger(__name__)

_CHECKED_ROWS = 64
"""Rows of a loaded index whose stored vector is compared with the table's (a few ms even at 1M rows)."""
_MIN_STORED_COSINE = 0.95
"""A loaded index's stored vector must be this close to its row (int8 rounding keeps about 0.998)."""


def as_unit_vector(vector: np.ndarray, dim: int, what: str) -> np.ndarray:
    """Return `vector` as float32 (dim,), L2-normalised; raise on a wrong shape or a zero vector."""
    from memora_rl.errors import GraphError

    array = np.asarray(vector, dtype=np.float32).reshape(-1)
    if array.shape[0] != dim:
        raise GraphError(
            f"{what} has dimension {array.shape[0]}, the store holds {dim}-d vectors. Use the same embedder."
        )
    norm = float(np.linalg.norm(array))
    if not np.isfinite(norm) or norm == 0.0:
        raise GraphError(f"{what} is a zero or non-finite vector; pass an L2-normalised embedding.")
    return array / norm


@cache
def _blas_controller() -> object | None:
    """A threadpoolctl controller for the BLAS under numpy, or None when threadpoolctl is absent."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn / scipy stacks
        return None
    return ThreadpoolController()


@contextmanager
def single_thread_blas() -> Iterator[None]:
    """Run matrix-vector products on one BLAS thread.

    A matrix-vector product is memory-bound: a second OpenBLAS thread barely helps on an
    idle machine, and on a busy one (other processes on the cores) its spin-waits made a
    10k x 384 product 13x slower here (31 ms vs 2.4 ms). Costs about 0.2 ms per use.
    """
    controller = _blas_controller()
    if controller is None:
        yield
        return
    with controller.limit(limits=1, user_api="blas"):  # type: ignore[attr-defined]
        yield


class VectorTable:
    """Rows of unit vectors addressed by row number; removed rows become tombstones.

    Exact search is one matrix-vector product; once `ann_rows` rows are live (`ann_threshold`
    unless a backend's view hook sets its own) the first search builds a usearch HNSW index that
    later adds and removes keep in sync. ANN hits are re-scored exactly from the float32 rows, so
    returned scores are true cosines.

    With `ann_file` set, a built index is saved beside the store under a fingerprint of the
    rows, and a later process with the same rows loads it instead of rebuilding
    (layout and keys: `memory.ann_files`). With `ann_factory` set, the index is the one it
    makes instead (the PostgreSQL store's pgvector index, `memory.pg_ann`): nothing is built.
    """

    def __init__(self, dim: int, config: StoreConfig, capacity: int = 1024) -> None:
        self.dim = dim
        self.config = config
        self._matrix = np.zeros((capacity, dim), dtype=np.float32)  # (capacity, dim)
        self._alive = np.zeros(capacity, dtype=bool)  # (capacity,)
        self.size = 0
        self.live = 0
        self._ann: object | None = None
        self.ann_file: Path | None = None  # prefix of saved indexes, `<prefix>.<fingerprint>.usearch`
        self._ann_saved = False  # the index on disk matches the one in memory
        self.ann_factory: Callable[[], object] | None = None  # an index kept elsewhere (add/remove/search)
        self.ann_rows = config.ann_threshold  # live rows at which searches switch to the index

    @property
    def matrix(self) -> np.ndarray:
        """The used rows, shape (size, dim); tombstones are zero rows."""
        return self._matrix[: self.size]

    @property
    def alive(self) -> np.ndarray:
        """Boolean mask of live rows, shape (size,)."""
        return self._alive[: self.size]

    @property
    def uses_ann(self) -> bool:
        """True once the HNSW index has been built."""
        return self._ann is not None

    def _grow(self, needed: int) -> None:
        capacity = self._matrix.shape[0]
        if needed <= capacity:
            return
        new_capacity = max(needed, capacity * 2)
        matrix = np.zeros((new_capacity, self.dim), dtype=np.float32)
        matrix[: self.size] = self._matrix[: self.size]
        alive = np.zeros(new_capacity, dtype=bool)
        alive[: self.size] = self._alive[: self.size]
        self._matrix, self._alive = matrix, alive

    def append(self, vectors: np.ndarray) -> np.ndarray:
        """Append unit rows (n, dim); returns their row numbers (n,)."""
        vectors = np.asarray(vectors, dtype=np.float32).reshape(-1, self.dim)
        start = self.size
        self._grow(start + len(vectors))
        self._matrix[start : start + len(vectors)] = vectors
        self._alive[start : start + len(vectors)] = True
        self.size += len(vectors)
        self.live += len(vectors)
        rows = np.arange(start, start + len(vectors))
        if self._ann is not None and len(rows):
            self._ann.add(rows, vectors, threads=2)  # type: ignore[attr-defined]
            self._ann_saved = False
        return rows

    def replace(self, row: int, vector: np.ndarray) -> None:
        """Overwrite one live row (e.g. a refined abstraction)."""
        self._matrix[row] = vector
        if self._ann is not None:
            self._ann.remove(row)  # type: ignore[attr-defined]
            self._ann.add(row, vector)  # type: ignore[attr-defined]
            self._ann_saved = False

    def remove(self, row: int) -> None:
        """Turn a row into a tombstone."""
        if not self._alive[row]:
            return
        self._alive[row] = False
        self._matrix[row] = 0.0
        self.live -= 1
        if self._ann is not None:
            self._ann.remove(row)  # type: ignore[attr-defined]
            self._ann_saved = False

    def build_ann(self) -> None:
        """Build the HNSW index over the live rows now (normally done lazily by `top_k`)."""
        index = ann_files.load_usearch().index.Index(
            ndim=self.dim,
            metric="cos",
            dtype=self.config.ann_dtype,
            connectivity=self.config.ann_connectivity,
            expansion_add=self.config.ann_expansion_add,
            expansion_search=self.config.ann_expansion_search,
        )
        rows = np.flatnonzero(self.alive)
        if len(rows):
            index.add(rows, self._matrix[rows], threads=2)
        self._ann = index
        self._ann_saved = False
        logger.info("built an HNSW index over %d vectors", len(rows))

    def fingerprint(self) -> str:
        """The key of a saved index for these rows and settings (see `memory.ann_files`)."""
        return ann_files.fingerprint(self._matrix[: self.size], self._alive[: self.size], self.config)

    def _ann_path(self, fingerprint: str) -> Path:
        assert self.ann_file is not None
        return ann_files.index_path(self.ann_file, fingerprint)

    def _ensure_ann(self) -> None:
        """Load the saved index for these rows if there is one, else build it (and save it)."""
        if self.ann_factory is not None:
            self._ann, self._ann_saved = self.ann_factory(), True
            return
        fingerprint = self.fingerprint() if self.ann_file is not None else None
        if fingerprint is not None and self._load_ann(fingerprint):
            return
        self.build_ann()
        self.save_ann(fingerprint)

    def _load_ann(self, fingerprint: str) -> bool:
        path = self._ann_path(fingerprint)
        if not path.exists():
            return False
        try:
            index = ann_files.load_usearch().index.Index.restore(str(path))
        except (RuntimeError, ValueError, OSError) as error:
            logger.warning("ignoring the unreadable saved index %s (%s); rebuilding it", path, error)
            return False
        problem = "it is empty" if index is None else self._mismatch(index)
        if problem is not None:
            logger.warning("ignoring the saved index %s: %s; rebuilding it", path, problem)
            return False
        index.expansion_search = self.config.ann_expansion_search
        self._ann, self._ann_saved = index, True
        logger.info("loaded the HNSW index over %d vectors from %s", self.live, path)
        return True

    def _mismatch(self, index: object) -> str | None:
        """Why a restored index is not over these rows (None when it is): its row count, keys, or sampled vectors.

        The fingerprint in a file name says which rows the file was saved for, not what it holds:
        a file copied or renamed from another store's folder has the right name and foreign contents.
        """
        if len(index) != self.live:  # type: ignore[arg-type]
            return "it holds another row count"
        rows = np.flatnonzero(self.alive)
        keys = np.sort(np.asarray(index.keys, dtype=np.int64))  # type: ignore[attr-defined]
        if not np.array_equal(keys, rows):
            return "it holds other row numbers"
        sample = np.unique(rows[np.linspace(0, len(rows) - 1, min(len(rows), _CHECKED_ROWS)).astype(np.int64)])
        stored = np.stack(index.get(sample, dtype=np.float32))  # type: ignore[attr-defined]  # (n, dim)
        norms = np.maximum(np.linalg.norm(stored, axis=1), 1e-12)
        cosines = np.einsum("ij,ij->i", stored, self._matrix[sample]) / norms
        if cosines.min() < _MIN_STORED_COSINE:
            return f"its vectors are not these rows (cosine {cosines.min():.3f} at row {sample[cosines.argmin()]})"
        return None

    def save_ann(self, fingerprint: str | None = None) -> None:
        """Write the index beside the store (atomically), replacing older saves; no-op when not wanted.

        Skipped with tombstones: a reopened store numbers its rows without them, so the keys would differ.
        `fingerprint` saves hashing the rows again when the caller has just done it.
        """
        if self.ann_file is None or self._ann is None or self._ann_saved or self.live != self.size:
            return
        path = self._ann_path(fingerprint or self.fingerprint())
        partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._ann.save(str(partial))  # type: ignore[attr-defined]
            os.replace(partial, path)
        except (OSError, RuntimeError) as error:
            partial.unlink(missing_ok=True)
            logger.warning("could not save the HNSW index to %s (%s); it will be rebuilt on the next open", path, error)
            return
        for old in ann_files.older_saves(self.ann_file, path):
            old.unlink(missing_ok=True)
        self._ann_saved = True
        logger.info("saved the HNSW index over %d vectors to %s", self.live, path)

    def top_k(self, query: np.ndarray, k: int, mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Best `k` live rows by cosine to the unit `query`, restricted to `mask` (size,) when given.

        Returns:
            (rows, scores), both (<= k,), best first.
        """
        if k <= 0 or self.live == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        if self._ann is None and self.live >= self.ann_rows:
            self._ensure_ann()
        allowed = self.alive if mask is None else self.alive & mask
        if self._ann is not None and (mask is None or allowed.sum() * 10 >= self.live):
            rows, scores = self._ann_top_k(query, k, allowed)
            if len(rows) >= min(k, int(allowed.sum())):
                return rows, scores
        return self._exact_top_k(query, k, allowed)

    def _exact_top_k(self, query: np.ndarray, k: int, allowed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        candidates = np.flatnonzero(allowed)
        if len(candidates) == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        # (n_allowed,): skip the gather when every row is allowed
        scores = self.matrix @ query if len(candidates) == self.size else self._matrix[candidates] @ query
        top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
        top = top[np.argsort(-scores[top], kind="stable")]
        return candidates[top], scores[top]

    def _ann_top_k(self, query: np.ndarray, k: int, allowed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        wanted = min(k * self.config.ann_oversample, self.live)  # extra candidates: recall, filters, tombstones
        matches = self._ann.search(query, wanted)  # type: ignore[attr-defined]
        rows = np.asarray(matches.keys, dtype=np.int64)
        rows = rows[allowed[rows]]
        scores = self._matrix[rows] @ query  # exact re-score, (n,)
        order = np.argsort(-scores, kind="stable")[:k]
        return rows[order], scores[order]
