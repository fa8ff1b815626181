"""What the env needs from other parts: small protocols (query embedder, judge, frontier ranker), a store opener."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import numpy as np

from memora_rl.core.trajectory import Trajectory
from memora_rl.errors import GraphError
from memora_rl.memory.store import GraphStore


class QueryEmbedder(Protocol):
    """Turns a query into the unit vector the store searches with (see `memora_rl.embedding.Embedder`)."""

    def encode_one(self, text: str) -> np.ndarray:
        """Unit vector of `text`, shape (dim,)."""
        ...


class Judge(Protocol):
    """Scores a finished trajectory (see `memora_rl.judge.TrajectoryJudge`)."""

    def score(self, trajectory: Trajectory) -> Any:
        """A result with `total: float` and `components: dict[str, float]`."""
        ...


class FrontierRanker(Protocol):
    """Scores frontier entries for the env to order and show (see `memora_rl.env.ranker.LearnedRanker`)."""

    def scores(self, env: Any, snapshot: Any, question: str) -> np.ndarray:
        """One score in [0, 1] per frontier entry of `snapshot`, in its frontier order."""
        ...


def open_existing_store(path: str | Path) -> GraphStore:
    """Open the SQLite store at `path` (it must exist: the env never builds graphs)."""
    from memora_rl.memory import open_store

    if not Path(path).is_file():
        raise GraphError(
            f"Graph store {path} does not exist; build it first: `memora-rl graph build --data DATA --out {path}` "
            "(DATA: a LoCoMo/LongMemEval JSON file, 'locomo' or 'synthetic')."
        )
    return open_store(path)
