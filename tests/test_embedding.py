"""The embedder: its batch combiner (concurrent encodes share forward passes) and its ONNX Runtime backend."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from memora_rl.embedding.batching import BatchCombiner
from memora_rl.embedding.caches import QueryCache, text_key
from memora_rl.embedding.embedder import BACKEND_ENV, Embedder
from memora_rl.errors import ModelError


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


def test_the_query_cache_drops_the_least_recently_used_beyond_its_capacity() -> None:
    cache = QueryCache(capacity=2)
    cache.put_many(["a", "b"], np.eye(2, dtype=np.float32))
    assert cache.get("a") is not None  # "a" is now the most recently used
    cache.put_many(["c"], np.ones((1, 2), dtype=np.float32))
    assert (len(cache), cache.get("b")) == (2, None)
    assert cache.get("a").tolist() == [1.0, 0.0] and cache.get("c").tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="read-only"):
        cache.get("a")[0] = 5.0


@pytest.mark.slow
def test_queries_stay_in_memory_and_documents_go_to_the_disk_cache(embedder, tmp_path) -> None:
    from memora_rl.memory import EntryCandidate, always_create, open_store

    question = f"Where did the cache test {tmp_path.name} leave its keys?"
    document = f"The cache test {tmp_path.name} left its keys in the drawer."
    on_disk = lambda text: embedder._cache.get_many(embedder.model_name, [text_key(text)])  # noqa: E731
    with open_store(tmp_path / "store.sqlite", embedder=embedder) as store:
        store.upsert_entry("g", EntryCandidate(abstraction="keys", value=document), always_create)
        hits = store.search("g", question, k=1)  # the query text: embedded through encode_one
    assert [hit.entry_id for hit in hits] and embedder.queries.get(question) is not None
    assert np.allclose(embedder.encode_one(question), embedder._encode_uncached([question])[0], atol=1e-5)
    assert on_disk(question) == {}  # a served question never grows the disk cache
    assert list(on_disk(document)) == [text_key(document)]


@pytest.mark.slow
def test_the_real_embedder_gives_the_same_vectors_batched_or_alone(embedder) -> None:
    texts = [f"Where did guest {number} leave the blue umbrella?" for number in range(8)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        together = list(pool.map(embedder.encode_one, texts))
    for text, vector in zip(texts, together, strict=True):
        assert np.allclose(vector, embedder._encode_uncached([text])[0], atol=1e-5)


def _varied_texts() -> list[str]:
    """Texts from empty to past the model's 256-token limit, with accents, CJK and an emoji."""
    sentence = "Alice moved to Berlin after her promotion, and she said the café in 東京 was lovely 🙂. "
    return ["", "a", *(sentence * count for count in (1, 3, 10, 40))]


@pytest.mark.slow
def test_the_onnx_backend_gives_the_torch_backend_s_vectors_batched_and_alone() -> None:
    torch_embedder = Embedder(use_cache=False, backend="torch")
    onnx_embedder = Embedder(use_cache=False, backend="onnx")
    assert (torch_embedder.backend, onnx_embedder.backend) == ("torch", "onnx")
    texts = _varied_texts()
    reference = torch_embedder.encode(texts)
    batched = onnx_embedder.encode(texts)
    alone = np.stack([onnx_embedder.encode([text])[0] for text in texts])
    assert batched.shape == reference.shape == (len(texts), 384)
    assert (batched * reference).sum(axis=1).min() > 0.99999
    assert (alone * reference).sum(axis=1).min() > 0.99999
    assert np.allclose(np.linalg.norm(batched, axis=1), 1.0, atol=1e-5)


def test_an_unknown_backend_names_the_variable_and_the_choices(monkeypatch) -> None:
    monkeypatch.setenv(BACKEND_ENV, "tensorrt")
    with pytest.raises(ModelError, match=rf"tensorrt.*\${BACKEND_ENV}.*auto, onnx, torch"):
        Embedder(use_cache=False)


@pytest.mark.slow
def test_the_default_backend_is_onnx_where_it_is_installed(monkeypatch) -> None:
    monkeypatch.delenv(BACKEND_ENV, raising=False)
    assert Embedder(use_cache=False).backend == "onnx"
    monkeypatch.setenv(BACKEND_ENV, "torch")
    assert Embedder(use_cache=False).backend == "torch"


@pytest.mark.slow
def test_a_model_that_is_not_mean_pooled_stays_on_torch_under_auto_and_is_refused_under_onnx(tmp_path) -> None:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Pooling

    from memora_rl.embedding.embedder import resolve_embedder_path

    mean_pooled = SentenceTransformer(resolve_embedder_path("all-MiniLM-L6-v2"), device="cpu")
    cls_pooled = SentenceTransformer(modules=[mean_pooled[0], Pooling(384, pooling_mode="cls")], device="cpu")
    folder = tmp_path / "cls-model"
    cls_pooled.save(str(folder))
    assert Embedder(str(folder), use_cache=False, backend="auto").backend == "torch"
    with pytest.raises(ModelError, match=f"not a mean-pooling model.*{BACKEND_ENV}=torch"):
        Embedder(str(folder), use_cache=False, backend="onnx")


@pytest.mark.slow
def test_the_export_is_made_once_and_reused(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MEMORA_RL_HOME", str(tmp_path))
    first = Embedder(use_cache=False, backend="onnx")
    exported = list((tmp_path / "cache" / "models" / "onnx").glob("*.onnx"))
    assert len(exported) == 1
    stamp = exported[0].stat().st_mtime_ns
    second = Embedder(use_cache=False, backend="onnx")
    assert exported[0].stat().st_mtime_ns == stamp
    assert np.allclose(first.encode(["same text"]), second.encode(["same text"]))


@pytest.mark.slow
def test_onnx_after_usearch_is_a_clear_error_not_a_crash() -> None:
    """onnxruntime 1.32 segfaults when imported after usearch 2.26: the embedder refuses instead."""
    import subprocess
    import sys

    script = (
        "import usearch.index\n"
        "from memora_rl.embedding import Embedder\n"
        "from memora_rl.errors import ModelError\n"
        "try:\n    Embedder(use_cache=False, backend='onnx')\nexcept ModelError as error:\n    print(error)\n"
        "print(Embedder(use_cache=False, backend='auto').backend)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "cannot be loaded after usearch" in done.stdout and done.stdout.strip().endswith("torch")
