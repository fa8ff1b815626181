"""`run(config)`: one GRPO training run, end to end (env, policy, server, trainer, outputs).

Outputs under `checkpoints/<run>/`: `config.yaml` (resolved), `data_split.json` (with `grpo.tasks=missed`
also `start_recall.json`, the starting policy's recall per training task), `metrics.jsonl`,
`samples.jsonl`, `data_order.jsonl`, `wandb_id` and `wandb/` (unless wandb is disabled),
`checkpoint-<step>/` (adapter, optimizer, scheduler, trainer state, RNG, config, split) and
`final/` (the trained adapter and tokenizer).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memora_rl.config import dump_config
from memora_rl.errors import ConfigError, RolloutError, ServerError
from memora_rl.llm.server_api import base_model_name
from memora_rl.training.callbacks import BatchRecorder, CheckpointExtras, MetricsWriter
from memora_rl.training.config import TrainConfig, rollout_server_config
from memora_rl.training.distributed import (
    barrier,
    from_main,
    is_main_process,
    on_main_first,
    process_count,
    record_processes,
    restore_indexed_cpu_locations,
)
from memora_rl.training.generation import Generator, TransformersGenerator, VLLMGenerator
from memora_rl.training.importance import enable_rollout_importance_sampling
from memora_rl.training.rewards import judge_weights, make_component_rewards
from memora_rl.training.rollout import EpisodePlayer, GRPORollout, RolloutSettings, end_of_turn_ids
from memora_rl.training.sync import AdapterSync
from memora_rl.training.tracking import wandb_run
from memora_rl.training.trainer import build_grpo_config, build_policy, build_trainer, resolve_device, tasks_dataset

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunResult:
    """Where a finished run left its outputs."""

    run_dir: Path
    final_step: int
    adapter_dir: Path
    metrics_path: Path


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The `checkpoint-<step>` folder with the highest step, or None."""
    steps = [(int(path.name.split("-")[1]), path) for path in run_dir.glob("checkpoint-*") if path.name[11:].isdigit()]
    return max(steps)[1] if steps else None


def resume_hint(config: TrainConfig, step: int) -> str:
    """Where a run that failed at `step` can continue from, and how."""
    last = latest_checkpoint(config.output_dir)
    if last is None:
        return f"The run stopped at step {step} before its first checkpoint; start it again once the server answers."
    return (
        f"The run stopped at step {step}; its last checkpoint is {last}. Once the server answers, continue "
        "it: run the same command with `--resume` (or the override `resume=true`)."
    )


def _focus_tasks(
    config: TrainConfig, tasks: list[Any], env_factory: Any, server_url: str | None, max_turns: int
) -> list[Any]:
    """The tasks GRPO samples (`grpo.tasks`); `missed` plays the starting policy greedily once to pick them.

    A resumed run keeps the tasks it started with (a replay could pick others).
    """
    if config.grpo.tasks == "all":
        return tasks
    saved = config.output_dir / "data_split.json"
    if config.resume and saved.is_file():
        kept = set(json.loads(saved.read_text())["task_ids"])
        return [task for task in tasks if task.id in kept]
    if server_url is None:
        raise ConfigError("grpo.tasks=missed plays the starting policy through the rollout server; use backend=vllm.")
    from memora_rl.policy.llm_policy import LLMPolicyConfig, make_llm_policy
    from memora_rl.training.task_focus import missed_tasks

    policy = make_llm_policy(
        LLMPolicyConfig(
            backend="server", model=base_model_name(server_url), base_url=server_url,
            max_new_tokens=config.grpo.max_new_tokens, name="start",
        )
    )  # fmt: skip
    kept, recall = missed_tasks(env_factory, tasks, policy, max_turns)
    (config.output_dir / "start_recall.json").write_text(json.dumps(recall, indent=1))
    if not kept:
        raise ConfigError(
            "grpo.tasks=missed: the starting policy reaches full recall on every training task, so there is "
            "nothing to train on; use grpo.tasks=all."
        )
    return kept


def _prepare_run_dir(config: TrainConfig) -> Path | None:
    """Create the run folder (on the main process); return the checkpoint to resume from (None for a fresh run)."""
    run_dir = config.output_dir
    checkpoint = latest_checkpoint(run_dir) if run_dir.is_dir() else None
    if config.resume and checkpoint is None:
        raise ConfigError(f"resume=true but {run_dir} holds no checkpoint-<step> folder; drop resume to start fresh.")
    if not config.resume and checkpoint is not None:
        raise ConfigError(
            f"{run_dir} already holds {checkpoint.name}; pass resume=true to continue it, "
            "or choose another run_name (or delete the folder)."
        )
    barrier()  # every process has read the folder before the main one changes it
    if is_main_process():
        run_dir.mkdir(parents=True, exist_ok=True)
        if not config.resume:
            for name in ("metrics.jsonl", "samples.jsonl", "data_order.jsonl"):
                (run_dir / name).unlink(missing_ok=True)
        dump_config(config, run_dir / "config.yaml")
    barrier()
    return checkpoint


def _write_split(config: TrainConfig, task_ids: list[str]) -> None:
    """Save the task split (on the main process); on resume it must equal the one the run started with."""
    path = config.output_dir / "data_split.json"
    split = {"env": config.env, "split": config.split, "task_ids": task_ids}
    if config.resume and path.is_file() and json.loads(path.read_text()) != split:
        raise ConfigError(
            f"The tasks of env={config.env!r} split={config.split!r} differ from the ones in {path}; "
            "resume with the same env, env_overrides, split and max_tasks."
        )
    barrier()  # every process has compared the saved split before the main one rewrites it
    if is_main_process():
        path.write_text(json.dumps(split, indent=1))


def _load_env(config: TrainConfig, tokenizer: Any) -> tuple[Any, list[Any], Any]:
    """The env (with the run's `env_overrides`), its training tasks, and a factory for more env instances.

    The factory makes one env per concurrent episode: the env itself first, then its siblings (same store).
    """
    from memora_rl.env.registry import make_env

    env, tasks = make_env(config.env, split=config.split, overrides=config.env_overrides, tokenizer=tokenizer)
    tasks = list(tasks)[: config.max_tasks] if config.max_tasks else list(tasks)
    pool = [env]

    def factory() -> Any:
        return pool.pop() if pool else env.sibling()

    return env, tasks, factory


@contextlib.contextmanager
def vllm_server(config: TrainConfig) -> Iterator[str]:
    """Yield the `/v1` URL of the (first) rollout server: a configured one, or one started (and stopped) for this run.

    Configured servers (`server.url`, or each of `server.urls`) must serve the policy's base model.
    """
    from memora_rl.llm.server import VLLMServer
    from memora_rl.llm.server_api import attach, serves_weights_of

    running = config.server.running_urls
    if not running and process_count() > 1:  # the main process starts one server for all
        with contextlib.ExitStack() as stack:
            url = stack.enter_context(VLLMServer(rollout_server_config(config))).base_url if is_main_process() else None
            yield from_main(url)
            barrier()  # no process is still sampling when the main one stops the server
        return
    if running:
        endpoints = [attach(url) for url in running]
        for endpoint in endpoints:
            if not serves_weights_of(endpoint.base_url, config.model):
                raise ConfigError(
                    f"The server at {endpoint.base_url} serves {endpoint.model}, not the policy's base {config.model}"
                    + (" (the warm-started model of stage one)" if config.warm_start.enabled else "")
                    + ": its rollouts would come from another model. Serve it (`memora-rl serve --model "
                    f"{config.model}`) and pass that URL, or leave server.url and server.urls unset and the run "
                    "starts a server for it."
                )
        yield endpoints[0].base_url
        return
    with VLLMServer(rollout_server_config(config)) as server:
        yield server.base_url


def with_warm_start(config: TrainConfig, device: str) -> TrainConfig:
    """Run (or reuse) stage one; return the config whose base model is the merged warm start.

    The run folder's `config.yaml` (copied into every checkpoint, read by export) is rewritten to
    name that folder: an adapter trained on the warm start must be exported and served on it.
    """
    from memora_rl.training.stage_one import warm_start

    merged = str(on_main_first(lambda: warm_start(config, device)).resolve())
    server = config.server.model_copy(update={"model": merged})  # the server serves the policy's base: saved so
    config = config.model_copy(update={"model": merged, "server": server})  # the dumped config validates on load
    if is_main_process():
        dump_config(config, config.output_dir / "config.yaml")
    return config


def run(config: TrainConfig, callbacks: list[Any] | None = None) -> RunResult:
    """Train the retrieval policy with GRPO as `config` says; returns where the outputs are.

    Args:
        config: The run's settings.
        callbacks: Extra `transformers.TrainerCallback`s (tests use one to interrupt a run).
    """
    device = resolve_device(config.device)
    if process_count() > 1 and device == "cpu":
        restore_indexed_cpu_locations()  # transformers resumes the optimizer onto `cpu:0` there
    checkpoint = _prepare_run_dir(config)
    if config.warm_start.enabled:  # stage one; GRPO's base (and KL reference) becomes the merged warm start
        config = with_warm_start(config, device)
    base_model, tokenizer, lora = build_policy(config, device)
    env, tasks, env_factory = _load_env(config, tokenizer)
    reward_funcs, reward_weights = make_component_rewards(config.reward_weights or judge_weights(env.config.judge))
    from memora_rl.policy.chat import chat_opener

    grpo = config.grpo
    limits = RolloutSettings(grpo.max_turns, grpo.max_new_tokens, grpo.max_completion_tokens)
    player = EpisodePlayer(tokenizer, chat_opener(env.config), limits)
    stop_ids = end_of_turn_ids(tokenizer, player.turn_format)
    server = vllm_server(config) if config.backend == "vllm" else contextlib.nullcontext(None)
    with server as server_url, wandb_run(config) as sink:
        focus = _focus_tasks(config, tasks, env_factory, server_url, env.config.max_steps) if is_main_process() else []
        kept = set(from_main([task.id for task in focus]))  # the main process's choice, on every process
        tasks = [task for task in tasks if task.id in kept]
        _write_split(config, [task.id for task in tasks])
        dataset, task_by_prompt = tasks_dataset(tasks)
        generator: Generator
        trainer_callbacks: list[Any] = [CheckpointExtras(config.output_dir)]
        sync = None
        if server_url is not None:
            generator = VLLMGenerator(
                config.server.pool(server_url),
                base_model_name(server_url),
                stop_ids,
                config.server.request_timeout_s,
                config.server.max_concurrency,
                seed=config.seed,
            )
            shared = bool(config.server.running_urls)  # names on a shared server carry the run name
            sync = AdapterSync(  # an absolute folder: the server may run elsewhere than the trainer's cwd
                generator,
                config.output_dir.resolve() / "adapters",
                config.run_name if shared else None,
            )
            trainer_callbacks.append(sync)
        else:
            generator = TransformersGenerator(base_model, tokenizer, stop_ids)  # re-pointed at the peft model below
        trainer_callbacks.append(MetricsWriter(config.output_dir / "metrics.jsonl", player, sync, sink))
        recorder = BatchRecorder(config.output_dir, config.logging.samples_per_step, config.logging.sample_every)
        rollout = GRPORollout(player, generator, task_by_prompt, env_factory, on_batch=recorder)
        args = build_grpo_config(config, reward_weights, device)
        trainer = build_trainer(
            base_model, lora, tokenizer, args, dataset, reward_funcs, rollout, trainer_callbacks + list(callbacks or [])
        )
        if args.vllm_importance_sampling_correction:
            enable_rollout_importance_sampling(trainer)
        if isinstance(generator, TransformersGenerator):
            generator.model = trainer.model  # sample from the policy being trained
        logger.info("training %s on %d tasks (%s backend, %s)", config.run_name, len(tasks), config.backend, device)
        try:
            trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
        except (RolloutError, ServerError) as error:  # the server went away: say where to resume from
            raise type(error)(f"{error} {resume_hint(config, trainer.state.global_step)}") from error
    adapter_dir = config.output_dir / "final"
    trainer.save_model(str(adapter_dir))  # on the main process only
    if is_main_process():
        tokenizer.save_pretrained(str(adapter_dir))
        dump_config(config, adapter_dir / "train_config.yaml")
    record_processes(trainer.model, adapter_dir)
    return RunResult(config.output_dir, trainer.state.global_step, adapter_dir, config.output_dir / "metrics.jsonl")
