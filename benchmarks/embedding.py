"""Benchmark the embedder's backends: PyTorch (sentence-transformers, the baseline) against ONNX Runtime.

Three shapes of work, each on texts new to both backends (the disk cache is off):
one query at a time (a served retrieve at concurrency 1), 8 queries in one batch (what the
service's batch combiner forms under 8 clients), and passages in batches of 64 (a graph build).
Wall and CPU milliseconds, the ratio to PyTorch measured in the same run, and the lowest
cosine between the two backends' vectors of the same text.

    python -m benchmarks.embedding --queries 200 --passages 512 --record embedding
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from benchmarks.common import add_record_option, markdown, result_table, save_record
from memora_rl.memory.sql_io import chunks

NAMES = ["Alice", "Bruno", "Chen", "Dana", "Emil", "Farah", "Goran", "Hana"]
THINGS = ["bicycle", "new job", "sister's wedding", "trip to Lisbon", "cooking class", "old flat", "garden", "band"]
COLUMNS = ["shape", "backend", "texts a batch", "p50 ms a batch", "CPU ms a batch", "CPU / PyTorch", "lowest cosine"]
"""The printed (and recorded) table's columns, one row per (shape, backend)."""


def queries(count: int, salt: str) -> list[str]:
    """Distinct short questions (a retrieve's query)."""
    return [f"What did {NAMES[i % 8]} say about the {THINGS[(i // 8) % 8]}? ({salt} {i})" for i in range(count)]


def passages(count: int, salt: str) -> list[str]:
    """Distinct statements of 10 to 60 words (a graph build's entry values and abstractions)."""
    return [
        " ".join(f"{NAMES[(i + j) % 8]} talked about the {THINGS[(i * j) % 8]}" for j in range(2 + i % 10))
        + f" ({salt} {i})"
        for i in range(count)
    ]


def batched(texts: list[str], size: int) -> list[list[str]]:
    """`texts` in consecutive batches of `size` (the last may be shorter)."""
    return [list(batch) for batch in chunks(texts, size)]


def timed(encode: Callable[[list[str]], np.ndarray], batches: list[list[str]]) -> tuple[float, float, np.ndarray]:
    """Encode each batch in turn; (wall ms per batch p50, CPU ms per batch mean, the vectors)."""
    walls, cpu_start, vectors = [], time.process_time(), []
    for batch in batches:
        started = time.perf_counter()
        vectors.append(encode(batch))
        walls.append(time.perf_counter() - started)
    cpu = (time.process_time() - cpu_start) / len(batches)
    return float(np.median(walls) * 1000.0), cpu * 1000.0, np.concatenate(vectors)


def measure(backend: str, count: int, passage_count: int) -> dict[str, dict[str, float]]:
    """Rows of one backend (its disk cache off, so every text is encoded); the texts are the same for both."""
    from memora_rl.embedding import Embedder

    embedder = Embedder(use_cache=False, backend=backend)
    embedder.encode(queries(8, f"warm-up {backend}"))
    shapes = {
        "query, alone": batched(queries(count, "alone"), 1),
        "8 queries, one batch": batched(queries(count, "batch"), 8),
        "passages, batches of 64": batched(passages(passage_count, "build"), 64),
    }
    rows = {}
    for shape, batches in shapes.items():
        wall, cpu, vectors = timed(embedder.encode, batches)
        texts = sum(len(batch) for batch in batches)
        rows[shape] = {"wall_ms": wall, "cpu_ms": cpu, "texts_per_batch": texts / len(batches), "vectors": vectors}
    return rows


def main() -> None:
    """Measure both backends and print the table (and `--json`, and a result record with `--record`)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=200, help="Queries per row (a multiple of 8).")
    parser.add_argument("--passages", type=int, default=512, help="Passages embedded in batches of 64.")
    parser.add_argument("--json", type=Path, help="Also write the rows here.")
    add_record_option(parser)
    args = parser.parse_args()
    if args.queries < 8 or args.queries % 8:
        parser.error(f"--queries {args.queries}: give a positive multiple of 8.")
    baseline = measure("torch", args.queries, args.passages)
    contender = measure("onnx", args.queries, args.passages)
    report, cells = [], []
    for shape, base in baseline.items():
        for backend, row in (("torch (baseline)", base), ("onnx", contender[shape])):
            cosine = float((row["vectors"] * base["vectors"]).sum(axis=1).min())
            ratio = row["cpu_ms"] / base["cpu_ms"]
            cells.append([shape, backend, f"{row['texts_per_batch']:.0f}", f"{row['wall_ms']:.1f}",
                          f"{row['cpu_ms']:.1f}", f"{ratio:.2f}", f"{cosine:.7f}"])  # fmt: skip
            report.append({"shape": shape, "backend": backend, "wall_ms": row["wall_ms"], "cpu_ms": row["cpu_ms"],
                           "cpu_ratio": ratio, "min_cosine": cosine})  # fmt: skip
    title = "MiniLM embedding a batch, disk cache off: PyTorch (baseline) vs ONNX Runtime"
    table = result_table(title, COLUMNS, cells)
    print(markdown(table))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    save_record(args, "Embedder backends: ONNX Runtime against PyTorch (sentence-transformers)", [table])


if __name__ == "__main__":
    main()
