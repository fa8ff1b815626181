"""Benchmark query-likelihood scoring (a likelihood ranker's features): bfloat16 (the baseline) against float32.

The same (question, passage) pairs, new to both (each precision writes its own empty cache), scored in the
scorer's batches: pairs a second, the ratio to bfloat16 measured in the same run, and how far the float32
scores lie from the bfloat16 ones. On a CPU without native bfloat16 the baseline is emulated and slow.

    python -m benchmarks.query_likelihood --pairs 256 --record query-likelihood
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.common import add_record_option, markdown, result_table, save_record
from benchmarks.embedding import passages, queries

COLUMNS = ["precision", "pairs", "pairs / s", "speed / bfloat16", "largest score gap to bfloat16", "rank agreement"]


def measure(dtype: str, pair_count: int, folder: Path) -> tuple[float, np.ndarray]:
    """(pairs a second, the scores) of one precision over the benchmark's pairs, its cache empty."""
    from memora_rl.embedding.caches import EmbeddingCache
    from memora_rl.env.query_likelihood import RANKER_MODEL, QueryLikelihood

    scorer = QueryLikelihood(RANKER_MODEL, cache=EmbeddingCache(folder / f"{dtype}.sqlite"), dtype=dtype)
    scorer.score(["What did they say?"], ["A warm-up passage."])
    asked, shown = queries(pair_count, "ql"), passages(pair_count, "ql")
    started = time.perf_counter()
    scores = scorer.score(asked, shown)
    return pair_count / (time.perf_counter() - started), scores


def rank_agreement(first: np.ndarray, second: np.ndarray) -> float:
    """Spearman's correlation of two score lists (continuous scores, so ties are left aside).

    >>> rank_agreement(np.array([0.1, 0.5, 0.3]), np.array([1.0, 9.0, 2.0]))
    1.0
    """
    return float(np.corrcoef(np.argsort(np.argsort(first)), np.argsort(np.argsort(second)))[0, 1])


def main() -> None:
    """Score the pairs at both precisions and print the table (and a result record with `--record`)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=256, help="Distinct (question, passage) pairs scored.")
    add_record_option(parser)
    args = parser.parse_args()
    if args.pairs < 2:
        parser.error(f"--pairs {args.pairs}: score at least two pairs.")
    with tempfile.TemporaryDirectory() as folder:
        base_rate, base = measure("bfloat16", args.pairs, Path(folder))
        rate, scores = measure("float32", args.pairs, Path(folder))
    gap = float(np.abs(scores - base).max())
    agreement = rank_agreement(scores, base)
    cells = [
        ["bfloat16 (baseline)", str(args.pairs), f"{base_rate:.1f}", "1.00", "0", "1"],
        ["float32", str(args.pairs), f"{rate:.1f}", f"{rate / base_rate:.2f}", f"{gap:.3f}", f"{agreement:.3f}"],
    ]
    table = result_table("Query likelihood of SmolLM2-135M, pairs a second: bfloat16 (baseline) vs float32", COLUMNS,
                         cells)  # fmt: skip
    print(markdown(table))
    save_record(args, "Query-likelihood scoring: float32 against bfloat16", [table])


if __name__ == "__main__":
    main()
