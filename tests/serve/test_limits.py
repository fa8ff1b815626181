"""Request limits (issue 50, item 5): each over-limit request is refused naming the limit and its setting; nothing
is written. Over HTTP (real uvicorn) and MCP, on a service started with small limits."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from tests.serve.conftest import GRAPH, held_elsewhere, make_service, running_server

LIMITS = {"max_body_bytes": 3000, "max_question_chars": 120, "max_ingest_turns": 3, "max_ingest_chars": 400}
"""Small limits, so that each test sends a small request over one."""


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory, friends_store: Path, embedder) -> Iterator[str]:
    """serve-memory with `LIMITS` over an empty store (where ingest creates graphs) and the friends store."""
    first = tmp_path_factory.mktemp("limits") / "ingest.sqlite"
    with running_server(make_service([first, friends_store], embedder, **LIMITS)) as url:
        yield url


@pytest.fixture
def http(limited: str) -> Iterator[httpx.Client]:
    """An HTTP client on the limited server."""
    with httpx.Client(base_url=limited, timeout=60) as client:
        yield client


def turns(count: int, text: str = "I keep bees on the roof.") -> list[dict]:
    """`count` turns of one speaker."""
    return [{"speaker": "Ada", "text": f"{text} ({number})"} for number in range(count)]


def assert_names_the_limit(response: httpx.Response, status: int, field: str, setting: str, limit: int) -> None:
    """The refusal: its status, and a body naming the field, the limit's value, its setting and its option."""
    assert response.status_code == status, response.text
    body = response.json()
    assert [detail["field"] for detail in body["details"]] == [field]
    option = "--" + setting.replace("_", "-")
    assert f"limit of {limit} ({setting})" in body["error"] and f"{option} N" in body["error"], body["error"]


def test_an_over_size_body_is_413_and_writes_nothing(http: httpx.Client) -> None:
    payload = {"graph": "limit-body", "turns": turns(2, "x" * 2000)}
    response = http.post("/v1/ingest", json=payload)
    assert_names_the_limit(response, 413, "body", "max_body_bytes", 3000)
    assert http.get("/v1/graphs/limit-body").status_code == 404


def test_a_streamed_body_is_cut_off_once_over_the_limit(http: httpx.Client) -> None:
    chunks = [b'{"graph": "limit-stream", "turns": [', *[b'{"speaker": "A", "text": "' + b"y" * 900 + b'"},'] * 4]
    response = http.post("/v1/ingest", content=iter(chunks), headers={"content-type": "application/json"})
    assert "content-length" not in response.request.headers  # sent chunked: the size was not declared
    assert_names_the_limit(response, 413, "body", "max_body_bytes", 3000)
    assert http.get("/v1/graphs/limit-stream").status_code == 404


def test_a_body_within_the_limit_still_reaches_the_api(http: httpx.Client) -> None:
    chunks = [b'{"graph": "limit-ok", ', b'"turns": [{"speaker": "Ada", "text": "I keep bees on the roof."}]}']
    response = http.post("/v1/ingest", content=iter(chunks), headers={"content-type": "application/json"})
    assert response.status_code == 200, response.text
    assert http.get("/v1/graphs/limit-ok").json()["entries"] >= 1


def test_an_over_long_question_is_422_naming_the_limit(http: httpx.Client) -> None:
    response = http.post("/v1/retrieve", json={"graph": GRAPH, "question": "Who? " * 25})
    assert_names_the_limit(response, 422, "question", "max_question_chars", 120)
    assert "125 characters" in response.json()["error"]


@pytest.mark.parametrize(
    ("payload", "setting", "limit"),
    [
        ({"graph": "limit-turns", "turns": turns(4)}, "max_ingest_turns", 3),
        ({"graph": "limit-chars", "turns": turns(2, "z" * 250)}, "max_ingest_chars", 400),
    ],
)
def test_an_over_size_ingest_batch_is_413_and_writes_nothing(
    http: httpx.Client, payload: dict, setting: str, limit: int
) -> None:
    assert_names_the_limit(http.post("/v1/ingest", json=payload), 413, "turns", setting, limit)
    assert http.get(f"/v1/graphs/{payload['graph']}").status_code == 404


@pytest.mark.parametrize(
    ("tool", "arguments", "words"),
    [
        ("retrieve", {"graph": GRAPH, "question": "Who? " * 25}, ["question: 125 characters", "max_question_chars"]),
        ("remember", {"graph": "limit-mcp", "speaker": "Ada", "texts": ["a", "b", "c", "d"]},
         ["turns: 4 turns in one batch", "limit of 3 (max_ingest_turns)", "--max-ingest-turns N"]),
    ],
)  # fmt: skip
def test_mcp_tools_apply_the_same_limits_in_the_same_words(
    limited: str, http: httpx.Client, tool: str, arguments: dict, words: list[str]
) -> None:
    from mcp import Client

    async def call() -> tuple[bool, str]:
        async with Client(f"{limited}/mcp") as client:
            result = await client.call_tool(tool, arguments)
            return result.is_error, result.content[0].text

    is_error, text = asyncio.run(call())
    assert is_error and all(word in text for word in words), text
    assert http.get("/v1/graphs/limit-mcp").status_code == 404


@pytest.fixture
def slow_service(tmp_path: Path, friends_store: Path, embedder) -> Iterator:
    """A service whose requests time out after 0.2 s, over an empty store and the friends store."""
    service = make_service([tmp_path / "ingest.sqlite", friends_store], embedder, request_timeout_s=0.2)
    yield service
    service.close()


def test_a_walk_past_the_timeout_is_503_naming_the_setting(slow_service) -> None:
    from memora_rl.serve.app import create_app

    slow_service.config = slow_service.config.model_copy(update={"request_timeout_s": 1e-9})
    http = TestClient(create_app(slow_service, close_service=False), base_url="http://127.0.0.1:8700")
    response = http.post("/v1/retrieve", json={"graph": GRAPH, "question": "Where is Carla visiting from?"})
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "1"
    error = response.json()["error"]
    assert "request_timeout_s" in error and "--request-timeout-s S" in error and "walking" in error


def test_an_ingest_waiting_past_the_timeout_is_503_and_writes_nothing(slow_service) -> None:
    from memora_rl.serve.app import create_app

    http = TestClient(create_app(slow_service, close_service=False), base_url="http://127.0.0.1:8700")
    store = slow_service.graphs.handles[0]
    with held_elsewhere(store.ingest_lock()):  # another ingest into the same store, in progress
        response = http.post("/v1/ingest", json={"graph": "limit-late", "turns": turns(1)})
    assert response.status_code == 503, response.text
    assert (
        "waiting for another ingest" in response.json()["error"] and "nothing was written" in response.json()["error"]
    )
    assert http.get("/v1/graphs/limit-late").status_code == 404
    assert http.post("/v1/ingest", json={"graph": "limit-late", "turns": turns(1)}).status_code == 200  # lock free
