"""Warm-start (stage one SFT) cost by precision: float32 against bf16 autocast, on the real oracle episodes.

The episodes are the warm start's own (`warm_start_episodes` of a config's first `--tasks` sampled training
tasks: oracle walks played token-exact through the rollout's `EpisodePlayer`). Each precision then trains
`--steps` optimizer steps of the config's SFT (`sft_config`: TRL's SFTTrainer, LoRA, the same batch and
learning rate) in a fresh subprocess, so its peak RSS is its own. float32 is the baseline; the ratio is
its seconds a step over each row's. The losses show both learn the same rows alike. The warm start uses bf16
only with `warm_start.bf16_on_cpu` and where the CPU computes it natively (AVX512-BF16 or AMX).
`--record NAME` also writes the table and the run's sizes as the result record docs/results/NAME.json.

    python -m benchmarks.warm_start                                    # quickstart.yaml, ~4 minutes here
    python -m benchmarks.warm_start --config configs/grpo/hard.yaml --tasks 16 --steps 8
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.common import REPO_ROOT, add_record_option, markdown, result_table, save_record, spawn
from memora_rl.training.distributed import peak_rss_gb

if TYPE_CHECKING:
    from memora_rl.experiments.records import ResultTable

MODULE = "benchmarks.warm_start"
"""This script as a module: the episodes and each precision run in `python -m benchmarks.warm_start --worker SPEC`."""
QUICKSTART = REPO_ROOT / "configs" / "grpo" / "quickstart.yaml"
PRECISIONS = {"fp32": False, "bf16": True}
"""Row name -> SFTConfig's `bf16` (autocast over the float32 weights)."""


def load(config_path: Path, overrides: list[str]) -> Any:
    """The TrainConfig the benchmark measures."""
    from memora_rl.config import load_config
    from memora_rl.training.config import TrainConfig

    return load_config(TrainConfig, config_path, overrides)


def record_rows(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """Play the oracle episodes of the config's warm-start tasks; write their SFT rows to `out`."""
    from memora_rl.llm.registry import load_tokenizer
    from memora_rl.training.warmstart import sft_rows, warm_start_episodes

    config = load(args.config, args.overrides)
    rows = sft_rows(warm_start_episodes(config, load_tokenizer(config.model), args.tasks))
    out.write_text(json.dumps(rows))
    lengths = [len(row["input_ids"]) for row in rows]
    return {"rows": len(rows), "tokens": sum(lengths), "policy_tokens": sum(sum(r["assistant_masks"]) for r in rows)}


def train_rows(spec: dict[str, Any]) -> dict[str, Any]:
    """Worker: `spec["steps"]` SFT optimizer steps on the recorded rows at one precision; times and losses."""
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import SFTTrainer

    from memora_rl.training.trainer import build_policy
    from memora_rl.training.warmstart import sft_config

    torch.manual_seed(0)
    config = load(Path(spec["config"]), spec["overrides"])
    base, tokenizer, lora = build_policy(config, "cpu")
    rows = json.loads(Path(spec["rows"]).read_text())
    step_s: list[float] = []

    class StepTimer(TrainerCallback):
        """Wall time of each optimizer step."""

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.start = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            step_s.append(time.perf_counter() - self.start)

    with tempfile.TemporaryDirectory(prefix="memora-warm-start-") as folder:
        sft = sft_config(config, Path(folder), "cpu", max_steps=spec["steps"], save_strategy="no", bf16=spec["bf16"])
        trainer = SFTTrainer(
            model=base,
            args=sft,
            train_dataset=Dataset.from_list(rows),
            processing_class=tokenizer,
            peft_config=lora,
            callbacks=[StepTimer()],
        )
        trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    timed = step_s[1:] or step_s  # the first step also warms the kernels up
    return {
        "step_s": statistics.median(timed),
        "steps": len(step_s),
        "peak_rss_gb": peak_rss_gb(),
        "first_loss": losses[0],
        "last_loss": statistics.fmean(losses[len(losses) // 2 :]),
    }


def table(rows: dict[str, dict[str, Any]], tokens_a_step: float) -> ResultTable:
    """The measured precisions, with the speed-up over float32 (a failed one keeps its error)."""
    columns = ["precision", "s per optimizer step (median)", "tokens/s", "peak RSS GB", "loss: first step, last half",
               "speed-up over fp32"]  # fmt: skip
    cells: list[list[object]] = []
    base = rows.get("fp32", {}).get("step_s")
    for name, row in rows.items():
        if row.get("error"):
            cells.append([name, f"failed: {row['error']}", "", "", "", ""])
            continue
        ratio = f"{base / row['step_s']:.2f}x" if base else "-"
        cells.append([name, f"{row['step_s']:.2f}", f"{tokens_a_step / row['step_s']:.0f}", f"{row['peak_rss_gb']:.2f}",
                      f"{row['first_loss']:.3f}, {row['last_loss']:.3f}", ratio])  # fmt: skip
    return result_table("Warm-start SFT steps by precision", columns, cells)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's options."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=QUICKSTART, help="TrainConfig YAML whose warm start is run.")
    parser.add_argument("--tasks", type=int, default=8, help="Oracle episodes of this many training tasks.")
    parser.add_argument("--steps", type=int, default=12, help="Optimizer steps a precision.")
    parser.add_argument(
        "--precisions", nargs="+", choices=list(PRECISIONS), default=list(PRECISIONS), help="Rows to measure."
    )
    parser.add_argument("--timeout-s", type=float, default=1800.0, help="Limit for each subprocess.")
    parser.add_argument("--json", type=Path, default=None, help="Also write the results here.")
    parser.add_argument("overrides", nargs="*", help="Extra TrainConfig key=value overrides.")
    add_record_option(parser)
    return parser.parse_args(argv)


def main() -> None:
    """Record the rows, train each precision in its own process, print the table (and the record)."""
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        spec = json.loads(sys.argv[2])
        rows = spec["job"] == "rows"
        print(json.dumps(record_rows(argparse.Namespace(**spec), Path(spec["out"])) if rows else train_rows(spec)))
        return
    args = parse_args()
    config = load(args.config, args.overrides)
    with tempfile.TemporaryDirectory(prefix="memora-warm-start-bench-") as folder:
        rows_file = Path(folder) / "rows.json"
        job = {"config": str(args.config), "overrides": args.overrides}
        sizes = spawn(MODULE, {**job, "job": "rows", "tasks": args.tasks, "out": str(rows_file)}, args.timeout_s)
        if sizes.get("error"):
            raise SystemExit(f"Could not play the oracle episodes of {args.config}: {sizes['error']}")
        accumulation = config.warm_start.gradient_accumulation
        tokens_a_step = sizes["tokens"] / sizes["rows"] * accumulation
        results = {}
        for name in args.precisions:
            spec = {**job, "job": "train", "rows": str(rows_file), "steps": args.steps, "bf16": PRECISIONS[name]}
            results[name] = spawn(MODULE, spec, args.timeout_s)
    from memora_rl.training.trainer import cpu_has_bf16

    native = "computes bf16 in hardware" if cpu_has_bf16() else "emulates bf16 (the warm start keeps float32)"
    notes = [
        f"this CPU {native}",
        f"{args.config.name}: {sizes['rows']} oracle episodes, {sizes['tokens'] / sizes['rows']:.0f} tokens a row "
        f"({sizes['policy_tokens'] / sizes['rows']:.0f} trained), {accumulation} a step, {args.steps} steps a row",
    ]
    measured = table(results, tokens_a_step)
    print("\n".join(notes))
    print(markdown(measured))
    if args.json is not None:
        args.json.write_text(json.dumps({"rows": sizes, "results": results}, indent=1))
    save_record(
        args, f"Warm-start SFT cost by precision ({args.config.name}): float32 vs bf16 autocast", [measured], notes
    )


if __name__ == "__main__":
    main()
