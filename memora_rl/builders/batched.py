"""`BatchedLLMBuilder`: the resumable batch-by-batch `build` both LLM builders run, and its report.

A turn is done exactly when it is covered by a stored episode, so a killed build re-run
skips the batches it finished, and within a batch skips the candidates whose upsert receipt
is stored (written with the upsert, so a candidate merged into another value counts too).
Batches are static by default; a builder may cut them while writing (`_write_batches`).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pydantic import Field
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from memora_rl.builders.base import (
    BuildReport,
    ProgressCallback,
    covered_turn_ids,
    new_report,
    stored_statements,
    upsert_counted,
)
from memora_rl.builders.llm_config import LLMBuilderConfig, client_config
from memora_rl.builders.structured import StructuredAsker
from memora_rl.data.records import Conversation, Turn
from memora_rl.llm.client import LLMClient
from memora_rl.memory.records import EntryCandidate, Episode
from memora_rl.memory.store import Decider, GraphStore, SimilarBy

logger = logging.getLogger(__name__)


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


def already_stored(candidate: EntryCandidate, done: set[tuple[str, str]]) -> bool:
    """True when a candidate's value is already stored with its first source turn (resume of an older store)."""
    return bool(candidate.source_turn_ids) and (candidate.source_turn_ids[0], candidate.value) in done


def candidate_receipt(candidate: EntryCandidate) -> str:
    """The receipt a candidate's upsert leaves: its source turns, abstraction and value, hashed."""
    key = "\x1f".join([*candidate.source_turn_ids, candidate.abstraction, candidate.value])
    return hashlib.sha256(key.encode()).hexdigest()[:24]


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


@dataclass
class BatchSink:
    """Where one batch is written and counted: the graph and store, what is already stored, report and bars."""

    graph_id: str
    store: GraphStore
    done: set[tuple[str, str]]
    """(source turn id, value) of the values already stored: candidates a resumed build skips."""
    report: LLMBuildReport
    bars: PhaseProgress
    receipts: set[str]
    """Receipts of the candidates already upserted (`candidate_receipt`): a resumed build skips them."""

    def upsert(
        self, candidate: EntryCandidate, decider: Decider, phase: str, similar_by: SimilarBy = "abstraction"
    ) -> None:
        """Create-or-update `candidate` (unless already upserted), count it and advance the bar `phase`."""
        receipt = candidate_receipt(candidate)
        if receipt in self.receipts or already_stored(candidate, self.done):
            return
        upsert_counted(self.store, self.graph_id, candidate, decider, self.report, similar_by, receipt)
        self.receipts.add(receipt)
        self.bars.advance(phase)

    def add_episodes(self, episodes: Sequence[Episode]) -> None:
        """Write the batch's episodes (last: a batch is done exactly when its turns are covered)."""
        for episode in episodes:
            self.store.add_episode(episode)
            self.report.episodes_added += 1


class BatchedLLMBuilder:
    """Base of the LLM builders: a resumable `build` that writes a conversation batch by batch.

    A batch is done exactly when its turns are covered by stored episodes, so a re-run skips
    it; subclasses cut the conversation (`_batches`) and write one batch (`_write_batch`), or
    override `_write_batches` to cut batches while writing (Memora carries open segments).
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
            receipts = store.receipts(graph_id)
            with PhaseProgress(self.config.show_progress) as bars:  # type: ignore[attr-defined]
                done_turns = 0

                def advance(turns: int) -> None:
                    """Count `turns` more turns as done (written or skipped) on the bar and the callback."""
                    nonlocal done_turns
                    done_turns += turns
                    bars.advance(f"conversation {conversation.id}", turns, total=report.turns)
                    if progress is not None:
                        progress(done_turns, report.turns)

                sink = BatchSink(graph_id, store, done, report, bars, receipts)
                self._write_batches(all_batches, covered, sink, advance)
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

    def _write_batches(
        self, batches: list[list[Turn]], covered: set[str], sink: BatchSink, advance: Callable[[int], None]
    ) -> None:
        """Write, in order, every batch not yet covered by stored episodes; `advance(turns)` after each."""
        for batch in batches:
            if not all(turn.id in covered for turn in batch):
                self._write_batch(batch, sink)
            advance(len(batch))

    def _write_batch(self, batch: list[Turn], sink: BatchSink) -> None:
        """Write one batch through `sink`: its entries (create-or-update), then its episodes."""
        raise NotImplementedError
