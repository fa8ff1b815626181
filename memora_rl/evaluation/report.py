"""Write evaluation results: per-question JSONL (appendable, for resume), results JSON, Markdown tables."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from memora_rl.data.jsonio import read_model_lines
from memora_rl.errors import EvalError
from memora_rl.evaluation.compare import MetricDelta
from memora_rl.evaluation.metrics import OVERALL
from memora_rl.evaluation.records import QuestionRecord

RECORDS_FILE = "records.jsonl"
RESULTS_FILE = "results.json"
TABLE_FILE = "results.md"

TABLE_COLUMNS = (
    ("questions", "n", "{:.0f}"),
    ("answer_correct", "correct", "{:.3f}"),
    ("evidence_recall", "ev. recall", "{:.3f}"),
    ("token_f1", "F1", "{:.3f}"),
    ("bleu1", "BLEU-1", "{:.3f}"),
    ("context_tokens_mean", "ctx tok", "{:.0f}"),
    ("context_tokens_p95", "ctx p95", "{:.0f}"),
    ("steps_mean", "steps", "{:.2f}"),
    ("invalid_action_rate", "invalid", "{:.3f}"),
    ("latency_p50_s", "p50 s alone", "{:.3f}"),
    ("latency_p95_s", "p95 s alone", "{:.3f}"),
    ("questions_per_s", "q/s at once", "{:.2f}"),
)
"""Latency columns: questions played one at a time; q/s: the rest, `concurrency` at once (see `EvalConfig`)."""


def read_records(path: Path) -> list[QuestionRecord]:
    """Records of a run folder or a records file; a torn last line (killed run) is ignored."""
    path = path / RECORDS_FILE if path.is_dir() else path
    if not path.is_file():
        raise EvalError(f"{path} does not exist: pass a folder written by `memora-rl eval` (it holds {RECORDS_FILE}).")

    def damaged(number: int, error: ValidationError) -> EvalError:
        return EvalError(f"{path}:{number} is not a valid evaluation record: {error}")

    return read_model_lines(path, QuestionRecord, damaged)


def append_record(path: Path, record: QuestionRecord) -> None:
    """Append one record and flush it, so a killed eval loses at most the question in flight."""
    with path.open("a") as handle:
        handle.write(record.model_dump_json() + "\n")
        handle.flush()


def _cell(value: object, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)


def metrics_table(metrics: dict[str, dict], title: str) -> str:
    """A Markdown table: one row per category, `overall` last."""
    header = "| category | " + " | ".join(label for _, label, _ in TABLE_COLUMNS) + " |"
    rule = "|---" * (len(TABLE_COLUMNS) + 1) + "|"
    rows = [f"### {title}", "", header, rule]
    for category in [c for c in metrics if c != OVERALL] + [OVERALL]:
        cells = [_cell(metrics[category].get(key), fmt) for key, _, fmt in TABLE_COLUMNS]
        rows.append(f"| {category} | " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def comparison_table(names: Sequence[str], overall: Sequence[dict], deltas: dict[str, list[MetricDelta]]) -> str:
    """Markdown: overall metrics side by side, then each run's paired deltas against the first."""
    header = "| run | " + " | ".join(label for _, label, _ in TABLE_COLUMNS) + " |"
    lines = [header, "|---" * (len(TABLE_COLUMNS) + 1) + "|"]
    for name, metrics in zip(names, overall, strict=True):
        lines.append(f"| {name} | " + " | ".join(_cell(metrics.get(k), f) for k, _, f in TABLE_COLUMNS) + " |")
    for name, run_deltas in deltas.items():
        lines += ["", f"Paired differences, {name} minus {names[0]} (95% bootstrap CI):", ""]
        lines += ["| metric | A | B | B - A | CI low | CI high | n |", "|---|---|---|---|---|---|---|"]
        for d in run_deltas:
            lines.append(
                f"| {d.metric} | {d.mean_a:.3f} | {d.mean_b:.3f} | {d.delta:+.3f} | {d.ci_low:+.3f} | "
                f"{d.ci_high:+.3f} | {d.questions} |"
            )
    return "\n".join(lines) + "\n"


def dropped_tasks_note(shared: int, dropped: dict[str, list[str]], shown: int = 10) -> str:
    """Markdown: which questions each run lost to the shared set (empty text when no run lost any).

    >>> print(dropped_tasks_note(2, {"a": ["t3", "t4"], "b": []}), end="")
    <BLANKLINE>
    Compared on the 2 questions every run recorded; left out:
    <BLANKLINE>
    - a: 2 (t3, t4)
    - b: 0
    """
    if not any(dropped.values()):
        return ""
    lines = ["", f"Compared on the {shared} questions every run recorded; left out:", ""]
    for name, task_ids in dropped.items():
        more = f" and {len(task_ids) - shown} more" if len(task_ids) > shown else ""
        listed = f" ({', '.join(task_ids[:shown])}{more})" if task_ids else ""
        lines.append(f"- {name}: {len(task_ids)}{listed}")
    return "\n".join(lines) + "\n"


def write_results(run_dir: Path, metrics: dict[str, dict], meta: dict) -> None:
    """Write results.json (metrics + run metadata) and results.md."""
    (run_dir / RESULTS_FILE).write_text(json.dumps({"meta": meta, "metrics": metrics}, indent=2, sort_keys=True))
    (run_dir / TABLE_FILE).write_text(metrics_table(metrics, title=str(meta.get("policy", run_dir.name))))
