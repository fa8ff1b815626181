"""benchmarks.answers: every setting resolves, and a run over a scripted answerer compares the settings."""

from __future__ import annotations

import pytest

from benchmarks import answers
from memora_rl.env.registry import resolve_env_spec
from memora_rl.evaluation.report import read_records
from tests.judge.test_answer_judge import CountingEndpoint, route_llm_clients


@pytest.mark.parametrize("setting", sorted(answers.SETTINGS))
def test_every_setting_names_a_policy_and_overrides_the_locomo_env_accepts(setting):
    policy, overrides = answers.SETTINGS[setting]
    assert answers.available(policy)
    resolve_env_spec("locomo", overrides)


@pytest.mark.slow
def test_a_run_answers_every_setting_but_full_context_and_compares_them(tmp_path, monkeypatch, capsys):
    endpoint = CountingEndpoint()
    route_llm_clients(monkeypatch, endpoint)
    settings = ["semantic-factual", "semantic-episodic+factual", "full-context"]
    endpoint_args = ["--base-url", "http://answerer.test/v1", "--model", "tiny", "--llm-cache", str(tmp_path / "c")]
    answers.main(
        ["--env", "synthetic", "--limit", "2", "--out", str(tmp_path), *endpoint_args, "--settings", *settings]
    )
    assert endpoint.requests >= 2 * 2  # an answer and a label per question (a context seen before is cached)
    for setting in settings:
        records = read_records(tmp_path / setting)
        assert len(records) == 2
        assert all((record.answer is None) == (setting == "full-context") for record in records)
    table = (tmp_path / "compare" / "compare.md").read_text()
    assert table.strip() in capsys.readouterr().out
    assert "full-context" in table and "semantic (semantic-episodic+factual)" in table
