"""Answer correctness: answerer + CORRECT/WRONG judge through the real LLMClient over a scripted endpoint."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from memora_rl.errors import LLMError
from memora_rl.judge import JudgeConfig, TrajectoryJudge
from memora_rl.judge.answer import render_memory_context
from memora_rl.llm.client import LLMClient, LLMConfig
from tests.judge.trajectories import build_trajectory, make_entry

ALICE = make_entry("e1", "Alice works at Nova as a backend engineer", ["D1:1"])


def completion(text: str) -> dict[str, Any]:
    return {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 3},
    }


class ScriptedLLM:
    """Answers the answerer with `answer` and the judge (requests asking for JSON) with `labels` in order."""

    def __init__(self, answer: str, labels: list[str], status: int = 200) -> None:
        self.answer = answer
        self.labels = list(labels)
        self.status = status
        self.answer_prompts: list[str] = []
        self.label_calls = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if self.status != 200:
            return httpx.Response(self.status, text="server exploded")
        body = json.loads(request.content)
        if "response_format" in body:
            text = self.labels[min(self.label_calls, len(self.labels) - 1)]
            self.label_calls += 1
        else:
            self.answer_prompts.append(body["messages"][-1]["content"])
            text = self.answer
        return httpx.Response(200, json=completion(text))


def make_judge(tmp_path, embedder, script: ScriptedLLM, correctness: str = "answer_llm") -> TrajectoryJudge:
    client = LLMClient(
        LLMConfig(base_url="http://judge.test/v1", model="tiny", cache=False, max_retries=0),
        transport=httpx.MockTransport(script),
    )
    return TrajectoryJudge(JudgeConfig(correctness=correctness), embedder=embedder, llm=client)


@pytest.mark.parametrize(("label", "expected"), [("CORRECT", 1.0), ("WRONG", 0.0)])
def test_label_sets_correctness(tmp_path, embedder, label, expected):
    script = ScriptedLLM("Nova", [json.dumps({"reasoning": "same employer", "label": label})])
    judge = make_judge(tmp_path, embedder, script)
    [result] = asyncio.run(judge.score_many([build_trajectory(entries=[ALICE], answer="Nova")]))
    assert result.components["correctness"] == result.components["answer_correct"] == expected
    assert result.components["token_f1"] == 1.0  # logged alongside
    assert result.answer is not None and result.answer.answer == "Nova"
    assert result.answer.correct is (label == "CORRECT")
    assert "Alice works at Nova" in script.answer_prompts[0]  # the answerer saw the retrieved context


def test_malformed_label_is_repaired_by_the_client(tmp_path, embedder):
    script = ScriptedLLM("Nova", ["I think this is right.", '```json\n{"reasoning": "ok", "label": "CORRECT"}\n```'])
    judge = make_judge(tmp_path, embedder, script)
    result = judge.score(build_trajectory(entries=[ALICE]))
    assert result.components["correctness"] == 1.0
    assert script.label_calls == 2  # first answer + one repair


def test_llm_failure_propagates_instead_of_scoring_zero(tmp_path, embedder):
    judge = make_judge(tmp_path, embedder, ScriptedLLM("Nova", ["{}"], status=500))
    with pytest.raises(LLMError, match="HTTP 500"):
        judge.score(build_trajectory(entries=[ALICE]))


def test_token_f1_grader_asks_no_judge(tmp_path, embedder):
    script = ScriptedLLM("at Nova", ["unused"])
    judge = make_judge(tmp_path, embedder, script, correctness="token_f1")
    result = judge.score(build_trajectory(entries=[ALICE], answer="Nova"))
    assert script.label_calls == 0
    assert result.components["correctness"] == pytest.approx(2 / 3)
    assert "answer_correct" not in result.components
    assert result.answer is not None and result.answer.correct is None


def test_sync_score_works_inside_a_running_loop(tmp_path, embedder):
    script = ScriptedLLM("Nova", [json.dumps({"reasoning": "ok", "label": "CORRECT"})])
    judge = make_judge(tmp_path, embedder, script)

    async def inside_loop() -> float:
        return judge.score(build_trajectory(entries=[ALICE])).total

    assert asyncio.run(inside_loop()) > 0.9


def test_render_memory_context_empty_and_dated():
    from datetime import datetime

    assert "no memories" in render_memory_context([])
    dated = ALICE.model_copy(update={"created_at": datetime(2023, 5, 7, 13, 0)})
    assert render_memory_context([dated]).startswith("- [2023-05-07] about e1: Alice works")


@pytest.mark.slow
@pytest.mark.vllm
def test_answer_pipeline_against_real_server(vllm_server, embedder, tmp_path):
    """Answerer + judge on the tiny served model: the pipeline runs; the label itself is not asserted."""
    client = LLMClient(
        LLMConfig(base_url=vllm_server.base_url, model=vllm_server.model, cache_path=tmp_path / "llm.sqlite")
    )
    judge = TrajectoryJudge(JudgeConfig(correctness="answer_llm"), embedder=embedder, llm=client)
    trajectories = [build_trajectory(entries=[ALICE], answer="Nova"), build_trajectory(entries=[], answer="Nova")]
    results = asyncio.run(judge.score_many(trajectories))
    for result in results:
        assert result.answer is not None and result.answer.correct in (True, False)
        assert result.components["correctness"] in (0.0, 1.0)
        assert 0.0 <= result.components["token_f1"] <= 1.0
