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
current settings on the target workload (aborted at `--max-rss-gb`); `--rows` picks rows.

    python -m benchmarks.train_step                        # ~8 minutes here
    python -m benchmarks.train_step --generations 8 --turns 4 --steps 3 --json out.json
    python -m benchmarks.train_step --source synthetic --prompt-tokens 600 --observation-tokens 260
    python -m benchmarks.train_step --device cuda --generations 32   # on a GPU: peak GB is GPU memory
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.common import REPO_ROOT, peak_rss_gb, spawn

MODULE = "benchmarks.train_step"
"""This script as a module: episodes and each row run in `python -m benchmarks.train_step --worker SPEC`."""
QUICKSTART = REPO_ROOT / "configs" / "grpo" / "tiny.yaml"
MODEL = "smollm2-135m-instruct"
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


@dataclass(frozen=True)
class Workload:
    """What one optimizer step trains on: G episodes of one task, their turn and token limits, the layout."""

    name: str
    generations: int
    turns: int
    max_new_tokens: int
    max_completion_tokens: int
    compact: bool
    env_overrides: tuple[str, ...] = ()
    """`make_env` overrides of the synthetic env (e.g. `env.frontier_limit=5`)."""


@dataclass(frozen=True)
class Settings:
    """Trainer settings of one row (`memora_rl.training.trainer.StepSettings`, plus TRL's own logprob pass)."""

    name: str
    micro_batch_size: int | None
    share_prompt_prefix: bool
    gradient_checkpointing: bool
    checkpoint_every_n_layers: int = 1
    fast_logprobs: bool = True


CURRENT = Settings("current", None, False, False, fast_logprobs=False)
"""The trainer before issue 13: whole batch per pass, no checkpointing, TRL's padded logprob pass."""


@dataclass
class Row:
    """One measured configuration."""

    settings: str
    workload: str
    steps_s: list[float] = field(default_factory=list)
    steps_cpu_s: list[float] = field(default_factory=list)
    """CPU seconds of the process (all threads) per step: steadier than wall time on a shared machine."""
    threads: int = 1
    device: str = "cpu"
    peak_gb: float = 0.0
    """Peak RSS of the process on CPU; peak memory torch allocated on the GPU on CUDA."""
    loaded_gb: float = 0.0
    prompt_tokens: float = 0.0
    completion_tokens: float = 0.0
    policy_tokens: float = 0.0
    turns: float = 0.0
    error: str | None = None

    @property
    def step_s(self) -> float:
        """Median seconds per optimizer step."""
        return statistics.median(self.steps_s) if self.steps_s else float("nan")

    @property
    def step_cpu_s(self) -> float:
        """Median CPU seconds per optimizer step."""
        return statistics.median(self.steps_cpu_s) if self.steps_cpu_s else float("nan")

    @property
    def quiet_s(self) -> float:
        """Wall seconds per step on an otherwise idle machine, estimated as CPU seconds / torch threads."""
        return self.step_cpu_s / self.threads


# ---- episodes ----------------------------------------------------------------------------------


class ScriptedGenerator:
    """A seeded stand-in for the policy: expand linked ids, refine or stop, so lengths and rewards vary."""

    def __init__(self, tokenizer: Any, stop_id: int, turns: int, seed: int) -> None:
        self.tokenizer = tokenizer
        self.stop_id = stop_id
        self.turns = turns
        self.random = random.Random(seed)

    def generate(self, prompts: list[list[int]], max_new_tokens: int, temperature: float) -> list[Any]:
        """One action per prompt, tokenized and closed with the end-of-turn id."""
        from memora_rl.training.generation import Generated

        results = []
        for ids in prompts:
            text = self.tokenizer.decode(ids)
            turn = text.count("<|im_start|>assistant") - 3  # the few-shot turns and the generation prompt
            action = self._action(text.rsplit("<|im_start|>user", 1)[-1], last=turn >= self.turns - 1)
            tokens = [*self.tokenizer.encode(action, add_special_tokens=False), self.stop_id][:max_new_tokens]
            reason = "stop" if tokens[-1] == self.stop_id else "length"
            results.append(Generated(tokens, [-0.5] * len(tokens), reason))
        return results

    def _action(self, observation: str, last: bool) -> str:
        """Stop (half the time on the last turn, 10% before); else expand one or two linked ids (70%) or refine."""
        linked = re.split(r"^(?:Frontier|Linked)", observation, flags=re.M)[-1]
        ids = re.findall(r"^\[?(e\d+)\]?\s", linked, flags=re.M)
        if self.random.random() < (0.5 if last else 0.1):
            return '{"action": "stop"}'
        if ids and self.random.random() < 0.7:
            chosen = self.random.sample(ids, k=min(len(ids), self.random.choice([1, 2])))
            return json.dumps({"action": "expand", "ids": chosen})
        words = re.findall(r"[A-Za-z]+", observation)
        return json.dumps({"action": "refine", "query": " ".join(self.random.sample(words, k=min(4, len(words))))})


def env_episodes(workload: Workload, steps: int, seed: int) -> dict[str, Any]:
    """Play `steps` groups of G scripted episodes on distinct synthetic train tasks; ids, masks, rewards."""
    from memora_rl.env.registry import make_env
    from memora_rl.llm.registry import load_tokenizer
    from memora_rl.policy.chat import chat_opener
    from memora_rl.training.rewards import judge_weights
    from memora_rl.training.rollout import EpisodePlayer, RolloutSettings, end_of_turn_ids

    tokenizer = load_tokenizer(MODEL)
    overrides = [f"env.compact={str(workload.compact).lower()}", *workload.env_overrides]
    env, tasks = make_env("synthetic", split="train", overrides=overrides, tokenizer=tokenizer)
    limits = RolloutSettings(workload.turns, workload.max_new_tokens, workload.max_completion_tokens)
    player = EpisodePlayer(tokenizer, chat_opener(env.config), limits)
    stop_id = end_of_turn_ids(tokenizer, player.turn_format)[0]
    groups = []
    for step in range(steps):
        task = tasks[(seed + step) % len(tasks)]
        generator = ScriptedGenerator(tokenizer, stop_id, workload.turns, seed * 1000 + step)
        episodes = [player.play([player.start(env, task)], generator, 1.0)[0] for _ in range(workload.generations)]
        groups.append([_episode_record(episode) for episode in episodes])
    return {"weights": judge_weights(env.config.judge), "groups": groups}


def _episode_record(episode: Any) -> dict[str, Any]:
    """The parts of a played episode the trainer needs, as JSON."""
    return {
        "task_id": episode.task.id,
        "prompt_ids": episode.prompt_ids,
        "completion_ids": episode.completion_ids,
        "logprobs": episode.logprobs,
        "env_mask": episode.env_mask,
        "reward_components": episode.reward_components,
        "turns": len(episode.actions),
    }


def synthetic_episodes(workload: Workload, steps: int, seed: int, sizes: argparse.Namespace) -> dict[str, Any]:
    """Random-id episodes of the given sizes (prompt, then turns of action + observation), random rewards."""
    rng = random.Random(seed)
    groups = []
    for step in range(steps):
        prompt = [rng.randrange(100, 49_000) for _ in range(sizes.prompt_tokens)]
        group = []
        for _ in range(workload.generations):
            completion, mask = [], []
            for turn in range(workload.turns):
                completion += [rng.randrange(100, 49_000) for _ in range(sizes.action_tokens)]
                mask += [1] * sizes.action_tokens
                if turn < workload.turns - 1:
                    completion += [rng.randrange(100, 49_000) for _ in range(sizes.observation_tokens)]
                    mask += [0] * sizes.observation_tokens
            reward = {"correctness": float(rng.random() < 0.5), "total": 0.0}
            group.append({"task_id": f"s{step}", "prompt_ids": prompt, "completion_ids": completion,
                          "logprobs": [-0.5] * len(completion), "env_mask": mask,
                          "reward_components": reward, "turns": workload.turns})  # fmt: skip
        groups.append(group)
    return {"weights": {"correctness": 1.0, "total": 0.0}, "groups": groups}


# ---- one row (worker process) ------------------------------------------------------------------


class ReplayRollout:
    """TRL `rollout_func` that serves the recorded episodes of the requested task, in order."""

    def __init__(self, groups: list[list[dict[str, Any]]]) -> None:
        self.pending = {f"[{group[0]['task_id']}/{index}]": list(group) for index, group in enumerate(groups)}
        self.served: list[list[dict[str, Any]]] = []

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        """The next recorded episode for each (group-repeated) prompt."""
        episodes = [self.pending[str(prompt)].pop(0) for prompt in prompts]
        self.served.append(episodes)
        keys = ("prompt_ids", "completion_ids", "logprobs", "env_mask", "reward_components")
        return {key: [episode[key] for episode in episodes] for key in keys}


def rss_gb() -> float:
    """Resident set size of this process now, in GB (Linux /proc)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1e6
    return 0.0


def guard_memory(limit_gb: float) -> None:
    """Exit the worker (status 3) once its RSS passes `limit_gb`, before it starves a shared machine."""

    def watch() -> None:
        while True:
            if rss_gb() > limit_gb:
                print(json.dumps({"error": f"RSS passed {limit_gb:g} GB"}), flush=True)
                os._exit(3)
            time.sleep(0.2)

    threading.Thread(target=watch, daemon=True).start()


def run_row(
    settings: Settings,
    workload: Workload,
    episodes: dict[str, Any],
    steps: int,
    seed: int,
    importance: bool = True,
    device: str = "cpu",
) -> Row:
    """Train `steps` optimizer steps on the recorded episodes with `settings`; time and RSS per step.

    `importance`: as with the vLLM backend (the default), TRL's importance-sampling correction is
    on, which costs one more no-gradient policy pass per step (`memora_rl.training.importance`).
    """
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback

    from memora_rl.config import load_config
    from memora_rl.training.config import TrainConfig
    from memora_rl.training.importance import enable_rollout_importance_sampling
    from memora_rl.training.rewards import make_component_rewards
    from memora_rl.training.trainer import StepSettings, build_grpo_config, build_policy, build_trainer

    row = Row(settings.name, workload.name, threads=torch.get_num_threads(), device=device)
    groups = episodes["groups"][:steps]
    rollout = ReplayRollout(groups)
    with tempfile.TemporaryDirectory(prefix="memora-train-step-") as root:
        overrides = [
            f"grpo.num_generations={workload.generations}",
            f"grpo.per_device_batch_size={workload.generations}",
            f"grpo.max_steps={steps}",
            f"grpo.max_turns={workload.turns}",
            f"grpo.max_new_tokens={workload.max_new_tokens}",
            f"grpo.max_completion_tokens={workload.max_completion_tokens}",
            f"output_root={root}",
            f"seed={seed}",
            "save_steps=100000",
            "logging.wandb=disabled",
            f"backend={'vllm' if importance else 'transformers'}",  # no server starts; transformers: no IS pass
        ]
        config = load_config(TrainConfig, QUICKSTART, overrides)
        model, tokenizer, lora = build_policy(config, device)
        step = StepSettings(settings.micro_batch_size, settings.share_prompt_prefix,
                            settings.gradient_checkpointing, settings.checkpoint_every_n_layers)  # fmt: skip
        funcs, weights = make_component_rewards(episodes["weights"])
        args = build_grpo_config(config, weights, device, step)
        args.shuffle_dataset = False
        dataset = Dataset.from_list([{"prompt": prompt} for prompt in rollout.pending])

        class Timer(TrainerCallback):
            def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                self.started, self.started_cpu = time.perf_counter(), time.process_time()

            def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                row.steps_s.append(time.perf_counter() - self.started)
                row.steps_cpu_s.append(time.process_time() - self.started_cpu)

        trainer = build_trainer(
            model, lora, tokenizer, args, dataset, funcs, rollout, [Timer()], step.share_prompt_prefix
        )
        trainer.fast_logprobs = settings.fast_logprobs
        if importance:
            enable_rollout_importance_sampling(trainer)
        row.loaded_gb = rss_gb()
        trainer.train()
    row.peak_gb = torch.cuda.max_memory_allocated() / 1e9 if device == "cuda" else peak_rss_gb()
    served = [episode for batch in rollout.served for episode in batch]
    per_step = len(served) / max(1, len(rollout.served))
    row.prompt_tokens = sum(len(e["prompt_ids"]) for e in served) / len(served) * per_step
    row.completion_tokens = sum(len(e["completion_ids"]) for e in served) / len(served) * per_step
    row.policy_tokens = sum(sum(e["env_mask"]) for e in served) / len(served) * per_step
    row.turns = statistics.fmean(e["turns"] for e in served)
    return row


def worker(spec: dict[str, Any]) -> None:
    """Subprocess entry: play episodes, or measure one row; print one JSON line."""
    import torch

    torch.manual_seed(spec["seed"])
    if spec.get("threads"):
        torch.set_num_threads(spec["threads"])
    if spec["job"] == "play":
        workload = Workload(**{**spec["workload"], "env_overrides": tuple(spec["workload"]["env_overrides"])})
        if spec["source"] == "env":
            result = env_episodes(workload, spec["steps"], spec["seed"])
        else:
            result = synthetic_episodes(workload, spec["steps"], spec["seed"], argparse.Namespace(**spec["sizes"]))
        Path(spec["out"]).write_text(json.dumps(result))
        print(json.dumps({"ok": True}))
        return
    guard_memory(spec["max_rss_gb"])
    episodes = json.loads(Path(spec["episodes"]).read_text())
    settings, workload = Settings(**spec["settings"]), Workload(**spec["workload"])
    row = run_row(settings, workload, episodes, spec["steps"], spec["seed"], spec["importance"], spec["device"])
    print(json.dumps(asdict(row)))


# ---- parent ------------------------------------------------------------------------------------


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


def print_table(rows: list[Row]) -> None:
    """The rows, then the new settings' ratios to the current ones on the same workload, and the target check."""
    header = ("settings", "workload", "device", "s/step", "CPU s/step", "peak GB", "prompt tok", "completion tok",
              "policy tok", "turns")  # fmt: skip
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        if row.error:
            print(f"| {row.settings} | {row.workload} | {row.device} | {row.error} |" + " |" * (len(header) - 4))
            continue
        figures = (row.step_s, row.step_cpu_s, row.peak_gb, row.prompt_tokens, row.completion_tokens,
                   row.policy_tokens)  # fmt: skip
        cells = [f"{value:.1f}" for value in figures[:2]] + [f"{figures[2]:.2f}"] + [f"{v:.0f}" for v in figures[3:]]
        print(f"| {row.settings} | {row.workload} | {row.device} | " + " | ".join(cells) + f" | {row.turns:.2f} |")
    done = {(row.settings, row.workload): row for row in rows if not row.error}
    for (settings, workload), row in done.items():
        current = done.get((CURRENT.name, workload))
        if settings != CURRENT.name and current is not None:
            cpu, peak = row.step_cpu_s / current.step_cpu_s, row.peak_gb / current.peak_gb
            print(f"\nnew / current on {workload}: time {row.step_s / current.step_s:.2f}x, "
                  f"CPU time {cpu:.2f}x, peak memory {peak:.2f}x")  # fmt: skip
    for (settings, workload), row in done.items():
        if settings != CURRENT.name and workload.startswith(TARGET_PREFIX):
            ok = row.step_s <= TARGET_S and row.peak_gb <= TARGET_GB
            quiet = f" ({row.quiet_s:.1f} s on an idle machine: CPU s / {row.threads} threads)"
            print(f"new on {workload}: {row.step_s:.1f} s{quiet if row.device == 'cpu' else ' on CUDA'} and "
                  f"{row.peak_gb:.2f} GB a step "
                  f"(target <= {TARGET_S:g} s, <= {TARGET_GB:g} GB: {'met' if ok else 'NOT met'})")  # fmt: skip


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
    return parser.parse_args()


def main() -> None:
    """Record the episodes, measure each row in its own process, print the table (and JSON)."""
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
    print_table(rows)
    if args.json:
        extra = [{"step_s": row.step_s, "step_cpu_s": row.step_cpu_s, "quiet_s": row.quiet_s} for row in rows]
        args.json.write_text(
            json.dumps([{**asdict(row), **more} for row, more in zip(rows, extra, strict=True)], indent=1)
        )


if __name__ == "__main__":
    main()
