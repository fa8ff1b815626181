"""Errors of the web page's HTML routes as an HTML page; the JSON API (and JSON routes of the page) keep JSON.

A request is answered with `templates/error.html` when the route it matched renders HTML (declared with
`response_class=HTMLResponse`: the graph list, graph, entry, walk and report pages), or, when no route
matched, when a browser asked for HTML (`Accept: text/html`) outside the API's paths. Everything else,
`/v1/...`, `/mcp`, the page's own JSON helpers and files, gets the JSON error body (`memora_rl.serve.errors`).
The page shows the same words as the JSON body: the status, the error, and each field with its fix.
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

logger = logging.getLogger(__name__)

TEMPLATES = Jinja2Templates(directory=Path(__file__).parent / "templates")
"""The web page's templates (the error page extends its `base.html`)."""

API_PATHS = ("/v1/", "/mcp", "/healthz", "/openapi.json", "/static/")
"""Path prefixes whose errors stay JSON even for a browser that asks for HTML."""


def route_renders_html(route: Any) -> bool:
    """Whether a matched route answers HTML (its `response_class` is `HTMLResponse` or a subclass)."""
    answer = getattr(route, "response_class", None)
    return isinstance(answer, type) and issubclass(answer, HTMLResponse)


def wants_html_error(request: Request) -> bool:
    """Whether an error of `request` is answered as an HTML page (see the module docstring)."""
    route = request.scope.get("route")
    if route is not None:
        return route_renders_html(route)
    accepted = request.headers.get("accept", "")
    return "text/html" in accepted and not request.url.path.startswith(API_PATHS)


def error_page(
    request: Request, status: int, message: str, details: list[dict[str, str]], headers: dict[str, str] | None = None
) -> HTMLResponse | None:
    """The HTML page of an error: `status` and its phrase, the error text, and each detail's field and fix.

    Returns None when the page cannot be rendered (logged with its cause), so that the caller answers the
    error as JSON rather than failing a second time while reporting the first failure.
    """
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:  # a status Python has no name for
        phrase = "Error"
    context = {"status": status, "phrase": phrase, "message": message, "details": details}
    try:
        return TEMPLATES.TemplateResponse(request, "error.html", context, status_code=status, headers=headers)
    except Exception:
        logger.exception("The HTML error page of a %d answer failed to render; answering it as JSON.", status)
        return None
