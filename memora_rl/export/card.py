"""The model card (README.md) of an export, rendered from its manifest: a pure function."""

from __future__ import annotations

import json
from typing import Any

from memora_rl.policy.export_folder import ADAPTER_DIR, BASE_DIR, MERGED_DIR, ExportManifest

CARD_METRICS = (
    ("questions", "n"),
    ("answer_correct", "correct"),
    ("evidence_recall", "ev. recall"),
    ("token_f1", "F1"),
    ("context_tokens_mean", "ctx tok"),
    ("steps_mean", "steps"),
    ("invalid_action_rate", "invalid"),
)
TRAIN_METRIC_PREFIXES = ("step", "reward", "train/", "rollout/", "kl", "loss")


def _number(value: Any) -> str:
    """Short rendering of a metric value.

    >>> _number(0.123456), _number(None), _number(12)
    ('0.123', '-', '12')
    """
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _eval_table(results: list[dict[str, Any]]) -> list[str]:
    """Markdown rows of the eval runs' overall metrics."""
    if not results:
        return ["No offline evaluation was attached. Run `memora-rl eval --policy <this folder> ...`."]
    header = "| policy | env | split | " + " | ".join(label for _, label in CARD_METRICS) + " |"
    lines = [header, "|---" * (len(CARD_METRICS) + 3) + "|"]
    for result in results:
        overall = result.get("overall", {})
        cells = " | ".join(_number(overall.get(key)) for key, _ in CARD_METRICS)
        lines.append(
            f"| {result.get('policy', '?')} | {result.get('env', '?')} | {result.get('split', '?')} | {cells} |"
        )
    return lines


def _train_metrics(metrics: dict[str, Any]) -> list[str]:
    """Bullet list of the last logged training metrics (rewards, KL, loss)."""
    keys = [k for k in sorted(metrics) if k.startswith(TRAIN_METRIC_PREFIXES) and not isinstance(metrics[k], dict)]
    if not keys:
        return ["No training metrics were logged."]
    return [f"- `{key}`: {_number(metrics[key])}" for key in keys[:25]]


def _base_lines(manifest: ExportManifest) -> list[str]:
    """The model card's lines on the base model and the run's warm start (no path outside the export)."""
    bundled = manifest.base_model == BASE_DIR
    lines = [
        f"- Base model: `{BASE_DIR}/` in this folder (no registry model)"
        if bundled
        else f"- Base model: `{manifest.base_model}` (a registry name or hub id)"
    ]
    warm = manifest.warm_start
    if warm and warm.get("how") == "stacked":
        lines.append(
            "- Warm start: its LoRA (merged into the base before GRPO) and GRPO's LoRA are stacked into "
            f"`{ADAPTER_DIR}/` (one rank-{manifest.adapter.get('r', '?')} adapter holding both updates)"
        )
    elif warm:
        lines.append(
            f"- Warm start: merged into `{BASE_DIR}/` (the run kept no warm-start adapter to stack); "
            f"`{ADAPTER_DIR}/` is GRPO's LoRA on it"
        )
    return lines


def _serve_lines(manifest: ExportManifest) -> list[str]:
    """Shell lines that serve the export with vLLM: the merged model, or the base with the adapter at runtime."""
    from memora_rl.llm.server import served_lora_rank

    base = f"<this folder>/{BASE_DIR}" if manifest.base_model == BASE_DIR else manifest.base_model
    rank = served_lora_rank(int(manifest.adapter.get("r") or 8))
    lines = [f"memora-rl serve --model <this folder>/{MERGED_DIR} --no-enable-lora"] if manifest.merged else []
    return [*lines, f"memora-rl serve --model {base} --max-lora-rank {rank} --lora policy=<this folder>/{ADAPTER_DIR}"]


def render_model_card(manifest: ExportManifest) -> str:
    """README.md of an export: what it is, how to load and serve it, training setup, data split, metrics."""
    config = manifest.train_config
    lora = manifest.adapter
    split = manifest.data_split
    lines = [
        f"# memora-rl retrieval policy `{manifest.export_id}`",
        "",
        "A LoRA-tuned retrieval policy for the memora-rl harmonic memory graph: given a question, it walks",
        'the graph with JSON actions (`{"action": "expand", "ids": [...]}`, `{"action": "refine", "query": "..."}`,',
        '`{"action": "stop"}`) under a budget. Trained with GRPO (TRL) on trajectory-judge rewards.',
        "",
        "## Model",
        *_base_lines(manifest),
        f"- Adapter: `{ADAPTER_DIR}/` (LoRA r={lora.get('r', '?')}, alpha={lora.get('lora_alpha', '?')}, "
        f"targets {', '.join(lora.get('target_modules') or []) or '?'})",
        f"- Merged model: `{MERGED_DIR}/` ({manifest.merged_dtype})"
        if manifest.merged
        else "- Merged model: not exported",
        f"- Source: `{manifest.source_run}` / `{manifest.source_checkpoint}` (step {_number(manifest.step)})",
        f"- Exported {manifest.created_at} from memora-rl commit `{manifest.git_sha or 'unknown'}`"
        + (" (uncommitted changes)" if manifest.git_dirty else ""),
        "",
        "## Use",
        "```bash",
        f"memora-rl eval --env {manifest.env or '<env>'} --policy <this folder> --split test"
        + ("  # plays the run's env overrides (Training, below)" if manifest.env_overrides else ""),
        *_serve_lines(manifest),
        "```",
        "",
        "## Training",
        f"- Env: `{manifest.env}`; split `{split.get('split', '?')}` with {len(split.get('task_ids', []))} tasks"
        + (f"; overrides `{' '.join(manifest.env_overrides)}`" if manifest.env_overrides else ""),
        f"- GRPO: {json.dumps(config.get('grpo', {}), sort_keys=True)}",
        f"- Backend: {config.get('backend', '?')}; seed {config.get('seed', '?')}",
        "- Full resolved config and task ids: `export.json`",
        "",
        "### Last training metrics",
        *_train_metrics(manifest.train_metrics),
        "",
        "## Offline evaluation",
        *_eval_table(manifest.eval_results),
        "",
        "## Verification before publishing",
    ]
    for check in manifest.verification:
        lines.append(
            f"- {check.backend} ({check.weights}): first action `{check.action_text.strip()[:120]}` "
            f"parsed as `{check.action_kind}` in {check.seconds:.1f} s"
        )
    if not manifest.verification:
        lines.append("- not verified (`--verify none`)")
    return "\n".join(lines) + "\n"
