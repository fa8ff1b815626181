"""What the benchmark scripts share: synthetic graphs, percentiles, peak memory, workers, result records.

Every script imports it as `benchmarks.common`, so the scripts run as modules from the repo root
(`python -m benchmarks.graph_search ...`), and a script's worker processes (`spawn`) run the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from rich.table import Table

    from memora_rl.experiments.records import ResultTable

REPO_ROOT = Path(__file__).resolve().parents[1]
GRAPH = "bench"
"""The graph id `bulk_load` fills by default."""
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima",
         "mike", "november", "oscar", "papa"]  # fmt: skip
"""The vocabulary of the synthetic entries' texts (and of the questions asked about them)."""


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


def word_texts(number: int) -> tuple[str, str]:
    """Entry `number`'s (abstraction, value) texts, made of `WORDS`.

    >>> word_texts(17)
    ('bravo bravo topic 17', 'charlie value 17 about foxtrot')
    """
    abstraction = f"{WORDS[number % 16]} {WORDS[(number // 16) % 16]} topic {number % 997}"
    return abstraction, f"{WORDS[(number // 7) % 16]} value {number} about {WORDS[(number // 3) % 16]}"


@dataclass
class SyntheticGraph:
    """The vectors `bulk_load` wrote (for brute-force baselines) and how long the store took."""

    abstractions: np.ndarray
    """(size, dim) unit rows, entry i in row i."""
    values: np.ndarray
    """(size, dim) unit rows."""
    anchors: np.ndarray
    """(pool, dim) unit rows of the anchors `anchor 0` ... `anchor <pool - 1>`."""
    links: np.ndarray
    """(size, 3) anchor numbers of each entry (a number may repeat)."""
    seconds: float
    """Wall seconds of the store writes (the vectors are drawn before)."""


def bulk_load(
    store: Any,
    size: int,
    dim: int,
    rng: np.random.Generator,
    *,
    graph: str = GRAPH,
    pool: int | None = None,
    value_noise: float | None = 1.0,
    texts: Callable[[int], tuple[str, str]] = word_texts,
    chunk: int = 50_000,
) -> SyntheticGraph:
    """Fill `graph` of `store` with `size` entries of random unit vectors, `chunk` entries a transaction.

    No builder and no LLM: each entry has `texts(i)`, an abstraction vector, a value vector near it
    (`value_noise`, see `near`; None: an independent one), ~3 anchors drawn from a pool of `pool`
    (default max(1000, size // 10)) and the source turn `D<i // 100 + 1>:<i % 100 + 1>`.
    """
    from memora_rl.memory import EntryCandidate

    pool = pool or max(1000, size // 10)
    abstractions = unit_rows(rng, size, dim)
    values = unit_rows(rng, size, dim) if value_noise is None else near(rng, abstractions, value_noise)
    anchors = unit_rows(rng, pool, dim)
    links = rng.integers(0, pool, size=(size, 3))
    start = time.perf_counter()
    for low in range(0, size, chunk):
        high = min(size, low + chunk)
        candidates = []
        for number in range(low, high):
            abstraction, value = texts(number)
            candidates.append(
                EntryCandidate(
                    abstraction=abstraction,
                    value=value,
                    source_turn_ids=[f"D{number // 100 + 1}:{number % 100 + 1}"],
                    anchors=[f"anchor {a}" for a in links[number]],
                )
            )
        used = {text: anchors[int(text.split()[1])] for c in candidates for text in c.anchors}
        store.add_entries_bulk(graph, candidates, abstractions[low:high], values[low:high], used)
    return SyntheticGraph(abstractions, values, anchors, links, time.perf_counter() - start)


def percentile_ms(samples_s: list[float], share: float) -> float:
    """A percentile of latencies in seconds, in milliseconds (nan when there are no samples).

    >>> percentile_ms([0.001, 0.002, 0.003], 50)
    2.0
    """
    return float(np.percentile(np.asarray(samples_s) * 1e3, share)) if len(samples_s) else float("nan")


def percentiles(samples_s: list[float]) -> tuple[float, float]:
    """(p50, p95) of latencies in seconds, in milliseconds."""
    return percentile_ms(samples_s, 50), percentile_ms(samples_s, 95)


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB (Linux reports it in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def spawn(module: str, spec: dict[str, Any], timeout_s: float | None = None) -> dict[str, Any]:
    """Run `python -m <module> --worker <spec as JSON>` in a fresh process (so its peak RSS is its own).

    The worker inherits this process's working directory and environment, so it imports `benchmarks`
    the way this process did. Its last JSON line on stdout is the result; a worker that fails or
    runs past `timeout_s` gives `{"error": ...}` instead.
    """
    env = {**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE"), "WANDB_MODE": "disabled"}
    command = [sys.executable, "-m", module, "--worker", json.dumps(spec)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=env, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout_s:g} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {"error": f"exit {done.returncode}: {done.stderr.strip()[-600:]}"}
    return json.loads(lines[-1])


def add_record_option(parser: argparse.ArgumentParser) -> None:
    """`--record NAME` (and `--results-dir`): also write the script's tables as a result record."""
    record_help = "also write the tables as the result record docs/results/NAME.json (`make results-doc` renders it)"
    parser.add_argument("--record", metavar="NAME", default=None, help=record_help)
    results_help = "where --record writes (default: the repository's docs/results)"
    parser.add_argument("--results-dir", type=Path, default=REPO_ROOT / "docs" / "results", help=results_help)


def result_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> ResultTable:
    """A record's table from columns and rows of cells (each cell as `str` gives it)."""
    from memora_rl.experiments.records import ResultTable

    return ResultTable(title=title, columns=list(columns), rows=[[str(cell) for cell in row] for row in rows])


def from_rich(table: Table) -> ResultTable:
    """A printed rich table as a record's table: its title, column headers and cells as plain text."""
    from rich.text import Text

    def plain(cell: object) -> str:
        return cell.plain if isinstance(cell, Text) else Text.from_markup(str(cell)).plain  # no [bold] in a record

    columns = [plain(column.header) for column in table.columns]
    cells = [[plain(cell) for cell in column.cells] for column in table.columns]
    return result_table(plain(table.title or ""), columns, list(zip(*cells, strict=True)))


def markdown(table: ResultTable) -> str:
    """A record's table as Markdown lines (header, rule, rows), as the scripts print it.

    >>> print(markdown(result_table("t", ["a", "b"], [[1, 2.5]])))
    | a | b |
    |---|---|
    | 1 | 2.5 |
    """
    from memora_rl.experiments.records import table_lines

    return "\n".join(table_lines(table))


def benchmark_command(argv: Sequence[str] | None = None) -> str:
    """The command line that started this script, as `python -m benchmarks.NAME ARGS` from the repo root.

    `argv` are the arguments `main` parsed when it was called with them (default: the process's).
    """
    script = Path(sys.argv[0]).resolve()
    module = ".".join(script.relative_to(REPO_ROOT).with_suffix("").parts) if script.is_relative_to(REPO_ROOT) else None
    return shlex.join(["python", "-m", module or script.stem, *(sys.argv[1:] if argv is None else argv)])


def save_record(
    args: argparse.Namespace,
    title: str,
    tables: Sequence[ResultTable],
    notes: Sequence[str] = (),
    split: str | None = None,
    argv: Sequence[str] | None = None,
) -> Path | None:
    """With `--record NAME`, write `tables` (and `notes`) as the result record NAME; returns its path, else None.

    `split` is the task split the figures are on, if any; `argv` the arguments `main` was called with.
    """
    if args.record is None:
        return None
    from memora_rl.experiments.records import new_record, write_record

    record = new_record(args.record, title, benchmark_command(argv), tables, split=split, notes=list(notes))
    path = write_record(record, args.results_dir)
    print(f"result record written: {path}", file=sys.stderr)
    return path
