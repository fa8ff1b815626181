"""Turn links in the env: a built synthetic graph's frontier, and the `locomo` env's on a real conversation."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from memora_rl.core.layout import link_label
from memora_rl.core.parse import ExpandAction, format_action
from memora_rl.env.registry import make_env
from memora_rl.judge.graders import evidence_recall, initial_recall
from memora_rl.turn_ids import turn_key
from tests.env.test_contract import SMALL_DATA, make_small_env

TURN_LINKS = ["env.frontier_links=[turn]", "env.frontier_score=value", "env.compact=false", "env.few_shot=false"]


def test_a_turn_link_offers_the_same_speakers_neighbouring_turn_and_says_so(judge: Any) -> None:
    env, tasks = make_env("synthetic", split="all", overrides=[*SMALL_DATA["synthetic"], *TURN_LINKS], judge=judge)
    window = env.store.config.turn_link_window
    offered = 0
    for task in tasks:
        observation, info = env.reset(options={"task": task})
        working = env.snapshot().working
        positions = {(turn_key(t), entry.speaker) for entry in working for t in entry.source_turn_ids}
        linked = env.store.get_entries(task.conversation_id, [item["id"] for item in info["frontier"]])
        for item, entry in zip(info["frontier"], linked, strict=True):
            assert item["via"] == "turn" and f'via turn "{item["anchor"]}"' in observation
            assert item["anchor"] in {link_label(w.abstraction) for w in working}
            (session, turn), speaker = turn_key(entry.source_turn_ids[0]), entry.speaker
            assert any(
                key is not None and key[0] == session and 0 < abs(key[1] - turn) <= window and who == speaker
                for key, who in positions
            ), (task.id, entry.source_turn_ids)
            offered += 1
    assert offered >= len(tasks)  # about one a task at least: a conversation's speakers take turns


def test_an_interleaved_frontier_takes_the_best_turn_and_similar_link_in_turn(judge: Any) -> None:
    """`frontier_order=interleave`: the frontier is the score-ordered frontier's turn and similar items,
    best first within each kind, taken one kind at a time, so similar entries cannot push out every turn."""
    links = [*SMALL_DATA["synthetic"], *TURN_LINKS, "env.frontier_links=[turn, similar]", "env.similar_threshold=0.5"]
    by_score, tasks = make_env("synthetic", split="all", overrides=[*links, "env.frontier_limit=200"], judge=judge)
    mixed, _ = make_env(
        "synthetic",
        split="all",
        overrides=[*links, "env.frontier_order=interleave", "env.frontier_limit=2"],
        judge=judge,
    )
    limit, pushed_out = mixed.config.frontier_limit, 0
    for task in tasks:
        full = by_score.reset(options={"task": task})[1]["frontier"]
        shown = mixed.reset(options={"task": task})[1]["frontier"]
        turns, similar = ([item["id"] for item in full if item["via"] == kind] for kind in ("turn", "similar"))
        alternating = [i for pair in itertools.zip_longest(turns, similar) for i in pair if i is not None]
        assert [item["id"] for item in shown] == alternating[:limit], task.id
        pushed_out += bool(turns) and all(item["via"] == "similar" for item in full[:limit])
    assert pushed_out >= 2  # tasks whose score-ordered frontier shows no turn link though one exists


@pytest.mark.slow
@pytest.mark.locomo
def test_locomo_expands_along_turn_and_similar_links_and_finds_evidence_the_first_search_missed(judge: Any) -> None:
    env = make_small_env("locomo", judge)  # conv-30, every question
    assert env.config.frontier_links == ["turn", "similar"] and env.config.frontier_order == "interleave"
    missed = gained = mixed = 0
    for task in env.tasks[:60]:
        _, info = env.reset(options={"task": task})
        working = {link_label(entry.abstraction) for entry in env.snapshot().working}
        assert info["frontier"], task.id
        kinds = [item["via"] for item in info["frontier"]]
        assert set(kinds) <= {"turn", "similar"} and kinds[0] == "turn", (task.id, kinds)
        mixed += kinds[1:2] == ["similar"]  # interleaved: the best similar entry second
        assert {item["anchor"] for item in info["frontier"]} <= working  # labelled by the entry they come from
        ids = [item["id"] for item in info["frontier"][:3]]
        env.step(format_action(ExpandAction(ids=ids)))
        trajectory = env.step('{"action": "stop"}')[-1]["trajectory"]
        if initial_recall(trajectory) < 1.0:
            missed += 1
            gained += evidence_recall(trajectory) > initial_recall(trajectory)
    assert missed >= 20 and mixed >= 20
    assert gained >= 0.15 * missed, f"expanding turn links found missed evidence on {gained} of {missed} tasks"
