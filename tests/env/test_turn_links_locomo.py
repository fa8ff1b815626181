"""The `locomo` env's frontier on a real LoCoMo conversation: the same speaker's neighbouring turns, with evidence."""

from __future__ import annotations

from typing import Any

import pytest

from memora_rl.core.parse import ExpandAction, format_action
from memora_rl.core.render import link_label
from memora_rl.judge.graders import evidence_recall, initial_recall
from tests.env.test_contract import make_small_env


@pytest.mark.slow
@pytest.mark.locomo
def test_locomo_expands_along_turn_links_and_finds_evidence_the_first_search_missed(judge: Any) -> None:
    env = make_small_env("locomo", judge)  # conv-30, every question
    assert env.config.frontier_links == ["turn"] and env.config.frontier_score == "value"
    missed = gained = 0
    for task in env.tasks[:60]:
        _, info = env.reset(options={"task": task})
        working = {link_label(entry.abstraction) for entry in env.snapshot().working}
        assert info["frontier"], task.id
        assert {item["via"] for item in info["frontier"]} == {"turn"}
        assert {item["anchor"] for item in info["frontier"]} <= working  # labelled by the entry they neighbour
        ids = [item["id"] for item in info["frontier"][:3]]
        env.step(format_action(ExpandAction(ids=ids)))
        trajectory = env.step('{"action": "stop"}')[-1]["trajectory"]
        if initial_recall(trajectory) < 1.0:
            missed += 1
            gained += evidence_recall(trajectory) > initial_recall(trajectory)
    assert missed >= 20
    assert gained >= 0.15 * missed, f"expanding turn links found missed evidence on {gained} of {missed} tasks"
