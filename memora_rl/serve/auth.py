"""Who may call the service: a token on every route but a few open ones, and a scope for each graph touched.

Authentication (`AuthMiddleware`, before any route): a request outside `OPEN_PATHS` carries a token, as
`Authorization: Bearer <token>` (agents, MCP clients, scripts) or as the `memora_token` cookie that the login
page sets (a browser: HttpOnly, SameSite=Strict, never in a URL). No token, or a malformed, unknown or revoked
one, is answered 401 with `WWW-Authenticate: Bearer` in the API's error shape; a browser asking for a page is
sent to `/login` instead. Authorization (`require`, in each route; `check_scope`, in each MCP tool): a valid
token without the scope a request needs is 403, naming the scope. Every refusal is logged at WARNING with the
token's name when it is known, never the token itself.

With `--no-auth` (loopback only, `ServeConfig.no_auth`) every request acts as `EVERYONE`, which may do all.
"""

from __future__ import annotations

import logging
from urllib.parse import quote

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from memora_rl.errors import MemoraError
from memora_rl.paths import service_tokens_path
from memora_rl.serve.config import ServeConfig
from memora_rl.serve.error_pages import wants_html_error
from memora_rl.serve.tokens import ALL_GRAPHS, EVERYONE, Action, Principal, TokenRejected, TokenStore

logger = logging.getLogger(__name__)

COOKIE = "memora_token"
"""The web page's session cookie: the token itself, HttpOnly and SameSite=Strict (set by POST /login)."""
OPEN_PATHS = frozenset({"/healthz", "/login", "/logout", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})
"""Routes answered without a token: liveness, signing in and out, and the API reference (no graph data)."""
OPEN_PREFIXES = ("/static/",)
"""Path prefixes answered without a token: the page's stylesheet and script."""
CHALLENGE = 'Bearer realm="memora-rl"'
"""The `WWW-Authenticate` value of a 401 without a token (RFC 6750); a bad token adds `error="invalid_token"`."""
TOKEN_FIX = (
    "send the header `Authorization: Bearer <token>` with a valid token (a browser signs in at /login); whoever "
    "runs the service creates one with `memora-rl tokens create --name NAME --scope read:*`"
)
"""What to do about a 401."""


class AccessError(MemoraError):
    """A refused request: 401 (no valid token) or 403 (a valid token without the scope it needs).

    Args:
        status: 401 or 403.
        message: what was refused and why (never the token).
        fix: what to do instead.
    """

    def __init__(self, status: int, message: str, fix: str) -> None:
        super().__init__(f"{message} (fix: {fix})")
        self.status = status
        self.message = message
        self.fix = fix

    def detail(self) -> dict[str, str]:
        """The `{field, message, fix}` entry of the error body (`Authorization` for 401, `scope` for 403)."""
        return {"field": "Authorization" if self.status == 401 else "scope", "message": self.message, "fix": self.fix}

    def headers(self) -> dict[str, str] | None:
        """`WWW-Authenticate: Bearer` on a 401 (RFC 6750), nothing on a 403."""
        return {"WWW-Authenticate": CHALLENGE} if self.status == 401 else None


def open_tokens(config: ServeConfig) -> TokenStore | None:
    """The service's token file (created when missing), or None with `no_auth`."""
    return None if config.no_auth else TokenStore(config.tokens or service_tokens_path())


def principal_of(request: Request) -> Principal:
    """Who `request` acts for, as `AuthMiddleware` found it.

    Raises:
        AccessError: 401 when no principal was set (an app built without `AuthMiddleware` refuses everything).
    """
    principal = request.scope.get("state", {}).get("principal")
    if principal is None:
        raise AccessError(401, f"{request.method} {request.url.path} was not authenticated", TOKEN_FIX)
    return principal


def check_scope(principal: Principal, action: Action, graph: str, what: str) -> None:
    """Raise 403 (and log it) unless `principal` may `action` on `graph` (`*`: every graph).

    Args:
        principal: the caller.
        action: read or write.
        graph: the graph id the request touches, or `*` for a request over every graph.
        what: the request, as logged (`POST /v1/ingest`, `MCP tool remember`).
    """
    if principal.may(action, graph):
        return
    target = "every graph" if graph == ALL_GRAPHS else f"graph {graph!r}"
    wanted = f"{action}:{graph}" if graph == ALL_GRAPHS else f"{action}:{graph} or {action}:*"
    if action == "read":
        wanted += " (write scopes also allow reading)"
    logger.warning("refused %s (403): token %r may not %s %s (scopes: %s)", what, principal.name, action, target,
                   principal.scope_text())  # fmt: skip
    raise AccessError(
        403,
        f"token {principal.name!r} may not {action} {target} (its scopes: {principal.scope_text()})",
        f"use a token with the scope {wanted}; whoever runs the service creates one with "
        f"`memora-rl tokens create --name NAME --scope {action}:{graph}`",
    )


def require(request: Request, action: Action, graph: str) -> Principal:
    """The caller of `request`, once it may `action` on `graph` (403 otherwise, logged)."""
    principal = principal_of(request)
    check_scope(principal, action, graph, f"{request.method} {request.url.path}")
    return principal


def readable(request: Request, graph_ids: list[str]) -> list[str]:
    """The graphs of `graph_ids` the caller of `request` may read, in order."""
    principal = principal_of(request)
    return [graph_id for graph_id in graph_ids if principal.may("read", graph_id)]


def is_open(path: str) -> bool:
    """Whether `path` is answered without a token (`OPEN_PATHS`, `OPEN_PREFIXES`)."""
    return path in OPEN_PATHS or path.startswith(OPEN_PREFIXES)


def presented_token(request: Request) -> tuple[str | None, bool]:
    """The token a request carries and whether it came from the cookie: the bearer header first, then the cookie.

    Raises:
        TokenRejected: an `Authorization` header that is not `Bearer <token>`.
    """
    header = request.headers.get("authorization")
    if header is not None:
        scheme, _, value = header.strip().partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            raise TokenRejected(f"the Authorization header uses the scheme {scheme!r}, not `Bearer <token>`")
        return value.strip(), False
    cookie = request.cookies.get(COOKIE)
    return (cookie, True) if cookie else (None, False)


class AuthMiddleware:
    """Authenticate every HTTP request outside the open paths (see the module docstring).

    Sets `request.state.principal` (who it acts for) and, for a browser signed in with the cookie,
    `request.state.signed_in_as` (its name, for the page's log-out link).

    Args:
        app: the ASGI app to protect.
        tokens: the token file, or None to let every request act as `EVERYONE` (`--no-auth`).
    """

    def __init__(self, app: ASGIApp, tokens: TokenStore | None) -> None:
        self.app = app
        self.tokens = tokens

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass an authenticated (or open, or non-HTTP) request on; answer any other with `refusal`."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        if self.tokens is None:
            state["principal"] = EVERYONE
        elif not is_open(scope["path"]):
            request = Request(scope)
            via_cookie = False
            try:
                token, via_cookie = presented_token(request)
                if token is None:
                    await self.refusal(request, None)(scope, receive, send)
                    return
                principal = await anyio.to_thread.run_sync(self.tokens.verify, token)
            except TokenRejected as error:
                await self.refusal(request, error, stale_cookie=via_cookie)(scope, receive, send)
                return
            state["principal"] = principal
            if via_cookie:
                state["signed_in_as"] = principal.name
        await self.app(scope, receive, send)

    def refusal(self, request: Request, error: TokenRejected | None, stale_cookie: bool = False) -> Response:
        """The 401 of a request without a valid token, logged; a browser asking for a page goes to /login."""
        reason = "no token was sent" if error is None else error.reason
        logger.warning("refused %s %s (401): %s", request.method, request.url.path, reason)
        if request.method in ("GET", "HEAD") and wants_html_error(request):
            target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            response: Response = RedirectResponse(f"/login?next={quote(target, safe='')}", status_code=303)
        else:
            failure = AccessError(401, f"{request.method} {request.url.path} needs a token: {reason}", TOKEN_FIX)
            challenge = CHALLENGE if error is None else f'{CHALLENGE}, error="invalid_token"'
            response = JSONResponse(
                status_code=401,
                content={"error": str(failure), "details": [failure.detail()]},
                headers={"WWW-Authenticate": challenge},
            )
        if stale_cookie:
            response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
        return response
