"""Answer correctness: an answerer LLM answers from the retrieved memories, an LLM judge labels it.

The judge is generous in the LoCoMo style (lenient on wording and format; the same date
or time period counts) and answers with a JSON object validated by `LLMClient.chat_json`
(which also sends one repair request for a malformed answer). LLM failures propagate as
`LLMError`: a failed grade is never turned into WRONG. Abstention questions (category
`abstention`: the memories never say) are labelled with a prompt variant that tells the
judge the right answer is "the memories do not say"; the answerer is not told.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Literal, Protocol, TypeVar

from pydantic import BaseModel, Field, field_validator

from memora_rl.core.context import render_context
from memora_rl.core.state import ContextMode
from memora_rl.judge import prompts
from memora_rl.llm.client import ChatResult, Message
from memora_rl.memory.records import Episode, MemoryEntry

logger = logging.getLogger(__name__)

SchemaT = TypeVar("SchemaT", bound=BaseModel)

ANSWER_PHASE = "judge/answer"
LABEL_PHASE = "judge/label"

REASONING_MAX_CHARS = 160
"""Length limit of the judge's reasoning. It is part of the JSON schema, so guided decoding (vLLM) closes the
string in time: a small judge that repeats itself would otherwise run to max_tokens and never write its label.
Even at one token per character, the reasoning and the label fit the default 200-token verdict limit."""

ABSTENTION_CATEGORIES: frozenset[str] = frozenset({"abstention"})
"""Categories whose questions the memories cannot answer (LongMemEval `_abs`): the right answer is to say so."""


def is_abstention(category: str) -> bool:
    """True for a category whose right answer is "the memories do not say".

    >>> is_abstention("abstention"), is_abstention("temporal")
    (True, False)
    """
    return category in ABSTENTION_CATEGORIES


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

    reasoning: str = Field(max_length=REASONING_MAX_CHARS)
    """One short sentence on why."""
    label: Literal["CORRECT", "WRONG"]
    """The verdict; written after the reasoning, so the judge decides having said why."""

    @field_validator("label", mode="before")
    @classmethod
    def _canonical_label(cls, value: object) -> object:
        """Accept the label in any case with stray spaces or a full stop (`"correct."`); nothing else.

        >>> CorrectnessLabel(reasoning="same", label=" correct.").label
        'CORRECT'
        """
        return value.strip().rstrip(".").upper() if isinstance(value, str) else value


class AnswerVerdict(BaseModel):
    """The answerer's answer and, when a judge ran, its verdict."""

    answer: str
    """The answerer's reply, stripped."""
    correct: bool | None = None
    """True for CORRECT, False for WRONG, None when no judge was asked (token-F1 grading)."""
    reasoning: str = ""
    """The judge's one-sentence reason ("" when no judge was asked)."""


def render_memory_context(
    entries: Sequence[MemoryEntry], episodes: Iterable[Episode] = (), mode: ContextMode = "factual"
) -> str:
    """Render retrieved entries for the answerer in a context mode (`memora_rl.core.context`).

    `factual` (the default) is one line each: `- [date] abstraction: value` (date when known);
    `episodic` and `episodic+factual` read `episodes` (a trajectory's `episodes` and `context_mode`).

    >>> entry = MemoryEntry(id="e1", graph_id="g", abstraction="Alice's employer", value="Alice works at Nova")
    >>> render_memory_context([entry])
    "- Alice's employer: Alice works at Nova"
    """
    if not entries:
        return prompts.NO_CONTEXT
    return render_context(entries, episodes, mode)


def answer_messages(question: str, context: str) -> list[Message]:
    """The answerer's chat: system instructions, then the memories and the question."""
    return [
        {"role": "system", "content": prompts.ANSWER_SYSTEM},
        {"role": "user", "content": prompts.ANSWER_USER.format(context=context, question=question)},
    ]


def label_messages(question: str, gold: str, answer: str, *, abstention: bool = False) -> list[Message]:
    """The judge's chat: grading rules, then question, gold answer and the answer to grade.

    With `abstention`, the rules say the question cannot be answered and `gold` is read as the
    explanation of why: saying so is CORRECT, a definite answer is WRONG.
    """
    system, user = (
        (prompts.JUDGE_ABSTENTION_SYSTEM, prompts.JUDGE_ABSTENTION_USER)
        if abstention
        else (prompts.JUDGE_SYSTEM, prompts.JUDGE_USER)
    )
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": user.format(question=question, gold=gold, answer=answer)},
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
        judge_max_tokens: int = 200,
    ) -> None:
        self.answerer = answerer
        self.judge = judge if judge is not None else answerer
        self.answer_max_tokens = answer_max_tokens
        self.judge_max_tokens = judge_max_tokens

    def _clients(self) -> list[ChatClient]:
        """The answerer and the judge, once each when they are the same client."""
        return list({id(self.answerer): self.answerer, id(self.judge): self.judge}.values())

    async def aclose(self) -> None:
        """Close the clients' connections of the running event loop (clients that have `aclose`)."""
        for client in self._clients():
            close = getattr(client, "aclose", None)
            if close is not None:
                await close()

    def usage(self) -> dict[str, dict[str, float]]:
        """LLM usage by phase (`judge/answer`, `judge/label`) summed over both clients, for clients that count it.

        Counters are those of `memora_rl.llm.usage.PhaseUsage` (calls, cached_calls, http_requests,
        prompt_tokens, completion_tokens, ...): tokens are those the endpoints reported, so answers
        served from the response cache cost none.
        """
        phases: dict[str, dict[str, float]] = {}
        for client in self._clients():
            tracker = getattr(client, "usage", None)
            if tracker is None:
                continue
            for phase, counters in tracker.as_dict().items():
                merged = phases.setdefault(phase, dict.fromkeys(counters, 0))
                for name, value in counters.items():
                    merged[name] = merged.get(name, 0) + value
        return phases

    async def answer(self, question: str, context: str) -> str:
        """The answerer's short answer to `question` given a rendered `context`."""
        result = await self.answerer.chat(
            answer_messages(question, context), phase=ANSWER_PHASE, max_tokens=self.answer_max_tokens
        )
        return result.text.strip()

    async def label(self, question: str, gold: str, answer: str, *, abstention: bool = False) -> CorrectnessLabel:
        """The judge's CORRECT/WRONG label of `answer` against `gold` (raises on LLM failure).

        With `abstention`, CORRECT means the answer says the memories do not tell (see `label_messages`).
        """
        return await self.judge.chat_json(
            label_messages(question, gold, answer, abstention=abstention),
            CorrectnessLabel,
            phase=LABEL_PHASE,
            max_tokens=self.judge_max_tokens,
        )

    async def grade(
        self, question: str, gold: str, context: str, *, with_label: bool = True, abstention: bool = False
    ) -> AnswerVerdict:
        """Answer from `context`, then (with_label) ask the judge whether the answer matches `gold`.

        `abstention` marks a question the memories cannot answer (`is_abstention(task.category)`):
        the judge then labels "the memories do not say" CORRECT.
        """
        answer = await self.answer(question, context)
        if not with_label:
            return AnswerVerdict(answer=answer)
        verdict = await self.label(question, gold, answer, abstention=abstention)
        logger.debug("Graded %r against %r: %s", answer, gold, verdict.label)
        return AnswerVerdict(answer=answer, correct=verdict.label == "CORRECT", reasoning=verdict.reasoning)
