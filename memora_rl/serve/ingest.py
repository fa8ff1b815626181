"""Ingest: one batch of turns -> episodes and create-or-update entries, written in one transaction.

A batch becomes one new session of the graph's conversation (index = the highest stored
session + 1), so episode ids (`ep-s<session>-<n>`) and default turn ids (`D<session>:<n>`)
never collide with earlier batches. The extractive builder plans the batch without the store
(all embedding happens before the write lock is taken); other builders (Memora, NEMORI) run
their `build` inside the batch. Either way a failure rolls the whole batch back. Inside the
batch (once the store's write lock is held) the session number is read again: if another
writer added a session since, nothing is written. On SQLite that writer is outside
serve-memory's ingest lock (a `graph build` into the same file) and the batch is refused
(`IngestConflictError`, HTTP 409); on PostgreSQL it is usually another replica, and the batch
is planned again with the write lock held, so it lands once, as the next session.
"""

from __future__ import annotations

import logging
import re
import time
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Protocol

from memora_rl.builders.base import Builder
from memora_rl.data.records import Conversation, Session, Turn
from memora_rl.errors import ConfigError, GraphError
from memora_rl.memory.records import MemoryEntry
from memora_rl.memory.store import Decider
from memora_rl.serve.graphs import StoreHandle
from memora_rl.serve.limits import Deadline
from memora_rl.serve.schemas import IngestRequest, IngestResponse
from memora_rl.turn_ids import turn_key

logger = logging.getLogger(__name__)

_SESSION_OF_EPISODE = re.compile(r"^ep-s(\d+)-")


class IngestConflictError(GraphError):
    """Another writer of the store added a session to the graph while this batch was prepared (HTTP 409 on SQLite)."""


class PlanningBuilder(Protocol):
    """A builder that can plan a conversation without a store (the extractive one)."""

    decider: Decider

    def plan(self, conversation: Conversation, graph_id: str) -> list[Any]:
        """Segments with `.episode` and `.candidates`, computed without touching a store."""
        ...


def next_session_index(handle: StoreHandle, graph_id: str) -> int:
    """One above the highest session number in the graph's episode ids and turn ids (1 for a new graph)."""
    if graph_id not in handle.writer.graph_ids():
        return 1
    numbers = [0]
    for episode in handle.writer.episodes(graph_id):
        found = _SESSION_OF_EPISODE.match(episode.id)
        numbers.append(int(found.group(1)) if found else 0)
        numbers += [key[0] for t in episode.source_turn_ids if (key := turn_key(t))]
    return max(numbers) + 1


def _check_session(handle: StoreHandle, graph_id: str, session_index: int) -> None:
    """Inside the batch: refuse it when another process wrote session `session_index` meanwhile."""
    now = next_session_index(handle, graph_id)
    if now != session_index:
        raise IngestConflictError(
            f"graph {graph_id!r}: another writer of {handle.name} added session {now - 1} while this batch was "
            f"prepared as session {session_index}; nothing was written, send the batch again."
        )


def batch_conversation(request: IngestRequest, session_index: int) -> Conversation:
    """The batch as a one-session conversation whose id is the graph id.

    Raises:
        ConfigError: two turns of the batch share an id.
    """
    turns = [
        Turn(id=turn.id or f"D{session_index}:{number}", speaker=turn.speaker, text=turn.text,
             session_index=session_index, time=turn.time)
        for number, turn in enumerate(request.turns, start=1)
    ]  # fmt: skip
    ids = [turn.id for turn in turns]
    duplicates = sorted({turn_id for turn_id in ids if ids.count(turn_id) > 1})
    if duplicates:
        raise ConfigError(f"turns: ids {duplicates} appear more than once in the batch; give each turn its own id.")
    speakers = list(dict.fromkeys(turn.speaker for turn in turns))
    times = [turn.time for turn in turns if turn.time is not None]
    session = Session(index=session_index, time=min(times) if times else None, turns=turns)
    return Conversation(id=request.graph, speakers=speakers, sessions=[session])


def _classify(before: MemoryEntry | None, after: MemoryEntry) -> str:
    """Say whether an upsert created, merged or replaced, from an entry before and after one upsert."""
    if before is None:
        return "created"
    return "merged" if before.value == after.value else "replaced"


def _write_planned(
    handle: StoreHandle,
    builder: PlanningBuilder,
    conversation: Conversation,
    graph_id: str,
    deadline: Deadline,
    batch: AbstractContextManager[object],
) -> dict:
    """Plan (embed) the batch, then, unless past the deadline, write every episode and candidate in `batch`."""
    plan = builder.plan(conversation, graph_id)
    outcome: dict[str, list[str]] = {"episodes": [], "created": [], "merged": [], "replaced": []}
    writer = handle.writer
    deadline.check("planning the batch")
    with batch:
        deadline.check("waiting for the store's write lock")
        _check_session(handle, graph_id, conversation.sessions[0].index)
        for segment in plan:
            writer.add_episode(segment.episode)
            outcome["episodes"].append(segment.episode.id)
            for candidate in segment.candidates:
                result = writer.upsert_entry(graph_id, candidate, builder.decider)
                kind = "created" if result.created else _merge_kind(result.entry)
                if result.entry.id not in outcome[kind]:
                    outcome[kind].append(result.entry.id)
    return outcome


def _merge_kind(entry: MemoryEntry) -> str:
    """Say whether a merge kept the value (merged) or changed it (replaced), from its last history version."""
    return "replaced" if entry.history and entry.history[-1].value != entry.value else "merged"


def _write_built(
    handle: StoreHandle,
    builder: Builder,
    conversation: Conversation,
    graph_id: str,
    deadline: Deadline,
    batch: AbstractContextManager[object],
) -> dict:
    """Unless past the deadline, run a builder's own `build` inside `batch` and diff the graph to say what changed.

    The build (LLM calls) runs inside the batch, so the deadline is checked only before it starts.
    """
    writer = handle.writer
    known = graph_id in writer.graph_ids()
    before = {entry.id: entry for entry in writer.entries(graph_id)} if known else {}
    episodes_before = {episode.id for episode in writer.episodes(graph_id)} if known else set()
    deadline.check("reading the graph before the build")
    with batch:
        deadline.check("waiting for the store's write lock")
        _check_session(handle, graph_id, conversation.sessions[0].index)
        builder.build(conversation, writer, graph_id)
        after = writer.entries(graph_id)
        episodes = [episode.id for episode in writer.episodes(graph_id) if episode.id not in episodes_before]
    new_turns = conversation.turn_ids()
    touched = [entry for entry in after if entry.id not in before or new_turns & set(entry.source_turn_ids)]
    outcome: dict[str, list[str]] = {"episodes": episodes, "created": [], "merged": [], "replaced": []}
    for entry in touched:
        outcome[_classify(before.get(entry.id), entry)].append(entry.id)
    return outcome


def stored_turn_ids(handle: StoreHandle, graph_id: str) -> set[str]:
    """Every turn id the graph's episodes were built from (empty for a new graph)."""
    if graph_id not in handle.writer.graph_ids():
        return set()
    return {turn_id for episode in handle.writer.episodes(graph_id) for turn_id in episode.source_turn_ids}


def ingest_batch(
    handle: StoreHandle, builder: Builder, request: IngestRequest, deadline: Deadline | None = None
) -> IngestResponse:
    """Add `request.turns` to graph `request.graph` in `handle`'s store as one transaction.

    Ingests into one store are serialised, across processes too (SQLite: a file lock; PostgreSQL: the database's
    write lock around each batch); a failure leaves the store exactly as it was before the batch. A retried
    `idempotency_key` gets its first answer and writes nothing (`memora_rl.serve.idempotency`), on any replica;
    turns whose client id the graph already holds are skipped. `deadline` bounds the wait for the store's
    ingest lock and for the request's key, and is checked again once the write lock is held, before any write.

    Raises:
        ConfigError: two turns of the batch share an id, or its idempotency key was first sent with another batch.
        IngestConflictError: on SQLite, a writer outside serve-memory added a session while the batch was planned.
        RequestTimeoutError: the deadline passed before the batch was written (nothing was written).
    """
    started = time.perf_counter()
    deadline = deadline or Deadline.start(float("inf"))
    with (
        deadline.waiting(handle.ingest_lock(deadline.left_s()), "waiting for another ingest into the same store"),
        deadline.waiting(
            handle.keys.claim(request, deadline.left_s()), "waiting for another ingest of the same idempotency_key"
        ) as claim,
    ):
        if claim.replayed is not None:
            return claim.replayed
        response = _ingest_new_turns(handle, builder, request, started, deadline)
        claim.record(response)
    return response


def _ingest_new_turns(
    handle: StoreHandle, builder: Builder, request: IngestRequest, started: float, deadline: Deadline
) -> IngestResponse:
    """Write the batch's new turns as the graph's next session (the ingest lock held).

    The batch is planned (embedded) before the store's write lock is taken. On PostgreSQL another
    replica may add a session meanwhile (it takes no lock of this process): the batch is then
    refused inside its transaction, and planned again with the write lock held, so that nothing
    can come between; it lands once, as the next session. On SQLite, serve-memory processes take
    turns on the file lock, so a conflict means an outside writer (`graph build`): 409.
    """
    try:
        return _attempt(handle, builder, request, started, deadline, in_batch=False)
    except IngestConflictError:
        if not handle.shared_writers:
            raise
        logger.info("graph %r: another replica added a session while this batch was planned; planning it again "
                    "with the store's write lock held", request.graph)  # fmt: skip
    with handle.writer.batch():
        deadline.check("waiting for the store's write lock")
        return _attempt(handle, builder, request, started, deadline, in_batch=True)


def _attempt(
    handle: StoreHandle, builder: Builder, request: IngestRequest, started: float, deadline: Deadline, in_batch: bool
) -> IngestResponse:
    """Skip the turns the graph holds, plan the rest as its next session and write it (`in_batch`: inside one open)."""
    known = stored_turn_ids(handle, request.graph)
    skipped = list(dict.fromkeys(t.id for t in request.turns if t.id is not None and t.id in known))
    request = request.model_copy(update={"turns": [turn for turn in request.turns if turn.id not in skipped]})
    if not request.turns:
        return IngestResponse(graph=request.graph, session_index=None, turn_ids=[], skipped_turn_ids=skipped,
                              episodes=[], created=[], merged=[], replaced=[], seconds=0.0)  # fmt: skip
    session_index = next_session_index(handle, request.graph)
    conversation = batch_conversation(request, session_index)
    batch = nullcontext() if in_batch else handle.writer.batch()
    if hasattr(builder, "plan") and hasattr(builder, "decider"):
        outcome = _write_planned(handle, builder, conversation, request.graph, deadline, batch)  # type: ignore[arg-type]
    else:
        outcome = _write_built(handle, builder, conversation, request.graph, deadline, batch)
    seconds = time.perf_counter() - started
    logger.info(
        "ingested %d turns into %s: %d created, %d merged, %d replaced in %.2f s",
        len(request.turns), request.graph, len(outcome["created"]), len(outcome["merged"]),
        len(outcome["replaced"]), seconds,
    )  # fmt: skip
    return IngestResponse(
        graph=request.graph,
        session_index=session_index,
        turn_ids=[turn.id for turn in conversation.turns()],
        skipped_turn_ids=skipped,
        episodes=outcome["episodes"],
        created=outcome["created"],
        merged=outcome["merged"],
        replaced=outcome["replaced"],
        seconds=seconds,
    )
