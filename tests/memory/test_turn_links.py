"""Turn links: the frontier reaches the same speaker's previous and next turn; value-only frontier ranking."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from memora_rl.embedding import Embedder
from memora_rl.errors import GraphError
from memora_rl.memory import EntryCandidate, StoreConfig
from memora_rl.memory.base_store import BaseGraphStore
from memora_rl.memory.records import MemoryEntry
from memora_rl.memory.store import MergeDecision
from tests.memory.helpers import fill_turns as fill


@pytest.fixture
def turns(store: BaseGraphStore) -> tuple[BaseGraphStore, dict[str, str]]:
    return store, fill(store)


def reached(store: BaseGraphStore, working: list[str], query: str = "Rex the dog") -> set[str]:
    return {item.entry_id for item in store.frontier("g", working, [], query, links=("turn",))}


def test_a_turn_link_reaches_the_same_speakers_previous_and_next_turn_in_the_session(turns) -> None:
    store, ids = turns
    items = store.frontier("g", [ids["D1:3"]], [], "Rex the dog", links=("turn",))
    assert {item.entry_id for item in items} == {ids["D1:1"], ids["D1:5"]}  # not Bob's D1:2, D1:4, nor D2:1
    assert {(item.via, item.anchor_id, item.anchor_text) for item in items} == {("turn", ids["D1:3"], "Ann + Rex")}
    assert reached(store, [ids["D1:5"]]) == {ids["D1:3"]}  # the session's last turn by Ann: only the one before
    assert reached(store, [ids["D2:1"]]) == set()  # the next session is no neighbour
    assert reached(store, [ids["note-1"]]) == set()  # an id without a dialogue position has none
    assert reached(store, [ids["D1:3"], ids["D1:1"]]) == {ids["D1:5"]}  # the working set is left out


def test_turn_links_are_off_unless_asked_and_an_unknown_link_names_turn_in_the_fix(turns) -> None:
    store, ids = turns
    assert store.frontier("g", [ids["D1:3"]], [], "Rex") == []  # anchors only by default: these have none
    with pytest.raises(GraphError, match="turn"):
        store.frontier("g", [ids["D1:3"]], [], "Rex", links=("turns",))


def test_the_window_bounds_how_far_a_turn_link_looks_for_the_speaker(stores, embedder: Embedder) -> None:
    store = stores.open("w1", embedder=embedder, config=StoreConfig(turn_link_window=1))
    try:
        ids = fill(store)
        assert reached(store, [ids["D1:3"]]) == set()  # Ann's neighbours are two turns away
        assert reached(store, [ids["D1:2"]]) == set()  # and so are Bob's
    finally:
        store.close()


def test_turn_links_survive_reopening_and_follow_deletes_and_merges(stores, embedder: Embedder, turns) -> None:
    store, ids = turns
    store.delete_entry("g", ids["D1:5"])
    assert reached(store, [ids["D1:3"]]) == {ids["D1:1"]}

    def merge_into_first(candidate: EntryCandidate, similar: Sequence[MemoryEntry]) -> MergeDecision:
        return MergeDecision(action="merge", target_id=similar[0].id)

    again = EntryCandidate(abstraction="Ann + job", value="I started a new job at Nova today.", speaker="Ann",
                           source_turn_ids=["D1:7"])  # fmt: skip
    merged = store.upsert_entry("g", again, merge_into_first)
    assert merged.entry.id == ids["D2:1"] and not merged.created
    assert ids["D2:1"] in reached(store, [ids["D1:3"]])  # its new turn D1:7 is Ann's next after D1:3 (D1:5 is gone)
    store.close()
    reopened = stores.open("graph", embedder=embedder)
    try:
        assert reached(reopened, [ids["D1:3"]]) == {ids["D1:1"], ids["D2:1"]}
    finally:
        reopened.close()


def test_value_scoring_ranks_the_frontier_by_the_values_cosine_alone(turns, embedder: Embedder) -> None:
    store, ids = turns
    query = "Where does Rex like to run?"
    entries = {entry.id: entry for entry in store.entries("g")}
    q = embedder.encode_one(query)

    def cosine(text: str) -> float:
        return float(embedder.encode_one(text) @ q)

    for score, expected in (("value", lambda e: cosine(e.value)),
                            ("best", lambda e: max(cosine(e.abstraction), cosine(e.value)))):  # fmt: skip
        items = store.frontier("g", [ids["D1:3"], ids["D1:2"]], [], query, links=("turn",), score=score)
        assert len(items) == 3  # D1:1, D1:5 (Ann's) and D1:4 (Bob's)
        got = [item.score for item in items]
        assert got == sorted(got, reverse=True)
        assert np.allclose(got, [expected(entries[item.entry_id]) for item in items], atol=1e-4)
