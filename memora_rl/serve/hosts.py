"""DNS-rebinding protection on every route: the `Host` (and `Origin`) headers a request may name.

A web page on another site can make a browser send requests to a service on loopback by pointing
its own domain at 127.0.0.1 (DNS rebinding); such requests name the page's domain in `Host`. The
MCP SDK refuses them at `/mcp` (its `TransportSecuritySettings`); `transport_security` builds the
one setting this app hands the SDK for `/mcp`, and `HostCheckMiddleware` applies the SDK's own check
with it to every other route too (JSON API, web page, static files).

Allowed: loopback names on any port (`127.0.0.1:*`, `localhost:*`, `[::1]:*`), the address
serve-memory binds to when it is a specific one, and each `allowed_hosts` value of the config
(`--allowed-host`, e.g. `memory.lan:*` for any port). Origins: `http://` and `https://` of those.
"""

from __future__ import annotations

from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from memora_rl.serve.config import ServeConfig

LOOPBACK_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
"""The MCP SDK's default allowed hosts for a loopback server."""
WILDCARD_BINDS = {"0.0.0.0", "::", ""}
"""Bind addresses that name no host a client could send."""


def allowed_hosts(config: ServeConfig) -> list[str]:
    """`Host` values this service answers: loopback, its specific bind address, and `config.allowed_hosts`.

    >>> allowed_hosts(ServeConfig(stores=["g.sqlite"], host="10.0.0.5", allowed_hosts=["memory.lan:*"]))
    ['127.0.0.1:*', 'localhost:*', '[::1]:*', '10.0.0.5:*', 'memory.lan:*']
    """
    bound = [] if config.host in WILDCARD_BINDS or f"{config.host}:*" in LOOPBACK_HOSTS else [config.host]
    named = [f"[{host}]:*" if ":" in host else f"{host}:*" for host in bound]
    return list(dict.fromkeys([*LOOPBACK_HOSTS, *named, *config.allowed_hosts]))


def transport_security(config: ServeConfig) -> TransportSecuritySettings:
    """The MCP SDK's DNS-rebinding settings for this service: `allowed_hosts`, and their http(s) origins."""
    hosts = allowed_hosts(config)
    origins = [f"{scheme}://{host}" for host in hosts for scheme in ("http", "https")]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


class HostCheckMiddleware:
    """Refuse an HTTP request whose `Host` (421) or `Origin` (403) is not allowed, in the API's error shape.

    Args:
        app: the ASGI app to protect.
        settings: the allowed hosts and origins (`transport_security`).
    """

    def __init__(self, app: ASGIApp, settings: TransportSecuritySettings) -> None:
        self.app = app
        self.settings = settings
        self.check = TransportSecurityMiddleware(settings)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer a refused request with the error body; pass every other one (and non-HTTP scopes) on."""
        if scope["type"] == "http":
            request = Request(scope)
            refused = await self.check.validate_request(request, is_post=False)
            if refused is not None:
                await self.refusal(request, refused.status_code)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def refusal(self, request: Request, status: int) -> JSONResponse:
        """The 421 (Host) or 403 (Origin) body: which header, its value, and how to allow it."""
        field = "Host" if status == 421 else "Origin"
        value = request.headers.get(field.lower())
        fix = (
            f"send the request to an allowed host ({', '.join(self.settings.allowed_hosts)}), or start serve-memory "
            "with --allowed-host NAME:* for each name clients use to reach it"
        )
        message = f"{field} header {value!r} is not allowed (DNS-rebinding protection)"
        return JSONResponse(
            status_code=status,
            content={"error": f"{message} (fix: {fix})", "details": [{"field": field, "message": message, "fix": fix}]},
        )
