"""The web page's sign-in: a form that takes a token once and keeps it in an HttpOnly, SameSite=Strict cookie.

A browser cannot send `Authorization` headers on its own, and a token in a URL would land in history, logs
and `Referer` headers. So `/login` asks for the token in a password field and POSTs it; a valid one is set as
the `memora_token` cookie (HttpOnly: no script reads it; SameSite=Strict: no other site's page sends it;
Secure over https) and the browser goes on to the page it asked for. `/logout` deletes the cookie. Both are
open routes (`auth.OPEN_PATHS`); with `--no-auth` they only lead back to the page.
"""

from __future__ import annotations

import logging
from typing import Annotated
from urllib.parse import parse_qs

import anyio.to_thread
from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from memora_rl.serve.auth import CHALLENGE, COOKIE
from memora_rl.serve.error_pages import TEMPLATES
from memora_rl.serve.tokens import TokenRejected, TokenStore

logger = logging.getLogger(__name__)

router = APIRouter(include_in_schema=False)


def safe_next(target: str) -> str:
    r"""Where to go after signing in: a path of this site, else `/` (never another site: no open redirect).

    >>> [safe_next(t) for t in ("/graphs/friends?q=dog", "//evil.example/", "https://evil.example/", "/\\evil")]
    ['/graphs/friends?q=dog', '/', '/', '/']
    """
    if not target.startswith("/") or target.startswith(("//", "/\\")):
        return "/"
    return target


def tokens_of(request: Request) -> TokenStore | None:
    """The app's token file (None with `--no-auth`)."""
    return request.app.state.tokens


@router.get("/login", response_class=HTMLResponse)
def login_page(request: Request, target: Annotated[str, Query(alias="next")] = "/") -> Response:
    """The sign-in form; with `--no-auth`, straight on to `next` (the page that sent the browser here)."""
    if tokens_of(request) is None:
        return RedirectResponse(safe_next(target), status_code=303)
    return TEMPLATES.TemplateResponse(request, "login.html", {"next": safe_next(target), "problem": ""})


@router.post("/login", response_class=HTMLResponse)
async def login(request: Request) -> Response:
    """Check the posted token; set the cookie and go on (303), or show the form again with the reason (401)."""
    form = parse_qs((await request.body()).decode("utf-8", "replace"))
    token = form.get("token", [""])[0].strip()
    target = safe_next(form.get("next", ["/"])[0])
    tokens = tokens_of(request)
    if tokens is None:
        return RedirectResponse(target, status_code=303)
    try:
        principal = await anyio.to_thread.run_sync(tokens.verify, token)
    except TokenRejected as error:
        logger.warning("refused a sign-in at POST /login (401): %s", error.reason)
        problem = f"Not signed in: {error.reason}. Paste the whole token that `memora-rl tokens create` printed."
        context = {"next": target, "problem": problem}
        headers = {"WWW-Authenticate": CHALLENGE}
        return TEMPLATES.TemplateResponse(request, "login.html", context, status_code=401, headers=headers)
    logger.info("token %r signed in to the web page", principal.name)
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        COOKIE, token, httponly=True, samesite="strict", secure=request.url.scheme == "https", path="/"
    )  # a session cookie: gone when the browser closes; revoking the token ends it at once
    return response


@router.get("/logout")
def logout() -> RedirectResponse:
    """Delete the cookie and show the sign-in form."""
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
    return response
