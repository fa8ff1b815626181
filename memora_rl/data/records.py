"""Typed records every data loader returns: conversations with stable turn ids, and tasks."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

CategoryName = Literal[
    "multi-hop",
    "temporal",
    "open-domain",
    "single-hop",
    "adversarial",
    "knowledge-update",
    "preference",
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "temporal-reasoning",
    "abstention",
]


class Turn(BaseModel):
    """One message of a conversation; `id` is stable across runs (LoCoMo style `D3:7`)."""

    model_config = ConfigDict(frozen=True)

    id: str
    speaker: str
    text: str
    """Message text; an image turn carries `[shares an image: <caption>]` here."""
    session_index: int
    time: datetime | None = None


class Session(BaseModel):
    """A dated block of turns (one chat sitting)."""

    model_config = ConfigDict(frozen=True)

    index: int
    time: datetime | None = None
    turns: list[Turn]


class Conversation(BaseModel):
    """A long multi-session conversation: the source a memory graph is built from."""

    model_config = ConfigDict(frozen=True)

    id: str
    speakers: list[str]
    sessions: list[Session]

    def turns(self) -> Iterator[Turn]:
        """All turns in session order."""
        for session in self.sessions:
            yield from session.turns

    def turn_ids(self) -> set[str]:
        """The ids of every turn, for evidence checks."""
        return {turn.id for turn in self.turns()}

    def first_sessions(self, count: int) -> Conversation:
        """This conversation cut to its first `count` sessions."""
        return self.model_copy(update={"sessions": self.sessions[:count]})


class Task(BaseModel):
    """A question about one conversation, with its gold answer and evidence turn ids."""

    model_config = ConfigDict(frozen=True)

    id: str
    conversation_id: str
    question: str
    answer: str
    evidence: list[str] = Field(default_factory=list)
    """Turn ids that support the answer (only the well-formed ones that resolve)."""
    category: CategoryName
    question_time: datetime | None = None
    excluded: bool = False
    """True for questions the published evaluations skip (LoCoMo adversarial); kept out of splits by default."""


class Corpus(BaseModel):
    """What a loader returns: conversations, tasks, and the problems it tolerated."""

    name: str
    conversations: list[Conversation]
    tasks: list[Task]
    warnings: list[str] = Field(default_factory=list)
    """Human-readable notes on tolerated quirks (malformed or unresolved evidence ids)."""

    def first_sessions(self, count: int) -> Corpus:
        """Each conversation cut to its first `count` sessions, with the tasks whose evidence lies in them."""
        cut = [conversation.first_sessions(count) for conversation in self.conversations]
        kept = {turn_id for conversation in cut for turn_id in conversation.turn_ids()}
        tasks = [task for task in self.tasks if set(task.evidence) <= kept]
        return self.model_copy(update={"conversations": cut, "tasks": tasks})

    def conversation(self, conversation_id: str) -> Conversation:
        """Look up a conversation by id."""
        for conversation in self.conversations:
            if conversation.id == conversation_id:
                return conversation
        raise KeyError(conversation_id)
