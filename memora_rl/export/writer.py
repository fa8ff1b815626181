"""`export_run`: write a training run's adapter (and the merged model) as a self-describing folder.

The folder holds everything it needs and records no path outside itself (`memora_rl.export.portable`):
a warm-started run's adapter is its warm start's and GRPO's stacked into one over the registry base.
It is assembled in a hidden staging folder next to the target, verified, then renamed into place,
so a killed export never leaves a half-written folder under the final name.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import subprocess
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import Field

from memora_rl.config import StrictModel
from memora_rl.errors import ExportError
from memora_rl.export.card import render_model_card
from memora_rl.export.portable import BasePlan, copy_adapter, plan_base, portable_config, portable_path
from memora_rl.export.run_folder import RunSource, open_run
from memora_rl.export.stack import stack_adapters
from memora_rl.export.verify import VerifyMode, verify_export
from memora_rl.policy.export_folder import (
    ADAPTER_DIR,
    ADAPTER_FILES,
    BASE_DIR,
    CARD_FILE,
    MANIFEST_FILE,
    MERGED_DIR,
    Export,
    ExportManifest,
)

logger = logging.getLogger(__name__)

GENERATION_CONFIG = "generation_config.json"
CHAT_TEMPLATE_FILE = "chat_template.jinja"
MERGED_DTYPE = "float32"
"""The merged model is saved in float32 so it decodes like the adapter on the float32 base (docs/architecture.md)."""
ADAPTER_KEYS = ("r", "lora_alpha", "use_rslora", "lora_dropout", "target_modules")
"""The adapter settings the manifest lists."""


class ExportRequest(StrictModel):
    """What `memora-rl export` was asked to do."""

    run_dir: Path
    """Training run folder, `checkpoints/<run>`."""
    out: Path
    """Export folder to create, e.g. `exports/<name>`."""
    step: int | None = Field(default=None, ge=0)
    """Export `checkpoint-<step>`; None takes `final/`, else the latest checkpoint."""
    merge: bool = True
    """Also write the base model with the adapter merged in (`merged/`, safetensors): eval and serve-memory
    take it when it is there."""
    force: bool = False
    """Replace an existing folder at `out`."""
    verify: VerifyMode = "transformers"
    """Checks before publishing: `transformers` (load + one env step), `vllm` (also vLLM), `none`."""
    verify_env: str | None = None
    """Env for the one-step check; None uses the run's env."""
    vllm_url: str | None = None
    """Running vLLM server (runtime LoRA, same base model) for `verify=vllm`; None starts one."""
    eval_results: list[Path] = Field(default_factory=list)
    """`memora-rl eval` output folders (or their results.json) whose overall metrics go into the card."""


def git_revision(folder: Path) -> tuple[str | None, bool | None]:
    """HEAD commit of the checkout holding `folder` and whether it has uncommitted changes (None, None outside git)."""
    try:
        sha = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
        status = subprocess.run(
            ["git", "-C", str(folder), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None, None
    return sha or None, bool(status.strip())


def _sha256_prefix(path: Path, digits: int = 12) -> str:
    """First `digits` hex digits of a file's SHA-256."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:digits]


def read_eval_results(paths: list[Path]) -> list[dict[str, Any]]:
    """Overall metrics of `memora-rl eval` runs, as the card and manifest list them."""
    from memora_rl.evaluation.metrics import OVERALL
    from memora_rl.evaluation.report import RESULTS_FILE

    results = []
    for path in paths:
        file = path / RESULTS_FILE if path.is_dir() else path
        if not file.is_file():
            raise ExportError(f"No {RESULTS_FILE} at {path}; pass a folder written by `memora-rl eval --out`.")
        data = json.loads(file.read_text())
        meta = data.get("meta", {})
        results.append(
            {
                "policy": meta.get("policy"),
                "env": meta.get("env"),
                "split": meta.get("split"),
                "overall": data.get("metrics", {}).get(OVERALL, {}),
            }
        )
    return results


def _copy_tokenizer(source: RunSource, base_path: str, staging: Path) -> None:
    """Tokenizer + chat template (the run's copy when it saved one, else the base model's) and generation config."""
    from memora_rl.llm.registry import load_tokenizer

    tokenizer_source = source.adapter_dir if (source.adapter_dir / "tokenizer_config.json").is_file() else base_path
    tokenizer = load_tokenizer(str(tokenizer_source))
    tokenizer.save_pretrained(str(staging))
    if not (staging / CHAT_TEMPLATE_FILE).is_file() and getattr(tokenizer, "chat_template", None):
        (staging / CHAT_TEMPLATE_FILE).write_text(tokenizer.chat_template)
    generation = Path(base_path) / GENERATION_CONFIG
    if generation.is_file():
        shutil.copy2(generation, staging / GENERATION_CONFIG)
    else:
        logger.warning("The base model %s has no %s; the export ships none.", base_path, GENERATION_CONFIG)


def merge_adapter(base_model: str, adapter_dir: Path, target: Path) -> None:
    """Merge a peft adapter into a float32 copy of its base model and save it to `target` (safetensors)."""
    from peft import PeftModel

    from memora_rl.llm.registry import load_causal_lm

    base = load_causal_lm(base_model, dtype=MERGED_DTYPE)
    merged = PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload()
    merged.save_pretrained(str(target), safe_serialization=True)


def _write_merged(base_model: str, adapter_dir: Path, staging: Path) -> None:
    """The merged model in the export's `merged/` folder, with the export's tokenizer and config files."""
    target = staging / MERGED_DIR
    merge_adapter(base_model, adapter_dir, target)
    for name in staging.iterdir():
        if name.is_file() and name.name not in (MANIFEST_FILE, CARD_FILE):
            shutil.copy2(name, target / name.name)
    logger.info("Wrote the merged model (%s) to %s", MERGED_DTYPE, target)


def build_manifest(source: RunSource, request: ExportRequest, adapter_dir: Path, base: BasePlan) -> ExportManifest:
    """The manifest of an export of `source` whose adapter is in `adapter_dir` (verification filled in later)."""
    git_sha, git_dirty = git_revision(Path(__file__).parent)
    adapter_config = json.loads((adapter_dir / ADAPTER_FILES[0]).read_text())
    return ExportManifest(
        export_id=_sha256_prefix(adapter_dir / ADAPTER_FILES[1]),
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        git_sha=git_sha,
        git_dirty=git_dirty,
        base_model=base.model,
        source_run=portable_path(str(source.run_dir)),
        source_checkpoint=source.checkpoint_name,
        step=source.step,
        env=source.config.get("env") or source.data_split.get("env"),
        env_overrides=list(source.config.get("env_overrides") or []),
        adapter={key: adapter_config.get(key) for key in ADAPTER_KEYS},
        warm_start=base.warm_start,
        merged=request.merge,
        merged_dtype=MERGED_DTYPE if request.merge else None,
        train_config=portable_config(source.config, base.model),
        data_split={**source.data_split, "task_count": len(source.data_split.get("task_ids", []))},
        train_metrics=source.last_metrics,
        eval_results=read_eval_results(request.eval_results),
    )


def write_manifest_and_card(folder: Path, manifest: ExportManifest) -> None:
    """Write export.json and README.md."""
    (folder / MANIFEST_FILE).write_text(manifest.model_dump_json(indent=2))
    (folder / CARD_FILE).write_text(render_model_card(manifest))


def _assemble(source: RunSource, request: ExportRequest, staging: Path) -> ExportManifest:
    """Write every file of the export into `staging`; return its manifest."""
    from memora_rl.llm.registry import resolve_model

    staging.mkdir(parents=True)
    adapter_dir = staging / ADAPTER_DIR
    base = plan_base(source, json.loads((source.adapter_dir / ADAPTER_FILES[0]).read_text()))
    if base.warm_adapter is not None:
        stack_adapters(base.warm_adapter, source.adapter_dir, adapter_dir, base.model)
    else:
        copy_adapter(source.adapter_dir, adapter_dir, base.model)
    if base.bundle is not None:
        shutil.copytree(base.bundle, staging / BASE_DIR)
        logger.info("Copied the base model %s into the export's %s/", base.bundle, BASE_DIR)
    base_path = str(staging / BASE_DIR) if base.bundle is not None else resolve_model(base.model)
    manifest = build_manifest(source, request, adapter_dir, base)
    _copy_tokenizer(source, base_path, staging)
    if request.merge:
        _write_merged(base_path, adapter_dir, staging)
    write_manifest_and_card(staging, manifest)
    return manifest


def _publish(staging: Path, out: Path, force: bool) -> None:
    """Rename `staging` to `out` (same folder, atomic); with `force` the old folder is moved aside first."""
    if not out.exists():
        staging.rename(out)
        return
    if not force:
        raise ExportError(f"{out} already exists; pass --force to replace it, or choose another --out.")
    retired = out.parent / f".{out.name}.old-{uuid.uuid4().hex[:8]}"
    out.rename(retired)
    staging.rename(out)
    shutil.rmtree(retired, ignore_errors=True)


def export_run(request: ExportRequest) -> Export:
    """Export a run's adapter as `request` says, verify it, and publish it atomically at `request.out`.

    Raises:
        ExportError: `run_dir` is not a run folder, holds no adapter for `step`, `out` exists without
            `force`, or a verification check failed (nothing is left under `out` then).
    """
    source = open_run(request.run_dir, request.step)
    out = request.out
    if out.exists() and not request.force:
        raise ExportError(f"{out} already exists; pass --force to replace it, or choose another --out.")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.parent / f".{out.name}.partial-{uuid.uuid4().hex[:8]}"
    try:
        manifest = _assemble(source, request, staging)
        records = verify_export(Export(staging, manifest), request.verify, request.verify_env, request.vllm_url)
        manifest = manifest.model_copy(update={"verification": records})
        write_manifest_and_card(staging, manifest)
        _publish(staging, out, request.force)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    logger.info("Exported %s (%s) to %s", source.run_dir, source.checkpoint_name, out)
    return Export(out, manifest)
