"""Aggregate per-question records into per-category and overall metrics.

Abstention questions (`memora_rl.judge.answer.is_abstention`: the memories never say) are
reported apart: their evidence falls back to every turn of the answer sessions and their gold
answer is an explanation, so evidence recall, token F1 and BLEU-1 mean nothing for them. Their
own row shows the judge's score (did the answer say the memories do not tell?), context tokens
and the rest; the overall evidence recall leaves them out, and `abstention_questions` says how
many there were.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

import numpy as np

from memora_rl.evaluation.records import QuestionRecord
from memora_rl.judge.answer import is_abstention

OVERALL = "overall"


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if values else None


def _percentile(values: Sequence[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def summarize(records: Sequence[QuestionRecord]) -> dict[str, float | int | dict[str, float] | None]:
    """Metrics of one group of records; latencies come from the questions played alone (`in_flight == 1`).

    Evidence recall averages the non-abstention questions only (None when the group has none);
    token F1 and BLEU-1 skip records without them (abstention records carry None).

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
    answerable = [r for r in records if not is_abstention(r.category)]  # evidence recall means something
    solo = [r for r in records if r.in_flight == 1]  # latency is what a question costs alone, not queued
    searched = [r.search_latency_s for r in solo if r.search_latency_s is not None]  # None: not reported
    return {
        "questions": len(records),
        "abstention_questions": len(records) - len(answerable),
        "answer_correct": _mean(judged),
        "evidence_recall": _mean([r.evidence_recall for r in answerable]),
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
    """`summarize` per category plus an `overall` group, in `ordered_categories` order."""
    groups: dict[str, list[QuestionRecord]] = defaultdict(list)
    for record in records:
        groups[record.category].append(record)
    result = {category: summarize(groups[category]) for category in groups}
    result[OVERALL] = summarize(records)
    return {category: result[category] for category in ordered_categories(result)}


def ordered_categories(categories: Iterable[str]) -> list[str]:
    """Table order: answerable categories by name, then `overall`, then abstention categories (reported apart).

    >>> ordered_categories(["overall", "abstention", "temporal", "multi-session"])
    ['multi-session', 'temporal', 'overall', 'abstention']
    """
    names = set(categories) - {OVERALL}
    answerable = sorted(name for name in names if not is_abstention(name))
    return [*answerable, OVERALL, *sorted(names - set(answerable))]
