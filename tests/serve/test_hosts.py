"""DNS-rebinding protection on every route: a request naming a foreign `Host` is refused before any work."""

from __future__ import annotations

import httpx
import pytest

from tests.serve.conftest import LiveServer


@pytest.mark.parametrize(
    ("method", "path", "payload"),
    [
        ("POST", "/v1/ingest", {"graph": "rebound", "turns": [{"speaker": "Eve", "text": "I own this service now."}]}),
        ("POST", "/v1/retrieve", {"graph": "friends", "question": "What is Bob's dog called?"}),
        ("GET", "/v1/graphs", None),
        ("GET", "/", None),
        ("GET", "/static/style.css", None),
    ],
)
def test_a_foreign_host_is_refused_on_every_route(
    client: httpx.Client, method: str, path: str, payload: dict | None
) -> None:
    response = client.request(method, path, json=payload, headers={"Host": "attacker.example:8700"})
    assert response.status_code == 421, response.text
    body = response.json()
    assert "'attacker.example:8700'" in body["error"] and "--allowed-host" in body["error"]
    assert body["details"][0]["field"] == "Host" and body["details"][0]["fix"]
    assert client.get("/v1/graphs/rebound").status_code == 404  # nothing was written


def test_a_foreign_origin_is_refused_and_loopback_names_pass(client: httpx.Client, live_server: LiveServer) -> None:
    port = live_server.url.rsplit(":", 1)[1]
    refused = client.get("/v1/graphs", headers={"Origin": "http://attacker.example"})
    assert refused.status_code == 403 and refused.json()["details"][0]["field"] == "Origin"
    assert client.get("/v1/graphs", headers={"Host": f"localhost:{port}"}).status_code == 200
    same_origin = client.get("/v1/graphs", headers={"Origin": f"http://127.0.0.1:{port}"})
    assert same_origin.status_code == 200


def test_page_links_do_not_come_from_the_host_header(client: httpx.Client, live_server: LiveServer) -> None:
    port = live_server.url.rsplit(":", 1)[1]
    page = client.get("/", headers={"Host": f"localhost:{port}"}).text
    assert 'href="/static/style.css"' in page and "localhost" not in page
    walk = client.get("/walk", headers={"Host": f"localhost:{port}"}).text
    assert 'src="/static/walk.js"' in walk
