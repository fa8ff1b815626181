"""Shared helpers of the memory tests."""

from __future__ import annotations

import numpy as np


def random_unit(rng: np.random.Generator, count: int, dim: int = 384) -> np.ndarray:
    """`count` random L2-normalised float32 rows."""
    vectors = rng.standard_normal((count, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def perturb(rng: np.random.Generator, vectors: np.ndarray, noise: float) -> np.ndarray:
    """Unit vectors near `vectors` (queries with a known true neighbour)."""
    noisy = vectors + noise * rng.standard_normal(vectors.shape).astype(np.float32) / np.sqrt(vectors.shape[1])
    return noisy / np.linalg.norm(noisy, axis=1, keepdims=True)
