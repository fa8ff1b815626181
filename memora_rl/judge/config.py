"""The trajectory judge's one config: rubric weights, grader choice and optional LLM endpoints."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from memora_rl.config import StrictModel
from memora_rl.errors import ConfigError
from memora_rl.llm.client import LLMConfig

CorrectnessGrader = Literal["evidence_recall", "answer_llm", "token_f1"]
"""How G is measured: provenance recall (model-free), an LLM judge's label, or token F1 of an LLM answer."""

ANSWER_GRADERS: frozenset[str] = frozenset({"answer_llm", "token_f1"})
"""Correctness graders that need an answerer LLM."""


class JudgeConfig(StrictModel):
    """Reward J = w_g * G - w_r * R - w_c * C - λ * X + w_f * F, plus logged-only metrics.

    X is the context cost: context tokens / `context_token_unit`; λ is `context_weight` (0 by default,
    so recipes that do not set it keep their reward). Weights are magnitudes (>= 0); the judge applies
    the signs. A weight of 0 keeps the component in the logged metrics without letting it move the reward.
    """

    correctness: CorrectnessGrader = "evidence_recall"
    """Grader for G: `evidence_recall` (share of gold evidence turns retrieved, model-free),
    `answer_llm` (an answerer writes a short answer, an LLM judge labels it CORRECT=1/WRONG=0),
    `token_f1` (token F1 of the answerer's answer against the gold answer)."""
    correctness_weight: float = Field(default=1.0, ge=0.0)
    """w_g, weight of correctness G (range [0, 1])."""
    redundancy_weight: float = Field(default=0.4, ge=0.0)
    """w_r, weight of redundancy R (share of retrieved pairs with near-duplicate values, [0, 1])."""
    cost_weight: float = Field(default=0.4, ge=0.0)
    """w_c, weight of cost C (budget spent / budget + refine_cost per refine)."""
    context_weight: float = Field(default=0.0, ge=0.0)
    """λ, weight of the context cost X (context tokens handed to an answerer / `context_token_unit`, >= 0):
    reward lost per `context_token_unit` tokens of retrieved context. 0 (default) logs X without using it;
    with λ > 0 expanding every id is no longer nearly free, so choosing the evidence entries pays."""
    context_token_unit: int = Field(default=100, ge=1)
    """Tokens per unit of the context cost X (policy tokenizer, or 4 characters per token, as the env counts)."""
    format_weight: float = Field(default=0.1, ge=0.0)
    """w_f, weight of the format score F (share of the policy's actions that parsed and were allowed, [0, 1]).
    A small positive value gives a tiny policy a learning signal before it retrieves anything."""
    redundancy_delta: float = Field(default=0.9, ge=-1.0, le=1.0)
    """Cosine threshold (on L2-normalised value embeddings) at or above which two entries count as redundant."""
    refine_cost: float = Field(default=0.1, ge=0.0)
    """Added to C for each refine action (C's refine term), in units of a full budget."""
    embedder: str = "all-MiniLM-L6-v2"
    """Sentence embedder for the redundancy grader (name or local folder, see memora_rl.embedding)."""
    answerer: LLMConfig | None = None
    """Endpoint of the answerer LLM; needed by `answer_llm` and `token_f1` unless a client is passed in.
    Each answer is limited to `answer_max_tokens`."""
    judge_llm: LLMConfig | None = None
    """Endpoint of the CORRECT/WRONG judge; None reuses the answerer's endpoint."""
    answer_max_tokens: int = Field(default=48, ge=1, le=2048)
    """Token limit of one answer (answers are a few words)."""
    judge_max_tokens: int = Field(default=200, ge=16, le=2048)
    """Token limit of one CORRECT/WRONG verdict (a short JSON object)."""

    @model_validator(mode="after")
    def _judge_needs_answerer(self) -> JudgeConfig:
        """A separate judge endpoint without an answerer is a half-configured pipeline."""
        if self.judge_llm is not None and self.answerer is None:
            raise ConfigError(
                "judge.judge_llm is set but judge.answerer is not. Set answerer (judge_llm defaults to it) "
                "or remove judge_llm."
            )
        return self

    @property
    def needs_answer(self) -> bool:
        """True when G needs an LLM-written answer."""
        return self.correctness in ANSWER_GRADERS
