"""The embedder's batch combiner: concurrent single-text encodes share forward passes and get their own vectors."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from memora_rl.embedding import BatchCombiner


def test_concurrent_encodes_are_batched_and_each_caller_gets_its_own_vector() -> None:
    batches: list[list[str]] = []

    def encode_many(texts: list[str]) -> np.ndarray:
        batches.append(texts)
        time.sleep(0.05)  # a slow forward pass: callers arriving meanwhile queue for the next batch
        return np.array([[float(text.split()[-1])] for text in texts], dtype=np.float32)

    combiner = BatchCombiner(encode_many)
    texts = [f"query {number}" for number in range(16)]
    with ThreadPoolExecutor(max_workers=16) as pool:
        vectors = list(pool.map(combiner.encode, texts))
    assert [float(vector[0]) for vector in vectors] == list(range(16))
    assert sorted(text for batch in batches for text in batch) == sorted(texts)  # each text encoded once
    assert len(batches) < len(texts)  # and mostly together
    assert combiner.encode("query 99")[0] == 99.0 and batches[-1] == ["query 99"]  # alone: a batch of one


def test_an_error_reaches_every_caller_of_the_batch_and_the_next_batch_still_runs() -> None:
    started = threading.Event()

    def encode_many(texts: list[str]) -> np.ndarray:
        if "bad" in texts:
            started.set()
            time.sleep(0.05)
            raise ValueError("cannot encode 'bad'")
        return np.ones((len(texts), 2), dtype=np.float32)

    combiner = BatchCombiner(encode_many)
    with ThreadPoolExecutor(max_workers=2) as pool:
        failing = pool.submit(combiner.encode, "bad")
        started.wait(5)
        queued = pool.submit(combiner.encode, "good")  # queued behind the failing batch, served by the next
        with pytest.raises(ValueError, match="bad"):
            failing.result(timeout=5)
        assert queued.result(timeout=5).tolist() == [1.0, 1.0]


@pytest.mark.slow
def test_the_real_embedder_gives_the_same_vectors_batched_or_alone(embedder) -> None:
    texts = [f"Where did guest {number} leave the blue umbrella?" for number in range(8)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        together = list(pool.map(embedder.encode_one, texts))
    for text, vector in zip(texts, together, strict=True):
        assert np.allclose(vector, embedder._encode_uncached([text])[0], atol=1e-5)
