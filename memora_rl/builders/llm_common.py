"""Plumbing shared by the LLM builders: rendering messages, asking for JSON safely, resuming, reports.

`BatchedLLMBuilder` is the resumable batch-by-batch `build` both LLM builders run.

`StructuredAsker` wraps `LLMClient.chat_json` so that a builder never stops on a bad answer:
it returns None after the client's repair retry failed, and remembers that failure in the
client's response cache (under a key of its own) so a re-run does not ask again. Successful
answers are cached by the client itself, so a killed build re-run costs no LLM call for the
work it already did.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, Field, ValidationError
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from memora_rl.builders.base import (
    BuildReport,
    ProgressCallback,
    covered_turn_ids,
    new_report,
    stored_statements,
    upsert_counted,
)
from memora_rl.builders.registry import BuilderRequest
from memora_rl.config import StrictModel, load_config
from memora_rl.data.records import Conversation, Turn
from memora_rl.errors import ConfigError, StructuredOutputError
from memora_rl.llm.client import LLMClient, LLMConfig, Message
from memora_rl.llm.response_cache import CachedAnswer, request_key
from memora_rl.memory.records import EntryCandidate, Episode
from memora_rl.memory.store import Decider, GraphStore

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


class LLMBuilderConfig(StrictModel):
    """The settings every LLM builder config starts with (subclasses add their own)."""

    llm: LLMConfig = Field(default_factory=LLMConfig)
    """The OpenAI-compatible endpoint and sampling settings (temperature 0 keeps builds reproducible)."""
    repetition_penalty: float | None = Field(default=1.15, gt=0.0)
    """vLLM sampling parameter added to every request: small models otherwise loop on whitespace inside
    guided JSON until max_tokens. None sends nothing (for endpoints that reject the field, e.g. OpenAI)."""


@dataclass
class BatchSink:
    """Where one batch is written and counted: the graph and store, what is already stored, report and bars."""

    graph_id: str
    store: GraphStore
    done: set[tuple[str, str]]
    """(source turn id, value) of the values already stored: candidates a resumed build skips."""
    report: LLMBuildReport
    bars: PhaseProgress

    def upsert(self, candidate: EntryCandidate, decider: Decider, phase: str) -> None:
        """Create-or-update `candidate` (unless already stored), count it and advance the bar `phase`."""
        if already_stored(candidate, self.done):
            return
        upsert_counted(self.store, self.graph_id, candidate, decider, self.report)
        self.bars.advance(phase)

    def add_episodes(self, episodes: Sequence[Episode]) -> None:
        """Write the batch's episodes (last: a batch is done exactly when its turns are covered)."""
        for episode in episodes:
            self.store.add_episode(episode)
            self.report.episodes_added += 1


class BatchedLLMBuilder:
    """Base of the LLM builders: a resumable `build` that writes a conversation batch by batch.

    A batch is done exactly when its turns are covered by stored episodes, so a re-run skips
    it; subclasses cut the conversation (`_batches`) and write one batch (`_write_batch`).
    """

    client: LLMClient
    asker: StructuredAsker
    config: LLMBuilderConfig
    """The builder's config; it must have a `show_progress` flag."""

    def __init__(self, config: LLMBuilderConfig, client: LLMClient | None) -> None:
        self.config = config
        self.client = client or LLMClient(client_config(config.llm, config.repetition_penalty))
        self.asker = StructuredAsker(self.client)

    def build(
        self,
        conversation: Conversation,
        store: GraphStore,
        graph_id: str | None = None,
        progress: ProgressCallback | None = None,
    ) -> LLMBuildReport:
        """Build (or resume, or extend with new sessions) the graph of `conversation`."""
        started = time.perf_counter()
        graph_id = graph_id or conversation.id
        usage_before, fallbacks_before = self.client.usage.as_dict(), self.asker.fallbacks
        all_batches = self._batches(conversation)
        covered = covered_turn_ids(store, graph_id)
        report = new_report(LLMBuildReport, conversation, graph_id, sum(len(batch) for batch in all_batches))
        if all(turn.id in covered for batch in all_batches for turn in batch):
            logger.info("graph %s already covers conversation %s; skipped", graph_id, conversation.id)
            report.skipped = True
        else:
            done = stored_statements(store, graph_id)
            with PhaseProgress(self.config.show_progress) as bars:  # type: ignore[attr-defined]
                done_turns = 0
                for batch in all_batches:
                    if not all(turn.id in covered for turn in batch):
                        self._write_batch(batch, BatchSink(graph_id, store, done, report, bars))
                    done_turns += len(batch)
                    bars.advance(f"conversation {conversation.id}", len(batch), total=report.turns)
                    if progress is not None:
                        progress(done_turns, report.turns)
        self._count_llm_usage(report, usage_before, fallbacks_before)
        report.seconds = time.perf_counter() - started
        return report

    def _count_llm_usage(
        self, report: LLMBuildReport, usage_before: dict[str, dict[str, float]], fallbacks_before: int
    ) -> None:
        """Fill the report's LLM counters with what the client and asker did since the given counts."""
        report.usage = usage_delta(usage_before, self.client.usage.as_dict())
        report.llm_calls = int(sum(phase["calls"] for phase in report.usage.values()))
        report.http_requests = int(sum(phase["http_requests"] for phase in report.usage.values()))
        report.fallbacks = self.asker.fallbacks - fallbacks_before

    def _batches(self, conversation: Conversation) -> list[list[Turn]]:
        """The conversation cut into the batches written one at a time, in order."""
        raise NotImplementedError

    def _write_batch(self, batch: list[Turn], sink: BatchSink) -> None:
        """Write one batch through `sink`: its entries (create-or-update), then its episodes."""
        raise NotImplementedError
