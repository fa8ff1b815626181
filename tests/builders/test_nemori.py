"""NEMORI builder with a scripted endpoint: grouping repair, continuation merges, reconciliation, resume."""

from __future__ import annotations

from pathlib import Path

import pytest

from memora_rl.builders.nemori import NemoriBuilder, NemoriConfig, reconcile_decision
from memora_rl.builders.nemori_prompts import DistillAnswer, ReconcileAnswer
from memora_rl.data.records import Conversation
from memora_rl.errors import LLMError
from memora_rl.memory import open_store
from memora_rl.memory.records import EntryCandidate, MemoryEntry
from tests.builders.scripted_llm import (
    ScriptedEndpoint,
    as_answer,
    conversation_of,
    covered,
    default_answer,
    numbered_lines,
    scripted_client,
    small_conversation,
)

NOVA = "Alice works at Nova as a backend engineer."
ORBIT = "Alice now works at Orbit as a backend engineer."
HIKE_CUE, WORK_CUE = "hiking trip", "work chat"
HIKE = "Alice and Bob plan a hiking trip to the Alps in June and book mountain huts."
WORK = "Alice and Bob talk about Alice's job."


def one_group(messages: list[dict[str, str]]) -> str:
    """A grouping answer putting every numbered message into one episode."""
    return as_answer({"episodes": [{"messages": [n for n, _, _ in numbered_lines(messages)], "topic": "all"}]})


def two_buffer_responder(schema: str, messages: list[dict[str, str]]) -> str:
    """Hiking and work episodes; continuation when the cues match; Orbit replaces Nova (topics differ)."""
    lines = numbered_lines(messages)
    if schema == "GroupAnswer":
        hike = [n for n, _, text in lines if "hike" in text]
        work = [n for n, _, text in lines if "hike" not in text]
        groups = [{"messages": hike, "topic": "hike"}, {"messages": work, "topic": "work"}]
        return as_answer({"episodes": [group for group in groups if group["messages"]]})
    if schema == "EpisodeAnswer":
        hiking = any("hike" in text for _, _, text in lines)
        return as_answer({"cue": HIKE_CUE if hiking else WORK_CUE, "narrative": HIKE if hiking else WORK})
    if schema == "ContinueAnswer":
        user = messages[-1]["content"]
        same = user.startswith(f"Earlier episode ({HIKE_CUE})") == (f"New episode ({HIKE_CUE})" in user)
        return as_answer({"same_event": same, "narrative": HIKE if HIKE_CUE in user.split("\n")[0] else WORK})
    if schema == "DistillAnswer":
        facts = [
            {"topic": "Alice + career" if "Orbit" in text else "Alice + employer",
             "fact": ORBIT if "Orbit" in text else NOVA, "messages": [n]}
            for n, _, text in lines if "Nova" in text or "Orbit" in text
        ]  # fmt: skip
        return as_answer({"facts": facts})
    if schema == "ReconcileAnswer":
        replace = messages[-1]["content"].startswith(f"New fact: {ORBIT}")
        return as_answer({"action": "replace" if replace else "add", "target": int(replace), "merged_fact": ""})
    return default_answer(schema, messages)


def two_buffer_conversation() -> Conversation:
    """24 messages in 3 sessions (two buffers of 20 and 4): a hike planned, then resumed; Nova, then Orbit."""
    first = ["I work at Nova now.", "Nice, what do you do there?", "Backend code mostly.", "Let us hike in June!"]
    chat = [f"Small talk number {n} about work." for n in range(1, 5)]
    hike = ["The hike is on: Alps in June.", "I booked huts for the hike."]
    later = ["More hike plans: we need boots.", "Good idea for the hike.", "I left Nova, now at Orbit.", "Congrats!"]
    return conversation_of([first + chat, chat + hike + chat[:2], [*chat[:4], *later]])


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
    report, store = build(tmp_path, ScriptedEndpoint(responder), conversation, buffer_messages=6, merge_candidates=0)
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
    report, store = build(tmp_path, endpoint, small_conversation(), buffer_messages=8, merge_candidates=0)
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
            session_2 = "Session 2" in messages[-1]["content"]
            fact = "Alice now works at Orbit as a backend engineer." if session_2 else NOVA
            return as_answer({"facts": [{"topic": "Alice + employer", "fact": fact, "messages": [1]}]})
        if schema == "ReconcileAnswer":
            return as_answer({"action": "replace", "target": 1, "merged_fact": ""})
        return default_answer(schema, messages)

    report, store = build(
        tmp_path, ScriptedEndpoint(responder), small_conversation(), buffer_messages=4, merge_candidates=0
    )
    (entry,) = store.entries("c1")
    assert entry.value == "Alice now works at Orbit as a backend engineer."
    assert [version.value for version in entry.history] == [NOVA]
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


def test_episode_vector_is_retrieved_among_all_earlier_episodes_not_only_recent(tmp_path: Path) -> None:
    topics = {
        "Alps": ("hiking trip", HIKE),
        "lasagna": ("cooking", "Bob shares his lasagna recipe and Alice bakes bread."),
        "tax": ("taxes", "Alice files her tax return and Bob asks about deductions."),
        "guitar": ("music", "Bob learns the guitar and Alice sings in a choir."),
    }

    def responder(schema: str, messages: list[dict[str, str]]) -> str:
        if schema == "GroupAnswer":
            return one_group(messages)
        if schema == "EpisodeAnswer":
            cue, narrative = next(value for key, value in topics.items() if key in messages[-1]["content"])
            return as_answer({"cue": cue, "narrative": narrative})
        if schema == "ContinueAnswer":  # only the two hiking episodes are the same event
            same = messages[-1]["content"].count("Alps") == 2
            return as_answer({"same_event": same, "narrative": HIKE if same else ""})
        return default_answer(schema, messages)

    sessions = [["Alps in June?", "Yes, Alps!"], ["My lasagna.", "Nice lasagna."], ["My tax return.", "Tax, ugh."],
                ["My guitar.", "Cool guitar."], ["Huts for the Alps booked.", "Great, the Alps!"]]  # fmt: skip
    conversation = conversation_of(sessions)
    _, store = build(tmp_path, ScriptedEndpoint(responder), conversation, buffer_messages=2, merge_candidates=3)
    episodes = store.episodes("c1")
    assert len(episodes) == 4  # the fifth session continues the first, older than the 3 most recent episodes
    assert episodes[0].source_turn_ids == ["D1:1", "D1:2", "D5:1", "D5:2"]
    assert sorted(covered(store, "c1")) == sorted(conversation.turn_ids())
    assert store.check_integrity().ok


def test_a_perfect_prediction_distils_no_fact(tmp_path: Path) -> None:
    assert DistillAnswer.model_validate({"facts": []}).facts == []

    def responder(schema: str, messages: list[dict[str, str]]) -> str:
        return as_answer({"facts": []}) if schema == "DistillAnswer" else default_answer(schema, messages)

    endpoint = ScriptedEndpoint(responder)
    report, store = build(tmp_path, endpoint, small_conversation(), buffer_messages=4, merge_candidates=0)
    assert report.fallbacks == 0 and store.entries("c1") == []
    assert endpoint.requests["DistillAnswer"] == len(store.episodes("c1")) == 4  # no repair request either
    assert sorted(covered(store, "c1")) == sorted(small_conversation().turn_ids())


def test_reconcile_finds_the_fact_by_its_embedding_not_its_topic(tmp_path: Path) -> None:
    def responder(schema: str, messages: list[dict[str, str]]) -> str:
        if schema == "GroupAnswer":
            return one_group(messages)
        if schema == "DistillAnswer":  # topics at cosine 0.74 (below gamma 0.80), facts at 0.83
            later = "Session 2" in messages[-1]["content"]
            topic, fact = ("Alice + career", ORBIT) if later else ("Alice + employer", NOVA)
            return as_answer({"facts": [{"topic": topic, "fact": fact, "messages": [1]}]})
        if schema == "ReconcileAnswer":
            return as_answer({"action": "replace", "target": 1, "merged_fact": ""})
        return default_answer(schema, messages)

    report, store = build(tmp_path, ScriptedEndpoint(responder), small_conversation(), buffer_messages=4)
    (entry,) = store.entries("c1")
    assert (entry.value, [version.value for version in entry.history]) == (ORBIT, [NOVA])
    assert report.entries_created == 1 and report.entries_merged == 1
    assert store.check_integrity().ok


def test_episode_and_distill_prompts_date_every_message(tmp_path: Path) -> None:
    prompts: dict[str, list[list[dict[str, str]]]] = {}

    def responder(schema: str, messages: list[dict[str, str]]) -> str:
        prompts.setdefault(schema, []).append(messages)
        return one_group(messages) if schema == "GroupAnswer" else default_answer(schema, messages)

    build(tmp_path, ScriptedEndpoint(responder), small_conversation(), buffer_messages=8, merge_candidates=0)
    for schema in ("EpisodeAnswer", "DistillAnswer"):
        (messages,) = prompts[schema]  # one buffer over two sessions: 3 May and 6 May 2023
        system, user = messages[0]["content"], messages[-1]["content"]
        assert "3 May" not in system and "6 May" not in system, schema
        assert "[1] (3 May 2023) Alice: Session 1 message 1" in user, schema
        assert "[5] (6 May 2023) Alice: Session 2 message 1" in user, schema


def test_two_buffers_continue_an_episode_and_replace_an_earlier_fact(tmp_path: Path) -> None:
    conversation = two_buffer_conversation()
    assert len(list(conversation.turns())) > 20
    report, store = build(tmp_path, ScriptedEndpoint(two_buffer_responder), conversation)
    hike, work = store.episodes("c1")
    assert (hike.title, work.title) == (HIKE_CUE, WORK_CUE)
    assert {"D1:4", "D3:5", "D3:6"} <= set(hike.source_turn_ids)  # continued in the second buffer
    assert {"D1:1", "D3:7", "D3:8"} <= set(work.source_turn_ids)
    assert sorted(covered(store, "c1")) == sorted(conversation.turn_ids())
    (entry,) = store.entries("c1")
    assert (entry.value, [version.value for version in entry.history]) == (ORBIT, [NOVA])
    assert entry.source_turn_ids == ["D1:1", "D3:7"] and entry.episode_ids == [work.id]
    assert report.entries_created == 1 and report.entries_merged == 1
    assert store.check_integrity().ok


def test_predict_prompt_holds_the_cue_and_known_facts_not_the_narrative(tmp_path: Path) -> None:
    predictions: list[str] = []

    def responder(schema: str, messages: list[dict[str, str]]) -> str:
        if schema == "text":
            predictions.append("\n".join(message["content"] for message in messages))
        return two_buffer_responder(schema, messages)

    build(tmp_path, ScriptedEndpoint(responder), two_buffer_conversation())
    assert any(f"Cue: {WORK_CUE}" in prompt and NOVA in prompt for prompt in predictions)  # second buffer
    assert all(narrative not in prompt for prompt in predictions for narrative in (HIKE, WORK))
