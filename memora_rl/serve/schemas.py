"""Request and response records of the HTTP API (also the MCP and OpenAI tool argument shapes)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from memora_rl.core.state import ContextMode as ContextMode  # re-exported: one definition, in core
from memora_rl.core.walk import FrontierNode as FrontierNode  # re-exported: the walk's shape lives in core
from memora_rl.core.walk import WalkStep
from memora_rl.memory.records import Episode, MemoryEntry

GRAPH_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
"""Graph ids: letters, digits and `_ . : -`, up to 128 characters (safe in URLs and file names)."""


def not_blank(text: str) -> str:
    """`text` unchanged, unless it is only whitespace (a 422 naming the field, as an empty string is).

    >>> not_blank(" hi ")
    ' hi '
    """
    if not text.strip():
        raise ValueError("is blank (only whitespace)")
    return text


NonBlank = Annotated[str, AfterValidator(not_blank)]
"""A string with at least one non-whitespace character."""


class _Request(BaseModel):
    """Requests reject unknown fields, so a misspelt option is an error, not silently ignored."""

    model_config = ConfigDict(extra="forbid")


class RetrieveRequest(_Request):
    """Retrieve memories for a question by walking one graph with the served policy."""

    graph: str = Field(min_length=1, description="Graph id, as listed by GET /v1/graphs.")
    question: NonBlank = Field(
        min_length=1, description="The question to find memories for (at most the server's max_question_chars, 4000 "
        "characters by default; longer is a 422 naming the limit)."
    )  # fmt: skip
    budget: float | None = Field(default=None, gt=0.0, description="Walk budget (default: the server's).")
    context_mode: ContextMode = Field(default="factual", description="factual | episodic | episodic+factual.")
    top_k: int | None = Field(default=None, ge=1, le=50, description="Entries of the first search (default 5).")


class RetrieveResponse(BaseModel):
    """The working set after the walk, the walk itself, and the context text for an answerer."""

    graph: str
    question: str
    policy: str
    entries: list[MemoryEntry]
    episodes: list[Episode]
    walk: list[WalkStep]
    stop_reason: str | None
    budget: float
    budget_spent: float
    reward_components: dict[str, float]
    """The walk's cost and format terms (`memora_rl.serve.live_judge`: a live question has no gold evidence)."""
    context: str
    context_tokens: int
    """Tokens of `context` (4 characters per token), 0 when no entry was retrieved (`context` is then only the
    no-memories notice); `reward_components["context_tokens"]` is the same count, and `context_cost` follows it."""
    latency_ms: float
    """Server-side time of the whole walk."""
    search_ms: float
    """Part of it spent in search, frontier and entry reads."""


class IngestTurn(_Request):
    """One message to remember."""

    speaker: NonBlank = Field(min_length=1, max_length=200)
    text: NonBlank = Field(min_length=1, max_length=20_000)
    time: datetime | None = None
    """When it was said (ISO 8601). Stored as naive UTC, as the store reads every time: a time with an offset
    (`2026-05-09T16:00:00+02:00`, `...Z`) is converted to UTC and its offset dropped; a time without one is taken
    as UTC already. So one batch may mix both, and its times sort and compare with the graph's earlier ones."""
    id: str | None = Field(default=None, min_length=1, max_length=128, description="Turn id (default D<session>:<n>).")

    @field_validator("time")
    @classmethod
    def _time_in_utc(cls, value: datetime | None) -> datetime | None:
        """A time with an offset converted to naive UTC; a naive time kept (it is read as UTC)."""
        if value is None or value.tzinfo is None:
            return value
        return value.astimezone(UTC).replace(tzinfo=None)


class IngestRequest(_Request):
    """Turns to add to a graph (created when new) as one batch."""

    graph: str = Field(pattern=GRAPH_ID_PATTERN, description="Graph id (new ids create a graph).")
    turns: list[IngestTurn] = Field(min_length=1, description="Messages in order, at least one.")
    idempotency_key: str | None = Field(
        default=None, min_length=1, max_length=200,
        description="Any string naming this batch (e.g. a UUID): sent again with the same batch, nothing new is "
        "written and the first answer is returned (replayed: true); a different batch with it is a 422.",
    )  # fmt: skip


class IngestResponse(BaseModel):
    """What one ingest batch wrote (all in one transaction)."""

    graph: str
    session_index: int | None
    """Session number the batch was stored as (turn ids default to `D<session>:<n>`); None when every turn
    was skipped (nothing was written)."""
    turn_ids: list[str]
    """Ids of the turns stored by this batch."""
    skipped_turn_ids: list[str] = []
    """Client turn ids already in the graph: those turns were not stored again (a repeated id is one message)."""
    replayed: bool = False
    """True when this is the first answer to the request's `idempotency_key`, returned again: nothing was written."""
    episodes: list[str]
    created: list[str]
    """New entry ids."""
    merged: list[str]
    """Entries a statement merged into, value unchanged."""
    replaced: list[str]
    """Entries whose value a statement replaced (the old value is kept in their history)."""
    seconds: float


class GraphSummary(BaseModel):
    """A served graph and its size."""

    id: str
    store: str
    """The name of the store holding the graph: its file name, or `postgresql:<database>[.<schema>]` (no folder,
    host, user or password: answers do not reveal where the store lives)."""
    entries: int
    anchors: int
    episodes: int


class LinkedEntry(BaseModel):
    """An entry sharing a cue anchor with another."""

    id: str
    abstraction: str
    anchor: str


class EntryDetail(BaseModel):
    """An entry with its anchors, the entries they link it to, and its episodes."""

    entry: MemoryEntry
    anchors: list[str]
    linked: list[LinkedEntry]
    episodes: list[Episode]


class SearchResult(BaseModel):
    """One fused search hit with its entry."""

    entry_id: str
    score: float
    abstraction: str
    value: str
    channels: dict[str, float]
    """Cosine of the query to the abstraction, the value and the best anchor (what fusion ranked)."""
