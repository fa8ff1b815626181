"""What GRPO can see: how often a policy's sampled walks find evidence its greedy walk misses.

GRPO learns from the contrast between the sampled walks of one task. Where the greedy walk already
reaches full recall, a sample can only tie or lose on recall; where it misses, a sample that finds
more points away from the greedy choice. This plays every task of a split once greedily and
`--samples` times sampled (each with its own seed) and prints, per task category: the greedy
recall, the mean sampled recall, the best of the samples, and on how many of the tasks greedy
misses some sample beats it. Run it on a warm start to see whether GRPO has anything to find.

    memora-rl experiment exploration --model runs/learning-1202j/hard-s0/warmstart/model --samples 8 \
        --temperature 1.0 -o env.compact=true -o env.few_shot=false -o env.refine_new_entries=true \
        -o env.refine_top_k=1

`--model` is a model folder or registry name served by a vLLM server started here (or, with
`--server-url`, the served `--served-model` of a running one). The table goes to stdout and
`--out` (JSON with every task's recalls).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from statistics import fmean
from typing import Any

logger = logging.getLogger(__name__)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The experiment's options."""
    parser = argparse.ArgumentParser(
        prog="memora-rl experiment exploration",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--model", default="smollm2-135m-instruct", help="Model folder or registry name to serve.")
    parser.add_argument("--server-url", default=None, help="A running vLLM server (.../v1) instead of starting one.")
    parser.add_argument("--served-model", default=None, help="With --server-url: the served model name.")
    parser.add_argument("--env", default="synthetic-hard", help="Env name (memora-rl env list).")
    parser.add_argument("--split", default="train", help="Task split (GRPO samples the train split).")
    parser.add_argument("-o", "--set", dest="overrides", action="append", default=[], help="Env override key=value.")
    parser.add_argument("--limit", type=int, default=None, help="A seeded sample of N tasks (None: all).")
    parser.add_argument("--samples", type=int, default=8, help="Sampled walks a task (GRPO's group size).")
    parser.add_argument("--temperature", type=float, default=1.0, help="Sampling temperature of the samples.")
    parser.add_argument("--max-new-tokens", type=int, default=40, help="Tokens an action.")
    parser.add_argument("--concurrency", type=int, default=8, help="Episodes played at once.")
    parser.add_argument("--out", type=Path, default=Path("runs/exploration.json"), help="JSON with every recall.")
    args = parser.parse_args(argv)
    if args.samples < 1:
        parser.error(f"--samples {args.samples}: play at least one sampled walk a task.")
    if args.server_url and not args.served_model:
        parser.error("--server-url needs --served-model, the name the server serves the policy under.")
    return args


def exploration_rows(
    greedy: dict[str, float], samples: dict[str, list[float]], categories: dict[str, str]
) -> list[dict[str, Any]]:
    """One row per category and one for all tasks: greedy, mean sampled and best-of-N recall, and the misses.

    `beaten` counts the tasks greedy leaves below full recall on which some sample reaches more.

    >>> rows = exploration_rows({"a": 1.0, "b": 0.0}, {"a": [1.0, 0.0], "b": [0.0, 1.0]}, {"a": "x", "b": "x"})
    >>> rows[-1]["greedy"], rows[-1]["sampled"], rows[-1]["best"], rows[-1]["missed"], rows[-1]["beaten"]
    (0.5, 0.5, 1.0, 1, 1)
    """
    groups: dict[str, list[str]] = {}
    for task_id in greedy:
        groups.setdefault(categories[task_id], []).append(task_id)
    rows = []
    for name, ids in [*sorted(groups.items()), ("all", list(greedy))]:
        missed = [task_id for task_id in ids if greedy[task_id] < 1.0]
        rows.append(
            {
                "category": name,
                "tasks": len(ids),
                "greedy": fmean(greedy[task_id] for task_id in ids),
                "sampled": fmean(fmean(samples[task_id]) for task_id in ids),
                "best": fmean(max(samples[task_id]) for task_id in ids),
                "missed": len(missed),
                "beaten": sum(max(samples[task_id]) > greedy[task_id] for task_id in missed),
            }
        )
    return rows


def format_table(rows: Sequence[dict[str, Any]], samples: int) -> str:
    """The rows as a markdown table, with best-of-N over greedy as the ratio against the baseline (greedy)."""
    lines = [
        f"| category | tasks | greedy recall | sampled recall | best of {samples} | best / greedy | "
        "greedy < 1 | a sample beats greedy there |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        ratio = row["best"] / row["greedy"] if row["greedy"] else float("nan")
        lines.append(
            f"| {row['category']} | {row['tasks']} | {row['greedy']:.3f} | {row['sampled']:.3f} | {row['best']:.3f} "
            f"| {ratio:.2f}x | {row['missed']} | {row['beaten']} |"
        )
    return "\n".join(lines)


@contextlib.contextmanager
def endpoint(args: argparse.Namespace) -> Iterator[tuple[str, str]]:
    """(`/v1` URL, served name): `--server-url`, or a float32 vLLM server of `--model` started for the run."""
    if args.server_url:
        yield args.server_url, args.served_model
        return
    from memora_rl.llm.server import ServerConfig, VLLMServer

    with VLLMServer(ServerConfig(model=args.model, dtype="float32", enable_lora=False)) as server:
        yield server.base_url, server.model


def play(
    args: argparse.Namespace,
    tasks: list[Any],
    make_env: Any,
    max_turns: int,
    base_url: str,
    model: str,
    seed: int | None,
) -> dict[str, float]:
    """Evidence recall per task id of one pass over `tasks` (greedy when `seed` is None)."""
    from memora_rl.policy.llm_policy import LLMPolicyConfig, make_llm_policy
    from memora_rl.training.task_focus import recall_per_task

    config = LLMPolicyConfig(
        backend="server",
        model=model,
        base_url=base_url,
        max_new_tokens=args.max_new_tokens,
        temperature=0.0 if seed is None else args.temperature,
        seed=seed,
    )
    return recall_per_task(make_env, tasks, make_llm_policy(config), max_turns, args.concurrency, progress=False)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Play greedy and sampled passes and write the JSON; returns what was written (`table`: the Markdown)."""
    from rich.progress import track

    from memora_rl.data.sample import sample_tasks
    from memora_rl.env.registry import make_env

    args = parse_args(argv)
    env, all_tasks = make_env(args.env, split=args.split, overrides=args.overrides)
    tasks = sample_tasks(all_tasks, args.limit)

    def factory() -> Any:
        return make_env(args.env, split=args.split, overrides=args.overrides)[0]

    with endpoint(args) as (base_url, model):
        greedy = play(args, tasks, factory, env.config.max_steps, base_url, model, None)
        passes = [
            play(args, tasks, factory, env.config.max_steps, base_url, model, 1000 + index)
            for index in track(range(args.samples), description="sampled passes")
        ]
    samples = {task.id: [one[task.id] for one in passes] for task in tasks}
    rows = exploration_rows(greedy, samples, {task.id: task.category for task in tasks})
    title = f"{args.env} {args.split}: {len(tasks)} tasks, {args.model}, {args.samples} samples at T={args.temperature}"
    report = {
        "table": f"{title}\n{format_table(rows, args.samples)}",
        "args": {k: str(v) for k, v in vars(args).items()},
        "rows": rows,
        "greedy": greedy,
        "samples": samples,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1))
    return report
