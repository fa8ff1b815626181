"""Tokens and scopes over HTTP, MCP and the page's cookie, against serve-memory in real uvicorn with a token file.

Each refusal is checked for its status (401: no valid token; 403: a valid token without the scope), its body
in the documented error shape (which and why, never the token), `WWW-Authenticate: Bearer` on 401, and its
log line (the token's name, not its secret).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.serve.conftest import GRAPH, LINKED_GRAPH, make_service, running_server

TOKENS = {
    "reader": ["read:*"],
    "friends-reader": [f"read:{GRAPH}"],
    "notes-writer": ["write:notes"],
    "leaver": ["read:*"],
}
"""Token name -> scopes of the tokens the server's file holds."""
QUESTION = {"graph": GRAPH, "question": "What is Bob's dog called?"}
TURNS = [{"speaker": "Ivy", "text": "I keep the spare key under the blue flowerpot."}]


@dataclass
class AuthServer:
    """serve-memory requiring tokens, with the token file it reads and the secrets of `TOKENS`."""

    url: str
    tokens: object
    secrets: dict[str, str]

    def client(self, name: str | None = None) -> httpx.Client:
        """An HTTP client sending `name`'s token as a bearer token (none for None)."""
        headers = {"Authorization": f"Bearer {self.secrets[name]}"} if name else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)


@pytest.fixture(scope="module")
def auth_server(friends_store: Path, tmp_path_factory: pytest.TempPathFactory, embedder) -> Iterator[AuthServer]:
    """serve-memory (no `--no-auth`) over an empty store and the friends store (graphs friends, team)."""
    from memora_rl.serve.tokens import TokenStore, parse_scope

    folder = tmp_path_factory.mktemp("auth")
    store = TokenStore(folder / "tokens.sqlite")
    secrets = {name: store.create(name, [parse_scope(s) for s in scopes]) for name, scopes in TOKENS.items()}
    service = make_service([folder / "ingest.sqlite", friends_store], embedder, no_auth=False, tokens=store.path)
    with running_server(service) as url:
        yield AuthServer(url=url, tokens=store, secrets=secrets)


def assert_refused(response: httpx.Response, status: int, *words: str) -> str:
    """The response is `status` in the error shape, naming `words`; returns its error text."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error", "details"} and body["details"][0]["fix"], body
    assert body["details"][0]["field"] == ("Authorization" if status == 401 else "scope")
    assert all(word in body["error"] for word in words), body["error"]
    if status == 401:
        assert response.headers["www-authenticate"].startswith("Bearer")
    return body["error"]


def test_no_token_is_401_with_a_bearer_challenge_and_healthz_stays_open(auth_server: AuthServer, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="memora_rl.serve.auth")
    with auth_server.client() as http:
        assert http.get("/healthz").status_code == 200
        assert_refused(http.post("/v1/retrieve", json=QUESTION), 401, "no token was sent", "memora-rl tokens create")
        assert_refused(http.post("/v1/ingest", json={"graph": "notes", "turns": TURNS}), 401)
        assert_refused(http.get("/v1/graphs"), 401)
        assert_refused(http.get("/v1/tools"), 401)
        page = http.get("/graphs/friends?q=dog", headers={"Accept": "text/html"})
        assert page.status_code == 303 and page.headers["location"] == "/login?next=%2Fgraphs%2Ffriends%3Fq%3Ddog"
        forged = "mrl_0123456789ab_" + "x" * 43
        error = assert_refused(http.get("/v1/graphs", headers={"Authorization": f"Bearer {forged}"}), 401, "unknown")
        assert forged not in error
        malformed = assert_refused(http.get("/v1/graphs", headers={"Authorization": "Bearer x"}), 401, "mrl_<id>")
        assert "Bearer x" not in malformed
        assert (
            'error="invalid_token"'
            in http.get("/v1/graphs", headers={"Authorization": "Bearer x"}).headers["www-authenticate"]
        )
        assert_refused(http.get("/v1/graphs", headers={"Authorization": "Basic YWxpY2U6eA=="}), 401, "'Basic'")
    assert "refused POST /v1/retrieve (401): no token was sent" in caplog.text
    assert forged not in caplog.text


def test_a_read_token_on_ingest_is_403_and_writes_nothing(auth_server: AuthServer, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="memora_rl.serve.auth")
    with auth_server.client("reader") as http:
        refused = http.post("/v1/ingest", json={"graph": "reader-notes", "turns": TURNS})
        assert_refused(refused, 403, "'reader' may not write graph 'reader-notes'", "read:*")
        assert "write:reader-notes" in refused.json()["details"][0]["fix"]
        assert http.get("/v1/graphs/reader-notes").status_code == 404  # nothing was created
        assert http.post("/v1/retrieve", json=QUESTION).status_code == 200
    assert "token 'reader' may not write graph 'reader-notes'" in caplog.text
    assert auth_server.secrets["reader"] not in caplog.text


def test_a_token_for_one_graph_reading_another_is_403(auth_server: AuthServer) -> None:
    with auth_server.client("friends-reader") as http:
        assert http.post("/v1/retrieve", json=QUESTION).status_code == 200
        assert http.get(f"/v1/graphs/{GRAPH}/search", params={"q": "dog"}).status_code == 200
        other = {**QUESTION, "graph": LINKED_GRAPH}
        assert_refused(http.post("/v1/retrieve", json=other), 403, f"may not read graph {LINKED_GRAPH!r}")
        for path in ("", "/entries", "/episodes", "/search?q=ledger", "/entries/e0", "/episodes/x"):
            assert_refused(http.get(f"/v1/graphs/{LINKED_GRAPH}{path}"), 403)
        assert_refused(http.get("/v1/graphs/not-served"), 403)  # 403 before 404: no probing for graph ids
        assert [graph["id"] for graph in http.get("/v1/graphs").json()] == [GRAPH]
        assert http.get("/v1/tools").status_code == 200
    with auth_server.client("reader") as http:
        assert {GRAPH, LINKED_GRAPH} <= {graph["id"] for graph in http.get("/v1/graphs").json()}


def test_a_write_scope_creates_and_reads_its_graph_only(auth_server: AuthServer) -> None:
    with auth_server.client("notes-writer") as http:
        assert http.post("/v1/ingest", json={"graph": "notes", "turns": TURNS}).status_code == 200
        found = http.post("/v1/retrieve", json={"graph": "notes", "question": "Where is the spare key?"})
        assert found.status_code == 200 and "flowerpot" in found.json()["context"]  # write implies read
        assert_refused(http.post("/v1/ingest", json={"graph": "diary", "turns": TURNS}), 403, "may not write")
        assert_refused(http.post("/v1/retrieve", json=QUESTION), 403, "may not read")
        assert [graph["id"] for graph in http.get("/v1/graphs").json()] == ["notes"]


def test_a_revoked_token_is_401(auth_server: AuthServer, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="memora_rl.serve.auth")
    with auth_server.client("leaver") as http:
        assert http.get("/v1/graphs").status_code == 200
        auth_server.tokens.revoke("leaver")  # as `memora-rl tokens revoke leaver` does, while the server runs
        assert_refused(http.post("/v1/retrieve", json=QUESTION), 401, "'leaver' was revoked")
    assert "'leaver' was revoked" in caplog.text and auth_server.secrets["leaver"] not in caplog.text


def mcp_call(url: str, token: str, tool: str, arguments: dict) -> tuple[bool, str]:
    """Call one MCP tool at `url`/mcp with a bearer token; (is_error, first text block)."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async def call() -> tuple[bool, str]:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
        async with http, Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
            result = await client.call_tool(tool, arguments)
            return result.is_error, result.content[0].text

    return asyncio.run(call())


def test_mcp_needs_a_token_and_checks_the_scopes(auth_server: AuthServer) -> None:
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                             "clientInfo": {"name": "t", "version": "1"}}}  # fmt: skip
    headers = {"Accept": "application/json, text/event-stream"}
    with auth_server.client() as http:
        assert_refused(http.post("/mcp", json=initialize, headers=headers), 401, "no token was sent")
    token = auth_server.secrets["friends-reader"]
    is_error, text = mcp_call(auth_server.url, token, "retrieve", QUESTION)
    assert not is_error and "Biscuit" in text
    is_error, text = mcp_call(auth_server.url, token, "retrieve", {**QUESTION, "graph": LINKED_GRAPH})
    assert is_error and f"may not read graph {LINKED_GRAPH!r}" in text and "fix:" in text
    is_error, text = mcp_call(auth_server.url, token, "remember", {"graph": GRAPH, "speaker": "Ivy", "texts": ["x"]})
    assert is_error and f"may not write graph {GRAPH!r}" in text and token not in text


def test_the_login_form_sets_an_http_only_strict_cookie_and_logout_clears_it(auth_server: AuthServer) -> None:
    with httpx.Client(base_url=auth_server.url, timeout=60) as http:
        wrong = http.post("/login", data={"token": "mrl_0123456789ab_wrong", "next": "/"})
        assert wrong.status_code == 401 and "unknown" in wrong.text and "mrl_0123456789ab_wrong" not in wrong.text
        signed = http.post("/login", data={"token": auth_server.secrets["friends-reader"], "next": "//evil.example/"})
        assert signed.status_code == 303 and signed.headers["location"] == "/"
        cookie = signed.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie and "path=/" in cookie
        page = http.get("/", headers={"Accept": "text/html"})
        assert page.status_code == 200 and f"/graphs/{GRAPH}" in page.text
        assert f"/graphs/{LINKED_GRAPH}" not in page.text
        assert 'id="logout"' in page.text
        assert http.get(f"/graphs/{LINKED_GRAPH}", headers={"Accept": "text/html"}).status_code == 403
        assert http.post("/v1/retrieve", json=QUESTION).status_code == 200  # the walk viewer's fetch
        assert http.get("/logout").status_code == 303
        assert http.get("/", headers={"Accept": "text/html"}).status_code == 303  # back to /login


@pytest.mark.slow
def test_the_page_signs_in_in_chromium_then_shows_the_graphs(browser, auth_server: AuthServer, tmp_path: Path) -> None:
    """Headless Chromium: the page sends it to the login form; the token signs it in; the graph list follows."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    token = auth_server.secrets["friends-reader"]
    browser.get(auth_server.url + "/")
    assert browser.current_url == f"{auth_server.url}/login?next=%2F"
    browser.find_element(By.ID, "token").send_keys(token)
    browser.find_element(By.ID, "sign-in").click()
    WebDriverWait(browser, 30).until(lambda driver: driver.current_url == auth_server.url + "/")
    graphs = browser.find_element(By.ID, "graphs").text
    assert GRAPH in graphs and LINKED_GRAPH not in graphs  # only the graphs the token may read
    assert browser.find_element(By.ID, "signed-in").text == "friends-reader"
    cookie = browser.get_cookie("memora_token")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert browser.execute_script("return document.cookie") == ""  # no script on the page can read the token
    assert browser.save_screenshot(str(tmp_path / "signed-in.png"))
    browser.find_element(By.ID, "logout").click()
    WebDriverWait(browser, 30).until(lambda driver: driver.current_url == auth_server.url + "/login")
    browser.get(auth_server.url + "/")
    assert browser.current_url.startswith(auth_server.url + "/login")
    assert token not in browser.page_source
