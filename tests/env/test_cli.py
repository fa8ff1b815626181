"""`memora-rl env list` and `env play` (scripted keyboard input) through the real CLI app."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from memora_rl.cli import app
from memora_rl.env.cli import expand_shorthand

SMALL_SYNTHETIC = [
    "-o", "data.options.conversations=2", "-o", "data.options.sessions_per_conversation=3",
    "-o", "data.options.turns_per_session=6", "-o", "data.options.questions_per_conversation=5",
]  # fmt: skip


def test_list_shows_every_env() -> None:
    result = CliRunner().invoke(app, ["env", "list"])
    assert result.exit_code == 0, result.output
    for name in ("synthetic", "locomo", "longmemeval"):
        assert name in result.output


@pytest.mark.parametrize(
    ("typed", "sent"),
    [
        (":expand e1 e2", '{"action": "expand", "ids": ["e1", "e2"]}'),
        (":refine Alma's job", '{"action": "refine", "query": "Alma\'s job"}'),
        (":stop", '{"action": "stop"}'),
        ("stop", "stop"),  # not a shorthand: sent as written, so it is an invalid action
        (":expand", ":expand"),
    ],
)
def test_shorthand(typed: str, sent: str) -> None:
    assert expand_shorthand(typed) == sent


def test_play_one_episode_by_hand() -> None:
    keys = "hello\n:refine planted facts\n:stop\n"
    result = CliRunner().invoke(
        app, ["env", "play", "--env", "synthetic", "--split", "all", *SMALL_SYNTHETIC], input=keys
    )
    assert result.exit_code == 0, result.output
    assert "invalid action" in result.output  # "hello" is not an action
    assert "episode over: stop" in result.output
    for component in ("correctness", "redundancy", "cost", "format", "total"):
        assert component in result.output


def test_play_unknown_task_is_a_clear_error() -> None:
    result = CliRunner().invoke(app, ["env", "play", "--task-id", "nope", *SMALL_SYNTHETIC])
    assert result.exit_code != 0
    assert "No task 'nope'" in str(result.exception)


def test_stats_prints_headroom_and_writes_every_walk(tmp_path) -> None:
    out = tmp_path / "headroom.json"
    result = CliRunner().invoke(
        app, ["env", "stats", "synthetic", "--split", "all", "--limit", "4", "--json", str(out), *SMALL_SYNTHETIC]
    )
    assert result.exit_code == 0, result.output
    assert "headroom of synthetic" in result.output and "trainable" in result.output
    report = json.loads(out.read_text())
    assert len(report["walks"]) == report["overall"]["tasks"] == 4
    for walk in report["walks"]:
        assert walk["initial_recall"] <= walk["recall"]
        assert json.loads(walk["actions"][-1]) == {"action": "stop"}


def test_stats_of_an_unknown_split_is_a_clear_error() -> None:
    result = CliRunner().invoke(app, ["env", "stats", "synthetic", "--split", "dev", *SMALL_SYNTHETIC])
    assert result.exit_code != 0
    assert "Unknown split 'dev'" in str(result.exception)
