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
(`serve-memory --workers`). `--record NAME` also writes the table as the result record docs/results/NAME.json.

    python -m benchmarks.service_load --entries 10000 --requests 160
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
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
from memora_rl.data.load import SHARED_LOCOMO_PATH

if TYPE_CHECKING:
    from memora_rl.experiments.records import ResultTable

NAMES = ["Ava", "Ben", "Cara", "Dev", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jun", "Kai", "Lia", "Max", "Nia", "Omar"]
THINGS = ["bicycle", "violin", "garden", "camera", "kayak", "telescope", "notebook", "guitar", "tent", "drone"]


def entry_texts(number: int) -> tuple[str, str]:
    """Entry `number`'s (abstraction, value): who keeps which thing where, in the words `questions` asks with."""
    name, thing = NAMES[number % 15], THINGS[(number // 15) % 10]
    return f"{name} + {thing}", f"{name} keeps the {thing} near {WORDS[(number // 7) % 16]} hall, item {number}"


def build_graph(path: Path, entries: int, seed: int) -> float:
    """Bulk-load graph `bench` (entries with ~3 anchors from a pool of entries / 10); returns seconds."""
    from memora_rl.memory import open_store

    started = time.perf_counter()
    with open_store(path) as store:
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


async def load(url: str, path: str, bodies: list[dict], concurrency: int) -> dict:
    """Send every body with `concurrency` closed-loop clients; latency percentiles, requests/s, errors."""
    queue = list(reversed(bodies))
    samples: list[float] = []
    errors = 0

    async def client(http: httpx.AsyncClient) -> None:
        nonlocal errors
        while queue:
            body = queue.pop()
            started = time.perf_counter()
            try:
                response = await http.post(path, json=body) if body else await http.get(path)
                if response.status_code != 200:
                    errors += 1
                    continue
            except httpx.HTTPError:
                errors += 1
                continue
            samples.append(time.perf_counter() - started)

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as http:
        started = time.perf_counter()
        await asyncio.gather(*(client(http) for _ in range(concurrency)))
        wall = time.perf_counter() - started
    return {"p50": percentile_ms(samples, 50), "p95": percentile_ms(samples, 95), "rps": len(samples) / wall,
            "errors": errors, "n": len(bodies)}  # fmt: skip


class Server:
    """A `memora-rl serve-memory` subprocess on a free loopback port, without tokens (`--no-auth`: loopback only)."""

    def __init__(self, stores: list[Path], policy_args: list[str], port: int, start_timeout_s: float) -> None:
        executable = Path(sys.executable).with_name("memora-rl")
        store_args = [arg for store in stores for arg in ("--store", str(store))]
        command = [str(executable), "serve-memory", *store_args, "--port", str(port), "--no-auth", *policy_args]
        self.url = f"http://127.0.0.1:{port}"
        self.start_timeout_s = start_timeout_s
        self.log = stores[0].with_name(f"serve-{port}.log")
        environment = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_WAIT_POLICY": "PASSIVE"}
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(command, env=environment, stdout=log, stderr=subprocess.STDOUT)

    def __enter__(self) -> Server:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"serve-memory exited: {self.log.read_text(errors='replace')[-2000:]}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.5)
        self.__exit__()
        raise SystemExit(f"serve-memory did not answer /healthz within {self.start_timeout_s:g} s (log: {self.log})")

    def cpu_seconds(self) -> float:
        """User + system CPU seconds the server and its worker processes have used so far (nan without /proc)."""
        stats: dict[int, list[str]] = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                stats[int(stat.parent.name)] = stat.read_text().rpartition(")")[2].split()
            except OSError:  # a process that ended meanwhile
                continue
        if self.process.pid not in stats:
            return float("nan")
        tree, grew = {self.process.pid}, True
        while grew:
            children = {pid for pid, fields in stats.items() if int(fields[1]) in tree}  # fields[1]: parent pid
            grew = not children <= tree
            tree |= children
        ticks = sum(int(stats[pid][11]) + int(stats[pid][12]) for pid in tree)  # utime, stime
        return ticks / os.sysconf("SC_CLK_TCK")

    def measure(self, path: str, bodies: list[dict], concurrency: int) -> dict:
        """`load` plus the server's CPU milliseconds per request."""
        before = self.cpu_seconds()
        result = asyncio.run(load(self.url, path, bodies, concurrency))
        return {**result, "cpu_ms": (self.cpu_seconds() - before) * 1000.0 / max(len(bodies), 1)}

    def __exit__(self, *_: object) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:  # still finishing walks on a slow LLM: the rows are already measured
            print(f"serve-memory did not stop within 30 s of SIGTERM; killed (log: {self.log})", file=sys.stderr)
            self.process.kill()
            self.process.wait()


def free_port() -> int:
    """A free TCP port on loopback."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def retrieve_rows(
    server: Server, label: str, graph: str, texts: list[str], levels: list[int], requests: int, start: int = 0
) -> list[dict]:
    """One row per concurrency level of retrieves from `texts`, from position `start` on (after a warm-up).

    Every question is new to the server's embedding cache: a text sent before (past the end of
    `texts`, wrapping) gets its round number appended, so each row pays for its query embeddings.
    """
    asyncio.run(load(server.url, "/v1/retrieve", [{"graph": graph, "question": f"warm up {n}"} for n in range(4)], 2))
    rows = []
    for number, level in enumerate(levels):
        picks = [start + number * requests + n for n in range(requests)]
        chosen = [texts[i % len(texts)] + (f" (round {i // len(texts)})" if i >= len(texts) else "") for i in picks]
        bodies = [{"graph": graph, "question": text} for text in chosen]
        rows.append({"what": label, "concurrency": level, **server.measure("/v1/retrieve", bodies, level)})
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
    """Build the graph, measure the baseline, then load each policy's server and the ingest path."""
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
    add_record_option(parser)
    args = parser.parse_args()
    if args.llm_dtypes and args.llm_export is None:
        parser.error("--llm-dtypes serves --llm-export's merged model: pass --llm-export too.")
    if args.llm_dtypes and not (args.llm_export / "merged" / "config.json").is_file():
        parser.error(f"--llm-export {args.llm_export} holds no merged model; export it with `memora-rl export --merge`")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="service_load_"))
    store = workdir / "service.sqlite"
    if not store.exists():
        print(f"building {args.entries} entries: {build_graph(store, args.entries, args.seed):.1f} s", file=sys.stderr)
    base = baseline(store, [f"{text} (baseline)" for text in questions(args.requests)])  # no retrieve row sends these
    stores, locomo = [store], None
    if args.locomo is not None and args.locomo.is_file():
        locomo = build_locomo(workdir / "locomo.sqlite", args.locomo)
        stores.append(workdir / "locomo.sqlite")
    rows: list[dict] = []
    number = 0  # each server's questions are its own
    for name, endpoint in policy_servers(args):
        with endpoint as policy_args:
            for workers in args.workers:
                command = [*policy_args, "--workers", str(workers)]
                with Server(stores, command, free_port(), args.start_timeout) as server:
                    rows += server_rows(args, server, name, workers, number, locomo)
                number += 1
    table = load_table(rows, base)
    print(markdown(table))
    title = f"serve-memory over loopback ({args.entries}-entry graph): retrieve latency and throughput, ingest"
    save_record(args, title, [table])


if __name__ == "__main__":
    main()
