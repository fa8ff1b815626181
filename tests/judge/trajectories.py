"""Hand-built trajectories for judge tests (no env, no graph)."""

from __future__ import annotations

from memora_rl.core.layout import one_line
from memora_rl.core.tokens import count_tokens
from memora_rl.core.trajectory import ActionRecord, Trajectory
from memora_rl.data.records import Task
from memora_rl.memory.records import MemoryEntry


def make_entry(entry_id: str, value: str, turns: list[str]) -> MemoryEntry:
    return MemoryEntry(id=entry_id, graph_id="g1", abstraction=f"about {entry_id}", value=value, source_turn_ids=turns)


def factual_context_tokens(entries: list[MemoryEntry]) -> int:
    """Context tokens as `RetrievalEnv._trajectory` counts them in `factual` mode without a tokenizer."""
    context = "\n".join(f"{one_line(entry.abstraction)}: {one_line(entry.value)}" for entry in entries)
    return count_tokens(context) if context else 0


def build_trajectory(
    *,
    evidence: list[str] | None = None,
    entries: list[MemoryEntry] | None = None,
    kinds: list[str] | None = None,
    budget: float = 10.0,
    budget_spent: float = 0.0,
    answer: str = "Nova",
    question: str = "Where does Alice work?",
    context_tokens: int = 0,
) -> Trajectory:
    task = Task(
        id="t1",
        conversation_id="c1",
        question=question,
        answer=answer,
        evidence=["D1:1", "D2:3"] if evidence is None else evidence,
        category="single-hop",
    )
    actions = [
        ActionRecord(step=index, text=f"turn {index}", kind=kind, error="bad" if kind == "invalid" else None)
        for index, kind in enumerate(kinds or ["stop"])
    ]
    return Trajectory(
        task=task,
        graph_id="g1",
        actions=actions,
        retrieved=entries or [],
        budget=budget,
        budget_spent=budget_spent,
        stop_reason="stop",
        context_tokens=context_tokens,
    )
