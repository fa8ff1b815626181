"""Run a mean-pooling sentence-transformers model with ONNX Runtime: the same vectors, a fraction of the CPU.

A query embedding through PyTorch eager pays a Python dispatch per layer op, and its OpenMP threads
spin against every other busy process; ONNX Runtime runs the same graph as one call. The model is
exported once from the loaded weights (PyTorch's own exporter) and cached beside the other models.
sentence-transformers' built-in ONNX backend needs `optimum-onnx`, which requires transformers < 4.58
(transformers 5.16-5.17 is pinned for vLLM, see pyproject.toml), so the export and the pooling are done here.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from filelock import FileLock

logger = logging.getLogger(__name__)

ONNX_OPSET = 17
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
MAX_BATCH = 16
"""Texts per ONNX Runtime call at most: up to 16 it beats PyTorch on every text length measured
here, at 64 long passages it is 10% slower (`benchmarks/embedding.py`), so larger batches are split."""


def supports_onnx(model: Any) -> bool:
    """Whether a loaded SentenceTransformer is a transformer, mean pooling and (optionally) a normalisation.

    Other pipelines (CLS pooling, dense layers, prompts) stay on PyTorch.
    """
    kinds = [type(module).__name__ for module in model]
    if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        return False
    return getattr(model[1], "pooling_mode", None) == "mean" and hasattr(model[0], "auto_model")


def onnx_runtime_available() -> bool:
    """Whether `onnxruntime` (to run) and `onnx` (to export) are installed."""
    import importlib.util

    return all(importlib.util.find_spec(name) is not None for name in ("onnxruntime", "onnx"))


def export_path(model_path: str, folder: Path) -> Path:
    """Where in `folder` the model at `model_path` is exported; the key changes when its weights or torch do."""
    model = Path(model_path)
    files = sorted(model.glob("*.safetensors")) + sorted(model.glob("*.bin")) + sorted(model.glob("config.json"))
    stamp = [str(model.resolve()), torch.__version__, str(ONNX_OPSET)]
    stamp += [f"{file.name}:{file.stat().st_size}:{file.stat().st_mtime_ns}" for file in files]
    key = hashlib.sha256("\n".join(stamp).encode()).hexdigest()[:16]
    return folder / f"{model.name or 'model'}-{key}.onnx"


class LastHiddenState(torch.nn.Module):
    """A Hugging Face encoder with three named tensor inputs and one output, as the exporter wants it."""

    def __init__(self, auto_model: torch.nn.Module) -> None:
        super().__init__()
        self.model = auto_model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor) -> Any:
        """The transformer's last hidden state, (batch, tokens, dim)."""
        output = self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        return output.last_hidden_state


def export_onnx(model: Any, path: Path) -> Path:
    """Export `model`'s transformer to `path` once (several processes may race: one exports, all read it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{path}.lock"):
        if path.exists():
            return path
        sample = model.tokenizer(["a short text", "a second, longer sample text"], return_tensors="pt", padding=True)
        zeros = torch.zeros_like(sample["input_ids"])
        inputs = tuple(sample.get(name, zeros) for name in INPUT_NAMES)
        axes = {name: {0: "batch", 1: "tokens"} for name in (*INPUT_NAMES, "last_hidden_state")}
        partial = path.with_suffix(f".{os.getpid()}.partial")
        logger.info("Exporting the embedder to ONNX (once): %s", path)
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's notes on Python shape checks; tests compare the vectors
            module = LastHiddenState(model[0].auto_model).eval()
            torch.onnx.export(module, inputs, str(partial), input_names=list(INPUT_NAMES),
                              output_names=["last_hidden_state"], dynamic_axes=axes, opset_version=ONNX_OPSET,
                              dynamo=False)  # fmt: skip
        partial.replace(path)
    return path


class OnnxEncoder:
    """Tokenize, run the exported transformer, mean-pool and L2-normalise: `encode(texts) -> (N, dim)` float32."""

    def __init__(self, model: Any, onnx_path: Path, threads: int) -> None:
        if "usearch" in sys.modules and "onnxruntime" not in sys.modules:
            raise RuntimeError(
                "onnxruntime cannot be loaded after usearch in one process (onnxruntime 1.32 with usearch 2.26 "
                "segfaults on import); import usearch through memora_rl.memory.ann_files.load_usearch, which "
                "loads onnxruntime first"
            )
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # idle threads yield the cores
        self._session = onnxruntime.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
        self._tokenizer = model.tokenizer
        self._max_tokens = int(model.max_seq_length)

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        """Unit-length embeddings of `texts`, in order; batches hold texts of similar length (less padding)."""
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        batch_size = min(batch_size, MAX_BATCH)
        rows: list[np.ndarray] = [np.empty(0)] * len(texts)
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            for i, vector in zip(chunk, self._encode_batch([texts[i] for i in chunk]), strict=True):
                rows[i] = vector
        return np.stack(rows).astype(np.float32, copy=False)

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        tokens = self._tokenizer(texts, padding=True, truncation=True, max_length=self._max_tokens, return_tensors="np")
        mask = tokens["attention_mask"].astype(np.int64)
        feed = {name: np.asarray(tokens.get(name, np.zeros_like(mask)), dtype=np.int64) for name in INPUT_NAMES}
        (hidden,) = self._session.run(None, feed)
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
