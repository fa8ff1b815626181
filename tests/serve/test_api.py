"""The HTTP API against real uvicorn on loopback, a real SQLite store and the real embedder."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from memora_rl.policy.baselines import STOP_TEXT
from memora_rl.serve.schemas import RetrieveRequest
from tests.serve.conftest import GRAPH, LINKED_GRAPH, LiveServer, make_service


def test_healthz_and_graph_reads(client: httpx.Client) -> None:
    health = client.get("/healthz").json()
    assert health["status"] == "ok" and health["policy"] == "semantic"
    graphs = {graph["id"]: graph for graph in client.get("/v1/graphs").json()}
    assert graphs[GRAPH]["entries"] == 8 and graphs[GRAPH]["episodes"] == 2
    entries = client.get(f"/v1/graphs/{GRAPH}/entries", params={"limit": 3}).json()
    assert [entry["id"] for entry in entries] == ["e0", "e1", "e2"]
    episodes = client.get(f"/v1/graphs/{GRAPH}/episodes").json()
    assert {episode["id"] for episode in episodes} == {"ep-s1-1", "ep-s2-1"}
    one = client.get(f"/v1/graphs/{GRAPH}/episodes/ep-s2-1").json()
    assert "Carla" in one["text"]
    assert "openapi" in client.get("/openapi.json").json()


def test_retrieve_semantic_finds_the_fact(client: httpx.Client) -> None:
    response = client.post("/v1/retrieve", json={"graph": GRAPH, "question": "What is the name of Bob's dog?"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["policy"] == "semantic" and body["stop_reason"] == "stop"
    assert any("Biscuit" in entry["value"] for entry in body["entries"])
    assert "Biscuit" in body["context"] and body["context_tokens"] > 0
    assert [step["action"] for step in body["walk"]] == ["stop", None]  # one action, then the final state
    assert body["walk"][0]["working_set_ids"] == [entry["id"] for entry in body["entries"]]
    assert body["episodes"] and body["latency_ms"] >= body["search_ms"] > 0


def test_semantic_service_skips_the_frontier_and_retrieves_the_same(friends_store: Path, embedder) -> None:
    """The semantic policy never reads the frontier, so its service computes none; the walk's result is unchanged."""
    service = make_service([friends_store], embedder)
    assert service.env.frontier_limit == 0
    request = RetrieveRequest(graph=LINKED_GRAPH, question="Who is Priya's manager?", top_k=1)
    skipped = service.retrieve_sync(request, lambda messages, info: STOP_TEXT)
    service.env = service.env.model_copy(update={"frontier_limit": 10})
    computed = service.retrieve_sync(request, lambda messages, info: STOP_TEXT)
    assert skipped.walk[0].frontier == [] and computed.walk[0].frontier  # e0's anchors link e1
    assert [entry.id for entry in skipped.entries] == [entry.id for entry in computed.entries] == ["e0"]
    assert skipped.context == computed.context and skipped.reward_components == computed.reward_components


def test_retrieve_context_modes(client: httpx.Client) -> None:
    question = {"graph": GRAPH, "question": "Where is Carla visiting from?", "top_k": 1}
    factual = client.post("/v1/retrieve", json=question).json()["context"]
    episodic = client.post("/v1/retrieve", json={**question, "context_mode": "episodic"}).json()["context"]
    both = client.post("/v1/retrieve", json={**question, "context_mode": "episodic+factual"}).json()["context"]
    assert factual.startswith("- ") and "Alice: My sister Carla" not in factual
    assert "Alice: My sister Carla is visiting from Lisbon" in episodic and not episodic.startswith("- ")
    assert both.startswith(episodic) and both.endswith(factual)


def test_entry_page_data_has_anchors_links_and_episode(client: httpx.Client) -> None:
    detail = client.get(f"/v1/graphs/{LINKED_GRAPH}/entries/e1").json()
    assert detail["entry"]["abstraction"] == "Tomas's team"
    assert sorted(detail["anchors"]) == ["Tomas + team", "ledger + release"]
    assert {link["id"] for link in detail["linked"]} == {"e0", "e2"}


def test_search_reports_channel_scores(client: httpx.Client) -> None:
    results = client.get(f"/v1/graphs/{GRAPH}/search", params={"q": "puppy", "k": 3}).json()
    assert results[0]["value"].startswith("Congrats! I adopted a beagle puppy")
    assert set(results[0]["channels"]) == {"abstraction", "value", "anchor"}
    assert results[0]["score"] >= results[-1]["score"]


def test_tools_schema_names_both_operations(client: httpx.Client) -> None:
    tools = {tool["function"]["name"]: tool["function"] for tool in client.get("/v1/tools").json()}
    assert set(tools) == {"retrieve", "remember"}
    assert set(tools["retrieve"]["parameters"]["required"]) == {"graph", "question"}


def test_ingest_then_retrieve_the_new_fact(client: httpx.Client) -> None:
    turns = [
        {
            "speaker": "Dana",
            "text": "I moved to Trondheim to design electric fjord ferries.",
            "time": "2026-06-01T09:00",
        },
        {"speaker": "Eve", "text": "My favourite cheese is an aged Comté from the Jura mountains."},
    ]
    response = client.post("/v1/ingest", json={"graph": "ingest-new", "turns": turns})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["session_index"] == 1 and body["turn_ids"] == ["D1:1", "D1:2"]
    assert len(body["created"]) == 2 and body["episodes"] == ["ep-s1-1"]
    trial = {"speaker": "Dana", "text": "My ferry prototype sails its first sea trial in Bergen next spring."}
    second = client.post("/v1/ingest", json={"graph": "ingest-new", "turns": [trial]})
    assert second.json()["session_index"] == 2 and second.json()["turn_ids"] == ["D2:1"]
    found = client.post("/v1/retrieve", json={"graph": "ingest-new", "question": "Where will the ferry sea trial be?"})
    assert found.status_code == 200
    assert "Bergen" in found.json()["entries"][0]["value"]


def test_ingest_into_an_existing_graph_merges_a_repeat(client: httpx.Client) -> None:
    turn = {"speaker": "Gil", "text": "I keep three beehives on the roof of the library."}
    first = client.post("/v1/ingest", json={"graph": "ingest-repeat", "turns": [turn]}).json()
    again = client.post("/v1/ingest", json={"graph": "ingest-repeat", "turns": [turn]}).json()
    assert len(first["created"]) == 1
    assert again["created"] == [] and again["merged"] == first["created"]


@pytest.mark.parametrize(
    ("path", "payload", "field"),
    [
        ("/v1/retrieve", {"graph": GRAPH}, "question"),
        ("/v1/retrieve", {"graph": GRAPH, "question": ""}, "question"),
        ("/v1/retrieve", {"graph": GRAPH, "question": "x", "budget": -1}, "budget"),
        ("/v1/retrieve", {"graph": GRAPH, "question": "x", "budget": 1000}, "budget"),
        ("/v1/retrieve", {"graph": GRAPH, "question": "x", "context_mode": "all"}, "context_mode"),
        ("/v1/retrieve", {"graph": GRAPH, "question": "x", "k": 3}, "k"),
        ("/v1/ingest", {"graph": GRAPH, "turns": []}, "turns"),
        ("/v1/ingest", {"graph": GRAPH, "turns": [{"speaker": "A"}]}, "turns.0.text"),
        ("/v1/ingest", {"graph": "bad id!", "turns": [{"speaker": "A", "text": "hi"}]}, "graph"),
        ("/v1/ingest", {"graph": GRAPH, "turns": [{"speaker": "A", "text": "x", "id": "t"},
                                                   {"speaker": "B", "text": "y", "id": "t"}]}, "turns"),
    ],
)  # fmt: skip
def test_bad_input_is_422_naming_the_field_and_fix(client: httpx.Client, path: str, payload: dict, field: str) -> None:
    response = client.post(path, json=payload)
    assert response.status_code == 422, response.text
    body = response.json()
    assert field in [detail["field"] for detail in body["details"]]
    assert all(detail["fix"] for detail in body["details"])
    assert field.split(".")[0] in body["error"]


def test_unknown_graph_and_entry_are_404(client: httpx.Client) -> None:
    response = client.post("/v1/retrieve", json={"graph": "nobody", "question": "who?"})
    assert response.status_code == 404
    assert "'nobody' is not served" in response.json()["error"] and GRAPH in response.json()["error"]
    assert client.get("/v1/graphs/nobody").status_code == 404
    assert client.get("/v1/graphs/nobody/episodes").status_code == 404
    assert client.get(f"/v1/graphs/{GRAPH}/entries/e999").status_code == 404
    assert client.get(f"/v1/graphs/{GRAPH}/episodes/ep-s9-9").status_code == 404


def test_unknown_request_field_is_422_naming_it(live_server: LiveServer) -> None:
    with httpx.Client(base_url=live_server.url) as http:
        response = http.post("/v1/ingest", json={"graph": GRAPH, "turns": [{"speaker": "A", "text": "x"}], "x": 1})
    assert response.status_code == 422 and response.json()["details"][0]["field"] == "x"
