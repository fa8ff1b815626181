"""Read a training run folder (`checkpoints/<run>/`): which adapter to export, its config, split and metrics.

Layout written by `memora_rl.training.run.run`: `config.yaml` (resolved), `data_split.json`,
`metrics.jsonl`, `checkpoint-<step>/` (adapter + trainer state + config + split) and `final/`
(the trained adapter and tokenizer).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memora_rl.errors import ExportError
from memora_rl.policy.export_folder import ADAPTER_FILES

CONFIG_FILE = "config.yaml"
SPLIT_FILE = "data_split.json"
METRICS_FILE = "metrics.jsonl"
FINAL_DIR = "final"
CHECKPOINT_PREFIX = "checkpoint-"


@dataclass(frozen=True)
class RunSource:
    """The adapter chosen for export and what the run says about it."""

    run_dir: Path
    adapter_dir: Path
    """`final/` or `checkpoint-<step>/` (holds adapter_config.json and adapter_model.safetensors)."""
    step: int | None
    config: dict[str, Any]
    """The resolved training config (the checkpoint's copy when it has one)."""
    data_split: dict[str, Any]
    last_metrics: dict[str, Any]

    @property
    def checkpoint_name(self) -> str:
        """`final` or `checkpoint-<step>`."""
        return self.adapter_dir.name


def checkpoint_steps(run_dir: Path) -> dict[int, Path]:
    """`checkpoint-<step>` folders of a run by step."""
    steps = {}
    for path in run_dir.glob(f"{CHECKPOINT_PREFIX}*"):
        suffix = path.name[len(CHECKPOINT_PREFIX) :]
        if path.is_dir() and suffix.isdigit():
            steps[int(suffix)] = path
    return steps


def _has_adapter(folder: Path) -> bool:
    """True when `folder` holds a peft adapter."""
    return all((folder / name).is_file() for name in ADAPTER_FILES)


def choose_adapter(run_dir: Path, step: int | None) -> tuple[Path, int | None]:
    """The adapter folder for `step` (None: `final/`, else the latest checkpoint) and its step."""
    steps = {s: p for s, p in checkpoint_steps(run_dir).items() if _has_adapter(p)}
    if step is not None:
        if step not in steps:
            available = ", ".join(str(s) for s in sorted(steps)) or "none"
            raise ExportError(f"{run_dir} has no checkpoint-{step} with an adapter; steps available: {available}.")
        return steps[step], step
    if _has_adapter(run_dir / FINAL_DIR):
        return run_dir / FINAL_DIR, max(steps) if steps else None
    if steps:
        latest = max(steps)
        return steps[latest], latest
    raise ExportError(
        f"{run_dir} holds no adapter (no {FINAL_DIR}/ and no checkpoint-<step>/ with {ADAPTER_FILES[1]}); "
        "train first with `memora-rl train`, or pass the run folder under checkpoints/."
    )


def last_jsonl_line(path: Path) -> dict[str, Any]:
    """The last well-formed JSON object of a JSONL file ({} when absent or empty)."""
    if not path.is_file():
        return {}
    for line in reversed(path.read_text().splitlines()):
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    return {}


def _read_json(path: Path) -> dict[str, Any]:
    """A JSON object file, {} when absent."""
    if not path.is_file():
        return {}
    try:
        value = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ExportError(f"{path} is not valid JSON ({error}); the run folder is damaged.") from error
    return value if isinstance(value, dict) else {}


def open_run(run_dir: Path, step: int | None = None) -> RunSource:
    """Validate a run folder and pick the adapter to export.

    Raises:
        ExportError: `run_dir` is not a run folder (no config.yaml), or holds no adapter for `step`.
    """
    from memora_rl.config import read_yaml

    if not run_dir.is_dir():
        raise ExportError(f"No run folder at {run_dir}: pass checkpoints/<run> written by `memora-rl train`.")
    if not (run_dir / CONFIG_FILE).is_file():
        raise ExportError(
            f"{run_dir} is not a training run folder (no {CONFIG_FILE}); pass checkpoints/<run> written by "
            "`memora-rl train`."
        )
    adapter_dir, chosen_step = choose_adapter(run_dir, step)
    config_path = adapter_dir / CONFIG_FILE if (adapter_dir / CONFIG_FILE).is_file() else run_dir / CONFIG_FILE
    split_path = adapter_dir / SPLIT_FILE if (adapter_dir / SPLIT_FILE).is_file() else run_dir / SPLIT_FILE
    return RunSource(
        run_dir=run_dir,
        adapter_dir=adapter_dir,
        step=chosen_step,
        config=read_yaml(config_path),
        data_split=_read_json(split_path),
        last_metrics=last_jsonl_line(run_dir / METRICS_FILE),
    )
