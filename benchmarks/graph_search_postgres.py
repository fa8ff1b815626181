"""The PostgreSQL half of `benchmarks.graph_search --store postgresql://...`: one size on PostgreSQL + pgvector.

For each size, after SQLite's worker, a worker of this module loads the same graph (same seed,
so the same vectors and texts) into a PostgreSQL store and asks the same queries: vector
search, text search (query embedding, the vector channels and BM25), the BM25 channel alone
and the frontier. The store lives in a new schema of the URL's database, dropped at the end,
so nothing else in the database is read or changed.

Latencies are wall time: the server's share of the work runs in its own processes, which this
process's CPU time does not see. The first search builds pgvector's HNSW indexes (`index_s`,
beside SQLite's load + usearch build); a second connection's first search (`reopen_s`) loads the
graph's view with the indexes already in the database.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from benchmarks.common import bulk_load, peak_rss_mb
from benchmarks.graph_search import (
    anchor_members,
    baseline_search,
    draw_queries,
    hit_rates,
    keyword_ranking,
    parse_override,
    query_embedder,
    query_texts,
    timed,
)

if TYPE_CHECKING:
    from memora_rl.experiments.records import ResultTable

SCHEMA_PREFIX = "graph_bench_"
"""Schemas this benchmark creates (and drops) are named `graph_bench_<size>_<pid>`."""
COMPARED = [
    ("search", "vector search (vector query)"),
    ("search_embed", "text search (embedding + vectors + BM25)"),
    ("bm25", "BM25 channel alone (text query)"),
    ("frontier", "frontier, |W| = 10"),
]
"""(result key, row label) of each latency the comparison table puts side by side."""


def redacted_argv(argv: Sequence[str]) -> list[str]:
    """The command's arguments with each PostgreSQL URL's password left out (what a result record may show).

    >>> redacted_argv(["--store", "postgresql://me:secret@db/memory", "ann_dtype=f16"])
    ['--store', 'postgresql://me@db/memory', 'ann_dtype=f16']
    """
    from memora_rl.memory import is_postgres_url
    from memora_rl.memory.pg_connection import redact

    return [redact(arg) if is_postgres_url(arg) else arg for arg in argv]


def check_server(url: str) -> None:
    """Connect once before any size runs, so a wrong URL or a server without pgvector fails in seconds.

    Raises:
        SystemExit: psycopg is missing, the server cannot be reached, it has no pgvector, or the URL
            sets its own `options` (the benchmark picks the schema).
    """
    from memora_rl.errors import GraphError
    from memora_rl.memory.pg_connection import redact
    from memora_rl.memory.pg_schema import load_psycopg

    label = redact(url)
    if "options=" in url:
        raise SystemExit(f"--store {label}: drop `options=` from the URL; the benchmark makes its own schema.")
    try:
        psycopg = load_psycopg()
    except GraphError as error:
        raise SystemExit(str(error)) from error
    try:
        with psycopg.connect(url, connect_timeout=10) as conn:
            has_vector = conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone()
    except psycopg.Error as error:
        raise SystemExit(
            f"--store {label}: could not connect ({str(error).strip()}). Check the URL and that the server runs; "
            "for a local one with pgvector: pip install pgserver, then pgserver.get_server(folder).get_uri()."
        ) from error
    if has_vector is None:
        raise SystemExit(f"--store {label}: the server has no pgvector extension; install it there first.")


def _with_schema(url: str, schema: str) -> str:
    """`url` whose connections use `schema` as their current schema."""
    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"


@contextmanager
def scratch_schema(url: str, schema: str) -> Iterator[str]:
    """A new schema on the URL's database for the run's store; yields its URL, drops it (and the store) at the end."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield _with_schema(url, schema)
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def database_mb(url: str, schema: str) -> float:
    """Size of the schema's tables with their indexes and TOAST, in MiB."""
    import psycopg

    sql = ("SELECT COALESCE(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
           "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'")  # fmt: skip
    with psycopg.connect(url) as conn:
        return float(conn.execute(sql, (schema,)).fetchone()[0]) / 2**20


def _measure(store: Any, size: int, queries: int, embed_queries: int, embed_threads: int, dim: int, seed: int) -> dict:
    """Load the size's graph into `store` and time its searches, with `graph_search.run_size`'s draws in its order."""
    rng = np.random.default_rng(seed)
    graph = bulk_load(store, size, dim, rng, value_noise=1.0)
    start = time.perf_counter()
    store.search("bench", graph.abstractions[0], k=10)  # loads the view, builds the HNSW indexes
    index_s = time.perf_counter() - start
    picks, query_vectors = draw_queries(rng, graph, queries)
    search, hits = timed(lambda q: store.search("bench", q, k=10), query_vectors)
    members, depth, rrf_k = anchor_members(graph), store.config.channel_depth, store.config.rrf_k
    base_hits = [baseline_search(graph, members, query, 10, depth, rrf_k) for query in query_vectors]
    cache = store._cache("bench")
    store._embedder = query_embedder(embed_threads)
    texts = query_texts(picks)[:embed_queries]
    embed_only, _ = timed(store._embedder.encode_one, texts)  # also loads the model before the timed searches
    text_search, _ = timed(lambda text: store.search("bench", text, k=10), texts)
    bm25, _ = timed(lambda text: keyword_ranking(store, text), texts)
    working_sets = [rng.choice(size, 10, replace=False) for _ in range(queries)]
    ids = [[cache.entry_ids[row] for row in working] for working in working_sets]
    frontier, _ = timed(lambda i: store.frontier("bench", ids[i], [], query_vectors[i], limit=20), range(queries))
    return {
        "backend": "postgres", "size": size, "build_rate": size / graph.seconds, "build_s": graph.seconds,
        "index_s": index_s, "ann": cache.abstractions.uses_ann, "search": search,
        **hit_rates(cache, picks, hits, base_hits), "embed": embed_only, "search_embed": text_search, "bm25": bm25,
        "frontier": frontier, "peak_rss_mb": peak_rss_mb(),
    }  # fmt: skip


def run_postgres_size(
    size: int,
    queries: int,
    embed_queries: int,
    embed_threads: int,
    dim: int,
    seed: int,
    store_overrides: list[str],
    postgres_url: str,
) -> dict:
    """Measure one graph size on a PostgreSQL store in a scratch schema of `postgres_url` (this process)."""
    from memora_rl.memory import StoreConfig, open_store

    config = StoreConfig.model_validate(dict(parse_override(item) for item in store_overrides))
    schema = f"{SCHEMA_PREFIX}{size}_{os.getpid()}"
    with scratch_schema(postgres_url, schema) as url:
        with open_store(url, config=config) as store:
            result = _measure(store, size, queries, embed_queries, embed_threads, dim, seed)
        with open_store(url, config=config) as reopened:  # another connection: the indexes are in the database
            start = time.perf_counter()
            reopened.search("bench", np.ones(dim, dtype=np.float32) / np.sqrt(dim), k=10)
            result["reopen_s"] = time.perf_counter() - start
        result["db_mb"] = database_mb(postgres_url, schema)
    return result


def _wall(stats: dict) -> str:
    return "{:.2f} / {:.2f}".format(*stats["wall"])


def _ratio(postgres: dict, sqlite: dict, metric: str) -> float:
    """PostgreSQL's wall p50 over SQLite's."""
    return postgres[metric]["wall"][0] / max(sqlite[metric]["wall"][0], 1e-6)


def print_comparison(sqlite: list[dict], postgres: list[dict]) -> tuple[ResultTable, list[str]]:
    """Print the two backends' latencies side by side and a ratio line per size; return the table and the lines."""
    from rich.console import Console
    from rich.table import Table

    from benchmarks.common import from_rich

    table = Table(title="PostgreSQL + pgvector beside SQLite: wall latency in ms, p50 / p95")
    for column in ["entries", "measure", "SQLite", "PostgreSQL", "PostgreSQL / SQLite (p50)"]:
        table.add_column(column, justify="right")
    for lite, pg in zip(sqlite, postgres, strict=True):
        for metric, label in COMPARED:
            table.add_row(f"{pg['size']:,}", label, _wall(lite[metric]), _wall(pg[metric]),
                          f"{_ratio(pg, lite, metric):.2f}x")  # fmt: skip
    console = Console(width=160)
    console.print(table)
    notes = [
        f"{pg['size']:,} entries, PostgreSQL / SQLite wall p50: vector search {_ratio(pg, lite, 'search'):.2f}x, "
        f"text search {_ratio(pg, lite, 'search_embed'):.2f}x (BM25 alone {_ratio(pg, lite, 'bm25'):.2f}x), "
        f"frontier {_ratio(pg, lite, 'frontier'):.2f}x. PostgreSQL: bulk build {pg['build_rate']:,.0f} entries/s "
        f"({pg['build_s']:.1f} s; SQLite {lite['build_rate']:,.0f}/s), first search with HNSW build "
        f"{pg['index_s']:.1f} s (SQLite load + index {lite['index_s']:.1f} s), another connection's first search "
        f"{pg['reopen_s']:.1f} s, path {'ANN' if pg['ann'] else 'exact'}, recall@10 vs exact fused "
        f"{pg['recall']:.3f} (SQLite {lite['recall']:.3f}), source entry in top-10 {pg['source_hit']:.3f} "
        f"(SQLite {lite['source_hit']:.3f}), database {pg['db_mb']:,.0f} MB (SQLite file {lite['db_mb']:,.0f} MB)"
        for lite, pg in zip(sqlite, postgres, strict=True)
    ]
    for note in notes:
        console.print(note)
    return from_rich(table), notes
