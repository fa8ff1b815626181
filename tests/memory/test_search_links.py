"""Search links: the frontier offers the query's best entries not yet held, linked to the working set or not."""

from __future__ import annotations

import pytest

from memora_rl.memory.base_store import BaseGraphStore
from memora_rl.memory.records import SEARCH_LINK_TEXT
from tests.memory.helpers import fill_turns


@pytest.fixture
def turns(store: BaseGraphStore) -> tuple[BaseGraphStore, dict[str, str]]:
    return store, fill_turns(store)


def test_search_links_offer_the_searchs_next_hits_outside_the_working_set_and_visited(turns, embedder) -> None:
    store, ids = turns
    query = embedder.encode_one("Where does Rex like to run?")
    working, visited = [ids["D2:1"]], [ids["D1:3"]]
    items = store.frontier("g", working, visited, query, limit=3, links=("search",))
    hits = [hit.entry_id for hit in store.search("g", query, k=len(ids))]  # a vector query: the fused vector channels
    assert {item.entry_id for item in items} == set([hit for hit in hits if hit not in {*working, *visited}][:3])
    assert [item.score for item in items] == sorted((item.score for item in items), reverse=True)  # frontier order
    assert {(item.via, item.anchor_id, item.anchor_text) for item in items} == {
        ("search", SEARCH_LINK_TEXT, SEARCH_LINK_TEXT)
    }


def test_an_entry_a_turn_also_reaches_is_labelled_by_its_turn_and_interleave_takes_both_kinds(turns) -> None:
    store, ids = turns
    query = "Rex the dog on the beach"
    turn_only = {item.entry_id for item in store.frontier("g", [ids["D1:3"]], [], query, links=("turn",))}
    items = store.frontier("g", [ids["D1:3"]], [], query, limit=4, links=("turn", "search"), order="interleave")
    vias = {item.entry_id: item.via for item in items}
    assert {entry for entry, via in vias.items() if via == "turn"} == turn_only  # Ann's D1:1 and D1:5
    assert "search" in vias.values() and ids["D1:3"] not in vias  # search fills the rest; the working set stays out
    assert [item.via for item in items][:2] == ["turn", "search"]  # the best of each kind in turn


def test_without_a_search_link_an_unlinked_entry_stays_out(turns) -> None:
    store, ids = turns
    assert store.frontier("g", [ids["note-1"]], [], "Rex the dog", links=("turn",)) == []
    assert len(store.frontier("g", [ids["note-1"]], [], "Rex the dog", limit=5, links=("search",))) == 5
