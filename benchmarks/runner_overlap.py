"""Wall-clock gain of the batched runner's concurrency, with a policy that only waits (like an LLM server).

The runner tests assert that policy calls overlap by counting calls in flight; this script
measures what that overlap buys in seconds, which 2 shared cores make too noisy to assert in a
unit test. Each row plays the same scripted episodes at one concurrency; the ratio column is
the speed-up over concurrency 1 (ideal: the concurrency itself).

    python -m benchmarks.runner_overlap --episodes 16 --concurrency 1 8 --record runner-overlap
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

from benchmarks.common import add_record_option, markdown, result_table, save_record
from memora_rl.core.trajectory import ActionRecord, Trajectory
from memora_rl.data.records import Task
from memora_rl.policy.base import Policy
from memora_rl.policy.runner import run_episodes


class WaitingPolicy(Policy):
    """Answers `stop` after `delay_s` of sleeping: all of its time can overlap with other episodes."""

    name = "waiting"

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s

    async def act(self, messages: Any, info: Any) -> str:
        """Wait, then stop."""
        await asyncio.sleep(self.delay_s)
        return '{"action": "stop"}'


class TwoStepEnv:
    """Ends after two actions and returns a minimal trajectory (no store, no judge: only the runner is timed)."""

    last_search_s = 0.0
    config = None  # the default chat opener

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        """Start an episode on `options["task"]`."""
        self.task = (options or {})["task"]
        self.actions: list[str] = []
        return "observation", {"task_id": self.task.id, "step": 0}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        """Record the action; the second one ends the episode."""
        self.actions.append(action)
        done = len(self.actions) >= 2
        info: dict[str, Any] = {"task_id": self.task.id, "step": len(self.actions)}
        if done:
            records = [ActionRecord(step=i, text=a, kind="stop") for i, a in enumerate(self.actions)]
            info["trajectory"] = Trajectory(task=self.task, graph_id="c", actions=records, budget=4.0)
            info["reward_components"] = {"total": 0.0}
        return "observation", 0.0, done, False, info


def time_concurrency(episodes: int, concurrency: int, delay_s: float) -> float:
    """Seconds to play `episodes` two-step episodes at `concurrency`."""
    tasks = [
        Task(id=f"t{i}", conversation_id="c", question="q?", answer="a", category="single-hop") for i in range(episodes)
    ]
    started = time.perf_counter()
    asyncio.run(run_episodes(TwoStepEnv, tasks, WaitingPolicy(delay_s), concurrency=concurrency, progress=False))
    return time.perf_counter() - started


def main() -> None:
    """Print (and maybe record) one row per concurrency: seconds and speed-up over concurrency 1."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--delay-s", type=float, default=0.05, help="policy call time in seconds")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    add_record_option(parser)
    args = parser.parse_args()
    baseline_s = time_concurrency(args.episodes, 1, args.delay_s)
    rows = [{"concurrency": 1, "seconds": baseline_s, "speedup": 1.0}]
    for concurrency in (c for c in args.concurrency if c != 1):
        seconds = time_concurrency(args.episodes, concurrency, args.delay_s)
        rows.append({"concurrency": concurrency, "seconds": seconds, "speedup": baseline_s / seconds})
    title = f"Batched runner, {args.episodes} two-step episodes, policy calls of {args.delay_s:g} s that only wait"
    cells = [[row["concurrency"], f"{row['seconds']:.3f}", f"{row['speedup']:.2f}"] for row in rows]
    table = result_table(title, ["concurrency", "seconds", "speed-up over 1"], cells)
    print(markdown(table))
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2))
    save_record(args, "Wall-clock speed-up of the batched runner's concurrency over one episode at a time", [table])


if __name__ == "__main__":
    main()
