"""The sentence embedder: `Embedder` on PyTorch or ONNX Runtime, its caches and batching.

`embedder` (the `Embedder`, `get_embedder`), `caches` (disk and query caches), `batching`
(concurrent queries in shared batches) and `onnx_encoder` (the ONNX Runtime runner, which
imports torch: loaded only when an embedder picks it). This package re-exports the names
most callers use; nothing heavy is imported here (sentence-transformers loads with the first embedder).
"""

from memora_rl.embedding.embedder import DEFAULT_EMBEDDER, Embedder, get_embedder

__all__ = ["DEFAULT_EMBEDDER", "Embedder", "get_embedder"]
