"""PostgreSQL beside SQLite in `benchmarks.service_load`: one graph served from each, then from two replicas.

With `--store postgresql://...` the run bulk-loads the SQLite graph's twin (same seed: the same
vectors and texts) into that store and serves it with the semantic policy from one serve-memory
process, then from two on the same store, each level's clients split evenly between them. The
table sets these rows beside the SQLite server's semantic rows of the same run, with two ratios:
a row's p50 over SQLite's at the same client count, and its req/s over one PostgreSQL replica's.
The lines under it state the issue's targets at `TARGET_CLIENTS` clients: p50 within 1.5x of
SQLite's with no errors, and two replicas at least 1.5x one replica's throughput where the
machine has the cores (`machine cores busy` says whether it had them).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.common import GRAPH, result_table
from benchmarks.service_client import Server, free_port

if TYPE_CHECKING:
    from memora_rl.experiments.records import ResultTable

TARGET_CLIENTS = 8
"""The client count the issue's targets are stated at (the largest measured one stands in when it is absent)."""
SQLITE, ONE, TWO = (
    "retrieve, semantic, SQLite",
    "retrieve, semantic, PostgreSQL",
    "retrieve, semantic, PostgreSQL, 2 replicas",
)

RowsOf = Callable[[list[Server], str, int], list[dict]]
"""(servers, row label, number of the measurement: its questions are its own) -> the rows at every level."""


def postgres_graph_ready(url: str, entries: int) -> bool:
    """True when the store at `url` already holds the benchmark graph with `entries` entries (it is then reused).

    Raises:
        SystemExit: the store holds the graph at another size (the fix: an empty schema, or that size).
    """
    from memora_rl.memory import open_store

    with open_store(url) as store:
        if GRAPH not in store.graph_ids():
            return False
        held = store.stats(GRAPH)["entries"]
    if held != entries:
        raise SystemExit(
            f"--store {store.location} holds graph {GRAPH!r} with {held} entries, not --entries {entries}: pass "
            f"--entries {held}, or a store without it (a new schema: CREATE SCHEMA s; then add "
            "?options=-csearch_path%3Ds to the URL)."
        )
    return True


def postgres_rows(url: str, rows_of: RowsOf, number: int, start_timeout_s: float, log_dir: Path) -> list[dict]:
    """Semantic retrieve rows from one serve-memory on `url`, then from it and a second replica on the same store.

    `number` is the first free measurement number (the second measurement takes the next one).
    """
    with Server([url], ["--policy", "semantic"], free_port(), start_timeout_s, log_dir) as one:
        rows = rows_of([one], ONE, number)
        with Server([url], ["--policy", "semantic"], free_port(), start_timeout_s, log_dir) as two:
            rows += rows_of([one, two], TWO, number + 1)
    return rows


COLUMNS = ("what", "clients", "p50 ms", "p95 ms", "req/s", "errors", "server CPU ms/req", "machine cores busy",
           "p50 / SQLite p50", "req/s / one PostgreSQL replica")  # fmt: skip


def backend_table(sqlite_rows: list[dict], pg_rows: list[dict]) -> tuple[ResultTable, list[str]]:
    """The SQLite and PostgreSQL rows side by side with their ratios, and the lines stating the targets."""
    rows = [{**row, "what": SQLITE} for row in sqlite_rows] + pg_rows
    by = {(row["what"], row["concurrency"]): row for row in rows}
    cells = []
    for row in rows:
        sqlite, one = by.get((SQLITE, row["concurrency"])), by.get((ONE, row["concurrency"]))
        cells.append([row["what"], row["concurrency"], f"{row['p50']:.1f}", f"{row['p95']:.1f}", f"{row['rps']:.1f}",
                      f"{row['errors']}/{row['n']}", f"{row['cpu_ms']:.1f}", f"{row['cores_busy']:.2f}",
                      _ratio(row["p50"], sqlite["p50"] if sqlite else None),
                      _ratio(row["rps"], one["rps"] if one else None) if row["what"] != SQLITE else ""])  # fmt: skip
    title = "serve-memory on SQLite and on PostgreSQL (one replica, two on one store): semantic retrieve"
    return result_table(title, COLUMNS, cells), target_lines(by)


def _ratio(value: float, over: float | None) -> str:
    """`value / over` to two places ("" without `over`)."""
    return f"{value / over:.2f}" if over else ""


def target_lines(by: dict[tuple[str, int], dict]) -> list[str]:
    """The issue's two targets at `TARGET_CLIENTS` clients (or the most measured), as measured."""
    levels = sorted({level for _, level in by})
    level = TARGET_CLIENTS if TARGET_CLIENTS in levels else levels[-1]
    sqlite, one, two = by[(SQLITE, level)], by[(ONE, level)], by[(TWO, level)]
    cores = os.cpu_count() or 1
    return [
        f"PostgreSQL semantic retrieve p50 at {level} clients: {one['p50']:.1f} ms, {one['p50'] / sqlite['p50']:.2f}x "
        f"SQLite's {sqlite['p50']:.1f} ms (target: at most 1.5x); errors {one['errors']}/{one['n']} on PostgreSQL, "
        f"{sqlite['errors']}/{sqlite['n']} on SQLite (target: none).",
        f"Two PostgreSQL replicas at {level} clients: {two['rps']:.1f} req/s, {two['rps'] / one['rps']:.2f}x one "
        f"replica's {one['rps']:.1f} (target: at least 1.5x on a machine with the cores). This machine has {cores} "
        f"cores: {one['cores_busy']:.2f} were busy with one replica, {two['cores_busy']:.2f} with two (serve-memory, "
        "PostgreSQL and the load generator share them), so a second replica can only add what is left idle.",
    ]
