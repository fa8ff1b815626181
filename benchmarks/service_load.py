"""Load-test `memora-rl serve-memory` over loopback: retrieve latency and throughput, ingest throughput.

A graph of `--entries` entries (random unit vectors, like `graph_search`, with real text for
BM25 and the query embedding) is bulk-loaded into a fresh SQLite store. For each policy a real
`serve-memory` process is started on loopback and bounded closed-loop clients (`--concurrency`,
default 1 8 32) send `--requests` retrieves per level; then extractive ingest runs in batches.
The baseline, measured in the same run, is the same graph's semantic search called in-process
(query embedding + fused search + entry reads, no HTTP, no env): the ratio column is a row's
p50 over it. Each row also gives the server's CPU time per request (from /proc, Linux): with closed-loop
clients p50 is about clients / throughput, and throughput is bounded by the cores over that CPU time.
With `--llm-base-url/--llm-model` the exported policy (served by vLLM) gets rows too; with
`--llm-export E --llm-dtypes float32 bfloat16` the benchmark serves E's merged model itself, once per
dtype, so both are measured in one run. `--workers 1 2` loads each policy once per worker-process count
(`serve-memory --workers`). With `--store postgresql://...` the same graph is also served from that
PostgreSQL store, by one serve-memory process and then by two on the one store (`benchmarks.service_backends`):
a second table sets its semantic retrieve rows beside SQLite's of the same run. `--record NAME` also writes
the tables (and the target lines) as the result record docs/results/NAME.json. The HTTP side (servers,
clients, CPU) is `benchmarks.service_client`.

    python -m benchmarks.service_load --entries 10000 --requests 160
    python -m benchmarks.service_load --entries 10000 --concurrency 1 8 --policies semantic --store postgresql://...
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from benchmarks.common import (
    GRAPH,
    WORDS,
    add_record_option,
    bulk_load,
    markdown,
    percentile_ms,
    result_table,
    save_record,
)
from benchmarks.service_backends import backend_table, postgres_graph_ready, postgres_rows
from benchmarks.service_client import Server, free_port, load, measure_replicas
from memora_rl.data.load import SHARED_LOCOMO_PATH

if TYPE_CHECKING:
    from memora_rl.experiments.records import ResultTable

NAMES = ["Ava", "Ben", "Cara", "Dev", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jun", "Kai", "Lia", "Max", "Nia", "Omar"]
THINGS = ["bicycle", "violin", "garden", "camera", "kayak", "telescope", "notebook", "guitar", "tent", "drone"]


def entry_texts(number: int) -> tuple[str, str]:
    """Entry `number`'s (abstraction, value): who keeps which thing where, in the words `questions` asks with."""
    name, thing = NAMES[number % 15], THINGS[(number // 15) % 10]
    return f"{name} + {thing}", f"{name} keeps the {thing} near {WORDS[(number // 7) % 16]} hall, item {number}"


def build_graph(location: str, entries: int, seed: int) -> float:
    """Bulk-load graph `bench` (entries with ~3 anchors from a pool of entries / 10) into a store; returns seconds.

    The same seed gives the same graph (vectors and texts) in any store, so backends serve equal graphs.
    """
    from memora_rl.memory import open_store

    started = time.perf_counter()
    with open_store(location) as store:
        rng = np.random.default_rng(seed)
        pool = max(100, entries // 10)
        bulk_load(store, entries, store.embedder.dim, rng, graph=GRAPH, pool=pool, value_noise=None, texts=entry_texts)
    return time.perf_counter() - started


def build_locomo(path: Path, locomo: Path) -> tuple[str, list[str]]:
    """Extractive graph of LoCoMo's first conversation (resumable); returns its graph id and its questions."""
    from memora_rl.builders.extractive import ExtractiveBuilder
    from memora_rl.data.load import load_corpus
    from memora_rl.memory import open_store

    corpus = load_corpus(locomo)
    conversation = corpus.conversations[0]
    with open_store(path) as store:
        ExtractiveBuilder().build(conversation, store)
    return conversation.id, [task.question for task in corpus.tasks if task.conversation_id == conversation.id]


def questions(count: int) -> list[str]:
    """Distinct questions in the graph's vocabulary (each is embedded once by the server: cache misses)."""
    return [f"Where does {NAMES[i % 15]} keep the {THINGS[(i // 15) % 10]}? (ask {i})" for i in range(count)]


def baseline(store_path: Path, texts: list[str]) -> dict:
    """In-process semantic search, one at a time: embed the query, fused search (k = 5), read the entries."""
    from memora_rl.memory import open_store

    samples = []
    with open_store(store_path) as store:
        store.search(GRAPH, "warm up the index", k=5)
        for text in texts:
            started = time.perf_counter()
            hits = store.search(GRAPH, text, k=5)
            store.get_entries(GRAPH, [hit.entry_id for hit in hits])
            samples.append(time.perf_counter() - started)
    return {"p50": percentile_ms(samples, 50), "p95": percentile_ms(samples, 95)}


def retrieve_rows(
    servers: Server | list[Server],
    label: str,
    graph: str,
    texts: list[str],
    levels: list[int],
    requests: int,
    start: int = 0,
) -> list[dict]:
    """One row per concurrency level of retrieves from `texts`, from position `start` on (after a warm-up).

    Several `servers` (replicas of one store) share each level's clients evenly. Every question is
    new to the servers' embedding caches: a text sent before (past the end of `texts`, wrapping)
    gets its round number appended, so each row pays for its query embeddings.
    """
    servers = servers if isinstance(servers, list) else [servers]
    for server in servers:
        warm_up = [{"graph": graph, "question": f"warm up {n}"} for n in range(4)]
        asyncio.run(load(server.url, "/v1/retrieve", warm_up, 2))
    rows = []
    for number, level in enumerate(levels):
        picks = [start + number * requests + n for n in range(requests)]
        chosen = [texts[i % len(texts)] + (f" (round {i // len(texts)})" if i >= len(texts) else "") for i in picks]
        bodies = [{"graph": graph, "question": text} for text in chosen]
        rows.append({"what": label, "concurrency": level, **measure_replicas(servers, "/v1/retrieve", bodies, level)})
    return rows


def workers_label(workers: int) -> str:
    """What a row label adds for a server with several worker processes ("" for one)."""
    return f", {workers} workers" if workers > 1 else ""


def ingest_rows(server: Server, batches: int, batch_turns: int, levels: list[int], workers: int = 1) -> list[dict]:
    """Extractive ingest into a new graph: batches of `batch_turns` turns, as turns per second.

    Each row's turns differ (they name the worker count and the clients), so none is in the embedding cache.
    """
    rows = []
    suffix = workers_label(workers)
    for level in levels:
        bodies = [
            {"graph": f"ingest-w{workers}-c{level}", "turns": [
                {"speaker": NAMES[(b + t) % 15],
                 "text": f"I lent my {THINGS[t % 10]} to {NAMES[b % 15]} on day {b} ({workers}w{level}c)."}
                for t in range(batch_turns)]}
            for b in range(batches)
        ]  # fmt: skip
        result = server.measure("/v1/ingest", bodies, level)
        rows.append({"what": f"ingest, {batch_turns} turns/batch{suffix}", "concurrency": level, **result,
                     "turns_per_s": result["rps"] * batch_turns})  # fmt: skip
    return rows


COLUMNS = ("what", "clients", "p50 ms", "p95 ms", "req/s", "req/s / fewest clients", "errors", "server CPU ms/req",
           "p50 / in-process search")  # fmt: skip


def load_table(rows: list[dict], base: dict) -> ResultTable:
    """One row per measurement after the in-process baseline's, with two ratios.

    p50 over the in-process search's p50, and req/s over the same label's req/s at its fewest
    clients (how throughput grows with concurrency: the batching a server gets out of more clients).
    """
    cells: list[list[object]] = [["baseline: in-process semantic search (no HTTP)", 1, f"{base['p50']:.1f}",
                                  f"{base['p95']:.1f}", "", "", "", "", "1.00"]]  # fmt: skip
    fewest: dict[str, float] = {}
    for row in sorted(rows, key=lambda row: row["concurrency"]):
        fewest.setdefault(row["what"], row["rps"])
    for row in rows:
        rate = f"{row['rps']:.1f}" + (f" ({row['turns_per_s']:.0f} turns/s)" if "turns_per_s" in row else "")
        growth = row["rps"] / fewest[row["what"]] if fewest[row["what"]] else float("nan")
        cells.append([row["what"], row["concurrency"], f"{row['p50']:.1f}", f"{row['p95']:.1f}", rate,
                      f"{growth:.2f}", f"{row['errors']}/{row['n']}", f"{row['cpu_ms']:.1f}",
                      f"{row['p50'] / base['p50']:.2f}"])  # fmt: skip
    return result_table("serve-memory over loopback: latency, throughput and server CPU", COLUMNS, cells)


@contextmanager
def served_export(export: Path, dtype: str) -> Iterator[list[str]]:
    """A vLLM server of `export`'s merged model in `dtype`; yields serve-memory's arguments for policy=llm."""
    from memora_rl.llm.server import ServerConfig, VLLMServer

    config = ServerConfig(model=str(export / "merged"), served_name="policy", dtype=dtype, enable_lora=False)
    with VLLMServer(config) as server:
        endpoint = ["--llm-base-url", server.base_url, "--llm-model", server.model]
        yield ["--policy", "llm", *endpoint, "--export", str(export)]


def policy_servers(args: argparse.Namespace) -> list[tuple[str, AbstractContextManager[list[str]]]]:
    """(row name, context giving serve-memory's policy arguments) for each policy the run loads."""
    policies: list[tuple[str, AbstractContextManager[list[str]]]] = [
        (name, nullcontext(["--policy", name])) for name in args.policies
    ]
    if args.llm_base_url and args.llm_model:
        export = ["--export", str(args.llm_export)] if args.llm_export else []
        llm = ["--policy", "llm", "--llm-base-url", args.llm_base_url, "--llm-model", args.llm_model, *export]
        policies.append(("llm", nullcontext(llm)))
    policies += [(f"llm ({dtype})", served_export(args.llm_export, dtype)) for dtype in args.llm_dtypes]
    return policies


def server_rows(
    args: argparse.Namespace, server: Server, name: str, workers: int, number: int, locomo: tuple[str, list[str]] | None
) -> list[dict]:
    """One serve-memory process's rows: retrieves per graph, then (first baseline only) the HTTP floor and ingest."""
    requests = args.llm_requests if name.startswith("llm") else args.requests  # an LLM walk takes seconds, not ms
    suffix = workers_label(workers)
    start = number * len(args.concurrency) * args.requests
    label = f"retrieve, {name}, {args.entries} entries{suffix}"
    rows = retrieve_rows(server, label, GRAPH, questions(args.requests), args.concurrency, requests, start)
    if locomo is not None:
        label = f"retrieve, {name}, LoCoMo {locomo[0]}{suffix}"
        rows += retrieve_rows(server, label, locomo[0], locomo[1], args.concurrency[:2], requests, start)
    if args.policies and name == args.policies[0]:
        rows += [{"what": f"GET /healthz (HTTP floor){suffix}", "concurrency": level,
                  **server.measure("/healthz", [{}] * args.requests, level)}
                 for level in args.concurrency]  # fmt: skip
        rows += ingest_rows(server, args.ingest_batches, args.ingest_turns, [1, 4], workers)
    return rows


def main() -> None:
    """Build the graph, measure the baseline, then load each policy's server, the ingest path and PostgreSQL."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=10_000, help="entries of the benchmark graph")
    parser.add_argument("--requests", type=int, default=160, help="retrieves per concurrency level")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32], help="client counts")
    parser.add_argument("--policies", nargs="*", default=["semantic", "heuristic"],
                        help="baseline policies to serve (none: only the llm rows)")  # fmt: skip
    parser.add_argument("--llm-base-url", default=None, help="also serve policy=llm from this endpoint (.../v1)")
    parser.add_argument("--llm-model", default=None, help="served name of the exported policy")
    parser.add_argument("--llm-export", type=Path, default=None, help="that export's folder (its training env layout)")
    parser.add_argument("--llm-dtypes", nargs="*", default=[], choices=["float32", "bfloat16"],
                        help="serve --llm-export's merged model with vLLM in each dtype, one at a time")  # fmt: skip
    parser.add_argument("--llm-requests", type=int, default=32, help="retrieves per concurrency level of policy=llm")
    parser.add_argument("--ingest-batches", type=int, default=24, help="ingest batches per concurrency level")
    parser.add_argument("--ingest-turns", type=int, default=10, help="turns per ingest batch")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--locomo", type=Path, default=SHARED_LOCOMO_PATH, help="locomo10.json (skipped when absent)")
    parser.add_argument("--start-timeout", type=float, default=600, help="seconds a server may take to start")
    parser.add_argument("--workdir", type=Path, default=None, help="folder of the store (default: a temp dir)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1], help="serve-memory --workers values to load")
    store_help = "also serve the graph from this PostgreSQL store (one replica, then two), beside SQLite"
    parser.add_argument("--store", default=None, metavar="postgresql://...", help=store_help)
    add_record_option(parser)
    args = parser.parse_args()
    if args.llm_dtypes and args.llm_export is None:
        parser.error("--llm-dtypes serves --llm-export's merged model: pass --llm-export too.")
    if args.llm_dtypes and not (args.llm_export / "merged" / "config.json").is_file():
        parser.error(f"--llm-export {args.llm_export} holds no merged model; export it with `memora-rl export --merge`")
    if args.store is not None and not (args.store.startswith(("postgresql://", "postgres://")) and
                                       "semantic" in args.policies and 1 in args.workers):  # fmt: skip
        parser.error("--store takes a postgresql://user@host:port/db URL, compared with SQLite's semantic rows "
                     "(keep semantic in --policies and 1 in --workers).")  # fmt: skip
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="service_load_"))
    store = workdir / "service.sqlite"
    if not store.exists():
        print(f"building {args.entries} entries: {build_graph(str(store), args.entries, args.seed):.1f} s",
              file=sys.stderr)  # fmt: skip
    if args.store is not None and not postgres_graph_ready(args.store, args.entries):
        seconds = build_graph(args.store, args.entries, args.seed)
        print(f"building {args.entries} entries in PostgreSQL: {seconds:.1f} s", file=sys.stderr)
    base = baseline(store, [f"{text} (baseline)" for text in questions(args.requests)])  # no retrieve row sends these
    stores, locomo = [str(store)], None
    if args.locomo is not None and args.locomo.is_file():
        locomo = build_locomo(workdir / "locomo.sqlite", args.locomo)
        stores.append(str(workdir / "locomo.sqlite"))
    rows: list[dict] = []
    number = 0  # each server's questions are its own
    for name, endpoint in policy_servers(args):
        with endpoint as policy_args:
            for workers in args.workers:
                command = [*policy_args, "--workers", str(workers)]
                with Server(stores, command, free_port(), args.start_timeout, workdir) as server:
                    rows += server_rows(args, server, name, workers, number, locomo)
                number += 1
    tables, notes = [load_table(rows, base)], []
    if args.store is not None:
        table, notes = compare_postgres(args, rows, number, workdir)
        tables.append(table)
    print("\n\n".join(markdown(table) for table in tables))
    print("\n".join(notes))
    title = f"serve-memory over loopback ({args.entries}-entry graph): retrieve latency and throughput, ingest"
    save_record(args, title, tables, notes)


def compare_postgres(args: argparse.Namespace, rows: list[dict], number: int, workdir: Path) -> tuple:
    """The SQLite-and-PostgreSQL table and its target lines: PostgreSQL measured now, SQLite's semantic rows reused."""
    texts = questions(args.requests)

    def rows_of(servers: list[Server], label: str, number: int) -> list[dict]:
        start = number * len(args.concurrency) * args.requests
        return retrieve_rows(servers, label, GRAPH, texts, args.concurrency, args.requests, start)

    pg_rows = postgres_rows(args.store, rows_of, number, args.start_timeout, workdir)
    sqlite_rows = [row for row in rows if row["what"] == f"retrieve, semantic, {args.entries} entries"]
    return backend_table(sqlite_rows, pg_rows)


if __name__ == "__main__":
    main()
