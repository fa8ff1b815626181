"""Saved HNSW indexes on disk: where they live, how they are named, and the fingerprint that keys them.

Building an HNSW index is slow (17 minutes at 1M rows on 2 cores), so a built index is saved
beside the store and a later process loads it instead of rebuilding. The layout is

    <store file>.ann/<graph hash>-<table>.<fingerprint>.usearch

- graph hash: the first 16 hex digits of SHA-256 of the graph id (ids may hold any character);
- table: `abstractions`, `values` or `anchors`;
- fingerprint: SHA-256 of the table's rows, their live mask, the index settings and the usearch
  version. A saved index is loaded only by a process holding exactly those vectors; any change
  gives another fingerprint, the index is rebuilt, and its save replaces the older files.

A name proves nothing about a file's contents (a file copied or renamed from another store's
folder, a truncated one), so a loaded index is also checked against the rows: its row count,
its keys and a sample of its stored vectors (`VectorTable._mismatch`); any mismatch rebuilds it.

The folder is a cache: deleting it only costs rebuilds.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
from pathlib import Path
from types import ModuleType

import numpy as np

from memora_rl.memory.config import StoreConfig


@functools.cache
def load_usearch() -> ModuleType:
    """The `usearch` package with its `index` module; every usearch import of the project goes through here.

    onnxruntime 1.32 segfaults when it is imported after usearch 2.26 in one process, and the ONNX
    embedder (`memora_rl.embedding.onnx_encoder`) may be made after the first ANN search, so onnxruntime, when
    installed, is loaded first (0.05 s, 20 MB).
    """
    if importlib.util.find_spec("onnxruntime") is not None:
        import onnxruntime  # noqa: F401
    import usearch.index

    return usearch


def ann_dir(store_path: Path) -> Path:
    """The folder of a store's saved indexes, `<store file>.ann`."""
    return store_path.with_name(f"{store_path.name}.ann")


def table_prefix(folder: Path, graph_id: str, table: str) -> Path:
    """The name prefix of one graph table's saved indexes, `<folder>/<graph hash>-<table>`."""
    return folder / f"{hashlib.sha256(graph_id.encode()).hexdigest()[:16]}-{table}"


def fingerprint(matrix: np.ndarray, alive: np.ndarray, config: StoreConfig) -> str:
    """SHA-256 (32 hex digits) of rows (n, dim), their live mask (n,) and the index settings."""
    usearch = load_usearch()
    settings = (matrix.shape[1], config.ann_dtype, config.ann_connectivity, config.ann_expansion_add)
    digest = hashlib.sha256(f"{settings} usearch {usearch.__version__}".encode())
    digest.update(memoryview(alive))
    digest.update(memoryview(matrix))
    return digest.hexdigest()[:32]


def index_path(prefix: Path, key: str) -> Path:
    """The file of the index saved under `prefix` for the fingerprint `key`."""
    return prefix.with_name(f"{prefix.name}.{key}.usearch")


def older_saves(prefix: Path, current: Path) -> list[Path]:
    """Indexes saved under `prefix` for other fingerprints than `current`'s (stale, to delete)."""
    return [old for old in prefix.parent.glob(f"{prefix.name}.*.usearch") if old != current]
