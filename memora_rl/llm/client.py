"""Async OpenAI-compatible chat client: bounded concurrency, retries, structured output, caching.

Every LLM call in memora-rl (memory builders, answerer and judge LLMs, the prompted-LLM
policy) goes through `LLMClient`. It talks to any `/v1/chat/completions` endpoint (vLLM,
OpenAI, ...), retries connect errors, timeouts, 429 and 5xx with exponential backoff and
full jitter, validates structured answers with pydantic (one repair request on failure),
caches successful answers on disk and counts usage per phase.

Async use (many requests at once, at most `max_concurrency` in flight)::

    client = LLMClient(LLMConfig(base_url="http://127.0.0.1:8100/v1", model="smollm2-135m-instruct"))
    results = await asyncio.gather(*(client.chat(m, phase="judge") for m in conversations))

Sync use: `client.chat_sync(...)`, `client.chat_json_sync(...)`, or
`client.run_sync(client.gather_chat_json(...))` for a batch.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Self, TypeVar

import httpx
from pydantic import BaseModel

from memora_rl.async_bridge import LoopRunningError, run_sync
from memora_rl.errors import LLMError, ServerError, StructuredOutputError
from memora_rl.llm.client_config import ChatResult, LLMConfig
from memora_rl.llm.endpoint import backoff_delay, fix_hint, is_retryable, parse_completion, retry_after_s
from memora_rl.llm.pool import ServerPool, is_dead_error
from memora_rl.llm.response_cache import CachedAnswer, ResponseCache, request_key
from memora_rl.llm.structured import parse_structured, repair_messages, response_format, with_schema_instruction
from memora_rl.llm.usage import UsageTracker

logger = logging.getLogger(__name__)

__all__ = ["ChatResult", "LLMClient", "LLMConfig", "Message"]

SchemaT = TypeVar("SchemaT", bound=BaseModel)
ResultT = TypeVar("ResultT")
Message = dict[str, str]
"""One chat message: `{"role": "system" | "user" | "assistant", "content": "..."}`."""


class LLMClient:
    """Async client of one OpenAI-compatible chat endpoint, shared by every caller of one model.

    Args:
        config: endpoint, model, sampling defaults, retry, concurrency and cache settings.
        transport: an httpx transport to use instead of the network (tests pass `httpx.MockTransport`).
    """

    def __init__(self, config: LLMConfig, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.config = config
        self.servers = ServerPool(config.base_url)
        """The endpoint's servers (one unless `base_url` lists several), with their request counts."""
        self.usage = UsageTracker()
        self.cache = ResponseCache(config.cache_path) if config.cache else None
        self._transport = transport
        self._rng = random.Random()
        self._sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
        self._loop: asyncio.AbstractEventLoop | None = None
        self._http: httpx.AsyncClient | None = None
        self._semaphore: asyncio.Semaphore | None = None

    @property
    def url(self) -> str:
        """The chat completions URL (of the first server, when `base_url` lists several)."""
        return f"{self.servers.urls[0]}/chat/completions"

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP connections of the current event loop (the client stays usable)."""
        http, self._http, self._loop, self._semaphore = self._http, None, None, None
        if http is not None:
            await http.aclose()

    def _loop_state(self) -> tuple[httpx.AsyncClient, asyncio.Semaphore]:
        """The HTTP client and semaphore of the running event loop (new ones after `asyncio.run` changes it)."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._http is None or self._semaphore is None:
            self._http = httpx.AsyncClient(
                transport=self._transport,
                timeout=httpx.Timeout(self.config.timeout_s),
                headers={"Authorization": f"Bearer {self.config.api_key.get_secret_value()}"},
            )
            self._semaphore = asyncio.Semaphore(self.config.max_concurrency * len(self.servers.urls))
            self._loop = loop
        return self._http, self._semaphore

    # ----- public API -------------------------------------------------------------------------

    async def chat(
        self,
        messages: list[Message],
        *,
        phase: str,
        max_tokens: int | None = None,
        temperature: float | None = None,
        extra_body: dict[str, Any] | None = None,
    ) -> ChatResult:
        """Send one chat request and return the answer text with its token counts.

        Args:
            messages: the conversation, oldest first.
            phase: usage label, e.g. `memora/extract` or `judge/answer`.
            max_tokens: completion token limit; None = `config.max_tokens`.
            temperature: sampling temperature; None = `config.temperature`.
            extra_body: fields added to this request's body (and cache key) over `config.extra_body`,
                e.g. vLLM's `{"structured_outputs": {"json": schema}}`.

        Raises:
            LLMError: the endpoint failed after the retries, naming the URL, model, status and the fix.
        """
        result, _ = await self._answer(messages, phase, max_tokens, temperature, schema=None, extra_body=extra_body)
        return result

    async def chat_json(
        self,
        messages: list[Message],
        schema: type[SchemaT],
        *,
        phase: str,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> SchemaT:
        """Ask for a JSON object matching `schema` and return it validated.

        The request carries `response_format` json_schema (strict) unless `config.use_response_format`
        is False. The JSON object may be wrapped in code fences or text. When the answer does not
        validate, one repair request shows the model its answer and the validation error.

        Raises:
            StructuredOutputError: neither answer validated; `.raw_text` holds the last answer.
            LLMError: the endpoint failed after the retries.
        """
        _, parsed = await self._answer(messages, phase, max_tokens, temperature, schema=schema)
        return parsed  # type: ignore[return-value]

    async def gather_chat(
        self, conversations: Sequence[list[Message]], *, phase: str, return_exceptions: bool = False, **options: Any
    ) -> list[ChatResult | BaseException]:
        """`chat` over many conversations concurrently (at most `max_concurrency` in flight), in order.

        With `return_exceptions=True`, a failed request yields its `LLMError` in place of a result.
        """
        calls = (self.chat(messages, phase=phase, **options) for messages in conversations)
        return list(await asyncio.gather(*calls, return_exceptions=return_exceptions))

    async def gather_chat_json(
        self,
        conversations: Sequence[list[Message]],
        schema: type[SchemaT],
        *,
        phase: str,
        return_exceptions: bool = False,
        **options: Any,
    ) -> list[SchemaT | BaseException]:
        """`chat_json` over many conversations concurrently, in order (see `gather_chat`)."""
        calls = (self.chat_json(messages, schema, phase=phase, **options) for messages in conversations)
        return list(await asyncio.gather(*calls, return_exceptions=return_exceptions))

    def run_sync(self, awaitable: Coroutine[Any, Any, ResultT]) -> ResultT:
        """Run a coroutine of this client from synchronous code and close its connections after.

        Raises:
            LLMError: when called inside a running event loop (await the coroutine there instead).
        """
        try:
            return run_sync(awaitable, cleanup=self.aclose)
        except LoopRunningError as error:
            raise LLMError(
                "A *_sync LLM call was made inside a running event loop; await the async method instead."
            ) from error

    def chat_sync(self, messages: list[Message], **options: Any) -> ChatResult:
        """Blocking `chat` (same arguments)."""
        return self.run_sync(self.chat(messages, **options))

    def chat_json_sync(self, messages: list[Message], schema: type[SchemaT], **options: Any) -> SchemaT:
        """Blocking `chat_json` (same arguments)."""
        return self.run_sync(self.chat_json(messages, schema, **options))

    # ----- internals --------------------------------------------------------------------------

    async def _answer(
        self,
        messages: list[Message],
        phase: str,
        max_tokens: int | None,
        temperature: float | None,
        schema: type[BaseModel] | None,
        extra_body: dict[str, Any] | None = None,
    ) -> tuple[ChatResult, BaseModel | None]:
        """Serve a request from the cache or the endpoint, validating and caching the answer."""
        started = time.perf_counter()
        self.usage.add(phase, calls=1)
        body = {**self._body(messages, max_tokens, temperature, schema), **(extra_body or {})}
        key = request_key(
            model=self.config.model,
            messages=messages,
            schema=schema.model_json_schema() if schema is not None else None,
            temperature=body["temperature"],
            max_tokens=body["max_tokens"],
            seed=self.config.seed,
            extra={**self.config.extra_body, **(extra_body or {})},
        )
        hit = self._from_cache(key, schema)
        if hit is not None:
            self.usage.add(phase, cached_calls=1, seconds=time.perf_counter() - started)
            answer, parsed = hit
            return self._result(answer, cached=True), parsed
        try:
            answer = await self._post(body, phase)
            parsed = None
            if schema is not None:
                answer, parsed = await self._validate_or_repair(body, answer, schema, phase)
        except LLMError:
            self.usage.add(phase, failures=1)
            raise
        finally:
            self.usage.add(phase, seconds=time.perf_counter() - started)
        if self.cache is not None:
            self.cache.put(key, self.config.model, answer)
        return self._result(answer, cached=False), parsed

    def _from_cache(self, key: str, schema: type[BaseModel] | None) -> tuple[CachedAnswer, BaseModel | None] | None:
        """A stored answer (re-validated against `schema`), or None on a miss."""
        if self.cache is None:
            return None
        answer = self.cache.get(key)
        if answer is None:
            return None
        if schema is None:
            return answer, None
        try:
            return answer, parse_structured(answer.text, schema)
        except ValueError:
            logger.warning("Cached answer %s no longer validates against %s; asking again.", key[:12], schema.__name__)
            return None

    @staticmethod
    def _result(answer: CachedAnswer, *, cached: bool) -> ChatResult:
        return ChatResult(
            text=answer.text,
            prompt_tokens=answer.prompt_tokens,
            completion_tokens=answer.completion_tokens,
            cached=cached,
            finish_reason=answer.finish_reason,
        )

    def _body(
        self,
        messages: list[Message],
        max_tokens: int | None,
        temperature: float | None,
        schema: type[BaseModel] | None,
    ) -> dict[str, Any]:
        """The JSON body of a `/chat/completions` request."""
        if schema is not None and not self.config.use_response_format:
            messages = with_schema_instruction(messages, schema)
        body: dict[str, Any] = {
            **self.config.extra_body,
            "model": self.config.model,
            "messages": messages,
            "temperature": self.config.temperature if temperature is None else temperature,
            "max_tokens": self.config.max_tokens if max_tokens is None else max_tokens,
        }
        if self.config.seed is not None:
            body["seed"] = self.config.seed
        if schema is not None and self.config.use_response_format:
            body["response_format"] = response_format(schema)
        return body

    async def _validate_or_repair(
        self, body: dict[str, Any], answer: CachedAnswer, schema: type[BaseModel], phase: str
    ) -> tuple[CachedAnswer, BaseModel]:
        """Validate `answer`; on failure send one repair request, then give up with the raw text."""
        try:
            return answer, parse_structured(answer.text, schema)
        except ValueError as error:
            logger.info("Answer for %s did not validate (%s); sending one repair request.", schema.__name__, error)
            first_error = error
        self.usage.add(phase, repairs=1)
        repaired = await self._post(
            {**body, "messages": repair_messages(body["messages"], answer.text, first_error)}, phase
        )
        try:
            parsed = parse_structured(repaired.text, schema)
        except ValueError as error:
            raise StructuredOutputError(
                f"{self.config.model} at {self.url} did not answer with a valid {schema.__name__} JSON object, "
                f"even after one repair request: {error}. Last answer (finish_reason={repaired.finish_reason}): "
                f"{repaired.text[:300]!r}. "
                "Use a larger model, raise max_tokens, or keep use_response_format=True on vLLM (guided decoding).",
                raw_text=repaired.text,
            ) from error
        total = CachedAnswer(
            text=repaired.text,
            prompt_tokens=answer.prompt_tokens + repaired.prompt_tokens,
            completion_tokens=answer.completion_tokens + repaired.completion_tokens,
            finish_reason=repaired.finish_reason,
        )
        return total, parsed

    async def _post(self, body: dict[str, Any], phase: str) -> CachedAnswer:
        """POST `body` with retries and backoff; count tokens; raise `LLMError` once retries run out."""
        http, semaphore = self._loop_state()
        status: int | None = None
        detail, delay, url = "", 0.0, self.url
        for attempt in range(self.config.max_retries + 1):
            if attempt:
                self.usage.add(phase, retries=1)
                await self._sleep(delay)
            self.usage.add(phase, http_requests=1)
            server: str | None = None
            try:
                async with semaphore:
                    with self.servers.lease() as server:
                        url = f"{server}/chat/completions"
                        response = await http.post(url, json=body)
            except ServerError as error:  # no server left in rotation
                raise LLMError(f"{error} (model {self.config.model!r})") from error
            except httpx.TransportError as error:
                status, detail = None, f"{type(error).__name__}: {error}"
                delay = backoff_delay(attempt, self.config.backoff_base_s, self.config.backoff_max_s, self._rng)
                logger.warning("LLM request to %s failed (%s); attempt %d.", url, detail, attempt + 1)
                if server is not None and len(self.servers.urls) > 1 and is_dead_error(error):
                    self._drop(server, error)
                    delay = 0.0  # another server takes the retry at once
                continue
            if response.status_code == 200:
                return self._decode(response, phase)
            status, detail = response.status_code, response.text[:500]
            if not is_retryable(status):
                break
            delay = backoff_delay(attempt, self.config.backoff_base_s, self.config.backoff_max_s, self._rng)
            retry_after = retry_after_s(response)
            if retry_after is not None:
                delay = min(max(delay, retry_after), self.config.backoff_max_s)
            logger.warning("LLM request to %s got HTTP %d; attempt %d.", url, status, attempt + 1)
        raise self._error(status, detail, attempts=attempt + 1, url=url)

    def _drop(self, server: str, error: Exception) -> None:
        """Take a dead server out of rotation; LLMError when none is left."""
        try:
            self.servers.mark_dead(server, error)
        except ServerError as gone:
            raise LLMError(f"{gone} (model {self.config.model!r})") from gone

    def _decode(self, response: httpx.Response, phase: str) -> CachedAnswer:
        """Parse a 200 response and count its tokens."""
        try:
            answer = parse_completion(response.json())
        except ValueError as error:
            raise LLMError(
                f"{response.request.url} (model {self.config.model!r}) answered HTTP 200 with an unreadable body: "
                f"{error}. Check base_url points at an OpenAI-compatible /v1 endpoint."
            ) from error
        self.usage.add(phase, prompt_tokens=answer.prompt_tokens, completion_tokens=answer.completion_tokens)
        return answer

    def _error(self, status: int | None, detail: str, *, attempts: int, url: str) -> LLMError:
        """The error raised after the last attempt, naming URL, model, status, detail and the fix."""
        outcome = f"HTTP {status}" if status is not None else "no HTTP response"
        return LLMError(
            f"LLM request to {url} (model {self.config.model!r}) failed after {attempts} attempt(s): "
            f"{outcome}: {detail.strip() or '<empty body>'}. {fix_hint(status, detail)}"
        )
