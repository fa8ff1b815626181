"""`memora-rl graph copy`: SQLite -> PostgreSQL -> SQLite keeps every row; clashes and unknown graphs write nothing."""

from __future__ import annotations

from datetime import datetime

import pytest
from typer.testing import CliRunner

from memora_rl.cli import app
from memora_rl.errors import GraphError
from memora_rl.memory import (
    EntryCandidate,
    Episode,
    MergeDecision,
    always_create,
    copy_graphs,
    same_speaker_merge,
)

runner = CliRunner()


def _rich_graph(store: object) -> None:
    """Graph g with what a build leaves: episodes, merges (history), re-derived and pruned anchors, a delete
    (gaps in the internal keys), receipts, entries without speaker or time, non-ASCII text; graph h beside it."""
    store.add_episode(Episode(id="ep1", graph_id="g", text="Alice talks about work.", title="work",
                              source_turn_ids=["D1:1", "D1:2"], start_time=datetime(2026, 5, 9, 14, 0)))  # fmt: skip
    store.add_episode(Episode(id="ep2", graph_id="g", text="Ein Gespräch über Straße und Café."))
    facts = [
        ("Alice's employer", "Alice works at Nova", ["Alice + job", "Nova + company"], "Alice", ["D1:1"], ["ep1"]),
        ("Alice's employer", "Alice now works at Orbit", ["Alice + job"], "Alice", ["D1:5"], ["ep2"]),
        ("Bob's café", "Bob runs a naïve café in São Paulo", ["Bob + café"], None, [], []),
        ("Carol's pet", "Carol has a grey cat", ["Carol + pet"], "Carol", ["D2:1"], []),
    ]
    ids = []
    for number, (abstraction, value, anchors, speaker, turns, episodes) in enumerate(facts):
        candidate = EntryCandidate(abstraction=abstraction, value=value, anchors=anchors, speaker=speaker,
                                   source_turn_ids=turns, episode_ids=episodes,
                                   time=datetime(2026, 5, number + 1) if speaker else None)  # fmt: skip
        ids.append(store.upsert_entry("g", candidate, same_speaker_merge, receipt=f"r{number}").entry.id)
    rederive = lambda candidate, similar: MergeDecision(  # noqa: E731
        action="merge", target_id=similar[0].id, merged_value="Alice works at Orbit", anchors=["Alice + Orbit"]
    )
    store.upsert_entry("g", EntryCandidate(abstraction="Alice's employer", value="Orbit it is", speaker="Alice"),
                       rederive)  # fmt: skip
    store.link_anchors("g", ids[2], ["Café + city"])
    store.delete_entry("g", ids[3])
    store.upsert_entry("h", EntryCandidate(abstraction="Dan's car", value="Dan drives a Volvo", anchors=["Dan"]),
                       always_create)  # fmt: skip


def _invoke(*args: str) -> str:
    result = runner.invoke(app, ["graph", "copy", *args])
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def test_copy_round_trips_sqlite_postgres_sqlite_row_for_row(sqlite_stores, pg_stores, embedder) -> None:
    source = sqlite_stores.open("source", embedder=embedder)
    _rich_graph(source)
    expected = {graph_id: source.graph_rows(graph_id) for graph_id in ("g", "h")}
    assert expected["g"].history and expected["g"].receipts and expected["g"].entry_episodes
    source.close()

    shared, back = str(pg_stores.location("shared")), str(sqlite_stores.location("back"))
    assert "copied 2 graphs, every row read back equal" in _invoke(str(sqlite_stores.location("source")), shared)
    _invoke(shared, back)
    for name, stores in (("shared", pg_stores), ("back", sqlite_stores)):
        copy = stores.open(name, embedder=embedder)
        assert copy.graph_ids() == ["g", "h"]
        for graph_id, rows in expected.items():
            assert copy.graph_rows(graph_id) == rows, (name, graph_id)  # every row, vectors bit for bit
        assert copy.check_integrity().ok, copy.check_integrity().problems
        assert copy.search("g", "Where does Alice work?", k=3) == sqlite_stores.open("source").search(
            "g", "Where does Alice work?", k=3
        )
        new = copy.upsert_entry("g", EntryCandidate(abstraction="Eve's hobby", value="Eve sails"), always_create)
        assert new.entry.id not in {row[0] for row in expected["g"].entries}  # the id counters came along


def test_copy_refuses_a_graph_the_target_holds_and_writes_nothing(sqlite_stores, pg_stores, embedder) -> None:
    source = sqlite_stores.open("source", embedder=embedder)
    _rich_graph(source)
    target = pg_stores.open("target", embedder=embedder)
    target.upsert_entry("h", EntryCandidate(abstraction="other", value="another h"), always_create)
    with pytest.raises(GraphError, match=r"\['h'\] already exist"):
        copy_graphs(source, target)
    assert target.graph_ids() == ["h"]
    assert copy_graphs(source, target, ["g"])["g"]["entries"] == 2  # Alice (merged twice) and Bob; Carol deleted
    with pytest.raises(GraphError, match=r"\['nope'\] are not in store"):
        copy_graphs(source, target, ["nope"])
    result = runner.invoke(app, ["graph", "copy", str(sqlite_stores.location("missing")), "out.sqlite"])
    assert isinstance(result.exception, GraphError) and "does not exist" in str(result.exception)
