"""The answer judge: label parsing (correct / wrong / abstention), the abstention prompt, caching, training choice."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from memora_rl.core.trajectory import Trajectory
from memora_rl.judge import JudgeConfig, TrajectoryJudge, prompts
from memora_rl.judge.answer import AnswerGrader, label_messages
from memora_rl.llm.client import ChatResult, LLMClient, LLMConfig, Message
from memora_rl.llm.structured import parse_structured
from tests.judge.trajectories import build_trajectory, make_entry

ALICE = make_entry("e1", "Alice works at Nova as a backend engineer", ["D1:1"])
EXPLANATION = "You never mentioned a pet; you only talked about your job at Nova."


class ScriptedChat:
    """A `ChatClient` that answers with `answer` and labels with `labels` in order; records every judge chat."""

    def __init__(self, answer: str, labels: list[str]) -> None:
        self.answer = answer
        self.labels = list(labels)
        self.judge_chats: list[list[Message]] = []

    async def chat(
        self, messages: list[Message], *, phase: str, max_tokens: int | None = None, temperature: float | None = None
    ) -> ChatResult:
        return ChatResult(text=f" {self.answer}\n", prompt_tokens=20, completion_tokens=2, cached=False)

    async def chat_json(
        self,
        messages: list[Message],
        schema: type[BaseModel],
        *,
        phase: str,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> Any:
        self.judge_chats.append(messages)
        return parse_structured(self.labels.pop(0), schema)


def verdict_text(label: str) -> str:
    return json.dumps({"reasoning": "one sentence", "label": label})


@pytest.mark.parametrize(
    ("reply", "abstention", "expected"),
    [
        (verdict_text("CORRECT"), False, True),
        (verdict_text("WRONG"), False, False),
        (verdict_text(" correct."), False, True),  # case, spaces and a full stop are forgiven
        ('Sure: ```json\n{"reasoning": "r", "label": "wrong"}\n```', False, False),
        (verdict_text("CORRECT"), True, True),  # abstention: "not mentioned" is the right answer
        (verdict_text("WRONG"), True, False),
    ],
)
def test_the_judges_label_is_parsed(reply, abstention, expected):
    chat = ScriptedChat("Not mentioned.", [reply])
    grader = AnswerGrader(chat)
    verdict = asyncio.run(grader.grade("Does Alice have a pet?", EXPLANATION, "- Alice: works", abstention=abstention))
    assert verdict.answer == "Not mentioned." and verdict.correct is expected
    assert verdict.reasoning
    system = chat.judge_chats[0][0]["content"]
    assert system == (prompts.JUDGE_ABSTENTION_SYSTEM if abstention else prompts.JUDGE_SYSTEM)


@pytest.mark.parametrize("reply", [verdict_text("MAYBE"), "CORRECT", '{"label": "CORRECT"}'])
def test_a_label_that_is_not_correct_or_wrong_is_an_error_not_a_grade(reply):
    grader = AnswerGrader(ScriptedChat("Nova", [reply]))
    with pytest.raises(ValueError, match=r"CorrectnessLabel|no JSON object"):
        asyncio.run(grader.grade("Where does Alice work?", "Nova", "- Alice: works at Nova"))


def test_abstention_prompt_presents_the_gold_answer_as_the_reason():
    plain = label_messages("Does Alice have a pet?", EXPLANATION, "a cat")
    abstention = label_messages("Does Alice have a pet?", EXPLANATION, "a cat", abstention=True)
    assert f"Gold answer: {EXPLANATION}" in plain[1]["content"]
    assert f"Why it cannot be answered: {EXPLANATION}" in abstention[1]["content"]
    assert "cannot be answered" in abstention[0]["content"] and "cannot be answered" not in plain[0]["content"]


def with_category(trajectory: Trajectory, category: str) -> Trajectory:
    return trajectory.model_copy(update={"task": trajectory.task.model_copy(update={"category": category})})


@pytest.mark.parametrize(
    ("category", "system"), [("abstention", "JUDGE_ABSTENTION_SYSTEM"), ("single-hop", "JUDGE_SYSTEM")]
)
def test_the_trajectory_judge_tells_the_llm_judge_about_abstention(embedder, category, system):
    chat = ScriptedChat("Not mentioned.", [verdict_text("CORRECT")])
    judge = TrajectoryJudge(JudgeConfig(correctness="answer_llm"), embedder=embedder, llm=chat)
    trajectory = with_category(build_trajectory(entries=[ALICE], answer=EXPLANATION), category)
    [result] = asyncio.run(judge.score_many([trajectory]))
    assert result.components["correctness"] == result.components["answer_correct"] == 1.0
    assert chat.judge_chats[0][0]["content"] == getattr(prompts, system)


class CountingEndpoint:
    """An OpenAI-compatible endpoint (httpx transport) that counts requests; answers "Nova", labels CORRECT."""

    def __init__(self) -> None:
        self.requests = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        body = json.loads(request.content)
        text = verdict_text("CORRECT") if "response_format" in body else "Nova"
        message = {"role": "assistant", "content": text}
        payload = {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
        return httpx.Response(200, json={**payload, "usage": {"prompt_tokens": 50, "completion_tokens": 4}})


def route_llm_clients(monkeypatch, endpoint: CountingEndpoint) -> None:
    """Every `LLMClient` built from here on (an eval builds its own) talks to `endpoint` instead of the network."""
    from memora_rl.llm import client as client_module

    real_client = client_module.LLMClient

    class ScriptedClient(real_client):
        def __init__(self, config: LLMConfig) -> None:
            super().__init__(config, transport=httpx.MockTransport(endpoint))

    monkeypatch.setattr(client_module, "LLMClient", ScriptedClient)


def graded_twice(tmp_path, questions: list[tuple[str, str, str, bool]]) -> tuple[CountingEndpoint, list, list]:
    """Grade `questions` with fresh clients over one response cache, twice; returns the endpoint and both usages."""
    endpoint = CountingEndpoint()
    usages, verdicts = [], []
    for _ in range(2):
        config = LLMConfig(base_url="http://judge.test/v1", model="tiny", cache_path=tmp_path / "llm.sqlite")
        client = LLMClient(config, transport=httpx.MockTransport(endpoint))
        grader = AnswerGrader(client, answer_max_tokens=8, judge_max_tokens=64)

        async def grade_all(grader: AnswerGrader = grader) -> list:
            try:
                return await asyncio.gather(*(grader.grade(q, g, c, abstention=a) for q, g, c, a in questions))
            finally:
                await grader.aclose()

        verdicts.append(asyncio.run(grade_all()))
        usages.append(grader.usage())
    return endpoint, usages, verdicts


def test_a_second_run_over_the_same_inputs_sends_no_request(tmp_path):
    questions = [
        ("Where does Alice work?", "Nova", "- Alice works at Nova", False),
        ("What is Alice's job?", "backend engineer", "- Alice works at Nova", False),
        ("Does Alice have a pet?", EXPLANATION, "- Alice works at Nova", True),
    ]
    endpoint, (first, second), (verdicts, again) = graded_twice(tmp_path, questions)
    assert endpoint.requests == 6  # 3 answers + 3 labels, all on the first run
    assert first["judge/answer"]["http_requests"] == first["judge/label"]["http_requests"] == 3
    assert first["judge/answer"]["prompt_tokens"] == 150 and first["judge/label"]["completion_tokens"] == 12
    assert second["judge/answer"]["cached_calls"] == second["judge/label"]["cached_calls"] == 3
    assert second["judge/answer"]["http_requests"] == second["judge/label"]["http_requests"] == 0
    assert second["judge/label"]["prompt_tokens"] == 0  # a cached answer costs nothing
    assert [v.model_dump() for v in again] == [v.model_dump() for v in verdicts]


def test_usage_is_counted_once_when_answerer_and_judge_share_a_client(tmp_path):
    endpoint = CountingEndpoint()
    client = LLMClient(
        LLMConfig(base_url="http://judge.test/v1", model="tiny", cache=False), transport=httpx.MockTransport(endpoint)
    )
    grader = AnswerGrader(client, client)
    client.run_sync(grader.grade("Where does Alice work?", "Nova", "- Alice works at Nova"))
    usage = grader.usage()
    assert endpoint.requests == 2 and usage["judge/answer"]["calls"] == usage["judge/label"]["calls"] == 1


def test_training_selects_the_llm_judge_as_correctness_through_env_overrides(embedder):
    """`TrainConfig.env_overrides` reach the env's judge: answer_llm makes G the judge's 1/0 label."""
    from memora_rl.env.registry import resolve_env_spec
    from memora_rl.training.rewards import judge_weights

    answerer = "env.judge.answerer={base_url: http://127.0.0.1:8000/v1, model: smollm2}"
    spec = resolve_env_spec("synthetic", ["env.judge.correctness=answer_llm", answerer])
    assert spec.env.judge.answerer is not None and spec.env.judge.answerer.model == "smollm2"
    weights = judge_weights(spec.env.judge)
    assert weights["correctness"] == 1.0 and weights["answer_correct"] == weights["token_f1"] == 0.0
    chat = ScriptedChat("Nova", [verdict_text("WRONG")])
    judge = TrajectoryJudge(spec.env.judge, embedder=embedder, llm=chat)
    result = judge.score(build_trajectory(entries=[ALICE], answer="Nova"))
    assert result.components["correctness"] == 0.0  # the judge's label, although token F1 is 1.0
    assert result.components["token_f1"] == 1.0


@pytest.mark.parametrize(
    ("answer", "category", "gold", "expected"),
    [
        ("Not mentioned.", "abstention", EXPLANATION, 1.0),  # right, though it shares no word with the explanation
        ("The memories don't say.", "abstention", EXPLANATION, 1.0),
        ("a cat", "abstention", EXPLANATION, 0.0),
        ("You never mentioned a pet", "abstention", EXPLANATION, 0.0),  # copying the explanation earns nothing
        ("Not mentioned.", "single-hop", "Nova", 0.0),  # abstaining on an answerable question is plain token F1
        ("Nova.", "single-hop", "Nova", 1.0),
    ],
)
def test_the_token_f1_grader_scores_abstention_questions_by_whether_the_answer_abstains(
    embedder, answer, category, gold, expected
):
    judge = TrajectoryJudge(JudgeConfig(correctness="token_f1"), embedder=embedder, llm=ScriptedChat(answer, []))
    trajectory = with_category(build_trajectory(entries=[ALICE], answer=gold), category)
    [result] = asyncio.run(judge.score_many([trajectory]))
    assert result.components["correctness"] == result.components["token_f1"] == expected
