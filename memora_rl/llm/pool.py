"""Several OpenAI-compatible servers behind one client: least outstanding requests, dead servers out of rotation.

`ServerPool` holds the base URLs (`http://host:port/v1`) of servers that serve the same model. Each
request goes to the live server with the fewest requests in flight (ties go round robin). A server
that refuses the connection or drops it mid-request (`is_dead_error`) is taken out of rotation for
good; an HTTP error from a server that answered (4xx, 5xx) or a timeout is not a death. What happens
then is the pool's `on_dead` setting: `continue` retries the request on another live server while one
remains, `stop` raises `ServerError` naming the dead server. Training rollouts
(`memora_rl.training.generation.VLLMGenerator`, `AdapterSync`) and the chat client
(`memora_rl.llm.client.LLMClient`, so evaluation) share it; it is thread-safe, and its bookkeeping
never blocks, so async callers use it too.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Literal, TypeVar

import httpx

from memora_rl.errors import ConfigError, ServerError

logger = logging.getLogger(__name__)

OnDead = Literal["continue", "stop"]
"""What a pool does when a server dies: go on with the live ones, or stop with an error naming it."""
DEAD_ERRORS: tuple[type[httpx.HTTPError], ...] = (
    httpx.ConnectError,
    httpx.RemoteProtocolError,
    httpx.ReadError,
    httpx.WriteError,
)
"""Transport errors that mean the server is gone: refused connection, connection dropped mid-request."""

ResultT = TypeVar("ResultT")


def is_dead_error(error: BaseException | None) -> bool:
    """Whether `error` (or the error it was raised from) says the server is gone, not merely slow or refusing.

    >>> is_dead_error(httpx.ConnectError("refused")), is_dead_error(httpx.ReadTimeout("slow"))
    (True, False)
    >>> is_dead_error(ServerError("no answer")), is_dead_error(None)
    (False, False)
    """
    return _dead_cause(error) is not None


def _dead_cause(error: BaseException | None) -> BaseException | None:
    """The first `DEAD_ERRORS` error in `error`'s chain of causes, or None."""
    while error is not None:
        if isinstance(error, DEAD_ERRORS):
            return error
        error = error.__cause__
    return None


def split_urls(value: str | Sequence[str], name: str = "base_url") -> list[str]:
    """The http(s) URLs of a comma-separated string or a list, trailing `/` dropped; ConfigError names bad input.

    `name` is the option or key the value came from, for the error message.

    >>> split_urls("http://a:8100/v1, http://b:8100/v1/")
    ['http://a:8100/v1', 'http://b:8100/v1']
    >>> split_urls(["http://a:8100/v1", "http://a:8100/v1"], "server.urls")
    Traceback (most recent call last):
    ...
    memora_rl.errors.ConfigError: server.urls lists http://a:8100/v1 twice; list each server once.
    """
    parts = value.split(",") if isinstance(value, str) else list(value)
    urls = [str(part).strip().rstrip("/") for part in parts]
    if not urls or not all(urls):
        raise ConfigError(
            f"{name}={value!r} has an empty URL; give one or more http(s) URLs separated by commas, "
            "e.g. http://127.0.0.1:8100/v1,http://127.0.0.1:8101/v1."
        )
    for url in urls:
        if not url.startswith(("http://", "https://")):
            raise ConfigError(
                f"{name}: {url!r} is not an http(s) URL; write each server as http://host:port/v1, "
                "several separated by commas."
            )
        if urls.count(url) > 1:
            raise ConfigError(f"{name} lists {url} twice; list each server once.")
    return urls


@dataclass(frozen=True)
class ServerStats:
    """One server's counters in a pool."""

    url: str
    """Base URL of the server."""
    outstanding: int = 0
    """Requests in flight on it now."""
    served: int = 0
    """Requests it answered (any HTTP status)."""
    failed: int = 0
    """Requests that failed on it without an answer (transport errors, timeouts included)."""
    dead: str | None = None
    """Why it is out of rotation (the error that took it out), or None while it is live."""


class ServerPool:
    """Base URLs of servers serving the same model; picks the live one with the fewest requests in flight.

    Args:
        urls: The servers' base URLs, e.g. `http://127.0.0.1:8100/v1` (a comma-separated string is split).
        on_dead: `continue`: a dead server leaves the rotation and its request is retried on a live one;
            `stop`: the first death raises `ServerError` naming the server (and every later request does too).
    """

    def __init__(self, urls: str | Sequence[str], on_dead: OnDead = "continue") -> None:
        if on_dead not in ("continue", "stop"):
            raise ConfigError(f"on_dead={on_dead!r} is not one of 'continue', 'stop'.")
        self.urls = tuple(split_urls(urls))
        self.on_dead = on_dead
        self._stats = {url: ServerStats(url) for url in self.urls}
        self._lock = threading.Lock()
        self._turn = 0

    def live_urls(self) -> list[str]:
        """The servers still in rotation, in the order given."""
        with self._lock:
            return [url for url in self.urls if self._stats[url].dead is None]

    def dead_urls(self) -> list[str]:
        """The servers taken out of rotation, in the order given."""
        with self._lock:
            return [url for url in self.urls if self._stats[url].dead is not None]

    def stats(self) -> dict[str, ServerStats]:
        """A snapshot of every server's counters, by URL."""
        with self._lock:
            return dict(self._stats)

    def _choose(self) -> str:
        """The live server with the fewest requests in flight (ties: round robin); counts the request on it."""
        with self._lock:
            self._raise_if_unusable()
            order = self.urls[self._turn :] + self.urls[: self._turn]
            url = min((u for u in order if self._stats[u].dead is None), key=lambda u: self._stats[u].outstanding)
            self._turn = (self.urls.index(url) + 1) % len(self.urls)
            self._bump(url, outstanding=1)
            return url

    def _bump(self, url: str, **changes: int) -> None:
        """Add `changes` to `url`'s counters (call with the lock held)."""
        stats = self._stats[url]
        self._stats[url] = replace(stats, **{key: getattr(stats, key) + delta for key, delta in changes.items()})

    def _raise_if_unusable(self) -> None:
        """Raise ServerError when no server is live, or when one died and `on_dead` is `stop` (lock held)."""
        dead = [self._stats[url] for url in self.urls if self._stats[url].dead is not None]
        if self.on_dead == "stop" and dead:
            live = [url for url in self.urls if self._stats[url].dead is None]
            raise ServerError(
                f"The server at {dead[0].url} stopped answering ({dead[0].dead}); with on_dead_server=stop that "
                f"ends the run. Restart it, or set on_dead_server=continue to go on with the live servers "
                f"({', '.join(live) or 'none left'})."
            )
        if len(dead) == 1 == len(self.urls):
            raise ServerError(f"The server at {dead[0].url} does not answer ({dead[0].dead}). Is it running?")
        if len(dead) == len(self.urls):
            gone = "; ".join(f"{stats.url} ({stats.dead})" for stats in dead)
            raise ServerError(f"No server is left in rotation: {gone}. Restart them and run again.")

    def _release(self, url: str, answered: bool) -> None:
        """Count the request on `url` as no longer in flight: served when it was `answered`, else failed."""
        with self._lock:
            self._bump(url, outstanding=-1, served=int(answered), failed=int(not answered))

    @contextlib.contextmanager
    def lease(self) -> Iterator[str]:
        """Yield the URL to send one request to, counted as in flight until the block ends.

        A block that ends normally counts as served, one that raises as failed.

        Raises:
            ServerError: no live server is left, or one died and `on_dead` is `stop`.
        """
        url = self._choose()
        try:
            yield url
        except BaseException:
            self._release(url, answered=False)
            raise
        self._release(url, answered=True)

    def mark_dead(self, url: str, error: BaseException) -> None:
        """Take `url` out of rotation for good because of `error`; raise as `lease` would if that ends the pool.

        Raises:
            ServerError: `on_dead` is `stop`, or no live server is left.
        """
        cause = _dead_cause(error) or error
        with self._lock:
            if self._stats[url].dead is None:
                self._stats[url] = replace(self._stats[url], dead=f"{type(cause).__name__}: {cause}")
                logger.warning("server %s is out of rotation: %s", url, self._stats[url].dead)
            self._raise_if_unusable()

    def call(self, send: Callable[[str], ResultT]) -> ResultT:
        """`send(url)` on the chosen server; when that server is dead, mark it and try another (see `on_dead`).

        Errors other than `is_dead_error` ones (an HTTP error, a timeout) go to the caller as they are.
        """
        while True:
            url = self._choose()
            try:
                result = send(url)
            except BaseException as error:
                self._release(url, answered=False)
                if not isinstance(error, Exception) or not is_dead_error(error):
                    raise
                self.mark_dead(url, error)
                continue
            self._release(url, answered=True)
            return result

    def each_live(self, action: Callable[[str], object]) -> None:
        """`action(url)` on every live server in turn (e.g. loading an adapter); a dead one is marked and skipped.

        Raises:
            ServerError: as `mark_dead`, when a death ends the pool; other errors of `action` as they are.
        """
        for url in self.live_urls():
            try:
                action(url)
            except Exception as error:
                if not is_dead_error(error):
                    raise
                self.mark_dead(url, error)
