"""The trajectory judge: J = w_g * G - w_r * R - w_c * C - λ * X + w_f * F over a finished episode.

Components (keys of `JudgeResult.components`, logged as `reward/{name}`):

| name              | weight  | meaning                                                              |
|-------------------|---------|----------------------------------------------------------------------|
| `correctness`     | +w_g    | G from the configured grader (evidence recall, LLM label or token F1)|
| `redundancy`      | -w_r    | R, share of retrieved pairs with value cosine >= delta               |
| `cost`            | -w_c    | C, budget spent / budget + refine_cost per refine                    |
| `context_cost`    | -λ      | X, context tokens / context_token_unit; λ = context_weight, default 0|
| `format`          | +w_f    | F, share of the policy's actions that parsed and were allowed        |
| `evidence_recall` | 0       | always logged (model-free)                                           |
| `answer_correct`  | 0       | 1/0 LLM label (answer_llm grader only)                               |
| `token_f1`,`bleu1`| 0       | of the answer against the gold answer (answer graders only)          |
| `initial_recall`  | 0       | G0, evidence recall of the working set right after reset             |
| `recall_gain`     | 0       | evidence_recall - initial_recall: what the policy's actions added    |
| `valid_action_rate` | 0     | valid policy actions / policy actions (F, logged whatever w_f is)    |
| `context_tokens`, `steps`, `refines`, `invalid_actions` | 0 | logged-only episode metrics  |
| `actions_expand`, `actions_refine`, `actions_stop`, `actions_invalid`, `actions_forced` | 0 | action mix (counts) |
| `total`           |         | the weighted sum J                                                   |

A `forced` action is the rollout closing an episode that ran out of turns or tokens
(`RetrievalEnv.force_stop`): it is not the policy's, so F, `valid_action_rate` and `steps`
leave it out; a policy turn cut at the token limit is recorded as `invalid`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from pydantic import BaseModel

from memora_rl.async_bridge import run_sync
from memora_rl.core.trajectory import Trajectory
from memora_rl.errors import ConfigError
from memora_rl.judge import graders
from memora_rl.judge.answer import AnswerGrader, AnswerVerdict, ChatClient, is_abstention, render_memory_context
from memora_rl.judge.config import JudgeConfig
from memora_rl.judge.graders import TextEncoder
from memora_rl.judge.rubric import Rubric


class JudgeResult(BaseModel):
    """The judge's score of one trajectory."""

    total: float
    """The reward J (also `components["total"]`)."""
    components: dict[str, float]
    """Every component by name, the weighted `total`, and logged-only metrics."""
    answer: AnswerVerdict | None = None
    """The answerer's answer and the judge's verdict (answer graders only)."""

    def metrics(self, prefix: str = "reward/") -> dict[str, float]:
        """Components under a metric namespace, e.g. `reward/cost`."""
        return {f"{prefix}{name}": value for name, value in self.components.items()}


def build_rubric(config: JudgeConfig, embedder: TextEncoder) -> Rubric:
    """The rubric of a config; answer-based components are external (filled in by the judge)."""
    rubric = Rubric()
    if config.correctness == "evidence_recall":
        rubric.add("correctness", graders.evidence_recall, config.correctness_weight)
    else:
        rubric.add_external("correctness", config.correctness_weight)
    rubric.add(
        "redundancy", graders.make_redundancy_reward(embedder, config.redundancy_delta), -config.redundancy_weight
    )
    rubric.add("cost", graders.make_cost_reward(config.refine_cost), -config.cost_weight)
    rubric.add("context_cost", graders.make_context_cost_reward(config.context_token_unit), -config.context_weight)
    rubric.add("format", graders.format_score, config.format_weight)
    rubric.add_metric("evidence_recall", graders.evidence_recall)
    if config.correctness == "answer_llm":
        rubric.add_external("answer_correct", 0.0)
    if config.needs_answer:
        rubric.add_external("token_f1", 0.0)
        rubric.add_external("bleu1", 0.0)
    for name, fn in graders.EPISODE_METRICS.items():
        rubric.add_metric(name, fn)
    return rubric


def answer_components(config: JudgeConfig, trajectory: Trajectory, verdict: AnswerVerdict) -> dict[str, float]:
    """External component values from an answer verdict: G plus the answer metrics.

    On an abstention task the gold text explains what was never said, so overlap with it means nothing:
    `token_f1` and `bleu1` (and the `token_f1` grader's G) are 1 when the answer says the memories do not tell.
    """
    task = trajectory.task
    if is_abstention(task.category):
        f1 = graders.abstains(verdict.answer)
        values = {"token_f1": f1, "bleu1": f1}
    else:
        f1 = graders.token_f1(verdict.answer, task.answer)
        values = {"token_f1": f1, "bleu1": graders.bleu1(verdict.answer, task.answer)}
    if config.correctness == "answer_llm":
        if verdict.correct is None:
            raise ConfigError("The answer_llm grader needs a labelled verdict; the judge LLM was not asked.")
        values["answer_correct"] = float(verdict.correct)
        values["correctness"] = float(verdict.correct)
    else:
        values["correctness"] = f1
    return values


class TrajectoryJudge:
    """Scores finished trajectories with the rubric of a `JudgeConfig`.

    Args:
        config: Weights, grader choice and optional LLM endpoints (defaults: evidence recall,
            w_g/w_r/w_c/λ/w_f = 1.0/0.4/0.4/0/0.1).
        embedder: Encoder for the redundancy grader; None loads `config.embedder` via `get_embedder`.
        llm: Client for both the answerer and the judge LLM; None builds `LLMClient`s from
            `config.answerer` / `config.judge_llm` when the grader needs them.
    """

    def __init__(
        self, config: JudgeConfig | None = None, embedder: TextEncoder | None = None, llm: ChatClient | None = None
    ) -> None:
        self.config = config or JudgeConfig()
        if embedder is None:
            from memora_rl.embedding import get_embedder

            embedder = get_embedder(self.config.embedder)
        self.rubric = build_rubric(self.config, embedder)
        self.answer_grader = self._answer_grader(llm) if self.config.needs_answer else None

    def _answer_grader(self, llm: ChatClient | None) -> AnswerGrader:
        """The answerer/judge pair from an explicit client or from the config's endpoints."""
        config = self.config
        if llm is None and config.answerer is None:
            raise ConfigError(
                f"The {config.correctness!r} grader needs an answerer LLM: set judge.answerer "
                "(base_url, model) or pass llm= to TrajectoryJudge, or use correctness=evidence_recall."
            )
        if llm is not None:
            answerer: ChatClient = llm
            judge: ChatClient = llm
        else:
            from memora_rl.llm.client import LLMClient

            answerer = LLMClient(config.answerer)  # type: ignore[arg-type]
            judge = LLMClient(config.judge_llm) if config.judge_llm is not None else answerer
        return AnswerGrader(
            answerer, judge, answer_max_tokens=config.answer_max_tokens, judge_max_tokens=config.judge_max_tokens
        )

    @property
    def component_names(self) -> list[str]:
        """Every component key of a result, `total` last."""
        return [*self.rubric.names, Rubric.TOTAL]

    def score(self, trajectory: Trajectory) -> JudgeResult:
        """Score one trajectory; answer graders call their LLMs (blocking). Exceptions propagate."""
        if self.answer_grader is None:
            return self._combine(trajectory, None)
        # the grader's connections belong to this short-lived loop: closed on it, so a running loop is no obstacle
        results = run_sync(self.score_many([trajectory]), cleanup=self.answer_grader.aclose, in_running_loop="thread")
        return results[0]

    async def score_many(self, trajectories: Sequence[Trajectory]) -> list[JudgeResult]:
        """Score a batch; LLM calls of all trajectories run concurrently (bounded by the client)."""
        if self.answer_grader is None:
            return [self._combine(trajectory, None) for trajectory in trajectories]
        verdicts = await asyncio.gather(*(self.grade_answer(trajectory) for trajectory in trajectories))
        return [self._combine(trajectory, verdict) for trajectory, verdict in zip(trajectories, verdicts, strict=True)]

    async def grade_answer(self, trajectory: Trajectory) -> AnswerVerdict:
        """Answer the task's question from the retrieved entries and (answer_llm) label the answer.

        An abstention task (`is_abstention`) is labelled with the judge's abstention prompt.
        """
        if self.answer_grader is None:
            raise ConfigError(f"Grader {self.config.correctness!r} uses no answerer; set correctness=answer_llm.")
        context = render_memory_context(trajectory.retrieved, trajectory.episodes, trajectory.context_mode)
        return await self.answer_grader.grade(
            trajectory.task.question,
            trajectory.task.answer,
            context,
            with_label=self.config.correctness == "answer_llm",
            abstention=is_abstention(trajectory.task.category),
        )

    def _combine(self, trajectory: Trajectory, verdict: AnswerVerdict | None) -> JudgeResult:
        """Run the rubric with the verdict's external components."""
        external = answer_components(self.config, trajectory, verdict) if verdict is not None else None
        components = self.rubric.score(trajectory, external)
        return JudgeResult(total=components[Rubric.TOTAL], components=components, answer=verdict)
