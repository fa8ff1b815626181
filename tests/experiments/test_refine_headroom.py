"""`memora-rl experiment refine-headroom`: ways to choose a refine, lottery counts, stop bounds, a real run."""

from __future__ import annotations

import json

import pytest

import memora_rl.experiments.refine_headroom as refine_headroom
from memora_rl.experiments.refine_headroom import TaskProbe


def _probes() -> list[TaskProbe]:
    """Two tasks: the first query wins on one, the second query on the other; a third task has no query."""
    return [
        TaskProbe("a", "x", "q?", (0.0, 10), [("A1", 1.0, 14), ("A2", 0.0, 12)]),
        TaskProbe("b", "x", "q?", (0.5, 10), [("B1", 0.5, 16), ("B2", 1.0, 18)]),
        TaskProbe("c", "x", "q?", (0.25, 8), []),
    ]


def test_fixed_uniform_and_gold_choices_read_each_tasks_queries():
    rows = refine_headroom.choice_points(_probes(), fixed=2)
    assert rows["after reset (G0), stop"] == pytest.approx((0.25, 28 / 3))
    assert rows["refine with visible query #1"] == pytest.approx(((1.0 + 0.5 + 0.25) / 3, (14 + 16 + 8) / 3))
    assert rows["refine with visible query #2"] == pytest.approx(((0.0 + 1.0 + 0.25) / 3, (12 + 18 + 8) / 3))
    uniform = rows["refine, uniform choice (mean over queries)"]
    assert uniform == pytest.approx(((0.5 + 0.75 + 0.25) / 3, (13 + 17 + 8) / 3))
    gold = next(value for name, value in rows.items() if name.startswith("refine, gold choice"))
    assert gold == pytest.approx(((1.0 + 1.0 + 0.25) / 3, (14 + 18 + 8) / 3))


def test_lottery_counts_the_tasks_with_a_winning_query_and_their_winning_share():
    counts = refine_headroom.lottery_counts(_probes())
    assert counts == {"tasks": 3, "with_a_winning_query": 2, "winning_share": pytest.approx(0.5)}


def test_gold_adaptive_picks_k_per_task_within_the_token_budget():
    runs = {
        1: [(0.0, 10), (1.0, 10), (0.0, 10)],
        2: [(1.0, 20), (1.0, 20), (0.0, 20)],
        3: [(1.0, 30), (1.0, 30), (1.0, 30)],
    }
    # 20 tokens a task: a takes k=2, b k=1, c k=3, and every task is found
    assert refine_headroom.gold_adaptive(runs, 20.0) == pytest.approx((1.0, 20.0))
    # 15: c's k=3 no longer fits beside the others; a still gains most per token
    assert refine_headroom.gold_adaptive(runs, 15.0) == pytest.approx((2 / 3, 40 / 3))
    assert refine_headroom.gold_adaptive(runs, 10.0) == pytest.approx((1 / 3, 10.0))


def test_the_stop_rule_takes_the_small_k_only_when_every_question_word_shows():
    runs = {3: [(0.5, 30), (0.5, 30)], 8: [(1.0, 80), (1.0, 80)]}
    shown = ["vera moved to lyon", "vera likes tea"]
    questions = ["Where did Vera move?", "Where did Vera move?"]
    assert refine_headroom.rule_point(runs, shown, questions, (3, 8)) == pytest.approx((0.75, 55.0))


def test_bad_options_name_the_fix(capsys):
    for argv in (["--rules", "8:3"], ["--rules", "3-8"], ["--adaptive-at", "9"], ["--max-queries", "0"]):
        with pytest.raises(SystemExit):
            refine_headroom.parse_args(argv)
    assert "--max-queries" in capsys.readouterr().err


@pytest.mark.slow
def test_a_real_run_on_the_tiny_config_writes_every_probe(tmp_path):
    from typer.testing import CliRunner

    from memora_rl.cli import app

    out = tmp_path / "headroom.json"
    result = CliRunner().invoke(
        app,
        ["experiment", "refine-headroom", "--config", "configs/grpo/tiny.yaml", "--split", "test", "--limit", "4",
         "--semantic-k", "2", "3", "5", "--adaptive-at", "3", "--rules", "2:5", "--out", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert len(report["probes"]) == 4 and report["lottery"]["tasks"] == 4
    choices = report["choices"]
    gold = next(value for name, value in choices.items() if name.startswith("refine, gold choice"))
    uniform = choices["refine, uniform choice (mean over queries)"]
    assert gold["recall"] >= uniform["recall"] >= 0.0
    assert choices["after reset (G0), stop"]["recall"] == pytest.approx(report["semantic"]["3"]["recall"])
    assert "| refine with visible query #1 |" in result.output and report["table"] in result.output
