"""What an eval run records: one `records.jsonl` line per answered task, and the throughput of its concurrent phase."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, Field

from memora_rl.core.walk import WalkStep


class QuestionRecord(BaseModel):
    """What one policy did on one held-out question, and how it scored."""

    task_id: str
    conversation_id: str
    category: str
    question: str
    gold_answer: str
    policy: str
    retrieved_ids: list[str] = Field(default_factory=list)
    retrieved_turn_ids: list[str] = Field(default_factory=list)
    evidence_recall: float
    """Share of gold evidence turns covered by the retrieved context, in [0, 1]."""
    answer: str | None = None
    """The answerer LLM's short answer (None when no answerer endpoint is configured)."""
    correct: bool | None = None
    """The judge LLM's verdict (None when no judge endpoint is configured)."""
    token_f1: float | None = None
    bleu1: float | None = None
    context_tokens: int
    steps: int
    action_counts: dict[str, int] = Field(default_factory=dict)
    """Actions taken by kind: expand, refine, stop, invalid."""
    judge_total: float | None = None
    """The trajectory judge's reward J (graph policies only)."""
    search_latency_s: float | None = 0.0
    """Seconds the env reported spending in retrieval (query embedding, search, frontier); None when unreported."""
    total_latency_s: float = 0.0
    """Seconds from reset to the final step, policy calls included."""
    in_flight: int | None = None
    """Questions played at once when this one was (1: a latency measurement; None: not recorded)."""
    walk: list[WalkStep] | None = None
    """Each state the graph policy saw and its action, then the final state (None: a context baseline, or a
    record written before walks were kept); the web page's walk viewer steps through it."""


@dataclass(frozen=True)
class Throughput:
    """The concurrent phase of one eval invocation: questions played, wall seconds, episodes in flight."""

    questions: int
    wall_s: float
    in_flight: int

    @property
    def questions_per_s(self) -> float | None:
        """Finished questions per wall second (None when nothing was played)."""
        return self.questions / self.wall_s if self.questions and self.wall_s > 0 else None
