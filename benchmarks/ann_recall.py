"""Benchmark HNSW recall and latency on real sentence embeddings, against exact search in the same run.

Random vectors (`benchmarks.graph_search`) are the hardest case for HNSW; real embeddings cluster.
This script embeds real English lines (docstrings, comments and docs of the installed
Python packages, so it runs offline) with the store's MiniLM embedder, then searches held-out
lines through `VectorTable`, the store's own vector path, once with the HNSW index and once
exactly. Embeddings go through the disk cache, so a second run skips the ~10 minutes of
embedding 100k lines on 2 cores.

    python -m benchmarks.ann_recall --count 100000 --queries 200 --ef 64 128 256 --record ann-recall
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sysconfig
import time
from pathlib import Path

import numpy as np

from benchmarks.common import add_record_option, from_rich, percentiles, save_record
from memora_rl.memory.config import StoreConfig
from memora_rl.memory.vectors import VectorTable, single_thread_blas

PAIR = "{:.2f} / {:.2f}"  # p50 / p95 in ms
_PROSE = re.compile(r"[a-z]{3,} [a-z]{3,}")


def text_lines(limit: int, seed: int) -> list[str]:
    """`limit` distinct prose-like lines (>= 6 words) from the installed packages' sources and docs."""
    root = Path(sysconfig.get_paths()["purelib"])
    lines: set[str] = set()
    for path in sorted(root.rglob("*")):
        if path.suffix not in {".py", ".md", ".rst", ".txt"} or not path.is_file():
            continue
        for line in path.read_text(errors="ignore").splitlines():
            line = line.strip().lstrip("#").strip()
            if len(line) < 300 and len(line.split()) >= 6 and _PROSE.search(line):
                lines.add(line)
        if len(lines) >= 4 * limit:
            break
    if len(lines) < limit:
        raise SystemExit(f"only {len(lines):,} text lines found under {root}; pass a smaller --count")
    chosen = sorted(lines)
    random.Random(seed).shuffle(chosen)
    return chosen[:limit]


def main() -> None:
    """Embed, index, and print recall@10 and @50 and latency for each HNSW search beam width (and maybe record them)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=100_000, help="indexed lines")
    parser.add_argument("--queries", type=int, default=200, help="held-out lines used as queries")
    parser.add_argument("--ef", type=int, nargs="+", default=[64, 128, 256], help="HNSW search beam widths")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    add_record_option(parser)
    args = parser.parse_args()

    import torch
    from rich.console import Console
    from rich.table import Table

    from memora_rl.embedding import get_embedder

    console = Console(width=140)
    texts = text_lines(args.count + args.queries, args.seed)
    torch.set_num_threads(2)
    start = time.perf_counter()
    embedder = get_embedder()
    vectors = np.concatenate([embedder.encode(texts[i : i + 5000]) for i in range(0, len(texts), 5000)])
    console.print(f"embedded {len(texts):,} lines in {time.perf_counter() - start:.0f} s (disk-cached)")
    rows, queries = vectors[: args.count], vectors[args.count :]

    config = StoreConfig(ann_threshold=1, ann_persist=False)
    approx = VectorTable(rows.shape[1], config)
    approx.append(rows)
    exact = VectorTable(rows.shape[1], config.model_copy(update={"ann_threshold": args.count + 1}))
    exact.append(rows)
    start = time.perf_counter()
    approx.build_ann()
    build_s = time.perf_counter() - start

    table = Table(title=f"HNSW vs exact on {args.count:,} MiniLM embeddings of real text, {args.queries} queries")
    for column in ["ef search", "recall@10", "recall@50", "HNSW k=50 ms p50 / p95", "exact ms p50 / p95", "speedup"]:
        table.add_column(column, justify="right")
    with single_thread_blas():
        truth, exact_s = [], []
        for query in queries:
            begin = time.perf_counter()
            truth.append(exact.top_k(query, 50)[0])
            exact_s.append(time.perf_counter() - begin)
        exact_ms = percentiles(exact_s)
        results = []
        for ef in args.ef:
            approx._ann.expansion_search = ef  # type: ignore[attr-defined]
            recall10, recall50, ann_s = [], [], []
            for query, want in zip(queries, truth, strict=True):
                begin = time.perf_counter()
                got = approx.top_k(query, 50)[0]
                ann_s.append(time.perf_counter() - begin)
                recall10.append(len(set(got[:10].tolist()) & set(want[:10].tolist())) / 10)
                recall50.append(len(set(got.tolist()) & set(want.tolist())) / 50)
            ann_ms = percentiles(ann_s)
            results.append({"ef": ef, "recall10": float(np.mean(recall10)), "recall50": float(np.mean(recall50)),
                            "ann_p50_ms": ann_ms[0], "exact_p50_ms": exact_ms[0]})  # fmt: skip
            table.add_row(str(ef), f"{np.mean(recall10):.3f}", f"{np.mean(recall50):.3f}", PAIR.format(*ann_ms),
                          PAIR.format(*exact_ms), f"{exact_ms[0] / ann_ms[0]:.1f}x")  # fmt: skip
    console.print(table)
    index = (
        f"index: {config.ann_dtype}, connectivity {config.ann_connectivity}, expansion_add {config.ann_expansion_add}, "
        f"oversample {config.ann_oversample}; built in {build_s:.1f} s ({args.count / build_s:,.0f} vectors/s)"
    )
    console.print(index)
    if args.json:
        args.json.write_text(json.dumps({"count": args.count, "build_s": build_s, "rows": results}, indent=2))
    title = "HNSW recall and latency against exact search on MiniLM embeddings of real text"
    save_record(args, title, [from_rich(table)], [index])


if __name__ == "__main__":
    main()
