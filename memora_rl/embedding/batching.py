"""`BatchCombiner`: single-text encodes from concurrent threads served in shared batches."""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np


class _Job:
    """One text waiting in `BatchCombiner`: its vector (or error) once served, or the call to lead the next batch."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.ready = threading.Event()
        self.lead = False
        self.vector: np.ndarray | None = None
        self.error: BaseException | None = None

    def result(self) -> np.ndarray:
        if self.error is not None:
            raise self.error
        assert self.vector is not None
        return self.vector


class BatchCombiner:
    """Coalesce single-text encodes from concurrent threads into batched ones (a served query per thread).

    The first caller leads: it encodes every text queued so far in one batch while later
    callers queue; when it is done it hands the lead to the oldest queued caller. One
    caller alone pays nothing extra; eight concurrent ones share one forward pass instead
    of eight, which is what makes concurrent retrieves cheaper than sequential ones.
    """

    def __init__(self, encode_many: Callable[[list[str]], np.ndarray]) -> None:
        self._encode_many = encode_many
        self._lock = threading.Lock()
        self._queue: list[_Job] = []
        self._busy = False

    def encode(self, text: str) -> np.ndarray:
        """The vector of `text`, (dim,), encoded in a batch with whatever other threads asked for meanwhile."""
        job = _Job(text)
        with self._lock:
            self._queue.append(job)
            job.lead, self._busy = not self._busy, True
        if not job.lead:
            job.ready.wait()
            if not job.lead:
                return job.result()
        with self._lock:
            batch, self._queue = self._queue, []
        try:
            vectors = self._encode_many([queued.text for queued in batch])
            for queued, vector in zip(batch, vectors, strict=True):
                queued.vector = vector
        except BaseException as error:  # every waiter gets the error instead of hanging
            for queued in batch:
                queued.error = error
        for queued in batch:
            queued.ready.set()
        with self._lock:
            if self._queue:
                self._queue[0].lead = True
                self._queue[0].ready.set()
            else:
                self._busy = False
        return job.result()
