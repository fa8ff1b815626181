"""Answer correctness: an answerer LLM answers from the retrieved memories, an LLM judge labels it.

The judge is generous in the LoCoMo style (lenient on wording and format; the same date
or time period counts) and answers with a JSON object validated by `LLMClient.chat_json`
(which also sends one repair request for a malformed answer). LLM failures propagate as
`LLMError`: a failed grade is never turned into WRONG.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Literal, Protocol, TypeVar

from pydantic import BaseModel, Field

from memora_rl.judge import prompts
from memora_rl.llm.client import ChatResult, Message
from memora_rl.memory.records import MemoryEntry

logger = logging.getLogger(__name__)

SchemaT = TypeVar("SchemaT", bound=BaseModel)

ANSWER_PHASE = "judge/answer"
LABEL_PHASE = "judge/label"


class ChatClient(Protocol):
    """What answer grading needs from `memora_rl.llm.client.LLMClient` (tests pass a scripted one)."""

    async def chat(
        self, messages: list[Message], *, phase: str, max_tokens: int | None = None, temperature: float | None = None
    ) -> ChatResult:
        """One chat answer."""
        ...

    async def chat_json(
        self,
        messages: list[Message],
        schema: type[SchemaT],
        *,
        phase: str,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> SchemaT:
        """One JSON answer validated against `schema`."""
        ...


class CorrectnessLabel(BaseModel):
    """The judge LLM's structured verdict."""

    reasoning: str = Field(max_length=2000)
    """One short sentence on why."""
    label: Literal["CORRECT", "WRONG"]


class AnswerVerdict(BaseModel):
    """The answerer's answer and, when a judge ran, its verdict."""

    answer: str
    """The answerer's reply, stripped."""
    correct: bool | None = None
    """True for CORRECT, False for WRONG, None when no judge was asked (token-F1 grading)."""
    reasoning: str = ""
    """The judge's one-sentence reason ("" when no judge was asked)."""


def render_memory_context(entries: Sequence[MemoryEntry]) -> str:
    """Render retrieved entries as one line each: `- [date] abstraction: value` (date when known).

    >>> entry = MemoryEntry(id="e1", graph_id="g", abstraction="Alice's employer", value="Alice works at Nova")
    >>> render_memory_context([entry])
    "- Alice's employer: Alice works at Nova"
    """
    if not entries:
        return prompts.NO_CONTEXT
    lines = []
    for entry in entries:
        moment = entry.updated_at or entry.created_at
        stamp = f"[{moment.date().isoformat()}] " if moment is not None else ""
        lines.append(f"- {stamp}{entry.abstraction}: {entry.value}")
    return "\n".join(lines)


def answer_messages(question: str, context: str) -> list[Message]:
    """The answerer's chat: system instructions, then the memories and the question."""
    return [
        {"role": "system", "content": prompts.ANSWER_SYSTEM},
        {"role": "user", "content": prompts.ANSWER_USER.format(context=context, question=question)},
    ]


def label_messages(question: str, gold: str, answer: str) -> list[Message]:
    """The judge's chat: grading rules, then question, gold answer and the answer to grade."""
    return [
        {"role": "system", "content": prompts.JUDGE_SYSTEM},
        {"role": "user", "content": prompts.JUDGE_USER.format(question=question, gold=gold, answer=answer)},
    ]


class AnswerGrader:
    """Answer a question from a context with one LLM and (optionally) label the answer with another.

    Args:
        answerer: Client of the answerer LLM.
        judge: Client of the judge LLM; None reuses `answerer`.
        answer_max_tokens: Token limit of one answer.
        judge_max_tokens: Token limit of one verdict.
    """

    def __init__(
        self,
        answerer: ChatClient,
        judge: ChatClient | None = None,
        *,
        answer_max_tokens: int = 48,
        judge_max_tokens: int = 128,
    ) -> None:
        self.answerer = answerer
        self.judge = judge if judge is not None else answerer
        self.answer_max_tokens = answer_max_tokens
        self.judge_max_tokens = judge_max_tokens

    async def aclose(self) -> None:
        """Close the clients' connections of the running event loop (clients that have `aclose`)."""
        for client in {id(self.answerer): self.answerer, id(self.judge): self.judge}.values():
            close = getattr(client, "aclose", None)
            if close is not None:
                await close()

    async def answer(self, question: str, context: str) -> str:
        """The answerer's short answer to `question` given a rendered `context`."""
        result = await self.answerer.chat(
            answer_messages(question, context), phase=ANSWER_PHASE, max_tokens=self.answer_max_tokens
        )
        return result.text.strip()

    async def label(self, question: str, gold: str, answer: str) -> CorrectnessLabel:
        """The judge's CORRECT/WRONG label of `answer` against `gold` (raises on LLM failure)."""
        return await self.judge.chat_json(
            label_messages(question, gold, answer),
            CorrectnessLabel,
            phase=LABEL_PHASE,
            max_tokens=self.judge_max_tokens,
        )

    async def grade(self, question: str, gold: str, context: str, *, with_label: bool = True) -> AnswerVerdict:
        """Answer from `context`, then (with_label) ask the judge whether the answer matches `gold`."""
        answer = await self.answer(question, context)
        if not with_label:
            return AnswerVerdict(answer=answer)
        verdict = await self.label(question, gold, answer)
        logger.debug("Graded %r against %r: %s", answer, gold, verdict.label)
        return AnswerVerdict(answer=answer, correct=verdict.label == "CORRECT", reasoning=verdict.reasoning)
