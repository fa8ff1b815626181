"""`run_eval` with policy `nemori` on the synthetic env: records, results table, the answerer reads its context."""

from __future__ import annotations

import json

import httpx
import pytest

from memora_rl.evaluation.config import EvalConfig
from memora_rl.evaluation.offline import run_eval
from memora_rl.evaluation.report import RESULTS_FILE, TABLE_FILE, read_records
from memora_rl.policy.nemori_retrieval import EPISODES_HEADING, FACTS_HEADING, MESSAGES_HEADING
from tests.judge.test_answer_judge import CountingEndpoint, route_llm_clients

LIMIT = 3


class PromptKeepingEndpoint(CountingEndpoint):
    """The counting endpoint ("Nova", CORRECT) that also keeps the answerer's prompts."""

    def __init__(self) -> None:
        super().__init__()
        self.answer_prompts: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if "response_format" not in body:
            self.answer_prompts.append("\n".join(message["content"] for message in body["messages"]))
        return super().__call__(request)


def test_nemori_eval_writes_records_and_a_table_and_answers_from_its_context(tmp_path, monkeypatch):
    endpoint = PromptKeepingEndpoint()
    route_llm_clients(monkeypatch, endpoint)
    out = tmp_path / "nemori"
    config = EvalConfig(
        env="synthetic", policy="nemori", limit=LIMIT, out=out, latency_questions=1, concurrency=2,
        answerer_base_url="http://answerer.test/v1", answerer_model="tiny", llm_cache=tmp_path / "llm.sqlite",
    )  # fmt: skip
    run = run_eval(config)

    records = read_records(out)
    assert len(records) == LIMIT and {record.policy for record in records} == {"nemori"}
    for record in records:
        assert record.steps == 0 and record.context_tokens > 0 and 0.0 <= record.evidence_recall <= 1.0
        assert record.retrieved_ids and record.retrieved_turn_ids and record.search_latency_s > 0
        assert record.answer == "Nova" and record.correct is True
    results = json.loads((out / RESULTS_FILE).read_text())
    assert results["meta"]["policy"] == "nemori" and results["metrics"]["overall"]["questions"] == LIMIT
    assert run.metrics["overall"]["evidence_recall"] == pytest.approx(
        sum(record.evidence_recall for record in records) / LIMIT
    )
    assert "| overall |" in (out / TABLE_FILE).read_text()
    # the answerer read the NEMORI context: its three sections, in order
    assert len(endpoint.answer_prompts) == LIMIT
    for prompt in endpoint.answer_prompts:
        assert prompt.index(EPISODES_HEADING) < prompt.index(FACTS_HEADING) < prompt.index(MESSAGES_HEADING)
