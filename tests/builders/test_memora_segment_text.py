"""Memora `segment_output="text"`: the segmenter writes episodes out, turns still come from its message numbers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from memora_rl.builders.base import raw_text
from memora_rl.builders.memora import MemoraBuilder, MemoraConfig
from memora_rl.builders.memora_prompts import SegmentTextAnswer
from memora_rl.data.records import Conversation
from memora_rl.memory import open_store
from memora_rl.memory.store import GraphStore
from tests.builders.scripted_llm import (
    SMALL_TURN,
    ScriptedEndpoint,
    as_answer,
    covered,
    default_answer,
    numbered_lines,
    scripted_client,
    small_conversation,
)

Lines = list[tuple[int, str, str]]
"""(number, speaker, text) of the messages of one episode, as the scripted segmenter sees them."""


def said(lines: Lines) -> str:
    """A deterministic "written out" episode: who said which message."""
    return " ".join(f"{speaker} said {SMALL_TURN.match(text).group(0)[:-1]}." for _, speaker, text in lines)


def text_segmenter(write: Callable[[Lines], str], starts: set[str] | None = None):
    """A responder answering `SegmentTextAnswer` with episodes written by `write`.

    Without `starts` a batch is cut in two halves; with it an episode opens at the first
    message and at every turn id in `starts` (read back from the `small_conversation` texts).
    """

    def responder(schema: str, messages: list[dict[str, str]]) -> str:
        if schema != "SegmentTextAnswer":
            return default_answer(schema, messages)
        lines = numbered_lines(messages)
        if starts is None:
            half = max(1, len(lines) // 2)
            groups = [group for group in (lines[:half], lines[half:]) if group]
        else:
            groups = []
            for line in lines:
                session, turn = SMALL_TURN.match(line[2]).groups()
                if not groups or f"D{session}:{turn}" in starts:
                    groups.append([])
                groups[-1].append(line)
        episodes = [{"messages": [n for n, _, _ in g], "topic": f"t{g[0][0]}", "text": write(g)} for g in groups]
        return as_answer({"episodes": episodes})

    return responder


def build(tmp_path: Path, endpoint: ScriptedEndpoint, conversation: Conversation, **cfg):
    """Build `conversation` into tmp_path/g.sqlite (LLM cache beside it); returns (report, store)."""
    client = scripted_client(endpoint, tmp_path / "llm.sqlite")
    builder = MemoraBuilder(MemoraConfig(**cfg), client=client)
    store = open_store(tmp_path / "g.sqlite")
    return builder.build(conversation, store), store


def spans(store: GraphStore) -> list[list[str]]:
    """The turn ids of every stored episode, in turn order."""
    return [episode.source_turn_ids for episode in store.episodes("c1")]


def test_text_mode_stores_the_segmenters_text_over_the_turns_of_its_numbers(tmp_path: Path) -> None:
    conversation = small_conversation()
    endpoint = ScriptedEndpoint(text_segmenter(said))
    report, store = build(tmp_path, endpoint, conversation, segment_output="text")
    assert spans(store) == [["D1:1", "D1:2"], ["D1:3", "D1:4"], ["D2:1", "D2:2"], ["D2:3", "D2:4"]]
    episodes = store.episodes("c1")
    assert episodes[0].text == "Alice said Session 1 message 1. Bob said Session 1 message 2."
    assert episodes[3].text == "Alice said Session 2 message 3. Bob said Session 2 message 4."
    assert [episode.title for episode in episodes] == ["t1", "t3", "t1", "t3"]
    assert endpoint.requests["SegmentTextAnswer"] == 2 and endpoint.requests["SegmentAnswer"] == 0
    assert report.usage["memora/segment"]["calls"] == 2  # same phase as offsets mode
    by_id = {episode.id: episode for episode in episodes}
    for entry in store.entries("c1"):  # extraction still reads the raw messages, provenance by turn id
        assert set(entry.source_turn_ids) <= set(by_id[entry.episode_ids[0]].source_turn_ids)
    assert sorted(covered(store, "c1")) == sorted(conversation.turn_ids())
    assert store.check_integrity().ok


def test_text_mode_cuts_the_same_episodes_as_offsets_mode_with_carry(tmp_path: Path) -> None:
    thirty = small_conversation(sessions=1, turns_per_session=30)
    starts = {"D1:10", "D1:18", "D1:24"}
    _, store = build(tmp_path, ScriptedEndpoint(text_segmenter(said, starts)), thirty, segment_output="text")
    assert [(turns[0], turns[-1]) for turns in spans(store)] == [
        ("D1:1", "D1:9"),
        ("D1:10", "D1:17"),
        ("D1:18", "D1:23"),  # carried from batch 1-20 into batch 18-30
        ("D1:24", "D1:30"),
    ]
    carried = store.episodes("c1")[2]
    assert carried.text.startswith("Bob said Session 1 message 18.") and carried.text.endswith("message 23.")  # batch 2
    assert sorted(covered(store, "c1")) == sorted(thirty.turn_ids())


def test_an_unusable_text_falls_back_to_the_raw_segment(tmp_path: Path) -> None:
    def write(lines: Lines) -> str:
        first = lines[0][2]
        if first.startswith("Session 1 message 1:"):
            return ""
        if first.startswith("Session 1 message 3:"):
            return " 3, 4 ... "
        return said(lines)

    conversation = small_conversation()
    report, store = build(tmp_path, ScriptedEndpoint(text_segmenter(write)), conversation, segment_output="text")
    turns = {turn.id: turn for turn in conversation.turns()}
    episodes = store.episodes("c1")
    assert episodes[0].text == raw_text([turns["D1:1"], turns["D1:2"]])
    assert episodes[1].text == raw_text([turns["D1:3"], turns["D1:4"]])
    assert episodes[2].text == "Alice said Session 2 message 1. Bob said Session 2 message 2."
    assert report.fallbacks == 0  # the answer validated; only its text was unusable


def test_an_unusable_answer_makes_one_raw_episode_per_batch(tmp_path: Path) -> None:
    def responder(schema: str, messages: list[dict[str, str]]) -> str:
        return "no JSON here" if schema == "SegmentTextAnswer" else default_answer(schema, messages)

    conversation = small_conversation()
    report, store = build(tmp_path, ScriptedEndpoint(responder), conversation, segment_output="text")
    turns = list(conversation.turns())
    assert [episode.text for episode in store.episodes("c1")] == [raw_text(turns[:4]), raw_text(turns[4:])]
    assert report.fallbacks == 2


@pytest.mark.parametrize("output", ["offsets", "text"])
def test_only_text_mode_asks_the_segmenter_for_text(tmp_path: Path, output: str) -> None:
    systems: dict[str, str] = {}

    def recording(schema: str, messages: list[dict[str, str]]) -> str:
        systems.setdefault(schema, messages[0]["content"])
        return text_segmenter(said)(schema, messages)

    build(tmp_path, ScriptedEndpoint(recording), small_conversation(sessions=1), segment_output=output)
    schema = "SegmentTextAnswer" if output == "text" else "SegmentAnswer"
    (segment_schema,) = [name for name in systems if name.startswith("Segment")]
    assert segment_schema == schema
    system = systems[schema]
    assert "Every message number from 1 to 4 must appear in exactly one episode." in system
    assert ('"text"' in system) == (output == "text")
    assert ("written out" in system) == (output == "text")


def test_the_text_schema_bounds_the_written_text() -> None:
    long = {"messages": [1], "topic": "t", "text": "x" * 801}
    with pytest.raises(ValueError):
        SegmentTextAnswer.model_validate({"episodes": [long]})
