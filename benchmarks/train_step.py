"""GRPO optimizer-step cost: seconds and peak RSS per step, current trainer settings vs the new ones.

Each row runs real GRPO optimizer steps (TRL 1.16, SmolLM2-135M + LoRA r8, float32 on CPU or bf16 on CUDA:
reference pass, the importance-sampling pass of the vLLM backend unless `--no-importance-sampling`,
policy forward/backward, AdamW) in a fresh subprocess, so its peak RSS is its own. The
completions are replayed, not generated, so a row measures the trainer alone:

- `env` source (default): episodes played on the synthetic env's train tasks by a scripted,
  seeded policy (expand linked ids or refine; stop 10% of the time, 50% on the last turn), token-exact
  through the same `EpisodePlayer` as training, so prompt, observation and action sizes and
  the judge's rewards are real. `--compact` renders them with the compact layout.
- `synthetic` source: random token ids with the sizes given by `--prompt-tokens`,
  `--observation-tokens` and `--action-tokens` (no env, for quick sizing).

Rows: the current settings on today's quickstart workload (G=4, one turn: the baseline), the
new settings on the same workload (the ratio), and the new settings on the multi-turn target
workload (G=8 x 4 turns, target <= 60 s and <= 8 GB a step). `--rows baseline-target` adds the
current settings on the target workload (aborted at `--max-rss-gb`); `--rows` picks rows. The rows'
settings, workloads, episodes and worker process are `benchmarks.train_step_worker`'s; `--record NAME`
also writes the table and the ratios as the result record docs/results/NAME.json.

    python -m benchmarks.train_step                        # ~8 minutes here
    python -m benchmarks.train_step --generations 8 --turns 4 --steps 3 --json out.json
    python -m benchmarks.train_step --source synthetic --prompt-tokens 600 --observation-tokens 260
    python -m benchmarks.train_step --device cuda --generations 32   # on a GPU: peak GB is GPU memory
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.common import add_record_option, markdown, result_table, save_record, spawn
from benchmarks.train_step_worker import Row, Settings, Workload, worker

if TYPE_CHECKING:
    from memora_rl.experiments.records import ResultTable

MODULE = "benchmarks.train_step"
"""This script as a module: episodes and each row run in `python -m benchmarks.train_step --worker SPEC`."""
TARGET_S = 60.0
TARGET_GB = 8.0
TARGET_PREFIX = "target"

ROWS = {
    "baseline": ("current", "baseline"),
    "same": ("new", "baseline"),
    "target": ("new", "target"),
    "baseline-target": ("current", "target"),
}
"""Row name -> (settings, workload) it measures."""
CURRENT = Settings("current", None, False, False, fast_logprobs=False)
"""The trainer before issue 13: whole batch per pass, no checkpointing, TRL's padded logprob pass."""


def play(workload: Workload, args: argparse.Namespace, folder: Path) -> Path:
    """Record the episodes of `workload` (one subprocess) unless `folder` has them; returns the JSON file."""
    key = f"{args.source}-g{workload.generations}-t{workload.turns}-n{workload.max_new_tokens}"
    key += f"-c{workload.max_completion_tokens}-{'compact' if workload.compact else 'full'}-s{args.steps}-r{args.seed}"
    if args.source == "synthetic":
        key += f"-p{args.prompt_tokens}-o{args.observation_tokens}-a{args.action_tokens}"
    key += "".join(f"-{override}" for override in workload.env_overrides).replace("/", "_")
    out = folder / f"episodes-{key}.json"
    if out.is_file():
        return out
    sizes = {k: getattr(args, k) for k in ("prompt_tokens", "observation_tokens", "action_tokens")}
    spec = {"job": "play", "workload": asdict(workload), "steps": args.steps, "seed": args.seed,
            "source": args.source, "sizes": sizes, "out": str(out)}  # fmt: skip
    result = spawn(MODULE, spec, args.timeout_s)
    if result.get("error"):
        raise SystemExit(f"Could not record the {workload.name} episodes: {result['error']}")
    return out


def measure(settings: Settings, workload: Workload, episodes: Path, args: argparse.Namespace) -> Row:
    """One row in its own process (a failed or aborted one keeps its error)."""
    spec = {"job": "train", "settings": asdict(settings), "workload": asdict(workload), "episodes": str(episodes),
            "steps": args.steps, "seed": args.seed, "max_rss_gb": args.max_rss_gb, "threads": args.threads,
            "importance": args.importance_sampling, "device": args.device}  # fmt: skip
    print(f"... {settings.name} on {workload.name}", file=sys.stderr, flush=True)
    result = spawn(MODULE, spec, args.timeout_s)
    if result.get("error"):
        return Row(settings.name, workload.name, device=args.device, error=result["error"])
    return Row(**result)


COLUMNS = ("settings", "workload", "device", "s/step", "CPU s/step", "peak GB", "prompt tok", "completion tok",
           "policy tok", "turns")  # fmt: skip
"""The rows table's columns (a failed row gives its error in the s/step cell)."""


def rows_table(rows: list[Row]) -> ResultTable:
    """The measured rows: medians a step, peak memory and the tokens a step trained on."""
    cells: list[list[object]] = []
    for row in rows:
        if row.error:
            cells.append([row.settings, row.workload, row.device, row.error] + [""] * (len(COLUMNS) - 4))
            continue
        figures = [f"{row.step_s:.1f}", f"{row.step_cpu_s:.1f}", f"{row.peak_gb:.2f}"]
        figures += [f"{value:.0f}" for value in (row.prompt_tokens, row.completion_tokens, row.policy_tokens)]
        cells.append([row.settings, row.workload, row.device, *figures, f"{row.turns:.2f}"])
    return result_table("GRPO optimizer steps (medians a step)", COLUMNS, cells)


def summary_lines(rows: list[Row]) -> list[str]:
    """The new settings' ratios to the current ones on the same workload, then the target check."""
    lines = []
    done = {(row.settings, row.workload): row for row in rows if not row.error}
    for (settings, workload), row in done.items():
        current = done.get((CURRENT.name, workload))
        if settings != CURRENT.name and current is not None:
            cpu, peak = row.step_cpu_s / current.step_cpu_s, row.peak_gb / current.peak_gb
            lines.append(f"new / current on {workload}: time {row.step_s / current.step_s:.2f}x, "
                         f"CPU time {cpu:.2f}x, peak memory {peak:.2f}x")  # fmt: skip
    for (settings, workload), row in done.items():
        if settings != CURRENT.name and workload.startswith(TARGET_PREFIX):
            ok = row.step_s <= TARGET_S and row.peak_gb <= TARGET_GB
            quiet = f" ({row.quiet_s:.1f} s on an idle machine: CPU s / {row.threads} threads)"
            lines.append(f"new on {workload}: {row.step_s:.1f} s{quiet if row.device == 'cpu' else ' on CUDA'} and "
                         f"{row.peak_gb:.2f} GB a step "
                         f"(target <= {TARGET_S:g} s, <= {TARGET_GB:g} GB: {'met' if ok else 'NOT met'})")  # fmt: skip
    return lines


def parse_args() -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=2, help="optimizer steps per row (median reported)")
    parser.add_argument("--generations", type=int, default=8, help="G of the target workload")
    parser.add_argument("--turns", type=int, default=4, help="policy turns per episode of the target workload")
    parser.add_argument("--max-new-tokens", type=int, default=48, help="tokens per turn at most (target)")
    parser.add_argument("--max-completion-tokens", type=int, default=2048, help="completion tokens at most (target)")
    parser.add_argument("--compact", action=argparse.BooleanOptionalAction, default=True,
                        help="compact observations in the target workload")  # fmt: skip
    parser.add_argument("--env-override", action="append", default=[], metavar="KEY=VALUE",
                        help="synthetic env override for the target workload, e.g. env.frontier_limit=5")  # fmt: skip
    parser.add_argument("--baseline-generations", type=int, default=4, help="G of the baseline (quickstart) workload")
    parser.add_argument("--baseline-turns", type=int, default=1, help="turns of the baseline workload")
    parser.add_argument("--micro-batch", type=int, default=2, help="new settings: episodes per forward/backward")
    parser.add_argument("--share-prefix", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--checkpointing", action=argparse.BooleanOptionalAction, default=False)
    parser.add_argument("--every-n-layers", type=int, default=1, help="with --checkpointing")
    parser.add_argument("--importance-sampling", action=argparse.BooleanOptionalAction, default=True,
                        help="TRL's importance-sampling pass (on with the vLLM backend)")  # fmt: skip
    parser.add_argument("--rows", nargs="+", choices=list(ROWS), default=["baseline", "same", "target"],
                        help="baseline: current settings, quickstart workload; same: new settings on it; target: "
                        "new settings, target workload; baseline-target: current settings on target")  # fmt: skip
    parser.add_argument("--episodes-dir", type=Path, default=None, help="keep (and reuse) recorded episodes here")
    parser.add_argument("--source", choices=["env", "synthetic"], default="env")
    parser.add_argument("--prompt-tokens", type=int, default=600, help="synthetic source")
    parser.add_argument("--observation-tokens", type=int, default=260, help="synthetic source")
    parser.add_argument("--action-tokens", type=int, default=17, help="synthetic source")
    parser.add_argument("--max-rss-gb", type=float, default=16.0, help="abort a row whose RSS passes this")
    parser.add_argument("--timeout-s", type=float, default=1800.0, help="per subprocess")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="cpu",
                        help="where the rows train (auto: CUDA when visible); episodes play on the CPU")  # fmt: skip
    parser.add_argument("--threads", type=int, default=None, help="torch threads per row (default: torch's)")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    add_record_option(parser)
    return parser.parse_args()


def main() -> None:
    """Record the episodes, measure each row in its own process, print the table (and JSON, and the record)."""
    args = parse_args()
    if args.worker:
        worker(json.loads(args.worker))
        return
    from memora_rl.training.trainer import resolve_device

    args.device = resolve_device(args.device)
    baseline = Workload(
        f"baseline: G={args.baseline_generations} x {args.baseline_turns} turns, full",
        args.baseline_generations,
        args.baseline_turns,
        32,
        64 if args.baseline_turns == 1 else args.max_completion_tokens,
        compact=False,
    )
    layout = "compact" if args.compact else "full"
    target = Workload(
        f"{TARGET_PREFIX}: G={args.generations} x {args.turns} turns, {layout}"
        + "".join(f", {override}" for override in args.env_override),
        args.generations,
        args.turns,
        args.max_new_tokens,
        args.max_completion_tokens,
        args.compact,
        tuple(args.env_override),
    )
    workloads = {"baseline": baseline, "target": target}
    settings = {"current": CURRENT, "new": Settings("new", args.micro_batch, args.share_prefix, args.checkpointing,
                                                    args.every_n_layers)}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="memora-train-step-") as folder:
        episodes_dir = args.episodes_dir or Path(folder)
        episodes_dir.mkdir(parents=True, exist_ok=True)
        needed = {ROWS[name][1] for name in args.rows}
        episodes = {name: play(workloads[name], args, episodes_dir) for name in workloads if name in needed}
        rows = [measure(settings[s], workloads[w], episodes[w], args) for s, w in (ROWS[name] for name in args.rows)]
    table, notes = rows_table(rows), summary_lines(rows)
    print(markdown(table))
    if notes:
        print("\n" + "\n".join(notes))
    if args.json:
        extra = [{"step_s": row.step_s, "step_cpu_s": row.step_cpu_s, "quiet_s": row.quiet_s} for row in rows]
        args.json.write_text(
            json.dumps([{**asdict(row), **more} for row, more in zip(rows, extra, strict=True)], indent=1)
        )
    title = "GRPO optimizer-step cost (SmolLM2-135M + LoRA r8): seconds and peak memory a step, current vs new settings"
    save_record(args, title, [table], notes)


if __name__ == "__main__":
    main()
