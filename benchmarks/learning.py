"""Learning benchmark: does GRPO training beat the base policy on held-out synthetic tasks?

For each seed: train the quickstart config (SmolLM2-135M + LoRA, synthetic env) for N steps,
then play the held-out split with the base model (adapter disabled) and with the trained
adapter, and report mean judge reward, evidence recall, valid-action rate and mean steps.
The margin (trained - base) is compared with the seed-to-seed spread.

    python benchmarks/learning.py --steps 20 --seeds 0 1 --backend vllm
    python benchmarks/learning.py --steps 4 --seeds 0 1 --backend transformers --eval-tasks 8   # quick look
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from memora_rl.config import load_config
from memora_rl.training.config import TrainConfig
from memora_rl.training.generation import TransformersGenerator
from memora_rl.training.rollout import Episode, EpisodePlayer, RolloutSettings, end_of_turn_ids
from memora_rl.training.run import run

REPO_ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = REPO_ROOT / "configs" / "grpo" / "quickstart.yaml"
METRICS = ("reward", "evidence_recall", "valid_action_rate", "steps")


def episode_metrics(episodes: list[Episode]) -> dict[str, float]:
    """Means over episodes of the judge total, evidence recall, share of valid actions and steps."""
    components = [episode.reward_components for episode in episodes]
    return {
        "reward": statistics.fmean(c["total"] for c in components),
        "evidence_recall": statistics.fmean(c["evidence_recall"] for c in components),
        "valid_action_rate": statistics.fmean(c["format"] for c in components),
        "steps": statistics.fmean(c["steps"] for c in components),
    }


def evaluate(
    config: TrainConfig, adapter_dir: Path, eval_split: str, eval_tasks: int, seed: int, temperatures: list[float]
) -> dict[str, Any]:
    """Play the held-out tasks with the base model and with the trained adapter (same sampling seed).

    Temperature 0 is greedy, as `memora-rl eval` plays a policy; the training temperature shows the
    sampled behaviour GRPO optimises.
    """
    import torch
    from peft import PeftModel

    from memora_rl.env.registry import make_env
    from memora_rl.llm.registry import load_causal_lm, load_tokenizer
    from memora_rl.policy.render import initial_messages

    tokenizer = load_tokenizer(config.model)
    model = PeftModel.from_pretrained(load_causal_lm(config.model, dtype="float32"), str(adapter_dir))
    env, tasks = make_env(config.env, split=eval_split, tokenizer=tokenizer)
    tasks = tasks[:eval_tasks]
    grpo = config.grpo
    player = EpisodePlayer(
        tokenizer, initial_messages, RolloutSettings(grpo.max_turns, grpo.max_new_tokens, grpo.max_completion_tokens)
    )
    generator = TransformersGenerator(model, tokenizer, end_of_turn_ids(tokenizer, player.turn_format))
    envs = [env] + [make_env(config.env, split=eval_split, tokenizer=tokenizer)[0] for _ in range(3)]
    results: dict[str, Any] = {}
    for temperature in temperatures:
        results[f"T={temperature:g}"] = {}
        for label in ("base", "trained"):
            torch.manual_seed(seed)
            episodes: list[Episode] = []
            for start in range(0, len(tasks), len(envs)):
                batch = [player.start(e, t) for e, t in zip(envs, tasks[start : start + len(envs)], strict=False)]
                if label == "base":
                    with model.disable_adapter():
                        episodes += player.play(batch, generator, temperature)
                else:
                    episodes += player.play(batch, generator, temperature)
            results[f"T={temperature:g}"][label] = episode_metrics(episodes)
    return results


def train_and_evaluate(args: argparse.Namespace, seed: int, root: Path) -> dict[str, Any]:
    """One seed: train, then evaluate base vs trained."""
    overrides = [
        f"seed={seed}",
        f"run_name=learning-s{seed}",
        f"output_root={root}",
        f"grpo.max_steps={args.steps}",
        f"backend={args.backend}",
        "logging.wandb=disabled",
        "save_steps=1000",
        *args.overrides,
    ]
    if args.server_url:
        overrides.append(f"server.url={args.server_url}")
    config = load_config(TrainConfig, args.config, overrides)
    started = time.perf_counter()
    result = run(config)
    train_s = time.perf_counter() - started
    steps = [json.loads(line) for line in result.metrics_path.read_text().splitlines()]
    evaluation = evaluate(config, result.adapter_dir, args.eval_split, args.eval_tasks, seed, args.eval_temperatures)
    return {
        "seed": seed,
        "train_s": round(train_s, 1),
        "step_s_mean": round(statistics.fmean(r["time/step_s"] for r in steps), 2),
        "train_reward_first": steps[0].get("reward/total"),
        "train_reward_last": steps[-1].get("reward/total"),
        "eval": evaluation,
    }


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """Per-seed rows plus mean and seed spread (max - min) of base, trained and margin."""
    lines = ["| seed | policy | " + " | ".join(METRICS) + " |", "|---|---|" + "---|" * len(METRICS)]
    for row in rows:
        for label in ("base", "trained"):
            lines.append(f"| {row['seed']} | {label} | " + " | ".join(f"{row[label][m]:.3f}" for m in METRICS) + " |")
    for label in ("base", "trained"):
        means = [statistics.fmean(row[label][m] for row in rows) for m in METRICS]
        lines.append(f"| mean | {label} | " + " | ".join(f"{value:.3f}" for value in means) + " |")
    margins = [[row["trained"][m] - row["base"][m] for row in rows] for m in METRICS]
    lines.append("| mean | margin | " + " | ".join(f"{statistics.fmean(m):+.3f}" for m in margins) + " |")
    spreads = [max(row["base"][m] for row in rows) - min(row["base"][m] for row in rows) for m in METRICS]
    lines.append("| spread | base | " + " | ".join(f"{value:.3f}" for value in spreads) + " |")
    return "\n".join(lines)


def main() -> None:
    """Parse arguments, run every seed, print and save the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=QUICKSTART)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--backend", choices=["vllm", "transformers"], default="vllm")
    parser.add_argument("--server-url", default=None, help="Use a running vLLM server instead of starting one.")
    parser.add_argument("--eval-split", default="test")
    parser.add_argument("--eval-tasks", type=int, default=20)
    parser.add_argument("--eval-temperatures", type=float, nargs="+", default=[0.0, 1.0], help="0 = greedy")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "benchmarks" / "results" / "learning.json")
    parser.add_argument("overrides", nargs="*", help="Extra TrainConfig key=value overrides.")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    with tempfile.TemporaryDirectory(prefix="memora-learning-") as root:
        rows = [train_and_evaluate(args, seed, Path(root)) for seed in args.seeds]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "rows": rows}, indent=1))
    for name in rows[0]["eval"]:
        print(f"\nHeld-out {args.eval_split} tasks, decoding {name}:")
        print(markdown_table([{"seed": row["seed"], **row["eval"][name]} for row in rows]))
    print(json.dumps([{k: v for k, v in row.items() if k != "eval"} for row in rows]))


if __name__ == "__main__":
    main()
