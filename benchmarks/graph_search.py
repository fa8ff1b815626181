"""Benchmark the SQLite graph store: bulk build, search and frontier latency, peak memory; PostgreSQL beside it.

Synthetic graphs of random unit vectors (dim 384): each entry has an abstraction vector, a
value vector near it, and ~3 anchors drawn from a pool. Every measurement is paired with a
brute-force numpy baseline computed in the same run. Each size runs in its own subprocess
so its peak RSS is its own.

    python -m benchmarks.graph_search --sizes 10000 100000 --queries 200 --record graph-search

With a PostgreSQL URL among the `--store` items, each size also runs on a PostgreSQL + pgvector
store (same graph, same queries; `benchmarks.graph_search_postgres`), and a second table puts
its vector and text search, BM25 and frontier latencies beside SQLite's:

    python -m benchmarks.graph_search --sizes 100000 --store postgresql://user:password@host:port/db
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from benchmarks.common import (
    WORDS,
    SyntheticGraph,
    add_record_option,
    bulk_load,
    from_rich,
    near,
    peak_rss_mb,
    percentiles,
    save_record,
    spawn,
)

if TYPE_CHECKING:
    from memora_rl.experiments.records import ResultTable

MODULE = "benchmarks.graph_search"
"""This script as a module: each size runs in `python -m benchmarks.graph_search --worker SPEC`."""


def parse_override(item: str) -> tuple[str, Any]:
    """`key=value` with the value read as YAML (numbers, booleans, null), e.g. `ann_expansion_search=256`."""
    import yaml

    key, separator, value = item.partition("=")
    if not separator:
        raise SystemExit(f"--store expects key=value, got {item!r}")
    return key, yaml.safe_load(value)


def split_store_items(items: list[str]) -> tuple[list[str], str | None]:
    """`--store` items as (StoreConfig overrides, the PostgreSQL URL or None).

    >>> split_store_items(["ann_dtype=f16", "postgresql://me@db/memory?sslmode=require"])
    (['ann_dtype=f16'], 'postgresql://me@db/memory?sslmode=require')
    """
    from memora_rl.memory import is_postgres_url

    urls = [item for item in items if is_postgres_url(item)]
    if len(urls) > 1:
        raise SystemExit(f"--store takes one postgresql:// URL, got {len(urls)}; pass the one to compare with SQLite.")
    return [item for item in items if not is_postgres_url(item)], (urls[0] if urls else None)


def draw_queries(rng: np.random.Generator, graph: SyntheticGraph, queries: int) -> tuple[np.ndarray, np.ndarray]:
    """(entries picked, query vectors near their abstractions): the same for a seed on either backend."""
    picks = rng.choice(len(graph.abstractions), queries, replace=False)
    return picks, near(rng, graph.abstractions[picks], 1.0)


def query_texts(picks: np.ndarray) -> list[str]:
    """One text question per picked entry, in the entries' words (they embed, and BM25 finds their words)."""
    return [f"{WORDS[i % 16]} {WORDS[(i * 7) % 16]} topic {int(p) % 997} question {i}" for i, p in enumerate(picks)]


def query_embedder(threads: int) -> Any:
    """A MiniLM embedder without disk cache (every query is really embedded), on `threads` torch threads."""
    import torch

    from memora_rl.embedding import Embedder

    # One query is a tiny forward pass: a second intra-op thread only adds spin-waits, and on a
    # busy machine it made one MiniLM query 10x slower here (0.50 s vs 0.05 s).
    torch.set_num_threads(threads)
    return Embedder(use_cache=False)


def keyword_ranking(store: Any, text: str) -> list[int]:
    """The store's BM25 channel alone for a text query (rows of the graph's entries, best first)."""
    with store._db.lock:
        return store._search.bm25_ranking(store._cache("bench"), "bench", text, store.config.channel_depth, None)


def hit_rates(cache: Any, picks: np.ndarray, hits: list, base_hits: list) -> dict[str, float]:
    """Recall@10 against exact fused search, and how often the picked entry is in the top 10 (store, numpy)."""
    rows = [{cache.entry_row[hit.entry_id] for hit in got} for got in hits]  # bulk_load's entry i is view row i
    return {
        "recall": float(np.mean([len(got & set(want)) / 10 for got, want in zip(rows, base_hits, strict=True)])),
        "source_hit": float(
            np.mean([cache.entry_row.get(f"e{p}", -1) in got for p, got in zip(picks, rows, strict=True)])
        ),
        "base_source_hit": float(np.mean([int(p) in want for p, want in zip(picks, base_hits, strict=True)])),
    }


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


def anchor_members(graph: SyntheticGraph) -> list[list[int]]:
    """The entries of each anchor, in entry order."""
    members: list[list[int]] = [[] for _ in range(len(graph.anchors))]
    for entry, anchors in enumerate(graph.links):
        for anchor in dict.fromkeys(anchors.tolist()):
            members[anchor].append(entry)
    return members


def baseline_search(
    graph: SyntheticGraph, members: list[list[int]], query: np.ndarray, k: int, depth: int, rrf_k: int
) -> list[int]:
    """Exact numpy version of the store's fused search (three channels, RRF)."""
    rankings = []
    for matrix in (graph.abstractions, graph.values):
        scores = matrix @ query
        top = np.argpartition(-scores, depth)[:depth]
        rankings.append(top[np.argsort(-scores[top])].tolist())
    anchor_scores = graph.anchors @ query
    top_anchors = np.argpartition(-anchor_scores, depth)[:depth]
    top_anchors = top_anchors[np.argsort(-anchor_scores[top_anchors])]
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


def baseline_frontier(graph: SyntheticGraph, working: np.ndarray, query: np.ndarray, limit: int) -> list[int]:
    """Brute-force frontier: scan the whole (size, 3) link table for shared anchors, score with numpy."""
    links = graph.links
    shared = np.isin(links, links[working]).any(axis=1)  # (size,)
    shared[working] = False
    rows = np.flatnonzero(shared)
    scores = np.maximum(graph.abstractions[rows] @ query, graph.values[rows] @ query)
    return rows[np.argsort(-scores)][:limit].tolist()


def time_baseline_search(graph: SyntheticGraph, queries: np.ndarray, depth: int, rrf_k: int) -> tuple[dict, list]:
    """`timed` results of `baseline_search` (k = 10) over `queries`, with the store's BLAS setting."""
    from memora_rl.memory.vectors import single_thread_blas

    members = anchor_members(graph)
    with single_thread_blas():  # the same BLAS setting as the store, for a fair baseline
        return timed(lambda query: baseline_search(graph, members, query, 10, depth, rrf_k), queries)


def time_baseline_frontier(graph: SyntheticGraph, working_sets: list[np.ndarray], queries: np.ndarray) -> dict:
    """`timed` latencies of `baseline_frontier` (limit 20) for each working set and its query."""
    from memora_rl.memory.vectors import single_thread_blas

    with single_thread_blas():
        stats, _ = timed(lambda i: baseline_frontier(graph, working_sets[i], queries[i], 20), range(len(queries)))
    return stats


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
    from memora_rl.memory import SQLiteGraphStore, StoreConfig

    rng = np.random.default_rng(seed)
    config = StoreConfig.model_validate(dict(parse_override(item) for item in store_overrides))
    path = workdir / f"bench_{size}.sqlite"
    path.unlink(missing_ok=True)
    store = SQLiteGraphStore(path, config=config)
    graph = bulk_load(store, size, dim, rng, value_noise=1.0)
    start = time.perf_counter()
    store.search("bench", graph.abstractions[0], k=10)  # loads vectors, builds ANN indexes
    index_s = time.perf_counter() - start
    picks, query_vectors = draw_queries(rng, graph, queries)  # each query is near its picked entry's abstraction
    search, hits = timed(lambda q: store.search("bench", q, k=10), query_vectors)
    base, base_hits = time_baseline_search(graph, query_vectors, config.channel_depth, config.rrf_k)
    cache = store._cache("bench")
    embedder = query_embedder(embed_threads)
    store._embedder = embedder
    texts = query_texts(picks)
    embed_only, _ = timed(embedder.encode_one, texts[:embed_queries])
    embed, _ = timed(lambda t: store.search("bench", t, k=10), texts[:embed_queries])
    bm25, _ = timed(lambda t: keyword_ranking(store, t), texts[:embed_queries])
    working_sets = [rng.choice(size, 10, replace=False) for _ in range(queries)]
    ids = [[cache.entry_ids[r] for r in ws] for ws in working_sets]
    frontier, _ = timed(lambda i: store.frontier("bench", ids[i], [], query_vectors[i], limit=20), range(queries))
    base_frontier = time_baseline_frontier(graph, working_sets, query_vectors)
    result = {
        "size": size, "build_rate": size / graph.seconds, "build_s": graph.seconds, "index_s": index_s,
        "ann": cache.abstractions.uses_ann, "search": search, "baseline": base,
        **hit_rates(cache, picks, hits, base_hits), "embed": embed_only, "search_embed": embed, "bm25": bm25,
        "frontier": frontier, "baseline_frontier": base_frontier,
        "peak_rss_mb": peak_rss_mb(),
        "db_mb": sum(p.stat().st_size for p in workdir.glob(f"bench_{size}.sqlite*") if p.is_file()) / 2**20,
    }  # fmt: skip
    store.close()
    del cache
    del graph  # free this view's vectors before the reopened store loads its own
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


def print_table(results: list[dict]) -> tuple[ResultTable, list[str]]:
    """Print a row per (size, measurement), store vs numpy baseline and target, and a summary line per size.

    Returns the table and the summary lines (build, index, recall against exact search), for the result record.
    """
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
    notes = [
        f"{r['size']:,} entries: bulk build {r['build_rate']:,.0f} entries/s ({r['build_s']:.1f} s), "
        f"load + index {r['index_s']:.1f} s, reopen + load saved index {r['reopen_s']:.1f} s "
        f"({r['ann_mb']:,.0f} MB), path {'ANN' if r['ann'] else 'exact'}, "
        f"recall@10 vs exact fused {r['recall']:.3f}, source entry in top-10 {r['source_hit']:.3f} "
        f"(numpy {r['base_source_hit']:.3f}), peak RSS {r['peak_rss_mb']:,.0f} MB, "
        f"file {r['db_mb']:,.0f} MB"
        for r in results
    ]
    for note in notes:
        console.print(note)
    return from_rich(table), notes


def run_sizes(args: argparse.Namespace, overrides: list[str], postgres_url: str | None) -> tuple[list, list]:
    """Each size in its own SQLite worker, then (with a URL) its own PostgreSQL worker; (SQLite, PostgreSQL) results."""
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="graph_bench_"))
    workdir.mkdir(parents=True, exist_ok=True)
    results, postgres_results = [], []
    for size in args.sizes:
        spec = {"size": size, "queries": args.queries, "embed_queries": args.embed_queries,
                "embed_threads": args.embed_threads, "dim": args.dim, "seed": args.seed,
                "store_overrides": overrides}  # fmt: skip
        runs = [("SQLite", {**spec, "workdir": str(workdir)}, results)]
        if postgres_url:
            runs.append(("PostgreSQL", {**spec, "postgres_url": postgres_url}, postgres_results))
        for backend, worker_spec, into in runs:
            result = spawn(MODULE, worker_spec)
            if result.get("error"):
                raise SystemExit(f"size {size:,} on {backend} failed: {result['error']}")
            into.append(result)
            print(f"size {size:,} on {backend} done: {result}", file=sys.stderr)
    return results, postgres_results


def main() -> None:
    """Parse arguments; run each size in a subprocess (own peak RSS), print the tables and maybe record them."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000], help="entries per graph")
    parser.add_argument("--queries", type=int, default=200, help="queries (and working sets) per size")
    parser.add_argument("--embed-queries", type=int, default=50, help="text queries (embedded) per size")
    parser.add_argument("--embed-threads", type=int, default=1, help="torch threads for query embedding")
    parser.add_argument("--dim", type=int, default=384, help="vector dimension")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=None, help="folder for the store files (default: a temp dir)")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    store_help = ("StoreConfig overrides key=value (e.g. ann_dtype=f16), and at most one postgresql://user:password@"
                  "host:port/db URL: each size then also runs on PostgreSQL + pgvector (in a new schema of that "
                  "database, dropped after), with a second table beside SQLite's")  # fmt: skip
    parser.add_argument("--store", nargs="*", default=[], help=store_help)
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    add_record_option(parser)
    args = parser.parse_args()
    if args.worker:
        spec = json.loads(args.worker)
        if "postgres_url" in spec:
            from benchmarks.graph_search_postgres import run_postgres_size

            print(json.dumps(run_postgres_size(**spec)))
        else:
            print(json.dumps(run_size(**{**spec, "workdir": Path(spec["workdir"])})))
        return
    overrides, postgres_url = split_store_items(args.store)
    if postgres_url:
        from benchmarks.graph_search_postgres import check_server, print_comparison, redacted_argv

        check_server(postgres_url)  # a wrong URL fails now, not after SQLite's run
    results, postgres_results = run_sizes(args, overrides, postgres_url)
    table, notes = print_table(results)
    tables, argv = [table], None
    if postgres_url:
        comparison, comparison_notes = print_comparison(results, postgres_results)
        tables.append(comparison)
        notes += comparison_notes
        argv = redacted_argv(sys.argv[1:])  # the record names the URL without its password
    if args.json:
        args.json.write_text(json.dumps([{"backend": "sqlite", **r} for r in results] + postgres_results, indent=2))
    title = "SQLite graph store: search, embedded search and frontier latency against numpy brute force"
    if postgres_url:
        title += "; PostgreSQL + pgvector beside it"
    save_record(args, title, tables, notes, argv=argv)


if __name__ == "__main__":
    main()
