"""Write evaluation results: per-question JSONL (appendable, for resume), results JSON, Markdown tables."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from memora_rl.data.jsonio import read_model_lines
from memora_rl.errors import EvalError
from memora_rl.evaluation.compare import MetricDelta
from memora_rl.evaluation.metrics import OVERALL, ordered_categories, summarize_by_category
from memora_rl.evaluation.records import QuestionRecord

if TYPE_CHECKING:
    from memora_rl.evaluation.records import Throughput

RECORDS_FILE = "records.jsonl"
RESULTS_FILE = "results.json"
TABLE_FILE = "results.md"
PLOT_FILES = {
    "category": "category_evidence_recall.png",
    "recall_tokens": "recall_vs_context_tokens.png",
    "latency": "latency_cdf.png",
}

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

CATEGORY_COLUMNS = (
    ("questions", "n", "{:.0f}"),
    ("answer_correct", "judge", "{:.3f}"),
    ("token_f1", "F1", "{:.3f}"),
    ("bleu1", "BLEU-1", "{:.3f}"),
    ("context_tokens_mean", "ctx tok", "{:.0f}"),
    ("evidence_recall", "ev. recall", "{:.3f}"),
)
"""Columns of the per-category comparison of runs (`-` where a run has no value, e.g. no answerer)."""

ABSTENTION_NOTE = (
    "Abstention questions (the memories never say) are reported apart: their row's `correct` is the judge's "
    "verdict that the answer said so; they are left out of the overall evidence recall, F1 and BLEU-1."
)

USAGE_PHASES = {"judge/answer": "answerer", "judge/label": "judge"}
"""LLM usage phases of an eval run and their names in the cost table."""


def read_records(path: Path) -> list[QuestionRecord]:
    """Records of a run folder or a records file; a torn last line (killed run) is ignored."""
    path = path / RECORDS_FILE if path.is_dir() else path
    if not path.is_file():
        raise EvalError(f"{path} does not exist: pass a folder written by `memora-rl eval` (it holds {RECORDS_FILE}).")

    def damaged(number: int, error: ValidationError) -> EvalError:
        return EvalError(f"{path}:{number} is not a valid evaluation record: {error}")

    return read_model_lines(path, QuestionRecord, damaged)


def record_line(record: QuestionRecord) -> str:
    """One line of `records.jsonl`."""
    return record.model_dump_json() + "\n"


def append_record(path: Path, record: QuestionRecord) -> None:
    """Append one record and flush it, so a killed eval loses at most the question in flight."""
    with path.open("a") as handle:
        handle.write(record_line(record))
        handle.flush()


def _cell(value: object, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)


def metrics_table(metrics: dict[str, dict], title: str) -> str:
    """A Markdown table: one row per category, `overall` last."""
    header = "| category | " + " | ".join(label for _, label, _ in TABLE_COLUMNS) + " |"
    rule = "|---" * (len(TABLE_COLUMNS) + 1) + "|"
    rows = [f"### {title}", "", header, rule]
    for category in ordered_categories(metrics):
        cells = [_cell(metrics[category].get(key), fmt) for key, _, fmt in TABLE_COLUMNS]
        rows.append(f"| {category} | " + " | ".join(cells) + " |")
    if metrics[OVERALL].get("abstention_questions"):
        rows += ["", ABSTENTION_NOTE]
    return "\n".join(rows) + "\n"


def category_comparison_table(names: Sequence[str], metrics: Sequence[dict[str, dict]]) -> str:
    """Markdown: per category (answerable ones, overall, then abstention), one row per run with `CATEGORY_COLUMNS`.

    >>> run = {"temporal": {"questions": 2, "token_f1": 0.5}, "overall": {"questions": 2, "token_f1": 0.5}}
    >>> print(category_comparison_table(["a"], [run]).splitlines()[5])
    | temporal | a | 2 | - | 0.500 | - | - | - |
    """
    header = "| category | run | " + " | ".join(label for _, label, _ in CATEGORY_COLUMNS) + " |"
    lines = ["", "Per category, on the shared questions:", "", header, "|---" * (len(CATEGORY_COLUMNS) + 2) + "|"]
    for category in ordered_categories({c for run in metrics for c in run}):
        for name, run in zip(names, metrics, strict=True):
            values = run.get(category)
            if values is None:
                continue
            cells = [_cell(values.get(key), fmt) for key, _, fmt in CATEGORY_COLUMNS]
            lines.append(f"| {category} | {name} | " + " | ".join(cells) + " |")
    if any(run.get(OVERALL, {}).get("abstention_questions") for run in metrics):
        lines += ["", ABSTENTION_NOTE]
    return "\n".join(lines) + "\n"


def usage_table(usage: dict[str, dict[str, float]]) -> str:
    """Markdown: the answerer's and judge's cost (requests and tokens), one row per phase; empty without usage.

    >>> print(usage_table({"judge/answer": {"calls": 2, "cached_calls": 1, "http_requests": 1,
    ...                                     "prompt_tokens": 80, "completion_tokens": 4}}), end="")
    <BLANKLINE>
    LLM cost (tokens the endpoints reported; cached answers cost none):
    <BLANKLINE>
    | phase | calls | cached | http requests | prompt tokens | completion tokens |
    |---|---|---|---|---|---|
    | answerer | 2 | 1 | 1 | 80 | 4 |
    """
    if not usage:
        return ""
    lines = ["", "LLM cost (tokens the endpoints reported; cached answers cost none):", ""]
    lines += ["| phase | calls | cached | http requests | prompt tokens | completion tokens |", "|---" * 6 + "|"]
    keys = ("calls", "cached_calls", "http_requests", "prompt_tokens", "completion_tokens")
    for phase, counters in usage.items():
        cells = " | ".join(str(int(counters.get(key, 0))) for key in keys)
        lines.append(f"| {USAGE_PHASES.get(phase, phase)} | {cells} |")
    return "\n".join(lines) + "\n"


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
    """Write results.json (metrics + run metadata) and results.md (metrics, then `meta["llm_usage"]` as cost)."""
    (run_dir / RESULTS_FILE).write_text(json.dumps({"meta": meta, "metrics": metrics}, indent=2, sort_keys=True))
    table = metrics_table(metrics, title=str(meta.get("policy", run_dir.name)))
    (run_dir / TABLE_FILE).write_text(table + usage_table(meta.get("llm_usage") or {}))


def write_run_plots(out: Path, metrics: dict[str, dict], records: dict[str, list[QuestionRecord]]) -> list[Path]:
    """The three PNG plots (per-category evidence recall, recall vs context tokens, latency CDF)."""
    from memora_rl.evaluation.plots import plot_category_bars, plot_latency_cdf, plot_recall_vs_tokens

    return [
        plot_category_bars(metrics, "evidence_recall", out / PLOT_FILES["category"]),
        plot_recall_vs_tokens(records, out / PLOT_FILES["recall_tokens"]),
        plot_latency_cdf(records, out / PLOT_FILES["latency"]),
    ]


def write_run_report(
    out: Path, records: Sequence[QuestionRecord], meta: dict[str, Any], throughput: Throughput | None
) -> dict[str, dict]:
    """A run folder's results.json, results.md and plots from its records (`memora-rl eval` and `eval merge`).

    Records are summarized in task-id order, so a run and the merge of its shards sum the same floats in the
    same order; `throughput` is the invocation's concurrent phase (None for a merge: its shards ran apart).
    """
    ordered = sorted(records, key=lambda record: record.task_id)
    metrics = summarize_by_category(ordered)
    metrics[OVERALL]["questions_per_s"] = throughput.questions_per_s if throughput is not None else None
    metrics[OVERALL]["throughput_in_flight"] = throughput.in_flight if throughput is not None else None
    write_results(out, metrics, meta)
    write_run_plots(out, {meta["policy"]: metrics}, {meta["policy"]: ordered})
    return metrics
