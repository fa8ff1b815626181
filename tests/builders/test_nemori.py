"""NEMORI builder with a scripted endpoint: grouping repair, continuation merges, reconciliation, resume."""

from __future__ import annotations

from pathlib import Path

import pytest

from memora_rl.builders.nemori import NemoriBuilder, NemoriConfig, reconcile_decision
from memora_rl.builders.nemori_prompts import ReconcileAnswer
from memora_rl.data.records import Conversation
from memora_rl.errors import LLMError
from memora_rl.memory import open_store
from memora_rl.memory.records import EntryCandidate, MemoryEntry
from tests.builders.scripted_llm import (
    ScriptedEndpoint,
    as_answer,
    covered,
    default_answer,
    scripted_client,
    small_conversation,
)


def build(tmp_path: Path, endpoint: ScriptedEndpoint, conversation: Conversation, store_name: str = "g.sqlite", **cfg):
    """Build `conversation` with NEMORI into a store under tmp_path; returns (report, store)."""
    client = scripted_client(endpoint, tmp_path / "llm.sqlite")
    builder = NemoriBuilder(NemoriConfig(**cfg), client=client)
    store = open_store(tmp_path / store_name)
    return builder.build(conversation, store), store


def test_buffer_flush_and_interleaved_groups_cover_every_message(tmp_path: Path) -> None:
    def responder(schema: str, messages: list[dict[str, str]]) -> str:
        if schema == "GroupAnswer":  # interleaved topics, a duplicate, an out-of-range index, 5 uncovered
            return as_answer(
                {"episodes": [{"messages": [1, 3, 3], "topic": "odd"}, {"messages": [2, 4, 42], "topic": "even"}]}
            )
        return default_answer(schema, messages)

    conversation = small_conversation(sessions=2, turns_per_session=5)  # 10 turns: a buffer of 6, a flush of 4
    report, store = build(tmp_path, ScriptedEndpoint(responder), conversation, buffer_messages=6, merge_window=0)
    spans = [episode.source_turn_ids for episode in store.episodes("c1")]
    assert spans[:2] == [["D1:1", "D1:3"], ["D1:2", "D1:4", "D1:5", "D2:1"]]
    assert sorted(covered(store, "c1")) == sorted(conversation.turn_ids())
    assert report.index_repairs == 2
    assert all(entry.kind == "semantic" and entry.source_turn_ids for entry in store.entries("c1"))
    assert store.check_integrity().ok


def test_unusable_grouping_and_narrative_fall_back(tmp_path: Path) -> None:
    def responder(schema: str, messages: list[dict[str, str]]) -> str:
        if schema in ("GroupAnswer", "EpisodeAnswer"):
            return '{"episodes": [' if schema == "GroupAnswer" else "no idea"
        return default_answer(schema, messages)

    endpoint = ScriptedEndpoint(responder)
    report, store = build(tmp_path, endpoint, small_conversation(), buffer_messages=8, merge_window=0)
    (episode,) = store.episodes("c1")
    assert len(episode.source_turn_ids) == 8
    assert episode.text.startswith("Alice: Session 1 message 1")  # raw messages when the narrative failed
    assert report.fallbacks == 2
    rerun, _ = build(tmp_path, endpoint, small_conversation(), store_name="fresh.sqlite", buffer_messages=8)
    assert rerun.http_requests == 0


def test_contradiction_replaces_the_fact_and_keeps_history(tmp_path: Path) -> None:
    def responder(schema: str, messages: list[dict[str, str]]) -> str:
        if schema == "GroupAnswer":
            return as_answer({"episodes": [{"messages": [1, 2, 3, 4], "topic": "work"}]})
        if schema == "DistillAnswer":
            fact = "Alice works at Orbit." if "Session 2" in messages[-1]["content"] else "Alice works at Nova."
            return as_answer({"facts": [{"topic": "Alice + employer", "fact": fact, "messages": [1]}]})
        if schema == "ReconcileAnswer":
            return as_answer({"action": "replace", "target": 1, "merged_fact": ""})
        return default_answer(schema, messages)

    report, store = build(
        tmp_path, ScriptedEndpoint(responder), small_conversation(), buffer_messages=4, merge_window=0
    )
    (entry,) = store.entries("c1")
    assert entry.value == "Alice works at Orbit."
    assert [version.value for version in entry.history] == ["Alice works at Nova."]
    assert entry.source_turn_ids == ["D1:1", "D2:1"]
    assert report.entries_created == 1 and report.entries_merged == 1
    assert store.check_integrity().ok


def test_continuation_merges_into_the_earlier_episode(tmp_path: Path) -> None:
    def responder(schema: str, messages: list[dict[str, str]]) -> str:
        if schema == "EpisodeAnswer":
            return as_answer({"cue": "topic chat", "narrative": "Alice and Bob talk about the topics they like."})
        if schema == "ContinueAnswer":
            return as_answer({"same_event": True, "narrative": "Alice and Bob keep talking about topics."})
        return default_answer(schema, messages)

    endpoint = ScriptedEndpoint(responder)
    report, store = build(tmp_path, endpoint, small_conversation(), buffer_messages=4)
    (episode,) = store.episodes("c1")
    assert episode.text == "Alice and Bob keep talking about topics."
    assert sorted(episode.source_turn_ids) == sorted(small_conversation().turn_ids())
    assert report.usage["nemori/continue"]["calls"] == 3  # the third prompt repeats the second: a cache hit
    assert endpoint.requests["ContinueAnswer"] == 2
    assert {episode.id} == {eid for entry in store.entries("c1") for eid in entry.episode_ids}
    assert store.check_integrity().ok


def test_reconcile_decision_table() -> None:
    similar = [MemoryEntry(id="e1", graph_id="g", abstraction="Alice + job", value="Alice works at Nova.")]
    candidate = EntryCandidate(abstraction="Alice + job", value="Alice works at Orbit.")
    replace = reconcile_decision(ReconcileAnswer(action="replace", target=1, merged_fact="x"), candidate, similar)
    assert (replace.action, replace.target_id, replace.merged_value) == ("merge", "e1", "Alice works at Orbit.")
    merge = reconcile_decision(ReconcileAnswer(action="merge", target=1, merged_fact=""), candidate, similar)
    assert merge.merged_value == "Alice works at Nova. Alice works at Orbit."
    for answer in (ReconcileAnswer(action="add", target=1, merged_fact=""),
                   ReconcileAnswer(action="replace", target=3, merged_fact=""), None):  # fmt: skip
        assert reconcile_decision(answer, candidate, similar).action == "create"


def test_killed_build_resumes_without_repeating_calls(tmp_path: Path) -> None:
    conversation = small_conversation(sessions=3)
    full, _ = build(tmp_path / "ref", ScriptedEndpoint(), conversation, buffer_messages=4)
    with pytest.raises(LLMError):
        build(tmp_path, ScriptedEndpoint(fail_after=7), conversation, buffer_messages=4)
    resumed, store = build(tmp_path, ScriptedEndpoint(), conversation, buffer_messages=4)
    assert resumed.http_requests == full.http_requests - 7
    assert sorted(covered(store, "c1")) == sorted(conversation.turn_ids())
    assert store.check_integrity().ok
