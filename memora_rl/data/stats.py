"""Size figures of a corpus (conversations, sessions, turns, tokens, questions per category)."""

from __future__ import annotations

from collections import Counter
from typing import get_args

from pydantic import BaseModel

from memora_rl.data.records import CategoryName, Corpus

_CATEGORY_ORDER = {name: position for position, name in enumerate(get_args(CategoryName))}


class CategoryStats(BaseModel):
    """Question counts of one category."""

    category: str
    questions: int
    excluded: int
    """Questions flagged `excluded` (left out of splits by default)."""
    mean_evidence_turns: float


class CorpusStats(BaseModel):
    """Corpus-wide counts; `tokens` are whitespace-separated words of the turn texts."""

    name: str
    conversations: int
    sessions: int
    turns: int
    tokens: int
    """Whitespace-separated words over all turn texts (not model tokens)."""
    questions: int
    warnings: int
    categories: list[CategoryStats]


def corpus_stats(corpus: Corpus) -> CorpusStats:
    """Count what a corpus holds; categories are listed in `records.CategoryName` order."""
    sessions = sum(len(conversation.sessions) for conversation in corpus.conversations)
    turns = [turn for conversation in corpus.conversations for turn in conversation.turns()]
    questions = Counter(task.category for task in corpus.tasks)
    excluded = Counter(task.category for task in corpus.tasks if task.excluded)
    evidence: Counter[str] = Counter()
    for task in corpus.tasks:
        evidence[task.category] += len(task.evidence)
    categories = [
        CategoryStats(
            category=category,
            questions=count,
            excluded=excluded[category],
            mean_evidence_turns=round(evidence[category] / count, 2),
        )
        for category, count in sorted(
            questions.items(), key=lambda item: _CATEGORY_ORDER.get(item[0], len(_CATEGORY_ORDER))
        )
    ]
    return CorpusStats(
        name=corpus.name,
        conversations=len(corpus.conversations),
        sessions=sessions,
        turns=len(turns),
        tokens=sum(len(turn.text.split()) for turn in turns),
        questions=len(corpus.tasks),
        warnings=len(corpus.warnings),
        categories=categories,
    )
