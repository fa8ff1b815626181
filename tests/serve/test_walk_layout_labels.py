"""Labels the walk viewer draws beside a walk's ids: looked up in the served store, with a note when they cannot be."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from memora_rl.core.walk import FrontierNode, WalkStep
from memora_rl.serve.graphs import GraphRegistry, UnknownGraphError
from memora_rl.serve.walk_view import entry_labels, recorded_walk_labels
from tests.serve.conftest import LINKED_ENTRIES, LINKED_GRAPH, LiveServer


@pytest.fixture(scope="module")
def graphs(friends_store: Path, embedder) -> Iterator[GraphRegistry]:
    """The friends store (graphs `friends` and `team`) opened as the service opens it."""
    registry = GraphRegistry([friends_store], embedder)
    yield registry
    registry.close()


def team_ids(graphs: GraphRegistry) -> dict[str, str]:
    """Entry id by abstraction in the hand-linked `team` graph."""
    return {entry.abstraction: entry.id for entry in graphs.find(LINKED_GRAPH).reader.entries(LINKED_GRAPH)}


def test_labels_come_from_the_store_in_the_order_asked_and_skip_gone_ids(graphs: GraphRegistry) -> None:
    ids = team_ids(graphs)
    asked = [ids["Ledger release"], "e-gone", ids["Priya's manager"], ids["Ledger release"]]
    labels = entry_labels(graphs, LINKED_GRAPH, asked)
    assert [(label.id, label.abstraction) for label in labels] == [
        (ids["Ledger release"], "Ledger release"),
        (ids["Priya's manager"], "Priya's manager"),
    ]
    assert labels[1].value == LINKED_ENTRIES[0][1]


def test_a_recorded_walk_is_labelled_from_its_conversations_graph(graphs: GraphRegistry) -> None:
    ids = team_ids(graphs)
    step = WalkStep(step=0, observation="", working_set_ids=[ids["Priya's manager"]], budget_left=2.0,
                    frontier=[FrontierNode(id=ids["Tomas's team"], anchor="Tomas + team")])  # fmt: skip
    labels, note = recorded_walk_labels(graphs, LINKED_GRAPH, [step])
    assert note == "" and [label.abstraction for label in labels] == ["Priya's manager", "Tomas's team"]
    labels, note = recorded_walk_labels(graphs, "synth-9-999", [step])
    assert labels == [] and "Graph 'synth-9-999' is not served here" in note and "--store" in note
    labels, note = recorded_walk_labels(graphs, "", [step])
    assert labels == [] and "names no conversation" in note
    with pytest.raises(UnknownGraphError):
        entry_labels(graphs, "synth-9-999", ["e1"])


def test_walk_labels_route_answers_a_live_walks_ids(live_server: LiveServer, graphs: GraphRegistry) -> None:
    ids = team_ids(graphs)
    with httpx.Client(base_url=live_server.url, timeout=60) as http:
        found = http.get("/walk/labels", params={"graph": LINKED_GRAPH, "id": [ids["Tomas's team"], "e-gone"]})
        unknown = http.get("/walk/labels", params={"graph": "nope", "id": ["e1"]})
        page = http.get("/walk", params={"graph": LINKED_GRAPH})
    assert found.status_code == 200
    assert found.json() == [{"id": ids["Tomas's team"], "abstraction": "Tomas's team", "value": LINKED_ENTRIES[1][1]}]
    assert unknown.status_code == 404 and "nope" in unknown.text
    assert 'data-frontier-note="no frontier: semantic search does not read links"' in page.text
