"""NEMORI retrieval as an eval baseline: top episodes, top semantic facts, and the raw messages of the best episodes.

NEMORI (Nan et al. 2025, "Nemori: self-organizing agent memory inspired by cognitive science")
answers a question from one retrieval over its two memories, with no walk: the episodes closest
to the question (by their cue + narrative vector), the closest semantic facts, and, for the very
best episodes, the original messages they were narrated from. This module does the same over any
memora-rl graph store, so it runs on a NEMORI-built graph (narrative episodes, semantic facts) and
on the extractive graph (raw-text segment episodes, extracted statements) alike.

The answer context is one text in three sections, each left out when empty:

    # Episodes            one `## <cue> [date]` heading and the episode's text per episode, best first
    # Facts               one `- [date] abstraction: value` line per fact, best first
    # Original messages   per top episode, its heading and its turns (`[date] speaker: text`), in order

This project's defaults (`NemoriRetrievalConfig`): the top 10 episodes, the top 20 facts, and
the raw messages of the top 2 episodes. An episode's raw messages are its own source turns
(both builders record the turns an episode covers); an episode without them falls back to the
source turns of its entries.

Evidence recall counts what the context gives the answerer: the source turns of the facts, the
source turns of the shown episodes' entries (an episode's text stands for its entries), and the
turns of the raw messages shown. Context tokens are the rendered text's tokens under the same
counter as the other context baselines.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import Field, ValidationError, model_validator

from memora_rl.config import StrictModel
from memora_rl.core.context import entry_line, episode_heading
from memora_rl.data.records import Conversation, Session, Turn
from memora_rl.errors import ConfigError, GraphError, describe_validation_error
from memora_rl.memory.records import Episode, EpisodeHit, MemoryEntry
from memora_rl.memory.store import GraphStore
from memora_rl.policy.context_baselines import RetrievedContext, TokenCounter, count_words, render_turn

logger = logging.getLogger(__name__)

EPISODES_HEADING = "# Episodes"
FACTS_HEADING = "# Facts"
MESSAGES_HEADING = "# Original messages"


class NemoriRetrievalConfig(StrictModel):
    """How much NEMORI retrieval puts in the answer context."""

    top_episodes: int = Field(default=10, ge=1)
    """Episodes retrieved by the cosine of their cue + text vector to the question (>= 1)."""
    top_facts: int = Field(default=20, ge=1)
    """Entries (semantic facts) retrieved by the store's fused entry search (>= 1)."""
    raw_episodes: int = Field(default=2, ge=0)
    """Of the retrieved episodes, how many best ones also show their original messages (0 to `top_episodes`)."""

    @model_validator(mode="after")
    def _raw_within_top(self) -> NemoriRetrievalConfig:
        """Raw messages can only be shown for retrieved episodes."""
        if self.raw_episodes > self.top_episodes:
            raise ValueError(
                f"raw_episodes={self.raw_episodes} exceeds top_episodes={self.top_episodes}; raw messages are shown "
                "only for retrieved episodes: lower raw_episodes or raise top_episodes."
            )
        return self


def nemori_config(values: Mapping[str, Any] | None = None) -> NemoriRetrievalConfig:
    """A validated config from `values` (defaults for missing keys).

    Raises:
        ConfigError: an unknown field or a bad value; the message names the field and the valid fields.
    """
    try:
        return NemoriRetrievalConfig.model_validate(dict(values or {}))
    except ValidationError as error:
        fields = ", ".join(NemoriRetrievalConfig.model_fields)
        raise ConfigError(
            f"Bad NEMORI retrieval config: {describe_validation_error(error)}. Fields: {fields}."
        ) from error


class NemoriContext(RetrievedContext):
    """A NEMORI answer context with what it was made of (ids best first)."""

    episode_ids: list[str] = Field(default_factory=list)
    """Retrieved episodes, best first."""
    raw_turn_ids: list[str] = Field(default_factory=list)
    """Turns shown as original messages, in conversation order per episode."""


class NemoriRetrieval:
    """Retrieve the NEMORI answer context of a question from a conversation's graph (graph id = conversation id).

    Args:
        store: The graph store holding one graph per conversation (the env's store).
        config: How many episodes, facts and raw-message episodes; None uses this project's defaults (10, 20, 2).
        count_tokens: Token counter of the context; default whitespace words, like the other context baselines.
        name: Policy name in eval records (a non-default config gets its own, e.g. `nemori-e5-f10-r1`).
    """

    def __init__(
        self,
        store: GraphStore,
        config: NemoriRetrievalConfig | None = None,
        count_tokens: TokenCounter = count_words,
        name: str = "nemori",
    ) -> None:
        self.name = name
        self.store = store
        self.config = config or NemoriRetrievalConfig()
        self.count_tokens = count_tokens
        self._entries_by_episode: dict[str, dict[str, list[MemoryEntry]]] = {}
        self._turns: dict[str, dict[str, tuple[int, Turn, Session]]] = {}

    def retrieve_context(self, conversation: Conversation, question: str) -> NemoriContext:
        """The rendered context for `question` over the graph of `conversation`.

        Raises:
            GraphError: the store holds no graph for the conversation.
        """
        graph_id = conversation.id
        if graph_id not in self.store.graph_ids():
            raise GraphError(
                f"NEMORI retrieval needs graph {graph_id!r}, which the store does not hold; build it first "
                "(memora-rl graph build, or evaluate through the env that builds it)."
            )
        config = self.config
        episode_hits = self.store.search(graph_id, question, k=config.top_episodes, kinds=("episode",))
        episode_ids = [hit.episode_id for hit in episode_hits if isinstance(hit, EpisodeHit)]
        episodes = self.store.get_episodes(graph_id, episode_ids)
        fact_hits = self.store.search(graph_id, question, k=config.top_facts)
        facts = self.store.get_entries(graph_id, [hit.entry_id for hit in fact_hits])
        by_episode = self._episode_entries(graph_id)
        turns = self._conversation_turns(conversation)
        raw = [(episode, self._raw_turn_ids(episode, by_episode, turns)) for episode in episodes[: config.raw_episodes]]
        text = render_nemori_context(episodes, facts, [(e, [turns[t] for t in ids]) for e, ids in raw])
        provenance = [turn_id for fact in facts for turn_id in fact.source_turn_ids]
        provenance += [t for e in episodes for entry in by_episode.get(e.id, []) for t in entry.source_turn_ids]
        raw_turn_ids = [turn_id for _, ids in raw for turn_id in ids]
        return NemoriContext(
            text=text,
            turn_ids=in_conversation_order([*provenance, *raw_turn_ids], turns),
            tokens=self.count_tokens(text) if text else 0,
            retrieved_ids=[fact.id for fact in facts],
            episode_ids=[episode.id for episode in episodes],
            raw_turn_ids=raw_turn_ids,
        )

    def _episode_entries(self, graph_id: str) -> dict[str, list[MemoryEntry]]:
        """The graph's entries grouped by each episode they belong to (read once per graph)."""
        if graph_id not in self._entries_by_episode:
            grouped: dict[str, list[MemoryEntry]] = {}
            for entry in self.store.entries(graph_id):
                for episode_id in entry.episode_ids:
                    grouped.setdefault(episode_id, []).append(entry)
            self._entries_by_episode[graph_id] = grouped
        return self._entries_by_episode[graph_id]

    def _conversation_turns(self, conversation: Conversation) -> dict[str, tuple[int, Turn, Session]]:
        """Turn id -> (position in the conversation, turn, its session), built once per conversation."""
        if conversation.id not in self._turns:
            turns = ((turn, session) for session in conversation.sessions for turn in session.turns)
            self._turns[conversation.id] = {turn.id: (i, turn, session) for i, (turn, session) in enumerate(turns)}
        return self._turns[conversation.id]

    @staticmethod
    def _raw_turn_ids(
        episode: Episode, by_episode: Mapping[str, list[MemoryEntry]], turns: Mapping[str, tuple[int, Turn, Session]]
    ) -> list[str]:
        """The episode's original messages, in conversation order: its source turns, else its entries' source turns.

        Turn ids missing from the conversation (a graph built from other data) are left out, with a warning.
        """
        ids = episode.source_turn_ids or [t for entry in by_episode.get(episode.id, []) for t in entry.source_turn_ids]
        missing = sorted(set(ids) - turns.keys())
        if missing:
            logger.warning("Episode %s names turns not in the conversation (%s); left out.", episode.id, missing[:5])
        return in_conversation_order([turn_id for turn_id in ids if turn_id in turns], turns)


def in_conversation_order(turn_ids: Iterable[str], turns: Mapping[str, tuple[int, Turn, Session]]) -> list[str]:
    """Distinct `turn_ids` in conversation order; ids the conversation lacks come last, sorted.

    >>> turns = {"D1:2": (1, None, None), "D1:1": (0, None, None)}
    >>> in_conversation_order(["D1:2", "X", "D1:1", "D1:2"], turns)
    ['D1:1', 'D1:2', 'X']
    """
    distinct = set(turn_ids)
    return sorted(distinct, key=lambda turn_id: (0, turns[turn_id][0], "") if turn_id in turns else (1, 0, turn_id))


def render_nemori_context(
    episodes: Sequence[Episode],
    facts: Sequence[MemoryEntry],
    raw: Sequence[tuple[Episode, Sequence[tuple[int, Turn, Session]]]],
) -> str:
    """The NEMORI answer context: episodes, then facts, then original messages (empty sections left out).

    >>> episode = Episode(id="ep1", graph_id="g", text="Alice told Bob she joined Nova.", title="Alice's new job")
    >>> fact = MemoryEntry(id="e1", graph_id="g", abstraction="Alice + employer", value="Alice works at Nova")
    >>> turn = Turn(id="D1:1", speaker="Alice", text="I joined Nova!", session_index=1)
    >>> print(render_nemori_context([episode], [fact], [(episode, [(0, turn, Session(index=1, turns=[turn]))])]))
    # Episodes
    ## Alice's new job
    Alice told Bob she joined Nova.
    <BLANKLINE>
    # Facts
    - Alice + employer: Alice works at Nova
    <BLANKLINE>
    # Original messages
    ## Alice's new job
    Alice: I joined Nova!
    """
    sections = []
    if episodes:
        blocks = [f"{episode_heading(episode)}\n{episode.text.strip()}" for episode in episodes]
        sections.append(f"{EPISODES_HEADING}\n" + "\n\n".join(blocks))
    if facts:
        sections.append(f"{FACTS_HEADING}\n" + "\n".join(entry_line(fact) for fact in facts))
    shown = [(episode, lines) for episode, lines in raw if lines]
    if shown:
        blocks = [
            "\n".join([episode_heading(episode), *(render_turn(turn, session) for _, turn, session in lines)])
            for episode, lines in shown
        ]
        sections.append(f"{MESSAGES_HEADING}\n" + "\n\n".join(blocks))
    return "\n\n".join(sections)
