"""A rich progress bar for the trainers: steps done, time left and the last loss, instead of raw log dicts."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
from transformers.trainer_callback import PrinterCallback, ProgressCallback

SHOWN_LOGS = ("loss", "reward", "kl", "grad_norm")
"""Log keys shown beside the bar when a step logs them (GRPO's reward and KL, SFT's loss)."""


def progress_line(logs: dict[str, float]) -> str:
    """The shown logs of one step as `key value` pairs (3 significant digits), in `SHOWN_LOGS` order.

    >>> progress_line({"loss": 0.56789, "grad_norm": 1.5, "epoch": 0.1})
    'loss 0.568  grad_norm 1.5'
    """
    return "  ".join(f"{key} {logs[key]:.3g}" for key in SHOWN_LOGS if isinstance(logs.get(key), int | float))


class LossProgress(TrainerCallback):
    """One bar over the run's optimizer steps, with the last logged loss (and reward, KL) beside it."""

    def __init__(self, label: str, console: Console | None = None) -> None:
        self.label = label
        self.console = console
        self.progress: Progress | None = None
        self.task: Any = None

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """Start the bar at the step a resumed run is at."""
        if not state.is_world_process_zero:
            return
        self.progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TimeRemainingColumn(), TextColumn("{task.fields[logs]}"), console=self.console, transient=False,
        )  # fmt: skip
        self.task = self.progress.add_task(self.label, total=state.max_steps, completed=state.global_step, logs="")
        self.progress.start()

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        """Move the bar to the step just finished."""
        if self.progress is not None:
            self.progress.update(self.task, completed=state.global_step)

    def on_log(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        logs: dict[str, float] | None = None,
        **kwargs: Any,
    ) -> None:
        """Show the step's loss (and reward, KL) beside the bar."""
        if self.progress is not None and logs:
            self.progress.update(self.task, logs=progress_line(logs))

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """Stop the bar, leaving its last line on screen."""
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def show_loss_progress(trainer: Any, label: str) -> LossProgress:
    """Replace the trainer's printed log dicts and tqdm bar with a `LossProgress` bar; returns the bar."""
    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    bar = LossProgress(label)
    trainer.add_callback(bar)
    return bar
