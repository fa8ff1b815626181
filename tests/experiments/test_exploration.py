"""`memora-rl experiment exploration`: greedy vs sampled walks of a policy, per category, on the real env and server."""

from __future__ import annotations

import json

import pytest

import memora_rl.experiments.exploration as exploration


def test_rows_count_the_missed_tasks_a_sample_beats():
    greedy = {"a": 1.0, "b": 0.0, "c": 0.5}
    samples = {"a": [1.0, 0.0], "b": [0.0, 0.0], "c": [0.5, 1.0]}
    rows = exploration.exploration_rows(greedy, samples, {"a": "x", "b": "y", "c": "y"})
    assert [row["category"] for row in rows] == ["x", "y", "all"]
    x, y, total = rows
    assert (x["tasks"], x["greedy"], x["sampled"], x["best"], x["missed"], x["beaten"]) == (1, 1.0, 0.5, 1.0, 0, 0)
    assert (y["missed"], y["beaten"], y["best"]) == (2, 1, 0.5)  # b: no sample beats 0.0; c: 1.0 beats 0.5
    assert total["greedy"] == pytest.approx(0.5) and total["best"] == pytest.approx(2 / 3)
    table = exploration.format_table(rows, samples=2)
    assert "| all | 3 | 0.500 | 0.417 | 0.667 | 1.33x | 2 | 1 |" in table


def test_bad_options_name_the_fix():
    with pytest.raises(SystemExit):
        exploration.parse_args(["--samples", "0"])
    with pytest.raises(SystemExit):
        exploration.parse_args(["--server-url", "http://127.0.0.1:1/v1"])


@pytest.mark.slow
def test_the_experiment_plays_greedy_and_sampled_passes_on_the_shared_server(vllm_server, tmp_path):
    from typer.testing import CliRunner

    from memora_rl.cli import app

    out = tmp_path / "exploration.json"
    result = CliRunner().invoke(
        app,
        ["experiment", "exploration", "--server-url", vllm_server.base_url, "--served-model", vllm_server.model,
         "--env", "synthetic",
         "--split", "test", "--limit", "2", "--samples", "2", "--max-new-tokens", "24", "--out", str(out)]
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    total = report["rows"][-1]
    assert total["category"] == "all" and total["tasks"] == 2
    assert all(len(recalls) == 2 for recalls in report["samples"].values())
    assert total["best"] >= total["sampled"] and 0.0 <= total["greedy"] <= 1.0
    assert "| all | 2 |" in result.output
