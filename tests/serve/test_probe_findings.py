"""The rest of the probe's findings (issue 50, item 6): bad JSON, offline /docs, hidden paths, one token count."""

from __future__ import annotations

import math
import re
from html import unescape
from pathlib import Path

import httpx
import pytest

from memora_rl.judge import JudgeConfig
from tests.serve.conftest import GRAPH, LiveServer


def assert_error_shape(body: dict, field: str) -> dict:
    """The documented error body: `error` text and `details` of {field, message, fix}; returns the first detail."""
    assert set(body) == {"error", "details"}, body
    detail = body["details"][0]
    assert set(detail) == {"field", "message", "fix"} and detail["field"] == field, body
    assert detail["message"] in body["error"] and f"fix: {detail['fix']}" in body["error"]
    return detail


def test_malformed_json_names_the_body_and_where_it_breaks(client: httpx.Client) -> None:
    body = b'{"graph": "friends",\n "question": }'
    response = client.post("/v1/retrieve", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400, response.text
    detail = assert_error_shape(response.json(), "body")
    assert "not valid JSON" in detail["message"] and "line 2, column 14" in detail["message"]


def test_a_deeply_nested_body_gets_the_documented_error_shape(client: httpx.Client) -> None:
    nested = "[" * 100_000 + "]" * 100_000
    body = f'{{"graph": "friends", "question": {nested}}}'.encode()
    response = client.post("/v1/retrieve", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400, response.text
    assert "nested too deeply" in assert_error_shape(response.json(), "body")["message"]


def test_an_unknown_route_gets_the_documented_error_shape(client: httpx.Client) -> None:
    response = client.get("/v1/nothing-here")
    assert response.status_code == 404
    assert "GET /v1/nothing-here" in assert_error_shape(response.json(), "request")["message"]


def local_links(page: str) -> list[str]:
    """Every `src` and `href` of an HTML page; fails on one that leaves the service (a CDN, another host)."""
    links = re.findall(r'(?:src|href)="([^"]+)"', page)
    outside = [link for link in links if not link.startswith("/") or link.startswith("//")]
    assert not outside, f"/docs loads from outside the service: {outside}"
    return links


@pytest.mark.parametrize(("path", "script"), [("/docs", "swagger-ui-bundle.js"), ("/redoc", "redoc.standalone.js")])
def test_docs_load_nothing_from_outside_the_service(client: httpx.Client, path: str, script: str) -> None:
    page = client.get(path)
    assert page.status_code == 200
    links = local_links(page.text)
    assert links, page.text
    for link in links:
        asset = client.get(link)
        assert asset.status_code == 200 and len(asset.content) > 100, link
    assert any(link.endswith(script) for link in links), links  # the viewer's own script, served by this service


def test_graph_list_and_index_page_show_store_names_not_paths(client: httpx.Client, live_server: LiveServer) -> None:
    graphs = client.get("/v1/graphs").json()
    stores = {graph["id"]: graph["store"] for graph in graphs}
    assert stores[GRAPH] == live_server.store.name
    assert all("/" not in store for store in stores.values()), stores
    index = unescape(client.get("/").text)
    assert live_server.store.name in index and str(live_server.store.parent) not in index


@pytest.mark.parametrize(
    "path",
    ["/walk?run=../..&task=t", "/walk?run=nothing-here&task=t", "/report/files/nothing.png"],
)
def test_errors_name_the_runs_folder_without_its_path(eval_server: str, eval_runs_dir: Path, path: str) -> None:
    response = httpx.get(f"{eval_server}{path}")
    assert response.status_code in (400, 404), response.text
    text = unescape(response.text)
    assert str(eval_runs_dir) not in text and str(eval_runs_dir.parent) not in text, text
    assert eval_runs_dir.name in text


@pytest.mark.parametrize("mode", ["factual", "episodic", "episodic+factual"])
def test_context_tokens_agree_with_the_reward_components(client: httpx.Client, mode: str) -> None:
    question = {"graph": GRAPH, "question": "Where is Carla visiting from?", "context_mode": mode}
    body = client.post("/v1/retrieve", json=question).json()
    tokens = body["context_tokens"]
    assert tokens == math.ceil(len(body["context"]) / 4) > 0  # the context the answer carries
    assert body["reward_components"]["context_tokens"] == tokens
    unit = JudgeConfig().context_token_unit
    assert body["reward_components"]["context_cost"] == pytest.approx(tokens / unit)


def test_report_page_names_the_runs_folder_without_its_path(eval_server: str, eval_runs_dir: Path) -> None:
    page = unescape(httpx.get(f"{eval_server}/report").text)
    assert eval_runs_dir.name in page and str(eval_runs_dir.parent) not in page
