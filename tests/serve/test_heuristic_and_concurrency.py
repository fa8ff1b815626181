"""A heuristic walk that expands along anchors, and concurrent ingests into one graph (real server, real store)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from memora_rl.memory import open_store
from tests.serve.conftest import LINKED_GRAPH, ingest_concurrently, make_service, running_server


@pytest.fixture(scope="module")
def heuristic_url(friends_store: Path, embedder):
    with running_server(make_service([friends_store], embedder, policy="heuristic")) as url:
        yield url


def test_heuristic_walk_expands_along_anchors(heuristic_url: str) -> None:
    request = {"graph": LINKED_GRAPH, "question": "Who is Priya's manager?", "top_k": 1, "budget": 4}
    body = httpx.post(f"{heuristic_url}/v1/retrieve", json=request, timeout=60).json()
    assert body["policy"] == "heuristic"
    assert body["walk"][0]["working_set_ids"] == ["e0"]
    assert body["walk"][0]["frontier"][0] == {
        "id": "e1",
        "anchor": body["walk"][0]["frontier"][0]["anchor"],
        "via": "anchor",
    }
    assert body["walk"][0]["action"] == "expand"
    retrieved = [entry["id"] for entry in body["entries"]]
    assert retrieved[:3] == ["e0", "e1", "e2"]  # Priya -> Tomas's team -> ledger release, by shared anchors
    assert "e3" not in retrieved  # the commute shares no anchor with the chain
    assert body["budget_spent"] == 2.0


@pytest.mark.slow
def test_concurrent_ingest_into_one_graph_loses_nothing(tmp_path: Path, embedder) -> None:
    store_path = tmp_path / "concurrent.sqlite"
    service = make_service([store_path], embedder)
    batches = [
        [{"speaker": f"Writer{w}", "text": f"Writer {w} planted {n + 3} {fruit} trees in orchard {w}-{n}."}
         for n, fruit in enumerate(["apple", "pear", "plum"])]
        for w in range(8)
    ]  # fmt: skip
    with running_server(service) as url, httpx.Client(base_url=url, timeout=120) as http:
        results = ingest_concurrently(http, "orchards", batches)
        summary = http.get("/v1/graphs/orchards").json()
    assert sorted(result["session_index"] for result in results) == list(range(1, 9))
    with open_store(store_path, embedder=embedder) as store:
        values = {entry.value for entry in store.entries("orchards")}
        covered = {turn for episode in store.episodes("orchards") for turn in episode.source_turn_ids}
        assert store.check_integrity().ok
    assert values == {turn["text"] for batch in batches for turn in batch}
    assert len(covered) == 24 and summary["entries"] == 24 and summary["episodes"] == len(results)
