"""Side-by-side comparison of evaluation runs with paired bootstrap confidence intervals."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np
from pydantic import BaseModel

from memora_rl.errors import EvalError
from memora_rl.evaluation.records import QuestionRecord
from memora_rl.judge.answer import is_abstention

PAIRED_METRICS = ("evidence_recall", "token_f1", "bleu1", "correct", "context_tokens", "steps", "judge_total")


class MetricDelta(BaseModel):
    """Mean difference (run B minus run A) of one metric over shared questions, with a CI."""

    metric: str
    mean_a: float
    mean_b: float
    delta: float
    ci_low: float
    ci_high: float
    questions: int


def paired_bootstrap(
    a: Sequence[float], b: Sequence[float], resamples: int = 2000, alpha: float = 0.05, seed: int = 0
) -> tuple[float, float, float]:
    """Mean of b - a and its (1 - alpha) percentile bootstrap interval over paired items.

    Item i of `a` and item i of `b` are the same question: each resample draws question indices
    once and keeps both runs' values of a drawn question together, so what the questions share
    (their difficulty) cancels out of the interval.

    >>> paired_bootstrap([0, 0, 0, 0], [1, 1, 1, 1])
    (1.0, 1.0, 1.0)

    Raises:
        EvalError: the two sequences differ in length (they are not paired) or are empty.
    """
    if len(a) != len(b):
        raise EvalError(f"Paired bootstrap needs one value per question in each run; got {len(a)} and {len(b)}.")
    diffs = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)  # (N,)
    if diffs.size == 0:
        raise EvalError("No shared questions to compare: the runs must be evaluated on the same tasks.")
    rng = np.random.default_rng(seed)
    samples = rng.integers(0, diffs.size, size=(resamples, diffs.size))  # (R, N)
    means = diffs[samples].mean(axis=1)  # (R,)
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return float(diffs.mean()), float(low), float(high)


def _metric_value(record: QuestionRecord, metric: str) -> float | None:
    """The record's value of `metric`; None when it has none, or for an abstention question's evidence recall."""
    if metric == "evidence_recall" and is_abstention(record.category):
        return None  # its evidence is every turn of the answer sessions: no retrieval target
    value = getattr(record, metric)
    return None if value is None else float(value)


def check_unique_task_ids(records: Sequence[QuestionRecord], run: str) -> None:
    """Refuse a run that holds a task id twice: pairing by task id would silently keep only one of them.

    Raises:
        EvalError: names the run, the repeated ids and the fix.
    """
    repeated = sorted(task_id for task_id, count in Counter(r.task_id for r in records).items() if count > 1)
    if repeated:
        shown = ", ".join(repeated[:10]) + (f" and {len(repeated) - 10} more" if len(repeated) > 10 else "")
        raise EvalError(
            f"Run {run!r} records {len(repeated)} task id(s) more than once ({shown}); each question must be "
            "recorded once to be paired. Re-run that eval with --restart, or remove the repeated lines."
        )


def split_shared_tasks(runs: Mapping[str, Sequence[QuestionRecord]]) -> tuple[set[str], dict[str, list[str]]]:
    """The task ids every run recorded, and per run the ids it recorded that the others lack (sorted).

    >>> from memora_rl.evaluation.records import QuestionRecord as R
    >>> make = lambda i: R(task_id=i, conversation_id="c", category="x", question="q", gold_answer="a",
    ...                    policy="p", evidence_recall=1.0, context_tokens=1, steps=1)
    >>> split_shared_tasks({"a": [make("t1"), make("t2")], "b": [make("t1")]})
    ({'t1'}, {'a': ['t2'], 'b': []})
    """
    ids = {name: {record.task_id for record in records} for name, records in runs.items()}
    shared = set.intersection(*ids.values()) if ids else set()
    return shared, {name: sorted(run_ids - shared) for name, run_ids in ids.items()}


def compare_runs(run_a: Sequence[QuestionRecord], run_b: Sequence[QuestionRecord], seed: int = 0) -> list[MetricDelta]:
    """Paired deltas for every metric both runs recorded on the questions they share.

    Raises:
        EvalError: a run records a task id twice, or the runs share no task id.
    """
    check_unique_task_ids(run_a, "A")
    check_unique_task_ids(run_b, "B")
    by_id_a = {record.task_id: record for record in run_a}
    shared = [(by_id_a[record.task_id], record) for record in run_b if record.task_id in by_id_a]
    if not shared:
        raise EvalError("The runs share no task ids; evaluate both on the same env and split.")
    deltas = []
    for metric in PAIRED_METRICS:
        pairs = [(_metric_value(x, metric), _metric_value(y, metric)) for x, y in shared]
        pairs = [(x, y) for x, y in pairs if x is not None and y is not None]
        if not pairs:
            continue
        values_a, values_b = zip(*pairs, strict=True)
        delta, low, high = paired_bootstrap(values_a, values_b, seed=seed)
        deltas.append(
            MetricDelta(
                metric=metric,
                mean_a=float(np.mean(values_a)),
                mean_b=float(np.mean(values_b)),
                delta=delta,
                ci_low=low,
                ci_high=high,
                questions=len(pairs),
            )
        )
    return deltas
