from __future__ import annotations

from datetime import datetime

import numpy as np
import pytest
from pydantic import ValidationError

from memora_rl.errors import GraphError
from memora_rl.memory import (
    EntryCandidate,
    Episode,
    MergeDecision,
    always_create,
    same_speaker_merge,
)


def candidate(abstraction: str, value: str, anchors: list[str], speaker: str = "Alice", **extra) -> EntryCandidate:
    return EntryCandidate(abstraction=abstraction, value=value, anchors=anchors, speaker=speaker, **extra)


def test_create_links_anchors_and_keeps_provenance(store):
    result = store.upsert_entry(
        "g",
        candidate(
            "Alice's employer",
            "Alice works at Nova",
            ["Alice + job", "Nova + company"],
            source_turn_ids=["D1:3"],
            episode_ids=["ep1"],
            time=datetime(2026, 5, 9),
        ),
        same_speaker_merge,
    )
    assert result.created
    (entry,) = store.get_entries("g", [result.entry.id])
    assert entry.value == "Alice works at Nova"
    assert entry.source_turn_ids == ["D1:3"] and entry.episode_ids == ["ep1"]
    assert entry.created_at == datetime(2026, 5, 9)
    assert sorted(a.text for a in store.anchors("g")) == ["Alice + job", "Nova + company"]
    assert len(entry.anchor_ids) == 2


def test_existence_checked_anchors_reuse_same_text(store):
    first = store.upsert_entry(
        "g", candidate("Alice's employer", "Alice works at Nova", ["Alice + job"]), always_create
    )
    second = store.upsert_entry(
        "g", candidate("Bob's hobby", "Bob plays chess", ["  alice+JOB ", "Bob + hobby"], speaker="Bob"), always_create
    )
    anchors = {a.text: a for a in store.anchors("g")}
    assert len(anchors) == 2
    assert sorted(anchors["Alice + job"].entry_ids) == sorted([first.entry.id, second.entry.id])
    linked = store.link_anchors("g", first.entry.id, ["ALICE + job", "Nova + company"])
    assert {a.text for a in linked} == {"Alice + job", "Nova + company"}
    assert len(store.anchors("g")) == 3


def test_merge_keeps_history_unions_provenance_and_anchors(store):
    first = store.upsert_entry(
        "g",
        candidate(
            "Alice's employer", "Alice works at Nova", ["Alice + job"], source_turn_ids=["D1:1"], episode_ids=["ep1"]
        ),
        same_speaker_merge,
    )
    second = store.upsert_entry(
        "g",
        candidate(
            "Alice's employer",
            "Alice now works at Orbit",
            ["Alice + job", "Orbit + company"],
            source_turn_ids=["D4:2", "D1:1"],
            episode_ids=["ep4"],
        ),
        same_speaker_merge,
    )
    assert not second.created and second.entry.id == first.entry.id
    (entry,) = store.get_entries("g", [first.entry.id])
    assert entry.value == "Alice now works at Orbit"
    assert [v.value for v in entry.history] == ["Alice works at Nova"]
    assert entry.history[0].source_turn_ids == ["D1:1"]
    assert entry.source_turn_ids == ["D1:1", "D4:2"]
    assert entry.episode_ids == ["ep1", "ep4"]
    assert len(entry.anchor_ids) == 2
    assert len(store.entries("g")) == 1
    assert store.check_integrity().ok


def test_merge_can_refine_abstraction_and_updates_vectors(store, embedder):
    first = store.upsert_entry("g", candidate("Alice's job", "Alice works at Nova", ["Alice + job"]), always_create)

    def refine(cand, similar):
        return MergeDecision(
            action="merge",
            target_id=similar[0].id,
            merged_value="Alice works at Nova, then Orbit",
            refined_abstraction="Alice's employer history",
        )

    result = store.upsert_entry("g", candidate("Alice's job", "Alice moved to Orbit", []), refine)
    (entry,) = store.get_entries("g", [first.entry.id])
    assert entry.abstraction == "Alice's employer history"
    assert entry.value == "Alice works at Nova, then Orbit"
    assert entry.history[0].abstraction == "Alice's job"
    stored = store.value_vectors("g", [entry.id])[0]
    expected = embedder.encode_one("Alice works at Nova, then Orbit")
    assert float(stored @ expected) > 0.999
    assert store.abstraction_vectors("g", [entry.id])[0] @ embedder.encode_one("Alice's employer history") > 0.999
    assert not result.created


def test_different_speaker_or_low_similarity_creates(store):
    store.upsert_entry("g", candidate("Alice's employer", "Alice works at Nova", []), same_speaker_merge)
    bob = store.upsert_entry(
        "g", candidate("Alice's employer", "Bob says Alice quit", [], speaker="Bob"), same_speaker_merge
    )
    other = store.upsert_entry("g", candidate("Favourite pizza topping", "Alice likes olives", []), same_speaker_merge)
    assert bob.created and other.created
    assert len(store.entries("g")) == 3


def test_decider_sees_only_similar_entries_and_bad_target_raises(store):
    store.upsert_entry("g", candidate("Alice's employer", "Alice works at Nova", []), always_create)
    store.upsert_entry("g", candidate("Weather in Paris", "It rained in Paris", []), always_create)
    seen = []

    def spy(cand, similar):
        seen.append([e.abstraction for e in similar])
        return MergeDecision(action="merge", target_id="e999")

    with pytest.raises(GraphError, match="e999"):
        store.upsert_entry("g", candidate("Alice's employer", "Alice works at Orbit", []), spy)
    assert seen == [["Alice's employer"]]
    assert len(store.entries("g")) == 2 and store.check_integrity().ok


def test_delete_cascades_and_prunes_orphan_anchors(store):
    kept = store.upsert_entry("g", candidate("Alice's employer", "Alice works at Nova", ["Alice + job"]), always_create)
    gone = store.upsert_entry(
        "g", candidate("Bob's pet", "Bob has a dog", ["Alice + job", "Bob + pet"], speaker="Bob"), always_create
    )
    store.upsert_entry("g", candidate("Bob's pet", "Bob's dog is called Rex", [], speaker="Bob"), same_speaker_merge)
    assert store.stats("g")["history"] == 1
    store.delete_entry("g", gone.entry.id)
    anchors = store.anchors("g")
    assert [a.text for a in anchors] == ["Alice + job"] and anchors[0].entry_ids == [kept.entry.id]
    assert store.stats("g") == {"entries": 1, "anchors": 1, "episodes": 0, "links": 1, "history": 0}
    assert [h.entry_id for h in store.search("g", "Bob dog Rex", k=5)] == [kept.entry.id]
    with pytest.raises(GraphError, match="not in graph"):
        store.delete_entry("g", gone.entry.id)
    assert store.check_integrity().ok


def test_graphs_are_isolated_namespaces(store):
    a = store.upsert_entry("alice", candidate("Alice's employer", "Alice works at Nova", ["job"]), same_speaker_merge)
    b = store.upsert_entry("bob", candidate("Alice's employer", "Alice works at Nova", ["job"]), same_speaker_merge)
    assert a.created and b.created  # no merge across graphs
    assert store.graph_ids() == ["alice", "bob"]
    assert [h.entry_id for h in store.search("alice", "Nova")] == [a.entry.id]
    assert store.anchors("alice")[0].id == store.anchors("bob")[0].id == "a0"
    store.delete_entry("alice", a.entry.id)
    assert store.entries("alice") == [] and len(store.entries("bob")) == 1
    assert len(store.anchors("bob")) == 1
    with pytest.raises(GraphError, match="nope"):
        store.search("nope", "x")


def test_episodes_upsert_by_id(store):
    store.add_episode(Episode(id="s1", graph_id="g", text="first text", source_turn_ids=["D1:1"]))
    store.add_episode(Episode(id="s1", graph_id="g", text="second text", title="t"))
    (episode,) = store.episodes("g")
    assert episode.text == "second text" and episode.title == "t"


def test_bulk_add_is_one_transaction_and_reuses_anchors(vector_store):
    import numpy as np

    from tests.memory.helpers import random_unit

    rng = np.random.default_rng(0)
    cands = [EntryCandidate(abstraction=f"a{i}", value=f"v{i}", anchors=[f"x{i % 3}"]) for i in range(30)]
    vecs = random_unit(rng, 30)
    anchors = {f"x{i}": v for i, v in enumerate(random_unit(rng, 3))}
    ids = vector_store.add_entries_bulk("g", cands, vecs, vecs, anchors)
    assert len(set(ids)) == 30 and len(vector_store.anchors("g")) == 3
    bad = vecs[:2]
    with pytest.raises(GraphError, match="shape"):
        vector_store.add_entries_bulk("g", cands, bad, bad, anchors)
    assert len(vector_store.entries("g")) == 30
    assert vector_store.check_integrity().ok


def test_second_connection_sees_commits_of_the_first(stores):
    import numpy as np

    from memora_rl.memory import StoreConfig
    from tests.memory.helpers import random_unit

    rng = np.random.default_rng(3)
    writer = stores.open("shared", config=StoreConfig(bm25=False))
    reader = stores.open("shared", config=StoreConfig(bm25=False))
    vectors = random_unit(rng, 2)
    anchors = {"x": random_unit(rng, 1)[0]}
    (first,) = writer.add_entries_bulk(
        "g", [EntryCandidate(abstraction="a", value="b", anchors=["x"])], vectors[:1], vectors[:1], anchors
    )
    assert [h.entry_id for h in reader.search("g", vectors[1], k=5)] == [first]
    (second,) = writer.add_entries_bulk(
        "g", [EntryCandidate(abstraction="c", value="d", anchors=["x"])], vectors[1:], vectors[1:], anchors
    )
    assert reader.search("g", vectors[1], k=5)[0].entry_id == second
    assert [i.entry_id for i in reader.frontier("g", [first], [], vectors[1])] == [second]
    writer.close()
    reader.close()


def test_episode_vector_embeds_cue_and_text(store, embedder):
    store.add_episode(Episode(id="s1", graph_id="g", text="Alice and Bob plan a hike.", title="Alps trip"))
    (blob,) = store._db.conn.execute("SELECT vector FROM episodes WHERE id = 's1'").fetchone()
    stored = np.frombuffer(blob, dtype=np.float32)
    assert float(stored @ embedder.encode_one("Alps trip\nAlice and Bob plan a hike.")) > 0.999
    assert float(stored @ embedder.encode_one("Alice and Bob plan a hike.")) < 0.99


def test_upsert_can_find_similar_entries_by_value(store):
    first = store.upsert_entry(
        "g", candidate("Alice's employer", "Alice works at Nova as a backend engineer.", []), always_create
    )
    seen = []

    def spy(cand, similar):
        seen.append([entry.id for entry in similar])
        return MergeDecision(action="create")

    fact = candidate("Favourite pizza topping", "Alice now works at Orbit as a backend engineer.", [])
    created = store.upsert_entry("g", fact, spy)  # abstractions far apart: the decider is not even asked
    store.delete_entry("g", created.entry.id)
    store.upsert_entry("g", fact, spy, similar_by="value")
    assert seen == [[first.entry.id]]


def test_merge_with_rederived_anchors_replaces_them_and_prunes_orphans(store):
    anchors = ["Alice + Nova", "Nova + office", "Alice + job"]
    first = store.upsert_entry("g", candidate("Alice's employer", "Alice works at Nova", anchors), always_create)
    other = store.upsert_entry(
        "g", candidate("Bob's office", "Bob visits the Nova office", ["Nova + office"], speaker="Bob"), always_create
    )
    assert first.entry.id in [item.entry_id for item in store.frontier("g", [other.entry.id], [], "Nova")]

    def rederive(cand, similar):
        return MergeDecision(
            action="merge",
            target_id=similar[0].id,
            merged_value="Alice works at Orbit",
            anchors=["Alice + Orbit", "Alice + job"],
        )

    result = store.upsert_entry("g", candidate("Alice's employer", "Alice moved to Orbit", ["Orbit + job"]), rederive)
    texts = {anchor.id: anchor.text for anchor in store.anchors("g")}
    (entry,) = store.get_entries("g", [first.entry.id])
    assert sorted(texts[a] for a in entry.anchor_ids) == sorted(texts[a] for a in result.entry.anchor_ids)
    assert sorted(texts[a] for a in entry.anchor_ids) == ["Alice + Orbit", "Alice + job"]
    assert sorted(texts.values()) == ["Alice + Orbit", "Alice + job", "Nova + office"]  # "Alice + Nova" pruned
    assert [a.entry_ids for a in store.anchors("g") if a.text == "Nova + office"] == [[other.entry.id]]
    assert store.frontier("g", [other.entry.id], [], "Nova") == []  # the loaded view forgot the old link too
    assert store.check_integrity().ok


def test_rederived_anchors_must_have_text(store):
    with pytest.raises(ValidationError):
        MergeDecision(action="merge", target_id="e0", anchors=[])
    store.upsert_entry("g", candidate("Alice's employer", "Alice works at Nova", ["Alice + job"]), always_create)

    def blank(cand, similar):
        return MergeDecision(action="merge", target_id=similar[0].id, anchors=["  "])

    with pytest.raises(GraphError, match="non-empty anchor"):
        store.upsert_entry("g", candidate("Alice's employer", "Alice works at Orbit", []), blank)
    assert [a.text for a in store.anchors("g")] == ["Alice + job"] and store.check_integrity().ok
