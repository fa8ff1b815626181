"""The run's wandb run: opened by us, not by transformers, so it logs `metrics.jsonl`'s own keys.

transformers' reporter would rename every key (`rewards/cost/mean` -> `train/rewards/cost/mean`);
`MetricsWriter` instead sends the one record it writes to `metrics.jsonl` to wandb as well, so a
metric has one name everywhere (`reward/cost`, `train/loss`, `time/step_s`, ...).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from memora_rl.training.config import TrainConfig
from memora_rl.training.distributed import is_main_process

ID_FILE = "wandb_id"
"""File in the run folder holding the wandb run id, so a resumed run continues the same wandb run."""


class MetricSink(Protocol):
    """Where a metrics record goes besides `metrics.jsonl` (a wandb run has this `log`)."""

    def log(self, data: dict[str, Any], step: int | None = None) -> None:
        """Record `data` at optimizer step `step`."""


def wandb_mode(config: TrainConfig) -> str | None:
    """The wandb mode this run uses (`online` or `offline`), or None when wandb is disabled.

    `auto` is online when the user is logged in (`WANDB_API_KEY` or `wandb login`), offline otherwise.
    """
    mode = config.logging.wandb
    if mode == "disabled":
        return None
    if mode == "auto":
        logged_in = bool(os.environ.get("WANDB_API_KEY")) or "api.wandb.ai" in _netrc_text()
        mode = "online" if logged_in else "offline"
    return mode


def _netrc_text() -> str:
    """Contents of ~/.netrc (where `wandb login` stores the key), or ''."""
    path = Path.home() / ".netrc"
    return path.read_text() if path.is_file() else ""


def run_id(run_dir: Path) -> str:
    """The run folder's wandb id: read from `wandb_id`, or made and written there on first use."""
    path = run_dir / ID_FILE
    if path.is_file():
        return path.read_text().strip()
    run_dir.mkdir(parents=True, exist_ok=True)
    new_id = uuid.uuid4().hex[:12]
    path.write_text(new_id + "\n")
    return new_id


@contextlib.contextmanager
def wandb_run(config: TrainConfig) -> Iterator[MetricSink | None]:
    """Open the run's wandb run for the body (None when disabled, and on every process but the main one).

    A resumed run continues the same one.
    """
    mode = wandb_mode(config)
    if mode is None or not is_main_process():
        yield None
        return
    import wandb

    run = wandb.init(
        project=config.logging.wandb_project,
        name=config.run_name,
        id=run_id(config.output_dir),
        resume="allow",
        dir=str(config.output_dir),
        mode=mode,
        config=config.model_dump(mode="json"),
    )
    try:
        yield run
    finally:
        run.finish()
