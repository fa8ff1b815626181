"""Records of the harmonic memory graph: episodes, entries (abstraction + value), cue anchors."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

EntryKind = Literal["factual", "episodic", "semantic"]
SearchKind = Literal["entry", "episode"]
"""What a search returns: entries (fused over their channels) and/or episodes (by their cue + text vector)."""
FrontierLink = Literal["anchor", "episode", "similar", "turn", "search"]
"""How a frontier entry is linked to the working set: a shared cue anchor, a shared episode, an
abstraction similar (cosine) to a working-set entry's, the same speaker's previous or next turn, or none
but the query (`search`: its best entries not yet held, wherever they lie: the search's next hits)."""


SEARCH_LINK_TEXT = "query"
"""What a search hit's frontier line names as its link (`via search "query"`): the query, not an entry."""

FrontierScore = Literal["best", "value"]
"""How frontier entries are ranked by the query: the better of the abstraction's and the value's cosine,
or the value's alone (where abstractions are terse keyphrases that match many questions)."""

FrontierOrder = Literal["score", "interleave"]
"""How the frontier's first items are chosen: best score first whatever the link, or the best of each link
kind in turn (so entries of one kind that match the question's words cannot push out every other kind)."""


class Episode(BaseModel):
    """A conversation segment (raw text or a narrative) that entries are grouped under."""

    id: str
    graph_id: str
    text: str
    title: str = ""
    """A short cue or title (NEMORI's episode cue)."""
    source_turn_ids: list[str] = Field(default_factory=list)
    start_time: datetime | None = None
    end_time: datetime | None = None

    @property
    def embedding_text(self) -> str:
        """What the episode is embedded by: its cue (title) and its text, so a search sees both (NEMORI)."""
        return "\n".join(part for part in (self.title.strip(), self.text.strip()) if part) or self.id


class ValueVersion(BaseModel):
    """An earlier value of an entry, kept when a newer value replaced or merged it."""

    value: str
    abstraction: str
    source_turn_ids: list[str] = Field(default_factory=list)
    recorded_at: datetime | None = None


class MemoryEntry(BaseModel):
    """A memory: a stable primary abstraction paired with a concrete value."""

    id: str
    graph_id: str
    abstraction: str
    """What the memory is about, e.g. "Alice's employer"."""
    value: str
    """The concrete content, e.g. "Alice works at Nova as a backend engineer since 9 May 2026"."""
    kind: EntryKind = "factual"
    episode_ids: list[str] = Field(default_factory=list)
    source_turn_ids: list[str] = Field(default_factory=list)
    """Provenance: the conversation turns this memory came from (LoCoMo style `D3:7`)."""
    speaker: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    history: list[ValueVersion] = Field(default_factory=list)
    """Older values, oldest first; never silently overwritten."""
    anchor_ids: list[str] = Field(default_factory=list)


class CueAnchor(BaseModel):
    """A cue such as "Alice + job" that links entries many-to-many."""

    id: str
    graph_id: str
    text: str
    entry_ids: list[str] = Field(default_factory=list)


class EntryCandidate(BaseModel):
    """A proposed memory before create-or-update decides whether it is new or merges."""

    abstraction: str
    value: str
    kind: EntryKind = "factual"
    episode_ids: list[str] = Field(default_factory=list)
    source_turn_ids: list[str] = Field(default_factory=list)
    speaker: str | None = None
    time: datetime | None = None
    anchors: list[str] = Field(default_factory=list)
    """Cue anchor texts ("<entity> + <aspect>") to link, existence-checked by the store."""


class SearchHit(BaseModel):
    """One search result: an entry and its fused score."""

    entry_id: str
    score: float


class EpisodeHit(BaseModel):
    """One episode search result: an episode and the cosine of its embedding (cue + text) to the query."""

    episode_id: str
    score: float


class FrontierItem(BaseModel):
    """An entry reachable from the working set, with the link that brought it."""

    entry_id: str
    anchor_id: str
    """Id of what linked it: the shared anchor (`via` anchor), the shared episode (episode), or the
    working-set entry whose abstraction is similar (similar) or whose speaker's neighbouring turn it holds (turn);
    `SEARCH_LINK_TEXT` for a search hit."""
    anchor_text: str
    """Text of that link: the anchor's text, the episode's cue (or the start of its text), that
    working-set entry's abstraction (similar, turn), or `SEARCH_LINK_TEXT` (search)."""
    score: float
    """Cosine similarity of the entry to the current query."""
    via: FrontierLink = "anchor"
    """The kind of link that brought the entry; an entry reached several ways shows the first of anchor,
    episode, similar, turn, search."""
