"""Errors on the HTML pages are an HTML page with the same words; the JSON API (and JSON routes) keep JSON."""

from __future__ import annotations

from html import unescape

import httpx
import pytest
from fastapi import FastAPI
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from fastapi.testclient import TestClient

from memora_rl.errors import GraphError
from memora_rl.serve.app import STATIC_DIR
from memora_rl.serve.errors import install_error_handlers
from tests.serve.conftest import GRAPH


def assert_error_page(response: httpx.Response, status: int, *words: str) -> str:
    """An HTML error page of `status` whose text holds each of `words`; returns its text, unescaped."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("text/html"), response.headers
    text = unescape(response.text)
    assert f'<h1 id="error-status">{status} ' in text and '<p id="error-message"' in text
    assert all(word in text for word in words), text
    return text


@pytest.mark.parametrize(
    ("path", "status", "words"),
    [
        ("/graphs/nobody", 404, ["Graph 'nobody' is not served", GRAPH]),
        (f"/graphs/{GRAPH}/entries/e999", 404, ["e999"]),
        (f"/graphs/{GRAPH}?k=many", 422, ["k: Input should be a valid integer", "fix:"]),
        ("/walk?run=heuristic", 400, ["needs both run"]),
    ],
)
def test_page_errors_are_html_pages(client: httpx.Client, path: str, status: int, words: list[str]) -> None:
    assert_error_page(client.get(path), status, *words)


def test_a_page_error_shows_each_field_and_fix(client: httpx.Client) -> None:
    text = assert_error_page(client.get(f"/graphs/{GRAPH}?k=many"), 422)
    assert '<table id="error-details">' in text and "<td>k</td>" in text
    assert 'href="/static/style.css"' in text  # the site's own page, with its stylesheet and links


def test_the_json_api_keeps_json_errors(client: httpx.Client) -> None:
    response = client.get("/v1/graphs/nobody", headers={"accept": "text/html"})
    assert response.status_code == 404 and response.headers["content-type"] == "application/json"
    assert "'nobody' is not served" in response.json()["error"]


def test_no_such_page_is_html_for_a_browser_and_json_otherwise(client: httpx.Client) -> None:
    browser = client.get("/no-such-page", headers={"accept": "text/html,application/xhtml+xml,*/*;q=0.8"})
    assert_error_page(browser, 404, "GET /no-such-page")
    assert client.get("/no-such-page").json()["details"][0]["field"] == "request"


def test_only_routes_that_render_html_answer_errors_as_html() -> None:
    """A JSON route of the web page (such as the walk viewer's data helpers) keeps JSON errors."""
    app = FastAPI()
    install_error_handlers(app)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")  # as the service's app: base.html links it

    @app.get("/page", response_class=HTMLResponse)
    def page() -> HTMLResponse:
        raise GraphError("Entry 'e9' is not in graph 'g'")

    @app.get("/page/data")
    def data() -> dict:
        raise GraphError("Entry 'e9' is not in graph 'g'")

    @app.get("/page/crash", response_class=HTMLResponse)
    def crash() -> HTMLResponse:
        raise RuntimeError("boom")

    http = TestClient(app, raise_server_exceptions=False)
    assert_error_page(http.get("/page"), 404, "Entry 'e9' is not in graph 'g'")
    assert http.get("/page/data").json()["error"] == "Entry 'e9' is not in graph 'g'"
    assert_error_page(http.get("/page/crash"), 500, "RuntimeError", "server log")


def test_a_page_error_that_cannot_render_answers_json() -> None:
    """The error page extends the site's base template; if that fails, the error still reaches the client."""
    app = FastAPI()
    install_error_handlers(app)  # no /static mount: base.html cannot link its stylesheet

    @app.get("/page", response_class=HTMLResponse)
    def page() -> HTMLResponse:
        raise GraphError("Entry 'e9' is not in graph 'g'")

    response = TestClient(app).get("/page")
    assert response.status_code == 404 and response.json()["error"] == "Entry 'e9' is not in graph 'g'"
