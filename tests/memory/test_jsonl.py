from __future__ import annotations

import json
from datetime import datetime

import pytest

from memora_rl.errors import DataError
from memora_rl.memory import EntryCandidate, Episode, same_speaker_merge
from memora_rl.memory.jsonl import export_jsonl, import_jsonl


def test_jsonl_round_trip(store, stores, tmp_path, embedder):
    store.add_episode(
        Episode(id="ep1", graph_id="g", text="a chat", source_turn_ids=["D1:1"], start_time=datetime(2026, 1, 2))
    )
    for value in ["Alice works at Nova", "Alice now works at Orbit"]:
        store.upsert_entry(
            "g",
            EntryCandidate(
                abstraction="Alice's employer",
                value=value,
                anchors=["Alice + job"],
                speaker="Alice",
                source_turn_ids=["D1:1"],
            ),
            same_speaker_merge,
        )
    store.upsert_entry(
        "h", EntryCandidate(abstraction="Bob's pet", value="Bob has a dog", anchors=["Bob + pet"]), same_speaker_merge
    )
    path = tmp_path / "g.jsonl"
    lines = export_jsonl(store, path)
    assert lines == 1 + 1 + 1 + 1 + 1 + 1 + 1  # graph g, episode, anchor, entry; graph h, anchor, entry
    assert all("type" in json.loads(line) for line in path.read_text().splitlines())
    copy = stores.open("copy", embedder=embedder)
    counts = import_jsonl(copy, path)
    assert counts == {"graph": 2, "episode": 1, "anchor": 2, "entry": 2}
    for graph_id in ["g", "h"]:
        assert copy.entries(graph_id) == store.entries(graph_id)
        assert copy.episodes(graph_id) == store.episodes(graph_id)
        assert [a.text for a in copy.anchors(graph_id)] == [a.text for a in store.anchors(graph_id)]
    new = copy.upsert_entry(
        "g", EntryCandidate(abstraction="Weather", value="It rains", anchors=[]), same_speaker_merge
    )
    assert new.entry.id not in {e.id for e in store.entries("g")}
    assert copy.search("g", "Orbit")[0].entry_id == store.entries("g")[0].id
    assert copy.check_integrity().ok
    with pytest.raises(DataError, match="already exist"):
        import_jsonl(copy, path)
    copy.close()


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "line|:2: not valid JSON"),
        ('{"type": "entry", "id": "e1"}', ":2: not a graph record"),
        ('{"type": "robot"}', ":2: not a graph record"),
        (
            '{"type": "entry", "id": "e1", "graph_id": "g", "abstraction": "a", "value": "v", "anchor_ids": ["a7"]}',
            ":2: entry 'e1' links anchors",
        ),
    ],
)
def test_import_errors_name_the_line(store, tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"type": "graph", "graph_id": "g"}\n' + line + "\n")
    with pytest.raises(DataError, match=message.split("|")[-1]):
        import_jsonl(store, path)
