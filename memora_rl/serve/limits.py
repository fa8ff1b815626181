"""Request limits of the memory service: body size, question length, ingest batch size and request time.

Each limit is a `ServeConfig` field and a `serve-memory` option. A request over one is refused before any
work, and nothing is written; the answer names the limit, its value and the setting that raises it, in
the same words over HTTP and MCP (`LimitError`):

- a body over `max_body_bytes`: 413, before it is parsed (`BodyLimitMiddleware`, every route, `/mcp` too);
- a question over `max_question_chars`: 422 (`check_question`);
- an ingest batch over `max_ingest_turns` turns or `max_ingest_chars` characters of text: 413 (`check_ingest`);
- a retrieve or ingest still running after `request_timeout_s`: 503 (`Deadline`). A walk checks it before
  each step; an ingest while it waits for the store's write lock and once more before it writes, so a
  timed-out ingest has written nothing (its retry, with the same `idempotency_key`, writes it once).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from typing import TypeVar

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memora_rl.errors import MemoraError
from memora_rl.serve.config import ServeConfig
from memora_rl.serve.schemas import IngestRequest

T = TypeVar("T")


class LimitError(MemoraError):
    """A request over one of the service's limits; `str()` is the answer's `error` text: field, reason, fix.

    Args:
        status: the HTTP status of the answer (413, 422 or 503).
        field: the request field (or `body`, `request`) that is over the limit.
        message: what is over which limit, naming the setting.
        fix: what to send instead, and the `serve-memory` option that raises the limit.
    """

    def __init__(self, status: int, field: str, message: str, fix: str) -> None:
        super().__init__(f"{field}: {message} (fix: {fix})")
        self.status = status
        self.field = field
        self.message = message
        self.fix = fix

    def detail(self) -> dict[str, str]:
        """The answer's `details` item: {field, message, fix}."""
        return {"field": self.field, "message": self.message, "fix": self.fix}


class RequestTimeoutError(LimitError):
    """A retrieve or ingest ran past `request_timeout_s` (HTTP 503); nothing was written."""


def over_limit(field: str, amount: str, limit: int, setting: str, status: int, send: str) -> LimitError:
    """The error of `amount` over `limit` (setting `setting`): `send` says what to send instead.

    >>> error = over_limit("question", "4001 characters", 4000, "max_question_chars", 422, "a shorter question")
    >>> error.status, error.message
    (422, "4001 characters is over this server's limit of 4000 (max_question_chars)")
    >>> error.fix
    'send a shorter question, or start serve-memory with --max-question-chars N to raise the limit'
    """
    option = "--" + setting.replace("_", "-")
    return LimitError(
        status,
        field,
        f"{amount} is over this server's limit of {limit} ({setting})",
        f"send {send}, or start serve-memory with {option} N to raise the limit",
    )


def check_question(question: str, config: ServeConfig) -> None:
    """Refuse a question longer than `config.max_question_chars` (422)."""
    limit = config.max_question_chars
    if len(question) > limit:
        send = f"the question in at most {limit} characters"
        raise over_limit("question", f"{len(question)} characters", limit, "max_question_chars", 422, send)


def check_ingest(request: IngestRequest, config: ServeConfig) -> None:
    """Refuse an ingest batch over `config.max_ingest_turns` turns or `config.max_ingest_chars` characters (413)."""
    turns, limit = len(request.turns), config.max_ingest_turns
    if turns > limit:
        send = f"the turns in several batches of at most {limit}"
        raise over_limit("turns", f"{turns} turns in one batch", limit, "max_ingest_turns", 413, send)
    chars, limit = sum(len(turn.text) for turn in request.turns), config.max_ingest_chars
    if chars > limit:
        send = f"the turns in several batches of at most {limit} characters of text each"
        raise over_limit("turns", f"{chars} characters of text in one batch", limit, "max_ingest_chars", 413, send)


@dataclass(frozen=True)
class Deadline:
    """When one request must be done: `timeout_s` (the config's `request_timeout_s`) after it started."""

    timeout_s: float
    ends_at: float
    """`time.monotonic()` at which the request times out."""

    @classmethod
    def start(cls, timeout_s: float) -> Deadline:
        """A deadline `timeout_s` seconds from now."""
        return cls(timeout_s=timeout_s, ends_at=time.monotonic() + timeout_s)

    def left_s(self) -> float:
        """Seconds left (0 once past)."""
        return max(0.0, self.ends_at - time.monotonic())

    def check(self, doing: str) -> None:
        """Raise the timeout error when the deadline has passed; `doing` says what the request was doing."""
        if time.monotonic() >= self.ends_at:
            raise self.expired(doing)

    @contextmanager
    def waiting(self, context: AbstractContextManager[T], doing: str) -> Iterator[T]:
        """Enter `context` (a lock or claim made with `left_s()` as its wait), its `TimeoutError` this deadline's error.

        `doing` says what the request was waiting for.
        """
        with ExitStack() as stack:
            try:
                entered = stack.enter_context(context)
            except TimeoutError as error:
                raise self.expired(doing) from error
            yield entered

    def expired(self, doing: str) -> RequestTimeoutError:
        """The timeout error of this deadline, while `doing`."""
        return RequestTimeoutError(
            503,
            "request",
            f"not done within this server's limit of {self.timeout_s:g} s (request_timeout_s) while {doing}; "
            "nothing was written",
            "retry later (an ingest retried with the same idempotency_key writes once), ask for less work "
            "(a smaller budget, fewer turns per batch), or start serve-memory with --request-timeout-s S",
        )


def body_too_large(size: int, limit: int) -> LimitError:
    """The 413 error of a body of `size` bytes (at least; a streamed body is cut off once over)."""
    send = "a smaller body (for ingest: fewer turns per batch)"
    return over_limit("body", f"a body of {size} bytes", limit, "max_body_bytes", 413, send)


class BodyLimitMiddleware:
    """Refuse an HTTP request whose body is over `max_bytes` with 413, before the app reads any of it.

    A declared `Content-Length` over the limit is refused at once; a body without one (chunked) is read up
    to the limit and refused as soon as it passes it. A body within the limit is handed on whole, so the
    app (FastAPI, the MCP endpoint) reads it as usual.

    Args:
        app: the ASGI app to protect.
        max_bytes: the largest body allowed (`ServeConfig.max_body_bytes`).
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass non-HTTP scopes on; read an HTTP body within the limit, or answer 413."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"").decode("latin-1")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await self.refuse(int(declared), send)
            return
        chunks: list[bytes] = []
        size, more, last = 0, True, None
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client left: let the app see it
                last = message
                break
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_bytes:
                await self.refuse(size, send)
                return
            more = message.get("more_body", False)
        await self.app(scope, self.replay(b"".join(chunks), last, receive), send)

    @staticmethod
    def replay(body: bytes, last: Message | None, receive: Receive) -> Receive:
        """A `receive` that gives the app the whole body in one message, then the client's later messages."""
        pending: list[Message] = [last or {"type": "http.request", "body": body, "more_body": False}]

        async def receive_again() -> Message:
            return pending.pop() if pending else await receive()

        return receive_again

    async def refuse(self, size: int, send: Send) -> None:
        """Answer 413 in the API's error shape."""
        error = body_too_large(size, self.max_bytes)
        content = json.dumps({"error": str(error), "details": [error.detail()]}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(content)).encode()),
                   (b"connection", b"close")]  # fmt: skip
        await send({"type": "http.response.start", "status": error.status, "headers": headers})
        await send({"type": "http.response.body", "body": content})
