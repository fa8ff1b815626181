"""Shared helpers of the memory tests."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import numpy as np

from memora_rl.memory import EntryCandidate, always_create, open_store
from memora_rl.memory.base_store import BaseGraphStore
from tests.postgres_fixtures import fresh_store_url


def random_unit(rng: np.random.Generator, count: int, dim: int = 384) -> np.ndarray:
    """`count` random L2-normalised float32 rows."""
    vectors = rng.standard_normal((count, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def perturb(rng: np.random.Generator, vectors: np.ndarray, noise: float) -> np.ndarray:
    """Unit vectors near `vectors` (queries with a known true neighbour)."""
    noisy = vectors + noise * rng.standard_normal(vectors.shape).astype(np.float32) / np.sqrt(vectors.shape[1])
    return noisy / np.linalg.norm(noisy, axis=1, keepdims=True)


class StoreFactory:
    """Opens stores of one backend by name; within a test the same name is the same store.

    Args:
        backend: `sqlite` or `postgres`.
        folder: the test's temp folder (SQLite files).
        postgres_url: the session's server (PostgreSQL), else None.
    """

    def __init__(self, backend: str, folder: Path, postgres_url: str | None) -> None:
        self.backend = backend
        self._folder = folder
        self._postgres_url = postgres_url
        self._locations: dict[str, str | Path] = {}
        self._opened: list[Any] = []

    def location(self, name: str = "graph") -> str | Path:
        """Where the store `name` lives: a file, or a URL whose schema was made for it."""
        if name not in self._locations:
            if self.backend == "sqlite":
                self._locations[name] = self._folder / f"{name}.sqlite"
            else:
                assert self._postgres_url is not None
                self._locations[name] = fresh_store_url(self._postgres_url, name)
        return self._locations[name]

    def open(self, name: str = "graph", **kwargs: Any) -> Any:
        """Open (creating on first use) the store `name`; closed at the end of the test if still open."""
        store = open_store(self.location(name), **kwargs)
        self._opened.append(store)
        return store

    def close_all(self) -> None:
        """Close what the test left open (closing twice is harmless for SQLite and PostgreSQL stores)."""
        for store in self._opened:
            with contextlib.suppress(Exception):  # already closed by the test
                store.close()


# (turn id, speaker, abstraction, value): Ann tells a story over D1:1, D1:3, D1:5; Bob answers between.
TURNS = [
    ("D1:1", "Ann", "Ann + puppy", "I adopted a puppy named Rex last week."),
    ("D1:2", "Bob", "Bob + reaction", "Wow, that is lovely news!"),
    ("D1:3", "Ann", "Ann + Rex", "Rex already loves running on the beach."),
    ("D1:4", "Bob", "Bob + hiking", "I went hiking in the hills on Sunday."),
    ("D1:5", "Ann", "Ann + vet", "The vet said Rex is healthy and strong."),
    ("D2:1", "Ann", "Ann + job", "I started a new job at Nova today."),
    ("note-1", "Ann", "Ann + note", "A note without a dialogue turn id."),
]


def fill_turns(store: BaseGraphStore) -> dict[str, str]:
    """Write `TURNS` into graph "g"; returns entry ids by turn id."""
    ids = {}
    for turn, speaker, abstraction, value in TURNS:
        candidate = EntryCandidate(abstraction=abstraction, value=value, speaker=speaker, source_turn_ids=[turn])
        ids[turn] = store.upsert_entry("g", candidate, always_create).entry.id
    return ids
