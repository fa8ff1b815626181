"""Benchmark the SQLite graph store: bulk build, search and frontier latency, peak memory.

Synthetic graphs of random unit vectors (dim 384): each entry has an abstraction vector, a
value vector near it, and ~3 anchors drawn from a pool. Every measurement is paired with a
brute-force numpy baseline computed in the same run. Each size runs in its own subprocess
so its peak RSS is its own.

    python benchmarks/graph_search.py --sizes 10000 100000 --queries 200
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from memora_rl.memory import SQLiteGraphStore

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima",
         "mike", "november", "oscar", "papa"]  # fmt: skip


def unit_rows(rng: np.random.Generator, count: int, dim: int) -> np.ndarray:
    """Random L2-normalised float32 rows, (count, dim), generated in chunks to bound memory."""
    out = np.empty((count, dim), dtype=np.float32)
    for start in range(0, count, 100_000):
        block = rng.standard_normal((min(100_000, count - start), dim), dtype=np.float32)
        out[start : start + len(block)] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out


def near(rng: np.random.Generator, rows: np.ndarray, noise: float) -> np.ndarray:
    """Unit rows close to `rows` (cosine ~ 1 / sqrt(1 + noise^2))."""
    noisy = rows + noise * rng.standard_normal(rows.shape, dtype=np.float32) / np.sqrt(rows.shape[1])
    return noisy / np.linalg.norm(noisy, axis=1, keepdims=True)


def parse_override(item: str) -> tuple[str, Any]:
    """`key=value` with the value read as YAML (numbers, booleans, null), e.g. `ann_expansion_search=256`."""
    import yaml

    key, separator, value = item.partition("=")
    if not separator:
        raise SystemExit(f"--store expects key=value, got {item!r}")
    return key, yaml.safe_load(value)


def percentiles(samples_s: list[float]) -> tuple[float, float]:
    """(p50, p95) in milliseconds."""
    return float(np.percentile(samples_s, 50) * 1e3), float(np.percentile(samples_s, 95) * 1e3)


def timed(function: Callable[[Any], Any], inputs: Iterable[Any]) -> tuple[dict, list]:
    """Run `function` on each input; return wall and CPU (p50, p95) in ms, and the results.

    CPU time (`time.process_time`, all threads of this process) is reported beside wall time
    because a shared machine's wall time mostly measures the other processes' load.
    """
    wall, cpu, results = [], [], []
    for item in inputs:
        start_wall, start_cpu = time.perf_counter(), time.process_time()
        results.append(function(item))
        cpu.append(time.process_time() - start_cpu)
        wall.append(time.perf_counter() - start_wall)
    return {"wall": percentiles(wall), "cpu": percentiles(cpu)}, results


def build(store: SQLiteGraphStore, size: int, dim: int, pool: int, rng: np.random.Generator) -> dict:
    """Bulk-load `size` entries in 50k-row transactions; returns vectors, links and the build rate."""
    from memora_rl.memory import EntryCandidate

    abstractions = unit_rows(rng, size, dim)
    values = near(rng, abstractions, 1.0)
    anchor_vectors = unit_rows(rng, pool, dim)
    links = rng.integers(0, pool, size=(size, 3))  # (size, 3) anchor numbers per entry
    anchor_map = {f"anchor {i}": anchor_vectors[i] for i in range(pool)}
    start = time.perf_counter()
    for chunk in range(0, size, 50_000):
        stop = min(size, chunk + 50_000)
        cands = [
            EntryCandidate(abstraction=f"{WORDS[i % 16]} {WORDS[(i // 16) % 16]} topic {i % 997}",
                           value=f"{WORDS[(i // 7) % 16]} value {i}", anchors=[f"anchor {a}" for a in links[i]])
            for i in range(chunk, stop)
        ]  # fmt: skip
        used = {text: anchor_map[text] for c in cands for text in c.anchors}
        store.add_entries_bulk("bench", cands, abstractions[chunk:stop], values[chunk:stop], used)
    seconds = time.perf_counter() - start
    return {"abstractions": abstractions, "values": values, "anchors": anchor_vectors, "links": links,
            "build_rate": size / seconds, "build_s": seconds}  # fmt: skip


def baseline_search(data: dict, query: np.ndarray, k: int, depth: int, rrf_k: int) -> list[int]:
    """Exact numpy version of the store's fused search (three channels, RRF)."""
    rankings = []
    for matrix in (data["abstractions"], data["values"]):
        scores = matrix @ query
        top = np.argpartition(-scores, depth)[:depth]
        rankings.append(top[np.argsort(-scores[top])].tolist())
    anchor_scores = data["anchors"] @ query
    top_anchors = np.argpartition(-anchor_scores, depth)[:depth]
    top_anchors = top_anchors[np.argsort(-anchor_scores[top_anchors])]
    members = data["anchor_members"]
    ranking: list[int] = []
    for anchor in top_anchors:
        ranking.extend(int(e) for e in members[anchor] if int(e) not in ranking)
        if len(ranking) >= depth:
            break
    rankings.append(ranking[:depth])
    fused: dict[int, float] = {}
    for ranked in rankings:
        for rank, item in enumerate(ranked):
            fused[item] = fused.get(item, 0.0) + 1.0 / (rrf_k + rank + 1)
    return [item for item, _ in sorted(fused.items(), key=lambda x: (-x[1], x[0]))[:k]]


def baseline_frontier(data: dict, working: np.ndarray, query: np.ndarray, limit: int) -> list[int]:
    """Brute-force frontier: scan the whole (size, 3) link table for shared anchors, score with numpy."""
    links = data["links"]
    shared = np.isin(links, links[working]).any(axis=1)  # (size,)
    shared[working] = False
    rows = np.flatnonzero(shared)
    scores = np.maximum(data["abstractions"][rows] @ query, data["values"][rows] @ query)
    return rows[np.argsort(-scores)][:limit].tolist()


def run_size(
    size: int,
    queries: int,
    embed_queries: int,
    embed_threads: int,
    dim: int,
    workdir: Path,
    seed: int,
    store_overrides: list[str],
) -> dict:
    """Measure one graph size in this process."""
    from memora_rl.embedding import Embedder
    from memora_rl.memory import SQLiteGraphStore, StoreConfig
    from memora_rl.memory.vectors import single_thread_blas

    rng = np.random.default_rng(seed)
    config = StoreConfig.model_validate(dict(parse_override(item) for item in store_overrides))
    path = workdir / f"bench_{size}.sqlite"
    path.unlink(missing_ok=True)
    store = SQLiteGraphStore(path, config=config)
    data = build(store, size, dim, max(1000, size // 10), rng)
    members: list[list[int]] = [[] for _ in range(len(data["anchors"]))]
    for entry, anchors in enumerate(data["links"]):
        for anchor in dict.fromkeys(anchors.tolist()):
            members[anchor].append(entry)
    data["anchor_members"] = members
    start = time.perf_counter()
    store.search("bench", data["abstractions"][0], k=10)  # loads vectors, builds ANN indexes
    index_s = time.perf_counter() - start
    picks = rng.choice(size, queries, replace=False)
    query_vectors = near(rng, data["abstractions"][picks], 1.0)
    search, hits = timed(lambda q: store.search("bench", q, k=10), query_vectors)
    with single_thread_blas():  # the same BLAS setting as the store, for a fair baseline
        base, base_hits = timed(lambda q: baseline_search(data, q, 10, config.channel_depth, config.rrf_k),
                                  query_vectors)  # fmt: skip
    cache = store._cache("bench")
    source_rows = [int(p) for p in picks]  # each query was made near this entry's abstraction
    source_hit = np.mean([cache.entry_row.get(f"e{row}", -1) in {cache.entry_row[h.entry_id] for h in got}
                          for row, got in zip(source_rows, hits, strict=True)])  # fmt: skip
    base_source_hit = np.mean([row in want for row, want in zip(source_rows, base_hits, strict=True)])
    recall = np.mean([len({cache.entry_row[h.entry_id] for h in got} & set(want)) / 10
                      for got, want in zip(hits, base_hits, strict=True)])  # fmt: skip
    import torch

    # One query is a tiny forward pass: a second intra-op thread only adds spin-waits, and on a
    # busy machine it made one MiniLM query 10x slower here (0.50 s vs 0.05 s).
    torch.set_num_threads(embed_threads)
    embedder = Embedder(use_cache=False)  # no disk cache: every query is really embedded
    store._embedder = embedder
    texts = [f"{WORDS[i % 16]} {WORDS[(i * 7) % 16]} topic {int(p) % 997} question {i}" for i, p in enumerate(picks)]
    embed_only, _ = timed(embedder.encode_one, texts[:embed_queries])
    embed, _ = timed(lambda t: store.search("bench", t, k=10), texts[:embed_queries])
    working_sets = [rng.choice(size, 10, replace=False) for _ in range(queries)]
    ids = [[cache.entry_ids[r] for r in ws] for ws in working_sets]
    frontier, _ = timed(lambda i: store.frontier("bench", ids[i], [], query_vectors[i], limit=20), range(queries))
    with single_thread_blas():
        base_frontier, _ = timed(lambda i: baseline_frontier(data, working_sets[i], query_vectors[i], 20),
                                   range(queries))  # fmt: skip
    result = {
        "size": size, "build_rate": data["build_rate"], "build_s": data["build_s"], "index_s": index_s,
        "ann": cache.abstractions.uses_ann, "search": search, "baseline": base, "recall": float(recall),
        "source_hit": float(source_hit), "base_source_hit": float(base_source_hit),
        "embed": embed_only, "search_embed": embed, "frontier": frontier, "baseline_frontier": base_frontier,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "db_mb": sum(p.stat().st_size for p in workdir.glob(f"bench_{size}.sqlite*") if p.is_file()) / 2**20,
    }  # fmt: skip
    store.close()
    del cache
    data.clear()  # free this view's vectors and indexes before the reopened store loads its own
    result["ann_mb"] = sum(p.stat().st_size for p in store.ann_dir.glob("*.usearch")) / 2**20
    with SQLiteGraphStore(path, config=config) as reopened:  # a later process: saved indexes, if any, load
        start = time.perf_counter()
        reopened.search("bench", query_vectors[0], k=10)
        result["reopen_s"] = time.perf_counter() - start
    path.unlink(missing_ok=True)
    shutil.rmtree(store.ann_dir, ignore_errors=True)
    return result


TARGETS_MS = {"search": {100_000: 5.0, 1_000_000: 20.0}, "search_embed": {100_000: 30.0}, "frontier": {0: 2.0}}


def _pair(stats: dict, kind: str) -> str:
    return "{:.2f} / {:.2f}".format(*stats[kind])


def _target(metric: str, size: int) -> str:
    targets = TARGETS_MS.get(metric, {})
    value = targets.get(size, targets.get(0))
    return f"<= {value:g}" if value is not None else ""


def print_table(results: list[dict]) -> None:
    """One table row per (size, measurement): store vs numpy baseline, wall and CPU, and the target."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="graph store benchmark: latency in ms, p50 / p95")
    for column in ["entries", "measure", "store wall", "store CPU", "numpy wall", "numpy CPU", "speedup (CPU p50)",
                   "target p50"]:  # fmt: skip
        table.add_column(column, justify="right")
    rows = [("search", "baseline", "search (vector query)"), ("embed", None, "query embedding alone"),
            ("search_embed", None, "search incl. embedding + BM25"), ("frontier", "baseline_frontier",
            "frontier, |W| = 10")]  # fmt: skip
    for r in results:
        for metric, baseline, label in [row for row in rows if row[0] in r]:
            base = r[baseline] if baseline else None
            table.add_row(
                f"{r['size']:,}", label, _pair(r[metric], "wall"), _pair(r[metric], "cpu"),
                _pair(base, "wall") if base else "-", _pair(base, "cpu") if base else "-",
                f"{base['cpu'][0] / max(r[metric]['cpu'][0], 1e-6):.1f}x" if base else "-", _target(metric, r["size"]),
            )  # fmt: skip
    console = Console(width=160)
    console.print(table)
    for r in results:
        console.print(
            f"{r['size']:,} entries: bulk build {r['build_rate']:,.0f} entries/s ({r['build_s']:.1f} s), "
            f"load + index {r['index_s']:.1f} s, reopen + load saved index {r['reopen_s']:.1f} s "
            f"({r['ann_mb']:,.0f} MB), path {'ANN' if r['ann'] else 'exact'}, "
            f"recall@10 vs exact fused {r['recall']:.3f}, source entry in top-10 {r['source_hit']:.3f} "
            f"(numpy {r['base_source_hit']:.3f}), peak RSS {r['peak_rss_mb']:,.0f} MB, "
            f"file {r['db_mb']:,.0f} MB"
        )


def main() -> None:
    """Parse arguments; run each size in a subprocess (own peak RSS) and print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000], help="entries per graph")
    parser.add_argument("--queries", type=int, default=200, help="queries (and working sets) per size")
    parser.add_argument("--embed-queries", type=int, default=50, help="text queries (embedded) per size")
    parser.add_argument("--embed-threads", type=int, default=1, help="torch threads for query embedding")
    parser.add_argument("--dim", type=int, default=384, help="vector dimension")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=None, help="folder for the store files (default: a temp dir)")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument("--store", nargs="*", default=[], help="StoreConfig overrides, e.g. ann_dtype=f16")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="graph_bench_"))
    workdir.mkdir(parents=True, exist_ok=True)
    if args.child:
        print(
            json.dumps(
                run_size(
                    args.sizes[0],
                    args.queries,
                    args.embed_queries,
                    args.embed_threads,
                    args.dim,
                    workdir,
                    args.seed,
                    args.store,
                )
            )
        )
        return
    results = []
    for size in args.sizes:
        command = [sys.executable, __file__, "--child", "--sizes", str(size), "--queries", str(args.queries),
                   "--embed-queries", str(args.embed_queries), "--embed-threads", str(args.embed_threads),
                   "--dim", str(args.dim), "--seed", str(args.seed), "--workdir", str(workdir),
                   "--store", *args.store]  # fmt: skip
        output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        results.append(json.loads(output.strip().splitlines()[-1]))
        print(f"size {size:,} done: {results[-1]}", file=sys.stderr)
    print_table(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
