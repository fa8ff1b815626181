"""Non-graph eval baselines: RAG over raw turns (500-token chunks, top 3) and the full conversation.

They need no env and no memory graph. Each returns a `RetrievedContext` (text, the turn ids
it covers, its token count), so evaluation scores evidence recall and context tokens for
them the same way as for graph policies.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np
from pydantic import BaseModel, Field

from memora_rl.data.records import Conversation, Session, Turn
from memora_rl.errors import ConfigError

TokenCounter = Callable[[str], int]
"""Counts the tokens of a text (default: whitespace-separated words)."""


def count_words(text: str) -> int:
    """Whitespace-separated words of `text`: the default token count of the context baselines.

    >>> count_words("Alice  works  at Nova")
    4
    """
    return len(text.split())


class RetrievedContext(BaseModel):
    """What a context baseline hands to the answerer, with what evaluation needs to score it."""

    text: str
    """The context, one turn per line."""
    turn_ids: list[str] = Field(default_factory=list)
    """Ids of the turns in `text` (for evidence recall)."""
    tokens: int
    """Tokens of `text` under the baseline's token counter."""
    retrieved_ids: list[str] = Field(default_factory=list)
    """Ids of the memory entries in `text` (baselines reading a graph, e.g. NEMORI retrieval; empty for raw turns)."""


class ContextBaseline(Protocol):
    """A non-graph baseline: a conversation and a question in, a context out."""

    name: str

    def retrieve_context(self, conversation: Conversation, question: str) -> RetrievedContext:
        """The context this baseline gives the answerer for `question`."""
        ...


class Chunk(BaseModel):
    """Consecutive turns packed up to the chunk size."""

    lines: list[str]
    """One rendered line per turn."""
    turn_ids: list[str]

    @property
    def text(self) -> str:
        """The chunk's turns, one per line."""
        return "\n".join(self.lines)


def render_turn(turn: Turn, session: Session) -> str:
    """One line per turn: `[date] speaker: text` (date of the turn, else of its session, when known)."""
    moment = turn.time or session.time
    stamp = f"[{moment.date().isoformat()}] " if moment is not None else ""
    return f"{stamp}{turn.speaker}: {' '.join(turn.text.split())}"


def chunk_conversation(conversation: Conversation, chunk_tokens: int, count: TokenCounter) -> list[Chunk]:
    """Pack consecutive turns into chunks of at most `chunk_tokens` tokens (a longer turn is its own chunk)."""
    chunks: list[Chunk] = []
    lines: list[str] = []
    ids: list[str] = []
    size = 0
    for session in conversation.sessions:
        for turn in session.turns:
            line = render_turn(turn, session)
            line_tokens = count(line)
            if lines and size + line_tokens > chunk_tokens:
                chunks.append(Chunk(lines=lines, turn_ids=ids))
                lines, ids, size = [], [], 0
            lines.append(line)
            ids.append(turn.id)
            size += line_tokens
    if lines:
        chunks.append(Chunk(lines=lines, turn_ids=ids))
    return chunks


def join_chunks(chunks: Sequence[Chunk], count: TokenCounter) -> RetrievedContext:
    """One context from chunks, separated by blank lines."""
    text = "\n\n".join(chunk.text for chunk in chunks)
    turn_ids = [turn_id for chunk in chunks for turn_id in chunk.turn_ids]
    return RetrievedContext(text=text, turn_ids=turn_ids, tokens=count(text) if text else 0)


class RagBaseline:
    """Return the top-k chunks of the conversation for the question (best first).

    A chunk's score is the highest cosine between the question and any of its turns: the
    default embedder reads at most 256 word pieces, so embedding a 500-word chunk whole
    would ignore its second half.

    Args:
        embedder: Any encoder with `encode(texts) -> (N, D)` unit rows; None = `get_embedder()`.
        chunk_tokens: Chunk size in tokens of `count_tokens` (500 in the published setup).
        top_k: Chunks returned (3 in the published setup).
        count_tokens: Token counter; default whitespace words (pass a tokenizer-based one to match a model).
    """

    name = "rag"

    def __init__(
        self,
        embedder: object | None = None,
        chunk_tokens: int = 500,
        top_k: int = 3,
        count_tokens: TokenCounter = count_words,
    ) -> None:
        if chunk_tokens < 1 or top_k < 1:
            raise ConfigError(f"RAG needs chunk_tokens >= 1 and top_k >= 1, got {chunk_tokens} and {top_k}.")
        if embedder is None:
            from memora_rl.embedding import get_embedder

            embedder = get_embedder()
        self.embedder = embedder
        self.chunk_tokens = chunk_tokens
        self.top_k = top_k
        self.count_tokens = count_tokens
        self._index: dict[str, tuple[list[Chunk], np.ndarray, np.ndarray]] = {}

    def _chunks(self, conversation: Conversation) -> tuple[list[Chunk], np.ndarray, np.ndarray]:
        """Chunks, turn vectors (T, D) and each turn's chunk index (T,), computed once per conversation."""
        if conversation.id not in self._index:
            chunks = chunk_conversation(conversation, self.chunk_tokens, self.count_tokens)
            lines = [line for chunk in chunks for line in chunk.lines]
            owner = np.array([index for index, chunk in enumerate(chunks) for _ in chunk.lines], dtype=np.int64)
            vectors = np.asarray(self.embedder.encode(lines))  # type: ignore[attr-defined]  # (T, D)
            self._index[conversation.id] = (chunks, vectors, owner)
        return self._index[conversation.id]

    def retrieve_context(self, conversation: Conversation, question: str) -> RetrievedContext:
        """The top-k chunks for `question`, best first."""
        chunks, vectors, owner = self._chunks(conversation)
        if not chunks:
            return RetrievedContext(text="", tokens=0)
        query = np.asarray(self.embedder.encode([question]))[0]  # type: ignore[attr-defined]  # (D,)
        scores = np.full(len(chunks), -np.inf)  # (C,)
        np.maximum.at(scores, owner, vectors @ query)
        best = np.argsort(-scores, kind="stable")[: self.top_k]
        return join_chunks([chunks[index] for index in best], self.count_tokens)


class FullContextBaseline:
    """The whole conversation as context (every turn, in order).

    Args:
        count_tokens: Token counter; default whitespace words.
    """

    name = "full_context"

    def __init__(self, count_tokens: TokenCounter = count_words) -> None:
        self.count_tokens = count_tokens

    def retrieve_context(self, conversation: Conversation, question: str) -> RetrievedContext:
        """Every turn of `conversation`; the question is not used."""
        lines = [render_turn(turn, session) for session in conversation.sessions for turn in session.turns]
        text = "\n".join(lines)
        turn_ids = [turn.id for turn in conversation.turns()]
        return RetrievedContext(text=text, turn_ids=turn_ids, tokens=self.count_tokens(text) if text else 0)


def make_context_baseline(name: str, count_tokens: TokenCounter = count_words) -> ContextBaseline:
    """Build a non-graph baseline by name (`rag`, `full_context`)."""
    if name == RagBaseline.name:
        return RagBaseline(count_tokens=count_tokens)
    if name == FullContextBaseline.name:
        return FullContextBaseline(count_tokens)
    raise ConfigError(f"Unknown context baseline {name!r}; choose one of ['full_context', 'rag'].")
