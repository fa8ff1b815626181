"""Memora builder with a scripted endpoint: index repair, fallbacks, LLM decider, resume, incremental builds."""

from __future__ import annotations

from pathlib import Path

import pytest

from memora_rl.builders.memora import MemoraBuilder, MemoraConfig, decision_from_answer
from memora_rl.builders.memora_prompts import DecideAnswer, ExtractAnswer
from memora_rl.data.records import Conversation
from memora_rl.errors import LLMError
from memora_rl.memory import open_store
from memora_rl.memory.records import MemoryEntry
from tests.builders.scripted_llm import (
    ScriptedEndpoint,
    as_answer,
    covered,
    default_answer,
    numbered_lines,
    scripted_client,
    small_conversation,
)


def build(tmp_path: Path, endpoint: ScriptedEndpoint, conversation: Conversation, store_name: str = "g.sqlite", **cfg):
    """Build `conversation` into a store under tmp_path; returns (report, store)."""
    client = scripted_client(endpoint, tmp_path / "llm.sqlite")
    builder = MemoraBuilder(MemoraConfig(**cfg), client=client)
    store = open_store(tmp_path / store_name)
    return builder.build(conversation, store), store


def test_build_covers_every_message_and_keeps_turn_ids(tmp_path: Path) -> None:
    conversation = small_conversation()
    report, store = build(tmp_path, ScriptedEndpoint(), conversation)
    assert store.check_integrity().ok
    assert sorted(covered(store, "c1")) == sorted(conversation.turn_ids())
    entries = store.entries("c1")
    assert report.entries_created == len(entries) == 8  # 2 memories per episode, 2 episodes per session
    texts = {turn.id: turn.text for turn in conversation.turns()}
    for entry in entries:
        assert texts[entry.source_turn_ids[0]] == entry.value
        assert entry.anchor_ids and entry.episode_ids
    assert report.http_requests == report.llm_calls > 0


def test_out_of_range_duplicate_and_missing_indices_are_repaired(tmp_path: Path) -> None:
    def responder(schema: str, messages: list[dict[str, str]]) -> str:
        if schema == "SegmentAnswer":  # 4 messages: 1 twice, 9 out of range, 2 and 4 uncovered
            return as_answer({"episodes": [{"messages": [1, 1, 9], "topic": "a"}, {"messages": [3], "topic": "b"}]})
        return default_answer(schema, messages)

    report, store = build(tmp_path, ScriptedEndpoint(responder), small_conversation())
    spans = [episode.source_turn_ids for episode in store.episodes("c1")]
    assert spans == [["D1:1", "D1:2"], ["D1:3", "D1:4"], ["D2:1", "D2:2"], ["D2:3", "D2:4"]]
    assert [episode.title for episode in store.episodes("c1")][:2] == ["a", "b"]
    assert report.index_repairs == 2
    assert store.check_integrity().ok


def test_invalid_json_falls_back_to_one_episode_and_is_not_asked_again(tmp_path: Path) -> None:
    def responder(schema: str, messages: list[dict[str, str]]) -> str:
        return "Sure! Here are the episodes: none" if schema == "SegmentAnswer" else default_answer(schema, messages)

    endpoint = ScriptedEndpoint(responder)
    report, store = build(tmp_path, endpoint, small_conversation())
    assert [len(episode.source_turn_ids) for episode in store.episodes("c1")] == [4, 4]
    assert endpoint.requests["SegmentAnswer"] == 4  # first answer + one repair, per batch
    assert report.fallbacks == 2
    assert store.check_integrity().ok
    rerun, _ = build(tmp_path, endpoint, small_conversation(), store_name="fresh.sqlite")
    assert rerun.http_requests == 0
    assert rerun.fallbacks == 2
    assert endpoint.requests["SegmentAnswer"] == 4


def test_llm_decider_merges_values_keeping_history(tmp_path: Path) -> None:
    def responder(schema: str, messages: list[dict[str, str]]) -> str:
        if schema == "ExtractAnswer":
            number, _, text = numbered_lines(messages)[0]
            memory = {"abstraction": "Alice's hobby", "value": text, "anchors": ["Alice + hobby"], "messages": [number]}
            return as_answer({"memories": [memory]})
        if schema == "DecideAnswer":
            new_value = messages[-1]["content"].split("\n")[1].split(": ", 1)[1]
            return as_answer(
                {
                    "action": "merge",
                    "target": 1,
                    "merged_value": f"latest: {new_value}",
                    "refined_abstraction": "",
                    "anchors": ["Alice + hobby"],
                }
            )
        return default_answer(schema, messages)

    report, store = build(tmp_path, ScriptedEndpoint(responder), small_conversation())
    (entry,) = store.entries("c1")
    assert report.entries_created == 1 and report.entries_merged == 3
    assert entry.value.startswith("latest: Session 2 message 3")
    assert len(entry.history) == 3
    assert entry.history[0].value == "Session 1 message 1: I like topic 11."
    assert entry.source_turn_ids == ["D1:1", "D1:3", "D2:1", "D2:3"]
    assert store.check_integrity().ok


def test_decision_from_answer_rejects_bad_targets() -> None:
    similar = [MemoryEntry(id="e1", graph_id="g", abstraction="a", value="v")]
    merge = DecideAnswer(action="merge", target=1, merged_value="", refined_abstraction="Alice's job", anchors=[])
    assert decision_from_answer(merge, similar).model_dump() == {
        "action": "merge",
        "target_id": "e1",
        "merged_value": None,
        "refined_abstraction": "Alice's job",
        "anchors": None,
    }
    for bad in (merge.model_copy(update={"target": 2}), merge.model_copy(update={"target": 0}), None):
        assert decision_from_answer(bad, similar).action == "create"


def test_killed_build_resumes_without_repeating_calls(tmp_path: Path) -> None:
    conversation = small_conversation(sessions=3)
    reference = ScriptedEndpoint()
    full, _ = build(tmp_path / "ref", reference, conversation)
    crashing = ScriptedEndpoint(fail_after=4)
    with pytest.raises(LLMError):
        build(tmp_path, crashing, conversation)
    resumed_endpoint = ScriptedEndpoint()
    resumed, store = build(tmp_path, resumed_endpoint, conversation)
    assert resumed.http_requests == full.http_requests - 4
    assert sum(resumed_endpoint.requests.values()) == full.http_requests - 4
    assert sorted(covered(store, "c1")) == sorted(conversation.turn_ids())
    assert len(store.entries("c1")) == full.entries_created
    assert store.check_integrity().ok
    again, _ = build(tmp_path, resumed_endpoint, conversation)
    assert again.skipped and again.llm_calls == 0


def test_later_sessions_extend_an_existing_graph(tmp_path: Path) -> None:
    endpoint = ScriptedEndpoint()
    first, store = build(tmp_path, endpoint, small_conversation(sessions=1))
    episodes_before = store.episodes("c1")
    store.close()
    second, store = build(tmp_path, endpoint, small_conversation(sessions=2))
    assert first.episodes_added == second.episodes_added == 2
    assert store.episodes("c1")[:2] == episodes_before
    assert len(store.entries("c1")) == first.entries_created + second.entries_created


def test_narrative_episodes_use_the_llm_text_or_keep_the_raw_segment(tmp_path: Path) -> None:
    def responder(schema: str, messages: list[dict[str, str]]) -> str:
        if schema == "NarrativeAnswer":
            if any("Session 2" in message["content"] for message in messages):  # also its repair request
                return "no JSON here"
            assert "happened on 3 May 2023" in messages[0]["content"]  # the session date, to resolve relative dates
            return as_answer({"title": "topics", "narrative": "On 3 May 2023 Alice and Bob listed topics."})
        return default_answer(schema, messages)

    report, store = build(tmp_path, ScriptedEndpoint(responder), small_conversation(), episode_text="narrative")
    texts = [episode.text for episode in store.episodes("c1")]
    assert texts[:2] == ["On 3 May 2023 Alice and Bob listed topics."] * 2
    assert texts[2].startswith("Bob: Session 2 message 2") or texts[2].startswith("Alice: Session 2 message 1")
    assert report.fallbacks == 2


def test_small_talk_may_extract_no_memory(tmp_path: Path) -> None:
    assert ExtractAnswer.model_validate({"memories": []}).memories == []

    def responder(schema: str, messages: list[dict[str, str]]) -> str:
        return as_answer({"memories": []}) if schema == "ExtractAnswer" else default_answer(schema, messages)

    endpoint = ScriptedEndpoint(responder)
    report, store = build(tmp_path, endpoint, small_conversation())
    assert report.fallbacks == 0 and store.entries("c1") == []
    assert endpoint.requests["ExtractAnswer"] == len(store.episodes("c1")) == 4  # no repair request either
    assert sorted(covered(store, "c1")) == sorted(small_conversation().turn_ids())


def test_merge_rederives_anchors_from_the_merged_value_and_prunes_stale_ones(tmp_path: Path) -> None:
    def responder(schema: str, messages: list[dict[str, str]]) -> str:
        lines = numbered_lines(messages)
        if schema == "SegmentAnswer":
            return as_answer({"episodes": [{"messages": [n for n, _, _ in lines], "topic": "work"}]})
        if schema == "ExtractAnswer":
            if "Session 2" in lines[0][2]:
                value, anchors = "Alice works at Orbit.", ["Alice + Orbit"]
            else:
                value, anchors = "Alice works at Nova.", ["Alice + Nova", "Alice + job"]
            memory = {"abstraction": "Alice's employer", "value": value, "anchors": anchors, "messages": [1]}
            return as_answer({"memories": [memory]})
        if schema == "DecideAnswer":
            merged = {"merged_value": "Alice works at Orbit (before: Nova).", "anchors": ["Orbit", "Alice + job"]}
            return as_answer({"action": "merge", "target": 1, "refined_abstraction": "", **merged})
        return default_answer(schema, messages)

    _, store = build(tmp_path, ScriptedEndpoint(responder), small_conversation())
    (entry,) = store.entries("c1")
    texts = {anchor.id: anchor.text for anchor in store.anchors("c1")}
    assert entry.value == "Alice works at Orbit (before: Nova)."
    assert sorted(texts[anchor_id] for anchor_id in entry.anchor_ids) == ["Alice + Orbit", "Alice + job"]
    assert sorted(texts.values()) == ["Alice + Orbit", "Alice + job"]  # "Alice + Nova" was left empty: pruned
    assert store.check_integrity().ok


def test_a_candidate_merged_into_another_value_is_not_merged_again_on_resume(tmp_path: Path) -> None:
    """A kill after a merge and before the batch's episodes: the re-run finds the upsert's receipt and skips it."""
    from memora_rl.builders.base import new_report, stored_statements
    from memora_rl.builders.batched import BatchSink, LLMBuildReport, PhaseProgress
    from memora_rl.memory import EntryCandidate, MergeDecision, always_create

    store = open_store(tmp_path / "g.sqlite")
    old = EntryCandidate(abstraction="Alice's job", value="Alice works at Nova", source_turn_ids=["D1:1"])
    new = EntryCandidate(abstraction="Alice's job", value="Alice now works at Orbit", source_turn_ids=["D2:1"])
    calls: list[str] = []

    def rewrite(candidate: EntryCandidate, similar: list[MemoryEntry]) -> MergeDecision:
        calls.append(candidate.value)
        return MergeDecision(action="merge", target_id=similar[0].id, merged_value="Alice moved from Nova to Orbit")

    def sink() -> BatchSink:
        """The sink a (re-)run of the batch gets: what the store says is done, fresh counters."""
        report = new_report(LLMBuildReport, small_conversation(), "c1", 2)
        done = stored_statements(store, "c1")
        return BatchSink("c1", store, done, report, PhaseProgress(False), store.receipts("c1"))

    first = sink()
    first.upsert(old, always_create, "extract")
    first.upsert(new, rewrite, "extract")  # merged into a value neither candidate has
    resumed = sink()
    resumed.upsert(old, always_create, "extract")
    resumed.upsert(new, rewrite, "extract")
    (entry,) = store.entries("c1")
    assert calls == ["Alice now works at Orbit"]  # decided once, not again on the re-run
    assert entry.value == "Alice moved from Nova to Orbit" and len(entry.history) == 1
    assert resumed.report.entries_created == resumed.report.entries_merged == 0
