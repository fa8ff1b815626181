"""The trainers show one progress bar with the loss, not a raw log dict per step."""

from __future__ import annotations

import io

from rich.console import Console
from transformers import TrainerControl, TrainerState, TrainingArguments
from transformers.trainer_callback import PrinterCallback, ProgressCallback

from memora_rl.training.progress import LossProgress, progress_line, show_loss_progress


class _Trainer:
    """The callback list of a trainer, as `Trainer.add_callback` / `remove_callback` keep it."""

    def __init__(self) -> None:
        self.callbacks: list[object] = [PrinterCallback(), ProgressCallback()]

    def remove_callback(self, kind: type) -> None:
        self.callbacks = [c for c in self.callbacks if not isinstance(c, kind)]

    def add_callback(self, callback: object) -> None:
        self.callbacks.append(callback)


def test_the_bar_replaces_the_printed_dicts_and_shows_the_loss(tmp_path):
    trainer = _Trainer()
    bar = show_loss_progress(trainer, "warm start")
    assert trainer.callbacks == [bar]
    out = io.StringIO()
    bar = LossProgress("warm start", Console(file=out, width=120, force_terminal=False))
    args, control = TrainingArguments(output_dir=str(tmp_path), report_to=[]), TrainerControl()
    state = TrainerState(max_steps=4, global_step=1)  # a resumed run starts where it was
    bar.on_train_begin(args, state, control)
    for step in (2, 3, 4):
        state.global_step = step
        bar.on_step_end(args, state, control)
        bar.on_log(args, state, control, logs={"loss": 1.0 / step, "learning_rate": 1e-4})
    bar.on_train_end(args, state, control)
    text = out.getvalue()
    assert "warm start" in text and "4/4" in text and "loss 0.25" in text
    assert "{'loss'" not in text and "learning_rate" not in text
    assert progress_line({"reward": 0.5, "kl": 0.01234}) == "reward 0.5  kl 0.0123"
