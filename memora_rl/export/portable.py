"""Exports that travel: where an export's base model comes from, and paths without this machine's folders.

An export names the base its adapter sits on by a registry name or hub id, or ships it in `base/`;
it never records a path outside its folder. How the base is chosen (`plan_base`):

- a warm-started run that kept its warm-start adapter (`<run>/warmstart/adapter`): the registry base,
  and the warm start's LoRA stacked with GRPO's into one adapter (`memora_rl.export.stack`);
- a warm-started run without it (runs made before it was kept), or whose merged warm start is not
  base + that adapter: the merged warm start, copied into `base/`, under GRPO's adapter as trained;
- any other run: its base model by name, or copied into `base/` when it is a local folder.
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memora_rl.errors import ExportError, MemoraError
from memora_rl.export.run_folder import RunSource
from memora_rl.export.stack import MERGE_TOLERANCE, merge_deviation, unstackable_reason
from memora_rl.policy.export_folder import ADAPTER_FILES, BASE_DIR

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BasePlan:
    """The base model of an export and what the export needs to write for it."""

    model: str
    """The base as export.json records it: a registry name, a hub id, or `base` (the folder inside the export)."""
    bundle: Path | None = None
    """Model folder to copy into the export's `base/` (None: the base is named, not shipped)."""
    warm_adapter: Path | None = None
    """The run's warm-start adapter, to stack with the run's own (None: the run's adapter is exported as is)."""
    warm_start: dict[str, Any] | None = None
    """What the manifest says of the run's warm start (None: the run had none)."""


def is_absolute(value: str) -> bool:
    r"""True for a string that is an absolute (or home-relative) path on some machine.

    >>> is_absolute("/root/checkpoints"), is_absolute("~/x"), is_absolute("C:\\models"), is_absolute("base")
    (True, True, True, False)
    """
    return value.startswith(("/", "~", "\\")) or (len(value) > 2 and value[1] == ":" and value[2] in "/\\")


def portable_path(value: str, root: Path | None = None) -> str:
    """A path as an export records it: relative to `root` (default: the working folder) inside it, else its name.

    >>> portable_path("checkpoints/quickstart"), portable_path("/elsewhere/checkpoints/tiny", Path("/work"))
    ('checkpoints/quickstart', 'tiny')
    """
    if not is_absolute(value):
        return value
    path = Path(value).expanduser().resolve()
    try:
        return str(path.relative_to((root or Path.cwd()).resolve()))
    except ValueError:
        return path.name


def portable_config(value: Any, base_model: str | None = None) -> Any:
    """A resolved config with every absolute path made portable, and `model` and `server.model` set to `base_model`.

    >>> portable_config({"model": "/r/warmstart/model", "server": {"model": "/r/warmstart/model"}, "seed": 0}, "m")
    {'model': 'm', 'server': {'model': 'm'}, 'seed': 0}
    """
    if isinstance(value, dict):
        out = {key: portable_config(item) for key, item in value.items()}
        if base_model is not None:
            for section in (out, out.get("server")):
                if isinstance(section, dict) and "model" in section:
                    section["model"] = base_model
        return out
    if isinstance(value, list):
        return [portable_config(item) for item in value]
    return portable_path(value) if isinstance(value, str) else value


def named_or_bundled(name: str) -> tuple[str, Path | None]:
    """A base model as the export names it: (registry name or hub id, None), or (`base`, the folder to copy).

    Raises:
        ExportError: `name` is a path to a folder that is gone.
    """
    from memora_rl.llm.registry import KNOWN_MODELS

    if name in KNOWN_MODELS:
        return name, None
    path = Path(name).expanduser()
    if path.is_dir():
        return BASE_DIR, path
    if is_absolute(name) or name.startswith("."):
        raise ExportError(
            f"The run's base model folder {name} is gone; the export cannot ship it. Restore it, or re-train."
        )
    return name, None


def _has_adapter(folder: Path) -> bool:
    """True when `folder` holds a peft adapter."""
    return all((folder / name).is_file() for name in ADAPTER_FILES)


def stack_problem(base: str, warm_adapter: Path, warm_model: Path, run_adapter: dict[str, Any]) -> str | None:
    """Why the warm start cannot be stacked onto `base` with the run's adapter (None when it can; no absolute path)."""
    if not base:
        return "the warm start's record names no base model"
    if not _has_adapter(warm_adapter):
        return f"the run kept no warm-start adapter ({warm_adapter.parent.name}/{warm_adapter.name}: older runs)"
    warm_config = json.loads((warm_adapter / ADAPTER_FILES[0]).read_text())
    reason = unstackable_reason(warm_config) or unstackable_reason(run_adapter)
    if reason is not None:
        return f"an adapter is no plain LoRA ({reason})"
    try:
        deviation = merge_deviation(base, warm_adapter, warm_model)
    except (MemoraError, OSError, ValueError, RuntimeError) as error:
        logger.warning("Checking the warm start's merge into %s failed: %s", base, error)
        return f"its merge into {portable_path(base)} could not be checked ({type(error).__name__})"
    if deviation > MERGE_TOLERANCE:
        return f"the merged warm start is not {portable_path(base)} + its adapter (deviation {deviation:.3g})"
    return None


def plan_base(source: RunSource, run_adapter: dict[str, Any]) -> BasePlan:
    """How the export of `source` (whose adapter config is `run_adapter`) names or ships its base model."""
    from memora_rl.training.warmstart import (
        DONE_FILE,
        warm_start_adapter_dir,
        warm_start_done,
        warm_start_model_dir,
    )

    model = str(source.config.get("model") or run_adapter.get("base_model_name_or_path") or "")
    warm_enabled = bool((source.config.get("warm_start") or {}).get("enabled"))
    if not (warm_enabled and warm_start_done(source.run_dir)):
        return BasePlan(*named_or_bundled(model))
    warm_model = warm_start_model_dir(source.run_dir)
    record = json.loads((warm_model / DONE_FILE).read_text())
    base = str(record.get("base") or "")
    warm_adapter = warm_start_adapter_dir(source.run_dir)
    problem = stack_problem(base, warm_adapter, warm_model, run_adapter)
    if problem is None:
        name, bundle = named_or_bundled(base)
        record = {"how": "stacked", **portable_config(record), "base": name}
        return BasePlan(name, bundle, warm_adapter, record)
    logger.warning("Cannot stack the warm start of %s: %s. The export ships the merged warm start in %s/.",
                   source.run_dir, problem, BASE_DIR)  # fmt: skip
    record = {"how": "bundled", **portable_config(record), "base": portable_path(base)}
    return BasePlan(BASE_DIR, warm_model, None, {**record, "why_not_stacked": problem})


def copy_adapter(source: Path, target: Path, base_model: str) -> dict[str, Any]:
    """Copy a peft adapter folder's two files; its config names `base_model` (no path of this machine)."""
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source / ADAPTER_FILES[1], target / ADAPTER_FILES[1])
    config = json.loads((source / ADAPTER_FILES[0]).read_text())
    config["base_model_name_or_path"] = base_model
    (target / ADAPTER_FILES[0]).write_text(json.dumps(config, indent=2, sort_keys=True))
    return config
