"""An export folder: its layout, its `export.json` manifest, and loading it back (ExportError when it is not one).

Layout written by `memora_rl.export.writer.export_run`:
```
<out>/export.json              manifest (ExportManifest): base model, source run, git SHA, resolved config
<out>/README.md                model card
<out>/tokenizer.json ...       tokenizer, chat_template.jinja, generation_config.json
<out>/adapter/                 peft LoRA adapter (adapter_config.json, adapter_model.safetensors)
<out>/merged/                  base + adapter merged, a plain safetensors model folder (unless --no-merge)
<out>/base/                    only when the base is no registry model or hub id: the base model itself
```
Every path the manifest and the model card record is relative to the folder, or a registry name: an
export copied to another machine (with the registry model pulled there) loads as it did here.
It lives with the policies, below both the writer and `memora_rl.evaluation`, which loads exports back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from memora_rl.errors import ExportError

MANIFEST_FILE = "export.json"
CARD_FILE = "README.md"
ADAPTER_DIR = "adapter"
MERGED_DIR = "merged"
BASE_DIR = "base"
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")
TOKENIZER_FILES = ("tokenizer_config.json", "tokenizer.json")
"""What `save_pretrained` of the policy's (fast) tokenizer writes at the top of an export."""
EXPORT_FORMAT = "memora-rl-export/2"
"""Format 2: the base is a registry name, a hub id or `base/` inside the export (1 could record a path)."""


class VerificationRecord(BaseModel):
    """One check the export passed before it was published: a backend played one env step."""

    backend: str
    """`transformers` or `vllm`."""
    weights: str
    """`adapter` or `merged`."""
    action_text: str
    """Greedy action the policy wrote for the first observation."""
    action_kind: str | None
    """How the env parsed it (`expand`, `refine`, `stop`, `invalid`)."""
    seconds: float
    """Wall-clock time of the check (load + one generation + one env step)."""


class ExportManifest(BaseModel):
    """`export.json`: what the export holds and where it came from (STYLE rule 12)."""

    format: str = EXPORT_FORMAT
    export_id: str
    """First 12 hex digits of the adapter weights' SHA-256 (names the adapter on a vLLM server)."""
    created_at: str
    """UTC time of the export, ISO 8601."""
    git_sha: str | None = None
    """Commit of the memora-rl checkout that exported it (None outside a git checkout)."""
    git_dirty: bool | None = None
    """True when that checkout had uncommitted changes."""
    base_model: str
    """The model the adapter sits on: a registry name, a hub id, or `base` (the folder inside the export).
    Format-1 exports may name a folder of the machine that exported them."""
    source_run: str
    """Run folder the adapter came from, relative to the folder the export was made in (else its name)."""
    source_checkpoint: str
    """`final` or `checkpoint-<step>`."""
    step: int | None = None
    """Optimizer step of the adapter (None for `final` when the run logged no step)."""
    env: str | None = None
    """Env the policy was trained on."""
    env_overrides: list[str] = Field(default_factory=list)
    """The run's dotted `key=value` overrides of that env's spec (`TrainConfig.env_overrides`)."""
    adapter: dict[str, Any] = Field(default_factory=dict)
    """LoRA rank, alpha and target modules of `adapter/` (a warm-started run's: both adapters stacked)."""
    warm_start: dict[str, Any] | None = None
    """The run's warm start: `how` it is in the export (`stacked` into `adapter/`, or `bundled`: the merged
    warm start is `base/`) and its record (episodes, loss, base); None for a run without one."""
    merged: bool = False
    """True when `merged/` holds the merged model."""
    merged_dtype: str | None = None
    train_config: dict[str, Any] = Field(default_factory=dict)
    """The run's resolved training config."""
    data_split: dict[str, Any] = Field(default_factory=dict)
    """The run's task split: env, split name, task count and the task ids."""
    train_metrics: dict[str, Any] = Field(default_factory=dict)
    """Last line of the run's metrics.jsonl."""
    eval_results: list[dict[str, Any]] = Field(default_factory=list)
    """Overall metrics of `memora-rl eval` runs given at export time."""
    verification: list[VerificationRecord] = Field(default_factory=list)

    def overrides_for(self, env: str) -> list[str]:
        """The run's env overrides when `env` is its training env, else none (another env keeps its own settings).

        >>> manifest = ExportManifest(export_id="0", created_at="", base_model="m", source_run="r",
        ...     source_checkpoint="final", env="synthetic-hard", env_overrides=["env.compact=true"])
        >>> manifest.overrides_for("synthetic-hard"), manifest.overrides_for("locomo")
        (['env.compact=true'], [])
        """
        return list(self.env_overrides) if env == self.env else []


@dataclass(frozen=True)
class Export:
    """A validated export folder."""

    path: Path
    manifest: ExportManifest

    @property
    def adapter_dir(self) -> Path:
        """The peft adapter folder."""
        return self.path / ADAPTER_DIR

    @property
    def merged_dir(self) -> Path:
        """The merged model folder (exists only when `manifest.merged`)."""
        return self.path / MERGED_DIR

    @property
    def base_model(self) -> str:
        """The base to load the adapter onto: the export's `base/` folder, or the registry name or hub id."""
        name = self.manifest.base_model
        inside = self.path / name
        return str(inside) if name == BASE_DIR and inside.is_dir() else name

    @property
    def has_merged(self) -> bool:
        """True when the merged model was exported."""
        return self.manifest.merged and (self.merged_dir / "config.json").is_file()


def load_export(path: Path) -> Export:
    """Validate an export folder and read its manifest.

    Raises:
        ExportError: `path` is missing, holds no (valid) export.json, or lacks the adapter files.
    """
    if not path.is_dir():
        raise ExportError(f"No export folder at {path}: pass a folder written by `memora-rl export --out`.")
    manifest_path = path / MANIFEST_FILE
    if not manifest_path.is_file():
        raise ExportError(
            f"{path} is not a memora-rl export (no {MANIFEST_FILE}); pass a folder written by `memora-rl export`, "
            "or a baseline name."
        )
    try:
        manifest = ExportManifest.model_validate(json.loads(manifest_path.read_text()))
    except (json.JSONDecodeError, ValidationError) as error:
        raise ExportError(f"{manifest_path} is not a valid export manifest ({error}); re-export the run.") from error
    missing = [name for name in ADAPTER_FILES if not (path / ADAPTER_DIR / name).is_file()]
    if missing:
        raise ExportError(f"Export {path} lacks {ADAPTER_DIR}/{', '.join(missing)}; re-export the run with --force.")
    if manifest.base_model == BASE_DIR and not (path / BASE_DIR / "config.json").is_file():
        raise ExportError(
            f"Export {path} lacks its base model ({BASE_DIR}/config.json); re-export the run with --force."
        )
    missing = [name for name in TOKENIZER_FILES if not (path / name).is_file()]
    if missing:
        raise ExportError(
            f"Export {path} lacks its tokenizer ({', '.join(missing)}): the policy's prompts could not be encoded. "
            "Re-export the run with --force."
        )
    return Export(path, manifest)


def load_export_model(export: Export, merged: bool = False, dtype: str = "float32") -> Any:
    """The policy model of an export for transformers: the merged folder, or the base model + the adapter."""
    from memora_rl.llm.registry import load_causal_lm

    if merged:
        if not export.has_merged:
            raise ExportError(f"Export {export.path} has no merged model; re-export without --no-merge.")
        model = load_causal_lm(str(export.merged_dir), dtype=dtype)
    else:
        from peft import PeftModel

        base = load_causal_lm(export.base_model, dtype=dtype)
        try:
            model = PeftModel.from_pretrained(base, str(export.adapter_dir))
        except (RuntimeError, ValueError, KeyError) as error:  # shapes or module names of another model
            first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise ExportError(
                f"The adapter of {export.path} does not fit the base model its manifest names "
                f"({export.manifest.base_model}): {first_line}. The adapter was trained on another model; "
                "re-export it from its run (`memora-rl export --run <run> --force`), which records the right base."
            ) from error
    model.eval()
    return model
