"""Aggregate per-question records into per-category and overall metrics."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

import numpy as np

from memora_rl.evaluation.records import QuestionRecord

OVERALL = "overall"


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if values else None


def _percentile(values: Sequence[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def summarize(records: Sequence[QuestionRecord]) -> dict[str, float | int | dict[str, float] | None]:
    """Metrics of one group of records; latencies come from the questions played alone (`in_flight == 1`).

    >>> r = QuestionRecord(task_id="t", conversation_id="c", category="temporal", question="q",
    ...     gold_answer="a", policy="p", evidence_recall=0.5, context_tokens=10, steps=2,
    ...     action_counts={"expand": 1, "stop": 1})
    >>> summarize([r])["evidence_recall"], summarize([r])["action_mix"]["expand"]
    (0.5, 0.5)
    """
    actions: Counter[str] = Counter()
    for record in records:
        actions.update(record.action_counts)
    total_actions = sum(actions.values())
    judged = [float(r.correct) for r in records if r.correct is not None]
    solo = [r for r in records if r.in_flight == 1]  # latency is what a question costs alone, not queued
    searched = [r.search_latency_s for r in solo if r.search_latency_s is not None]  # None: not reported
    return {
        "questions": len(records),
        "answer_correct": _mean(judged),
        "evidence_recall": _mean([r.evidence_recall for r in records]),
        "token_f1": _mean([r.token_f1 for r in records if r.token_f1 is not None]),
        "bleu1": _mean([r.bleu1 for r in records if r.bleu1 is not None]),
        "judge_total": _mean([r.judge_total for r in records if r.judge_total is not None]),
        "context_tokens_mean": _mean([r.context_tokens for r in records]),
        "context_tokens_p95": _percentile([r.context_tokens for r in records], 95),
        "steps_mean": _mean([r.steps for r in records]),
        "invalid_action_rate": (actions["invalid"] / total_actions) if total_actions else 0.0,
        "action_mix": {kind: count / total_actions for kind, count in sorted(actions.items())} if total_actions else {},
        "search_latency_p50_s": _percentile(searched, 50),
        "search_latency_p95_s": _percentile(searched, 95),
        "latency_questions": len(solo),
        "latency_p50_s": _percentile([r.total_latency_s for r in solo], 50),
        "latency_p95_s": _percentile([r.total_latency_s for r in solo], 95),
    }


def summarize_by_category(records: Sequence[QuestionRecord]) -> dict[str, dict]:
    """`summarize` per category plus an `overall` group, categories sorted by name."""
    groups: dict[str, list[QuestionRecord]] = defaultdict(list)
    for record in records:
        groups[record.category].append(record)
    result = {category: summarize(groups[category]) for category in sorted(groups)}
    result[OVERALL] = summarize(records)
    return result
