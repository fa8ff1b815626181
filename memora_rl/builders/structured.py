"""`StructuredAsker`: JSON answers from an LLM for the builders, where a bad answer means a fallback.

It wraps `LLMClient.chat_json` so that a builder never stops on a bad answer: it returns None
after the client's repair retry failed, and remembers that failure in the client's response
cache (under a key of its own) so a re-run does not ask again. Successful answers are cached
by the client itself, so a killed build re-run costs no LLM call for the work it already did.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

from memora_rl.errors import StructuredOutputError
from memora_rl.llm.client import LLMClient, Message
from memora_rl.llm.response_cache import CachedAnswer, request_key

logger = logging.getLogger(__name__)

SchemaT = TypeVar("SchemaT", bound=BaseModel)
FAILURE_MARK = {"memora_rl_builder_failed_answer": 1}
"""Extra field of the cache key under which a failed structured request is remembered."""


class StructuredAsker:
    """Asks an `LLMClient` for JSON and turns unusable answers into None (remembered across runs)."""

    def __init__(self, client: LLMClient) -> None:
        self.client = client
        self.fallbacks = 0

    def _failure_key(self, messages: list[Message], schema: type[BaseModel], max_tokens: int) -> str:
        """The cache key under which a failure of exactly this request is remembered."""
        config = self.client.config
        return request_key(
            model=config.model,
            messages=messages,
            schema=schema.model_json_schema(),
            temperature=config.temperature,
            max_tokens=max_tokens,
            seed=config.seed,
            extra={**config.extra_body, **FAILURE_MARK},
        )

    async def ask(
        self, messages: list[Message], schema: type[SchemaT], *, phase: str, max_tokens: int
    ) -> SchemaT | None:
        """The validated answer, or None when it failed validation even after the repair retry."""
        cache = self.client.cache
        key = self._failure_key(messages, schema, max_tokens)
        if cache is not None and cache.get(key) is not None:
            self.client.usage.add(phase, calls=1, cached_calls=1)
            self.fallbacks += 1
            return None
        try:
            return await self.client.chat_json(messages, schema, phase=phase, max_tokens=max_tokens)
        except StructuredOutputError as error:
            logger.info("Unusable %s answer in phase %s; using the fallback.", schema.__name__, phase)
            self.fallbacks += 1
            if cache is not None:
                cache.put(key, self.client.config.model, CachedAnswer(text=error.raw_text))
            return None

    async def ask_text(self, messages: list[Message], *, phase: str, max_tokens: int) -> str:
        """A plain-text answer (cached by the client)."""
        result = await self.client.chat(messages, phase=phase, max_tokens=max_tokens)
        return result.text.strip()

    def ask_sync(
        self, messages: list[Message], schema: type[SchemaT], *, phase: str, max_tokens: int
    ) -> SchemaT | None:
        """Blocking `ask` (for deciders, which the store calls synchronously)."""
        return self.client.run_sync(self.ask(messages, schema, phase=phase, max_tokens=max_tokens))

    def gather(self, calls: Sequence[Any]) -> list[Any]:
        """Run coroutines of this asker concurrently from synchronous code, results in order."""

        async def run_all() -> list[Any]:
            return list(await asyncio.gather(*calls))

        return self.client.run_sync(run_all())
