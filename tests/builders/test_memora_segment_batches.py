"""Memora batches: an open last segment is carried into the next batch; structure segmentation of documents."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from memora_rl.builders.memora import MemoraBuilder, MemoraConfig
from memora_rl.data.records import Conversation
from memora_rl.errors import LLMError
from memora_rl.memory import open_store
from memora_rl.memory.store import GraphStore
from tests.builders.scripted_llm import (
    SMALL_TURN,
    ScriptedEndpoint,
    as_answer,
    conversation_of,
    covered,
    default_answer,
    numbered_lines,
    scripted_client,
    small_conversation,
)


def segmenter(starts: set[str]):
    """A responder whose segmentation opens an episode at the first message and at every turn id in `starts`.

    Turn ids are read back from the `small_conversation` texts ("Session s message t: ..."), so the
    same turns get the same episodes whichever batch they fall in.
    """

    def responder(schema: str, messages: list[dict[str, str]]) -> str:
        if schema != "SegmentAnswer":
            return default_answer(schema, messages)
        groups: list[list[int]] = []
        for number, _, text in numbered_lines(messages):
            session, turn = SMALL_TURN.match(text).groups()
            if not groups or f"D{session}:{turn}" in starts:
                groups.append([])
            groups[-1].append(number)
        return as_answer({"episodes": [{"messages": group, "topic": f"t{group[0]}"} for group in groups]})

    return responder


class FailingSecondSegmentation(ScriptedEndpoint):
    """A scripted endpoint that answers HTTP 400 from the second segmentation request on (a build killed)."""

    def __call__(self, request: httpx.Request) -> httpx.Response:
        schema = json.loads(request.content).get("response_format", {}).get("json_schema", {}).get("name", "text")
        if schema == "SegmentAnswer" and self.requests["SegmentAnswer"] >= 1:
            return httpx.Response(400, json={"error": {"message": "scripted failure"}})
        return super().__call__(request)


def build(tmp_path: Path, endpoint: ScriptedEndpoint, conversation: Conversation, **cfg):
    """Build `conversation` into tmp_path/g.sqlite (LLM cache beside it); returns (report, store)."""
    client = scripted_client(endpoint, tmp_path / "llm.sqlite")
    builder = MemoraBuilder(MemoraConfig(**cfg), client=client)
    store = open_store(tmp_path / "g.sqlite")
    return builder.build(conversation, store), store


def spans(store: GraphStore) -> list[tuple[str, str]]:
    """(first turn id, last turn id) of every stored episode, in turn order."""
    return [(episode.source_turn_ids[0], episode.source_turn_ids[-1]) for episode in store.episodes("c1")]


def ids(first: int, last: int, session: int = 1) -> list[str]:
    """Turn ids D<session>:first .. D<session>:last."""
    return [f"D{session}:{turn}" for turn in range(first, last + 1)]


THIRTY = small_conversation(sessions=1, turns_per_session=30)
STARTS = {"D1:10", "D1:18", "D1:24"}


def test_an_open_last_segment_is_carried_across_the_batch_boundary(tmp_path: Path) -> None:
    endpoint = ScriptedEndpoint(segmenter(STARTS))
    _, store = build(tmp_path, endpoint, THIRTY)
    assert spans(store) == [("D1:1", "D1:9"), ("D1:10", "D1:17"), ("D1:18", "D1:23"), ("D1:24", "D1:30")]
    (spanning,) = [episode for episode in store.episodes("c1") if "D1:20" in episode.source_turn_ids]
    assert spanning.source_turn_ids == ids(18, 23) and spanning.title == "t1"
    assert sorted(covered(store, "c1")) == sorted(THIRTY.turn_ids())  # every turn exactly once
    assert endpoint.requests["SegmentAnswer"] == 2  # turns 1-20, then 18-30
    episodes = {episode.id: episode for episode in store.episodes("c1")}
    entries = store.entries("c1")
    assert len(entries) == 8  # 2 memories per stored episode: the carried turns were extracted once
    for entry in entries:  # ... with the episode they ended up in
        assert set(entry.source_turn_ids) <= set(episodes[entry.episode_ids[0]].source_turn_ids)
    assert store.check_integrity().ok


def test_without_carry_the_batches_are_the_static_ones(tmp_path: Path) -> None:
    _, store = build(tmp_path, ScriptedEndpoint(segmenter(STARTS)), THIRTY, carry_open_segment=False)
    assert spans(store) == [
        ("D1:1", "D1:9"),
        ("D1:10", "D1:17"),
        ("D1:18", "D1:20"),
        ("D1:21", "D1:23"),
        ("D1:24", "D1:30"),
    ]
    assert sorted(covered(store, "c1")) == sorted(THIRTY.turn_ids())


def test_a_build_killed_after_the_first_batch_resumes_to_the_same_graph(tmp_path: Path) -> None:
    full_report, reference = build(tmp_path / "ref", ScriptedEndpoint(segmenter(STARTS)), THIRTY)
    with pytest.raises(LLMError):
        build(tmp_path, FailingSecondSegmentation(segmenter(STARTS)), THIRTY)
    killed = open_store(tmp_path / "g.sqlite")
    assert spans(killed) == [("D1:1", "D1:9"), ("D1:10", "D1:17")]  # the open segment 18-20 was not written
    killed.close()
    resumed_endpoint = ScriptedEndpoint(segmenter(STARTS))
    resumed, store = build(tmp_path, resumed_endpoint, THIRTY)
    assert resumed_endpoint.requests["SegmentAnswer"] == 1 and resumed.episodes_added == 2  # the batch 18-30
    episode_view = [(e.id, e.source_turn_ids, e.title, e.text) for e in store.episodes("c1")]
    assert episode_view == [(e.id, e.source_turn_ids, e.title, e.text) for e in reference.episodes("c1")]
    entry_view = sorted((e.abstraction, e.value, tuple(e.source_turn_ids)) for e in store.entries("c1"))
    assert entry_view == sorted((e.abstraction, e.value, tuple(e.source_turn_ids)) for e in reference.entries("c1"))
    assert len(entry_view) == len(set(entry_view)) == full_report.entries_created  # no duplicate entry
    assert sorted(covered(store, "c1")) == sorted(THIRTY.turn_ids())
    assert store.check_integrity().ok
    again, _ = build(tmp_path, resumed_endpoint, THIRTY)
    assert again.skipped and again.llm_calls == 0 and again.episodes_added == 0


def test_carry_never_crosses_a_session(tmp_path: Path) -> None:
    conversation = small_conversation(sessions=2, turns_per_session=12)
    prompts: list[set[str]] = []
    responder = segmenter({"D1:5", "D1:10", "D2:7"})

    def recording(schema: str, messages: list[dict[str, str]]) -> str:
        if schema == "SegmentAnswer":
            prompts.append({SMALL_TURN.match(text).group(1) for _, _, text in numbered_lines(messages)})
        return responder(schema, messages)

    _, store = build(tmp_path, ScriptedEndpoint(recording), conversation, batch_messages=8)
    assert spans(store) == [
        ("D1:1", "D1:4"),
        ("D1:5", "D1:9"),  # batch 1-8 carried 5-8; batch 5-12 is the session's last, so 10-12 is written
        ("D1:10", "D1:12"),
        ("D2:1", "D2:6"),
        ("D2:7", "D2:12"),
    ]
    assert prompts == [{"1"}, {"1"}, {"2"}, {"2"}]  # every batch within one session
    assert sorted(covered(store, "c1")) == sorted(conversation.turn_ids())


DOCUMENT = [
    "# Install",
    "You need Python 3.11.",
    "```bash",
    "# run this once",
    "pip install deploy-tool",
    "```",
    "## Configure",
    "Put the host names in hosts.yaml.",
    "# Run",
    "deploy --all",
]


@pytest.mark.parametrize("segmentation", ["structure", "auto"])
def test_structure_segmentation_splits_a_document_at_its_headers_without_the_llm(
    tmp_path: Path, segmentation: str
) -> None:
    conversation = conversation_of([DOCUMENT])
    endpoint = ScriptedEndpoint()
    report, store = build(tmp_path, endpoint, conversation, segmentation=segmentation)
    episodes = store.episodes("c1")
    assert [episode.title for episode in episodes] == ["Install", "Configure", "Run"]
    assert [episode.source_turn_ids for episode in episodes] == [ids(1, 6), ids(7, 8), ids(9, 10)]  # code: 3-6
    assert endpoint.requests["SegmentAnswer"] == 0 and "memora/segment" not in report.usage
    assert endpoint.requests["ExtractAnswer"] == 3
    assert sorted(covered(store, "c1")) == sorted(conversation.turn_ids())


def test_llm_segmentation_of_the_same_document_calls_the_llm(tmp_path: Path) -> None:
    endpoint = ScriptedEndpoint()
    report, store = build(tmp_path, endpoint, conversation_of([DOCUMENT]), segmentation="llm")
    assert endpoint.requests["SegmentAnswer"] == 1 and report.usage["memora/segment"]["calls"] == 1
    assert [episode.title for episode in store.episodes("c1")] == ["chat", "chat"]


def test_auto_uses_the_llm_for_chat_with_fewer_than_two_headers(tmp_path: Path) -> None:
    endpoint = ScriptedEndpoint()
    build(tmp_path, endpoint, conversation_of([["# Hello", "hi Bob", "how are you?", "#blessed, fine"]]))
    assert endpoint.requests["SegmentAnswer"] == 1
