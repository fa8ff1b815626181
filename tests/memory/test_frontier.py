from __future__ import annotations

import pytest

from memora_rl.errors import GraphError
from memora_rl.memory import EntryCandidate, always_create


@pytest.fixture
def chain(store):
    """e0 -[Alice + job]- e1 -[Nova + office]- e2 ; e3 isolated; e4 -[Alice + job]-."""
    specs = [
        ("Alice's employer", "Alice works at Nova", ["Alice + job"]),
        ("Nova's office", "Nova's office is in Berlin", ["Alice + job", "Nova + office"]),
        ("Berlin weather", "Berlin was rainy in March", ["Nova + office"]),
        ("Carol's cat", "Carol has a grey cat", ["Carol + pet"]),
        ("Alice's salary", "Alice earns a good salary at Nova", ["Alice + job", "Alice + money"]),
    ]
    ids = [
        store.upsert_entry("g", EntryCandidate(abstraction=a, value=v, anchors=an), always_create).entry.id
        for a, v, an in specs
    ]
    return store, ids


def add(store, abstraction: str, value: str, anchors: list[str]) -> str:
    """Create one entry in graph "g" and return its id."""
    return store.upsert_entry(
        "g", EntryCandidate(abstraction=abstraction, value=value, anchors=anchors), always_create
    ).entry.id


def test_frontier_content_order_and_anchor(chain):
    store, ids = chain
    items = store.frontier("g", [ids[0]], [], "How much money does Alice make?")
    assert [i.entry_id for i in items] == [ids[4], ids[1]]
    assert all(i.anchor_text == "Alice + job" for i in items)
    assert items[0].score >= items[1].score


def test_frontier_excludes_working_set_and_visited(chain):
    store, ids = chain
    items = store.frontier("g", [ids[0], ids[1]], [ids[4]], "Berlin")
    assert [i.entry_id for i in items] == [ids[2]]
    assert items[0].anchor_text == "Nova + office"
    assert store.frontier("g", [ids[3]], [], "cat") == []
    assert len(store.frontier("g", [ids[0]], [], "x", limit=1)) == 1


def test_frontier_relaxed_anchors(chain):
    store, ids = chain
    extra = add(store, "Carol's dog", "Carol walks her dog", ["Carol + pets"])
    assert store.frontier("g", [ids[3]], [], "pet") == []
    relaxed = store.frontier("g", [ids[3]], [], "pet", relaxed_threshold=0.8)
    assert [i.entry_id for i in relaxed] == [extra] and relaxed[0].anchor_text == "Carol + pets"


def test_a_shared_anchor_outranks_a_relaxed_one_however_close_to_the_query(chain):
    store, ids = chain
    dog = add(store, "Carol's dog", "Carol walks her dog", ["Carol + pets"])
    bird = add(store, "Carol's bird", "Carol sings", ["Carol + pet"])
    # the dog entry is closer to the query but reached only by a relaxed anchor; the bird shares "Carol + pet"
    items = store.frontier("g", [ids[3]], [], "Carol walks her dog", relaxed_threshold=0.8)
    assert [i.entry_id for i in items] == [bird, dog] and items[1].score > items[0].score
    assert [i.entry_id for i in store.frontier("g", [ids[3]], [], "dog", limit=1, relaxed_threshold=0.8)] == [bird]


def test_frontier_unknown_working_id_raises(chain):
    store, _ = chain
    with pytest.raises(GraphError, match="e404"):
        store.frontier("g", ["e404"], [], "x")


def test_frontier_after_delete_and_link(chain):
    store, ids = chain
    store.delete_entry("g", ids[4])
    store.link_anchors("g", ids[3], ["Alice + job"])
    items = store.frontier("g", [ids[0]], [], "cat")
    assert [i.entry_id for i in items] == [ids[3], ids[1]]
