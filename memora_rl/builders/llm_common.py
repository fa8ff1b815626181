"""Plumbing shared by the LLM builders: rendering messages, asking for JSON safely, resuming, reports.

`StructuredAsker` wraps `LLMClient.chat_json` so that a builder never stops on a bad answer:
it returns None after the client's repair retry failed, and remembers that failure in the
client's response cache (under a key of its own) so a re-run does not ask again. Successful
answers are cached by the client itself, so a killed build re-run costs no LLM call for the
work it already did.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, Field, ValidationError
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from memora_rl.builders.base import BuildReport
from memora_rl.builders.registry import BuilderRequest
from memora_rl.config import load_config
from memora_rl.data.records import Conversation, Turn
from memora_rl.errors import ConfigError, StructuredOutputError
from memora_rl.llm.client import LLMClient, LLMConfig, Message
from memora_rl.llm.response_cache import CachedAnswer, request_key
from memora_rl.memory.records import EntryCandidate, Episode
from memora_rl.memory.store import GraphStore

logger = logging.getLogger(__name__)

SchemaT = TypeVar("SchemaT", bound=BaseModel)
ConfigT = TypeVar("ConfigT", bound=BaseModel)
FAILURE_MARK = {"memora_rl_builder_failed_answer": 1}
"""Extra field of the cache key under which a failed structured request is remembered."""


class LLMBuildReport(BuildReport):
    """`BuildReport` plus what the LLM cost and how often its answers had to be repaired."""

    llm_calls: int = 0
    """Logical LLM requests of this build (cached or not)."""
    http_requests: int = 0
    """HTTP requests actually sent (0 for a fully cached re-run)."""
    fallbacks: int = 0
    """Answers unusable after the client's repair retry, replaced by a deterministic fallback."""
    index_repairs: int = 0
    """Groupings whose indices had to be fixed (out of range, duplicates, uncovered messages)."""
    usage: dict[str, dict[str, float]] = Field(default_factory=dict)
    """Per-phase counters of the client during this build (see `memora_rl.llm.usage.PhaseUsage`)."""


def format_day(moment: datetime | None) -> str:
    """A date as "8 May 2023" (or "unknown date").

    >>> format_day(datetime(2023, 5, 8, 13, 56))
    '8 May 2023'
    """
    return f"{moment.day} {moment:%B %Y}" if moment is not None else "unknown date"


def render_messages(turns: Sequence[Turn], max_chars: int, dated: bool = False) -> str:
    """Numbered lines "[1] Speaker: text" (1-based), texts cut at `max_chars`; dates shown when they change."""
    lines: list[str] = []
    last_day = ""
    for number, turn in enumerate(turns, start=1):
        text = turn.text if len(turn.text) <= max_chars else turn.text[: max_chars - 3] + "..."
        day = format_day(turn.time)
        if dated and day != last_day:
            lines.append(f"(on {day})")
            last_day = day
        lines.append(f"[{number}] {turn.speaker}: {text}")
    return "\n".join(lines)


def batches(turns: Sequence[Turn], size: int) -> list[list[Turn]]:
    """Consecutive slices of at most `size` turns.

    >>> [len(b) for b in batches(list(range(5)), 2)]
    [2, 2, 1]
    """
    return [list(turns[start : start + size]) for start in range(0, len(turns), size)]


def session_batches(conversation: Conversation, size: int) -> list[list[Turn]]:
    """Each session cut into consecutive batches of at most `size` turns, in session order."""
    return [batch for session in conversation.sessions for batch in batches(session.turns, size)]


def episode_from_turns(graph_id: str, episode_id: str, turns: Sequence[Turn], text: str, title: str) -> Episode:
    """An episode over `turns`: their ids and time span, with the given text and title."""
    times = [turn.time for turn in turns if turn.time is not None]
    return Episode(
        id=episode_id,
        graph_id=graph_id,
        text=text,
        title=title,
        source_turn_ids=[turn.id for turn in turns],
        start_time=min(times) if times else None,
        end_time=max(times) if times else None,
    )


def raw_text(turns: Sequence[Turn]) -> str:
    """The turns as "Speaker: text" lines (the raw episodic memory)."""
    return "\n".join(f"{turn.speaker}: {turn.text}" for turn in turns)


def covered_turn_ids(store: GraphStore, graph_id: str) -> set[str]:
    """Turn ids already covered by an episode of the graph (what a resumed build may skip)."""
    if graph_id not in store.graph_ids():
        return set()
    return {turn_id for episode in store.episodes(graph_id) for turn_id in episode.source_turn_ids}


def stored_statements(store: GraphStore, graph_id: str) -> set[tuple[str, str]]:
    """(first source turn id, value) of every stored value, current or historical."""
    if graph_id not in store.graph_ids():
        return set()
    done: set[tuple[str, str]] = set()
    for entry in store.entries(graph_id):
        done.update((turn_id, entry.value) for turn_id in entry.source_turn_ids)
        for version in entry.history:
            done.update((turn_id, version.value) for turn_id in version.source_turn_ids)
    return done


def already_stored(candidate: EntryCandidate, done: set[tuple[str, str]]) -> bool:
    """True when a candidate's value is already stored with its first source turn (resume)."""
    return bool(candidate.source_turn_ids) and (candidate.source_turn_ids[0], candidate.value) in done


def normalise_anchor(text: str, entity: str) -> str | None:
    """An "<entity> + <aspect>" cue from an LLM's anchor text, or None when nothing usable is left.

    >>> normalise_anchor("Alice + new job", "Bob")
    'Alice + new job'
    >>> normalise_anchor("hiking", "Bob")
    'Bob + hiking'
    >>> normalise_anchor(" + ", "Bob") is None
    True
    """
    parts = [part.strip(" .\"'") for part in text.split("+")]
    parts = [part for part in parts if part]
    if not parts:
        return None
    if len(parts) == 1:
        return f"{entity} + {parts[0][:60]}" if entity else parts[0][:60]
    return f"{parts[0][:40]} + {' '.join(parts[1:])[:60]}"


def client_config(llm: LLMConfig, repetition_penalty: float | None) -> LLMConfig:
    """`llm` with the builder's `repetition_penalty` added to its extra request fields (when set)."""
    if repetition_penalty is None:
        return llm
    return llm.model_copy(update={"extra_body": {**llm.extra_body, "repetition_penalty": repetition_penalty}})


def load_llm_builder_config(model: type[ConfigT], request: BuilderRequest) -> ConfigT:
    """A builder config from the request's YAML and overrides, then its endpoint and model name.

    Raises:
        ConfigError: the YAML, an override, or the endpoint URL is invalid (the message names it).
    """
    config = load_config(model, request.config_path, request.overrides)
    updates = {"base_url": request.llm_base_url, "model": request.llm_model}
    updates = {key: value for key, value in updates.items() if value is not None}
    if updates:
        llm: LLMConfig = config.llm  # type: ignore[attr-defined]
        try:
            merged = LLMConfig.model_validate({**llm.model_dump(), "api_key": llm.api_key, **updates})
        except ValidationError as error:
            raise ConfigError(f"Invalid --llm-base-url/--llm-model {updates}: {error}") from error
        config.llm = merged  # type: ignore[attr-defined]
    return config


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


class PhaseProgress:
    """Rich progress bars, one per conversation and one per LLM phase (calls done); silent when disabled."""

    def __init__(self, enabled: bool) -> None:
        self._progress: Progress | None = None
        if enabled:
            self._progress = Progress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()
            )
        self._tasks: dict[str, TaskID] = {}

    def __enter__(self) -> PhaseProgress:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *_: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def advance(self, name: str, amount: int = 1, total: int | None = None) -> None:
        """Advance the bar `name` (created on first use; `total` None = open-ended)."""
        if self._progress is None:
            return
        if name not in self._tasks:
            self._tasks[name] = self._progress.add_task(name, total=total)
        self._progress.update(self._tasks[name], advance=amount, total=total)


def usage_delta(before: dict[str, dict[str, float]], after: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Per-phase counters `after - before` (phases with no change are left out)."""
    delta: dict[str, dict[str, float]] = {}
    for phase, counters in after.items():
        old = before.get(phase, {})
        diff = {name: value - old.get(name, 0) for name, value in counters.items()}
        if any(diff.values()):
            delta[phase] = diff
    return delta
