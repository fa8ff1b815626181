"""benchmarks.answers: every setting resolves, and a run over a scripted answerer compares the settings."""

from __future__ import annotations

import json
import sys

import pytest

from benchmarks import answers
from benchmarks.common import REPO_ROOT, markdown
from memora_rl.env.registry import resolve_env_spec
from memora_rl.evaluation.report import read_records
from tests.benchmarks.scripts import table_rows
from tests.judge.test_answer_judge import CountingEndpoint, route_llm_clients


@pytest.mark.parametrize("setting", sorted(answers.SETTINGS))
def test_every_setting_names_a_policy_and_overrides_the_locomo_env_accepts(setting):
    policy, overrides = answers.SETTINGS[setting]
    assert answers.available(policy)
    resolve_env_spec("locomo", overrides)


def test_the_comparison_splits_into_titled_tables_and_notes_and_prints_back_the_same() -> None:
    text = "\n".join([
        "| run | correct |", "|---|---|", "| a | 0.500 |", "| b | - |", "",
        "Paired differences, b minus a (95% bootstrap CI):", "", "| metric | n |", "|---|---|", "| correct | 2 |", "",
        "Compared on the 2 questions every run recorded; left out:", "", "- a: 1 (t3)", "- b: 0",
    ])  # fmt: skip
    parts = answers.blocks(text)
    assert "\n".join(part if isinstance(part, str) else markdown(part) for part in parts) == text
    tables, notes = answers.split_blocks(parts)
    assert [table.title for table in tables] == [
        answers.OVERALL_TITLE,
        "Paired differences, b minus a (95% bootstrap CI)",
    ]
    assert tables[0].columns == ["run", "correct"] and tables[0].rows == [["a", "0.500"], ["b", "-"]]
    assert notes == ["Compared on the 2 questions every run recorded; left out: a: 1 (t3); b: 0"]


@pytest.mark.slow
def test_a_run_answers_every_setting_but_full_context_and_compares_them(tmp_path, monkeypatch, capsys):
    endpoint = CountingEndpoint()
    route_llm_clients(monkeypatch, endpoint)
    settings = ["semantic-factual", "semantic-episodic+factual", "full-context"]
    endpoint_args = ["--base-url", "http://answerer.test/v1", "--model", "tiny", "--llm-cache", str(tmp_path / "c")]
    record_args = ["--record", "answers-tiny", "--results-dir", str(tmp_path / "results")]
    argv = ["--env", "synthetic", "--limit", "2", "--out", str(tmp_path), *endpoint_args, *record_args]
    monkeypatch.setattr(sys, "argv", [str(REPO_ROOT / "benchmarks" / "answers.py"), *argv, "--settings", *settings])
    answers.main()
    assert endpoint.requests >= 2 * 2  # an answer and a label per question (a context seen before is cached)
    for setting in settings:
        records = read_records(tmp_path / setting)
        assert len(records) == 2
        assert all((record.answer is None) == (setting == "full-context") for record in records)
    table = (tmp_path / "compare" / "compare.md").read_text()
    printed = capsys.readouterr().out
    assert table.strip() in printed
    record = json.loads((tmp_path / "results" / "answers-tiny.json").read_text())
    assert record["command"].startswith("python -m benchmarks.answers ")
    first = record["tables"][0]
    assert [first["columns"], *first["rows"]] == table_rows(printed)[: len(first["rows"]) + 1]
    assert sum(len(t["rows"]) + 1 for t in record["tables"]) == len(table_rows(printed))
    assert "full-context" in table and "semantic (semantic-episodic+factual)" in table
