"""Trainer callbacks and rollout hooks: metrics.jsonl, sample trajectories, data order, checkpoint extras."""

from __future__ import annotations

import json
import logging
import shutil
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from memora_rl.training.distributed import process_count, process_index
from memora_rl.training.rollout import Episode, EpisodePlayer
from memora_rl.training.tracking import MetricSink

logger = logging.getLogger(__name__)

RUN_FILES = ("config.yaml", "data_split.json")
"""Files of the run folder copied into every checkpoint (resolved config, task split)."""


def metric_name(key: str) -> str:
    """Namespace a TRL log key: `rewards/<n>/mean` -> `reward/<n>`, bare keys -> `train/<key>`.

    The one name a metric has, in `metrics.jsonl` and in wandb alike (`memora_rl.training.tracking`).

    >>> metric_name("rewards/cost/mean"), metric_name("loss"), metric_name("completions/mean_length")
    ('reward/cost', 'train/loss', 'rollout/mean_length')
    """
    parts = key.split("/")
    if parts[0] == "rewards" and len(parts) == 3:
        return f"reward/{parts[1]}" if parts[2] == "mean" else f"reward/{parts[1]}_{parts[2]}"
    if parts[0] == "completions" and len(parts) == 2:
        return f"rollout/{parts[1]}"
    return key if len(parts) > 1 else f"train/{key}"


def append_jsonl(path: Path, record: dict[str, Any]) -> None:
    """Append one JSON line to `path`."""
    with path.open("a") as handle:
        handle.write(json.dumps(record) + "\n")


class MetricsWriter(TrainerCallback):
    """Writes every trainer log as one line of `metrics.jsonl`, plus step and rollout timings.

    The same record, under the same keys, goes to `sink` (the run's wandb run) when there is one.
    """

    def __init__(
        self, path: Path, player: EpisodePlayer, sync: Any | None = None, sink: MetricSink | None = None
    ) -> None:
        self.path = path
        self.player = player
        self.sync = sync
        self.sink = sink
        self._last_time = time.perf_counter()
        self._last_generation_s = 0.0
        self._last_env_s = 0.0

    def on_log(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        logs: dict[str, float] | None = None,
        **kwargs: Any,
    ) -> None:
        """Record one log line (called every `logging_steps`, i.e. every step)."""
        if not state.is_world_process_zero or not logs or "train_runtime" in logs:
            return
        now = time.perf_counter()
        record: dict[str, Any] = {"step": state.global_step, "time/step_s": round(now - self._last_time, 3)}
        record["time/generation_s"] = round(self.player.generation_s - self._last_generation_s, 3)
        record["time/env_s"] = round(self.player.env_s - self._last_env_s, 3)
        if self.sync is not None and self.sync.count:
            record["time/adapter_sync_mean_s"] = round(self.sync.total_s / self.sync.count, 4)
        self._last_time, self._last_generation_s, self._last_env_s = now, self.player.generation_s, self.player.env_s
        record.update({metric_name(key): value for key, value in logs.items()})
        append_jsonl(self.path, record)
        if self.sink is not None:
            self.sink.log({key: value for key, value in record.items() if key != "step"}, step=state.global_step)


class CheckpointExtras(TrainerCallback):
    """Copies the resolved config and the data split into each checkpoint folder."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir

    def on_save(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        """Copy `RUN_FILES` next to the adapter, optimizer and trainer state."""
        if not state.is_world_process_zero:
            return
        checkpoint = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        for name in RUN_FILES:
            if (self.run_dir / name).is_file() and checkpoint.is_dir():
                shutil.copy2(self.run_dir / name, checkpoint / name)


class BatchRecorder:
    """Rollout hook: logs the data order and sample trajectories of every generation batch."""

    def __init__(self, run_dir: Path, samples_per_step: int, table_every: int, console: Console | None = None) -> None:
        self.run_dir = run_dir
        self.samples_per_step = samples_per_step
        self.table_every = table_every
        self.console = console or Console(stderr=True)

    def __call__(self, step: int, episodes: list[Episode]) -> None:
        """Append the batch's task ids to `data_order.jsonl` and a few episodes to `samples.jsonl`.

        With several trainer processes each appends its own share, its lines marked with its `process`.
        """
        order: dict[str, Any] = {"step": step, "task_ids": [e.task.id for e in episodes]}
        if process_count() > 1:
            order["process"] = process_index()
        append_jsonl(self.run_dir / "data_order.jsonl", order)
        for episode in episodes[: self.samples_per_step]:
            append_jsonl(self.run_dir / "samples.jsonl", sample_record(step, episode))
        if self.table_every and step % self.table_every == 0 and process_index() == 0:
            self.console.print(sample_table(step, episodes[: self.samples_per_step]))


def sample_record(step: int, episode: Episode) -> dict[str, Any]:
    """One episode as a JSON-ready dict (question, actions, reward and its components)."""
    return {
        "step": step,
        "task_id": episode.task.id,
        "question": episode.task.question,
        "actions": episode.actions,
        "reward": episode.reward,
        "reward_components": episode.reward_components,
        "forced_stop": episode.forced_stop,
        "stop_reason": episode.final_info.get("stop_reason"),
        "prompt_tokens": len(episode.prompt_ids),
        "completion_tokens": len(episode.completion_ids),
        "policy_tokens": sum(episode.env_mask),
    }


def sample_table(step: int, episodes: list[Episode]) -> Table:
    """A rich table of a few episodes for the console."""
    table = Table(title=f"sample trajectories, step {step}", show_lines=True)
    for column in ("task", "actions", "stop", "reward"):
        table.add_column(column)
    for episode in episodes:
        actions = "\n".join(action.strip()[:120] for action in episode.actions)
        stop = str(episode.final_info.get("stop_reason")) + (" (cut)" if episode.cut else "")
        table.add_row(episode.task.question[:80], actions, stop, f"{episode.reward:.3f}")
    return table
