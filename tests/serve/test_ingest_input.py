"""Ingest input edge cases of the probe (issue 50): mixed time zones, blank fields, retries and repeated turn ids."""

from __future__ import annotations

import httpx
import pytest

from tests.serve.conftest import GRAPH


def test_a_batch_mixing_zoned_and_naive_times_is_stored_whole_in_utc(client: httpx.Client) -> None:
    turns = [
        {"speaker": "Hal", "text": "I repair church organs across Norway.", "time": "2026-05-09T16:00:00+02:00"},
        {"speaker": "Hal", "text": "My apprentice Sigrid tunes the reed pipes.", "time": "2026-05-09T15:00:00"},
    ]
    response = client.post("/v1/ingest", json={"graph": "ingest-zones", "turns": turns})
    assert response.status_code == 200, response.text
    assert len(response.json()["created"]) == 2
    episode = client.get("/v1/graphs/ingest-zones/episodes").json()[0]
    assert episode["start_time"] == "2026-05-09T14:00:00"  # 16:00+02:00 is 14:00 UTC, before the naive 15:00 (UTC)
    assert episode["end_time"] == "2026-05-09T15:00:00"
    assert "Sigrid" in episode["text"] and "organs" in episode["text"]


@pytest.mark.parametrize(
    ("path", "payload", "field"),
    [
        ("/v1/retrieve", {"graph": GRAPH, "question": "  \t "}, "question"),
        ("/v1/ingest", {"graph": "blank-speaker", "turns": [{"speaker": "  ", "text": "I sail."}]}, "turns.0.speaker"),
        ("/v1/ingest", {"graph": "blank-text", "turns": [{"speaker": "A", "text": "ok"},
                                                         {"speaker": "A", "text": "\n \t"}]}, "turns.1.text"),
    ],
)  # fmt: skip
def test_blank_question_speaker_or_text_is_422_naming_it_and_writes_nothing(
    client: httpx.Client, path: str, payload: dict, field: str
) -> None:
    response = client.post(path, json=payload)
    assert response.status_code == 422, response.text
    body = response.json()
    assert [detail["field"] for detail in body["details"]] == [field]
    assert "blank" in body["details"][0]["message"] and "non-blank" in body["details"][0]["fix"]
    assert field in body["error"]
    if path == "/v1/ingest":
        assert client.get(f"/v1/graphs/{payload['graph']}").status_code == 404


def test_a_retried_batch_with_the_same_idempotency_key_writes_nothing_and_answers_the_same(
    client: httpx.Client,
) -> None:
    batch = {"graph": "ingest-retry", "idempotency_key": "batch-7f3a",
             "turns": [{"speaker": "Ines", "text": "I bake sourdough bread in a wood oven in Porto."}]}  # fmt: skip
    first = client.post("/v1/ingest", json=batch)
    assert first.status_code == 200, first.text
    counts = client.get("/v1/graphs/ingest-retry").json()
    again = client.post("/v1/ingest", json=batch)
    assert again.status_code == 200, again.text
    assert again.json() == {**first.json(), "replayed": True} and first.json()["replayed"] is False
    assert client.get("/v1/graphs/ingest-retry").json() == counts  # no second session, episode or entry
    other = client.post("/v1/ingest", json={**batch, "turns": [{"speaker": "Ines", "text": "I also keep bees."}]})
    assert other.status_code == 422 and other.json()["details"][0]["field"] == "idempotency_key"
    assert client.get("/v1/graphs/ingest-retry").json() == counts


def test_a_repeated_client_turn_id_is_stored_once_and_reported_skipped(client: httpx.Client) -> None:
    turn = {"speaker": "Jon", "text": "I climb sea cliffs on Lundy island every June.", "id": "msg-1"}
    first = client.post("/v1/ingest", json={"graph": "ingest-ids", "turns": [turn]}).json()
    assert first["turn_ids"] == ["msg-1"] and first["skipped_turn_ids"] == []
    new = {"speaker": "Jon", "text": "My climbing partner Ruth sets the ropes.", "id": "msg-2"}
    second = client.post("/v1/ingest", json={"graph": "ingest-ids", "turns": [turn, new]}).json()
    assert second["turn_ids"] == ["msg-2"] and second["skipped_turn_ids"] == ["msg-1"]
    counts = client.get("/v1/graphs/ingest-ids").json()
    third = client.post("/v1/ingest", json={"graph": "ingest-ids", "turns": [turn]})
    assert third.status_code == 200, third.text
    assert third.json()["skipped_turn_ids"] == ["msg-1"] and third.json()["turn_ids"] == []
    assert third.json()["session_index"] is None and third.json()["episodes"] == []
    assert client.get("/v1/graphs/ingest-ids").json() == counts
    episodes = client.get("/v1/graphs/ingest-ids/episodes").json()
    assert sum(episode["source_turn_ids"].count("msg-1") for episode in episodes) == 1
