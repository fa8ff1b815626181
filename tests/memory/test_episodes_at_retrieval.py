"""Episodes at retrieval: the episode search kind and channel, and the frontier's episode and similar links."""

from __future__ import annotations

import pytest

from memora_rl.errors import GraphError
from memora_rl.memory import EntryCandidate, Episode, always_create
from memora_rl.memory.base_store import BaseGraphStore
from memora_rl.memory.records import EpisodeHit, SearchHit

EPISODES = [
    ("ep-job", "Alice's first week at Nova", "Alice told Bob about her first week as a backend engineer at Nova."),
    ("ep-pet", "Bob adopts a beagle", "Bob said he adopted a beagle puppy called Rex from the shelter."),
    ("ep-trip", "Carol's sailing holiday", "Carol described sailing around the Greek islands with her cousins."),
]
# (abstraction, value, anchors, episode): no two entries share an anchor
ENTRIES = [
    ("Alice's employer", "Alice works at Nova as a backend engineer", ["Alice + job"], "ep-job"),
    ("Nova's office dog", "Nova's office has a resident dachshund", ["Nova + office"], "ep-job"),
    ("Bob's pet", "Bob adopted a beagle named Rex", ["Bob + pet"], "ep-pet"),
    ("Carol's holiday", "Carol sailed around the Greek islands", ["Carol + travel"], "ep-trip"),
    ("Bob's pet food", "Bob feeds Rex grain-free kibble", ["Rex + food"], None),
]


@pytest.fixture
def episodic_store(store: BaseGraphStore) -> tuple[BaseGraphStore, list[str]]:
    for episode_id, title, text in EPISODES:
        store.add_episode(Episode(id=episode_id, graph_id="g", title=title, text=text))
    ids = []
    for abstraction, value, anchors, episode in ENTRIES:
        candidate = EntryCandidate(
            abstraction=abstraction, value=value, anchors=anchors, episode_ids=[episode] if episode else []
        )
        ids.append(store.upsert_entry("g", candidate, always_create).entry.id)
    return store, ids


def test_episode_search_finds_an_episode_by_its_cue(episodic_store):
    store, _ = episodic_store
    hits = store.search("g", "sailing holiday", k=2, kinds=("episode",))
    assert all(isinstance(hit, EpisodeHit) for hit in hits)
    assert hits[0].episode_id == "ep-trip"
    assert hits[0].score > hits[1].score


def test_episode_added_after_the_view_loaded_is_searchable(episodic_store):
    store, _ = episodic_store
    store.search("g", "anything", k=1)  # loads the view
    store.add_episode(Episode(id="ep-bake", graph_id="g", title="Dana's sourdough", text="Dana bakes bread."))
    assert store.search("g", "sourdough bread", k=1, kinds=("episode",))[0].episode_id == "ep-bake"
    store.add_episode(Episode(id="ep-bake", graph_id="g", title="Dana's marathon", text="Dana ran a marathon."))
    assert store.search("g", "running a marathon", k=1, kinds=("episode",))[0].episode_id == "ep-bake"
    assert store.get_episodes("g", ["ep-bake", "ep-none"])[0].title == "Dana's marathon"


def test_search_with_both_kinds_returns_entries_then_episodes(episodic_store):
    store, _ = episodic_store
    default = store.search("g", "Bob's dog", k=3)
    both = store.search("g", "Bob's dog", k=3, kinds=("entry", "episode"))
    assert all(isinstance(hit, SearchHit) for hit in default)
    assert both[:3] == default  # the entry part is the default search, unchanged
    assert [type(hit) for hit in both] == [SearchHit] * 3 + [EpisodeHit] * 3
    assert both[3].episode_id == "ep-pet"
    with pytest.raises(GraphError, match="kinds"):
        store.search("g", "x", kinds=("entries",))


def test_episode_channel_is_off_by_default_and_ranks_an_episodes_entries(episodic_store):
    store, ids = episodic_store
    query = "first week at the new company"
    assert store.search("g", query, k=5) == store.search("g", query, k=5, episode_channel=False)
    with_channel = store.search("g", query, k=5, episode_channel=True)
    without = {hit.entry_id: hit.score for hit in store.search("g", query, k=5)}
    scores = {hit.entry_id: hit.score for hit in with_channel}
    # both entries of the matching episode gain a channel's share; the unrelated holiday entry gains less
    assert scores[ids[0]] > without[ids[0]] and scores[ids[1]] > without[ids[1]]
    assert scores[ids[0]] - without[ids[0]] > scores[ids[3]] - without.get(ids[3], 0.0)


def test_frontier_via_shared_episode_only_when_asked(episodic_store):
    store, ids = episodic_store
    assert store.frontier("g", [ids[0]], [], "Nova") == []  # no shared anchor
    items = store.frontier("g", [ids[0]], [], "Nova", links=("anchor", "episode"))
    assert [(item.entry_id, item.via, item.anchor_id, item.anchor_text) for item in items] == [
        (ids[1], "episode", "ep-job", "Alice's first week at Nova")
    ]
    assert store.frontier("g", [ids[0]], [ids[1]], "Nova", links=("episode",)) == []  # visited is left out


def test_frontier_via_similar_abstraction(episodic_store):
    store, ids = episodic_store
    assert store.frontier("g", [ids[2]], [], "dog") == []
    similar = store.frontier("g", [ids[2]], [], "dog", links=("similar",), similar_threshold=0.6)
    assert [(item.entry_id, item.via, item.anchor_id, item.anchor_text) for item in similar] == [
        (ids[4], "similar", ids[2], "Bob's pet")
    ]
    assert store.frontier("g", [ids[2]], [], "dog", links=("similar",), similar_threshold=0.99) == []
    with pytest.raises(GraphError, match="links"):
        store.frontier("g", [ids[2]], [], "dog", links=("cousins",))


def test_an_anchor_link_labels_an_entry_also_reached_by_episode(episodic_store):
    store, ids = episodic_store
    store.link_anchors("g", ids[1], ["Alice + job"])
    items = store.frontier("g", [ids[0]], [], "office", links=("anchor", "episode"))
    assert [(item.entry_id, item.via, item.anchor_text) for item in items] == [(ids[1], "anchor", "Alice + job")]


def test_episode_links_survive_reopening(episodic_store, stores, embedder):
    store, ids = episodic_store
    store.close()
    with stores.open("graph", embedder=embedder) as reopened:
        items = reopened.frontier("g", [ids[1]], [], "Alice", links=("episode",))
        assert [(item.entry_id, item.anchor_text) for item in items] == [(ids[0], "Alice's first week at Nova")]
        assert reopened.search("g", "beagle puppy", k=1, kinds=("episode",))[0].episode_id == "ep-pet"
        reopened.delete_entry("g", ids[0])
        assert reopened.frontier("g", [ids[1]], [], "Alice", links=("episode",)) == []
