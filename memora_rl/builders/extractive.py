"""The LLM-free extractive builder: conversation -> episodes, statement entries and keyphrase anchors.

For each conversation (one graph, id = conversation id by default):

1. **Episodes** are segments of a session (`statements.window_segments` or
   `statements.change_point_segments`); each covers its turns' ids and times.
2. **Entries** are the salient statements (`statements.turn_statements`): value = the
   statement verbatim, abstraction = "<entity> + <top keyphrase>" (the entity is the speaker,
   or the third party a statement opens with: "Hugo + adelaide"), kind episodic or
   factual (`statements.statement_kind`), source turn ids = the statement's turn.
3. **Anchors** are 1..`max_anchors` "<entity> + <aspect>" cues. Aspects are keyphrases
   chosen KeyBERT style: candidate n-grams of the statement (`keyphrases.candidate_phrases`)
   ranked by cosine to the statement embedding with MMR diversity; the first is always
   kept, later ones only when their cosine reaches `anchor_min_score`. The entity is the
   speaker; when the statement names a third party (a capitalised name that is neither
   speaker nor a prefix of one, e.g. a nickname), one anchor pairs that name with the best
   aspect that does not already contain it, and one pairs the speaker with the name, which
   links every statement that names them. A name the conversation writes mid-sentence
   counts at a sentence's start too (`cues.conversation_names`).
4. Entries go through `store.upsert_entry` with `OverlapDecider`: merge into a similar
   entry only when it has the same speaker and a near-identical value (token Jaccard
   >= `merge_min_overlap`), else create.

Embeddings are batched: the statements, then every distinct candidate phrase of the
conversation, then (to warm the embedder cache the store reads) abstractions, anchors
and episode texts, each in one `encode` call. The build is resumable: statements
already stored (same turn id and value) and episodes already present are skipped, so a
fully built conversation writes nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field, model_validator

from memora_rl.builders.base import (
    BuildReport,
    LazyEmbedder,
    ProgressCallback,
    episode_from_turns,
    new_report,
    raw_text,
    stored_statements,
    upsert_counted,
)
from memora_rl.builders.cues import (
    anchor_texts,
    conversation_names,
    speaker_name_tokens,
    subject_and_topic,
    third_party_names,
)
from memora_rl.builders.keyphrases import candidate_phrases, content_words, mmr_select, words
from memora_rl.builders.statements import (
    Statement,
    change_point_segments,
    statement_kind,
    turn_statements,
    window_segments,
)
from memora_rl.config import StrictModel
from memora_rl.data.records import Conversation, Turn
from memora_rl.embedding import DEFAULT_EMBEDDER, Embedder
from memora_rl.memory.deciders import always_create, same_speaker_merge
from memora_rl.memory.records import EntryCandidate, Episode, MemoryEntry
from memora_rl.memory.store import Decider, GraphStore, MergeDecision

logger = logging.getLogger(__name__)


class ExtractiveConfig(StrictModel):
    """Every default of the extractive builder (YAML: configs/builders/extractive.yaml)."""

    segmentation: Literal["window", "change_point"] = "window"
    """How sessions are cut into episodes: "window" (fixed blocks) or "change_point" (embedding drift)."""
    window_turns: int = Field(default=10, ge=1)
    """Turns per episode for "window" segmentation (the last block of a session may be shorter)."""
    change_threshold: float = Field(default=0.25, ge=-1.0, le=1.0)
    """"change_point": cosine to the running segment mean below which a turn opens a new episode."""
    min_episode_turns: int = Field(default=4, ge=1)
    """"change_point": an episode is never cut before it has this many turns."""
    max_episode_turns: int = Field(default=20, ge=1)
    """"change_point": an episode is always cut at this many turns."""
    max_statement_words: int = Field(default=50, ge=5)
    """Turns longer than this (whitespace words) are split at sentence ends into statements of at most this."""
    min_content_words: int = Field(default=2, ge=1)
    """A turn or chunk needs this many content words (not stopwords, fillers or speaker names) to be kept."""
    max_ngram: int = Field(default=2, ge=1, le=5)
    """Longest candidate keyphrase, in words."""
    max_anchors: int = Field(default=3, ge=1, le=3)
    """Cue anchors per entry (1-3)."""
    anchor_min_score: float = Field(default=0.3, ge=-1.0, le=1.0)
    """Cosine to the statement a second or third keyphrase needs to become an anchor (the first always does)."""
    mmr_diversity: float = Field(default=0.5, ge=0.0, le=1.0)
    """MMR trade-off: 0 ranks keyphrases by relevance only, 1 by novelty only."""
    title_keyphrases: int = Field(default=3, ge=1)
    """Keyphrases in an episode title (chosen by MMR against the episode's mean statement vector)."""
    decider: Literal["overlap", "same_speaker_merge", "always_create"] = "overlap"
    """Create-or-update rule: "overlap" (`OverlapDecider`, merges only near-identical statements, so every
    statement stays searchable), "same_speaker_merge" (`memora_rl.memory.deciders`: merges any similar
    abstraction of the same speaker, older values go to history) or "always_create"."""
    merge_min_overlap: float = Field(default=0.8, ge=0.0, le=1.0)
    """"overlap" decider: token Jaccard of values (same speaker) from which a candidate merges."""
    embedder: str = DEFAULT_EMBEDDER
    """Sentence-transformers model used for keyphrases and segmentation (the store embeds with its own)."""

    @model_validator(mode="after")
    def _check_episode_bounds(self) -> ExtractiveConfig:
        """min_episode_turns must not exceed max_episode_turns."""
        if self.min_episode_turns > self.max_episode_turns:
            raise ValueError(
                f"min_episode_turns={self.min_episode_turns} exceeds max_episode_turns={self.max_episode_turns}; "
                "lower the first or raise the second."
            )
        return self


def token_jaccard(left: str, right: str) -> float:
    """Jaccard overlap of the two texts' normalised word sets (1.0 for two empty texts).

    >>> token_jaccard("I love pottery", "i love Pottery!")
    1.0
    """
    left_words, right_words = set(words(left)), set(words(right))
    union = left_words | right_words
    return 1.0 if not union else len(left_words & right_words) / len(union)


class OverlapDecider:
    """Deterministic decider: merge into the first similar entry by the same speaker with a near-identical value."""

    def __init__(self, min_overlap: float) -> None:
        self.min_overlap = min_overlap

    def __call__(self, candidate: EntryCandidate, similar: Sequence[MemoryEntry]) -> MergeDecision:
        """Merge (the candidate's value becomes current, the old one goes to history) or create."""
        for entry in similar:
            if entry.speaker == candidate.speaker and token_jaccard(candidate.value, entry.value) >= self.min_overlap:
                return MergeDecision(action="merge", target_id=entry.id)
        return MergeDecision(action="create")


def make_decider(config: ExtractiveConfig) -> Decider:
    """The deterministic decider named by `config.decider`."""
    if config.decider == "same_speaker_merge":
        return same_speaker_merge
    if config.decider == "always_create":
        return always_create
    return OverlapDecider(config.merge_min_overlap)


class PlannedSegment(BaseModel):
    """One episode and the entry candidates of its statements, ready to be written."""

    episode: Episode
    candidates: list[EntryCandidate]
    turns: int


class ExtractiveBuilder(LazyEmbedder):
    """Deterministic, LLM-free builder; see the module docstring for every rule."""

    name = "extractive"

    def __init__(self, config: ExtractiveConfig | None = None, embedder: Embedder | None = None) -> None:
        self.config = config or ExtractiveConfig()
        self._embedder = embedder
        self.decider = make_decider(self.config)

    def build(
        self,
        conversation: Conversation,
        store: GraphStore,
        graph_id: str | None = None,
        progress: ProgressCallback | None = None,
    ) -> BuildReport:
        """Build (or finish building) the graph of `conversation`; a fully built one is skipped."""
        started = time.perf_counter()
        graph_id = graph_id or conversation.id
        done_statements, done_episodes, covered_turns = _stored_progress(store, graph_id)
        turns = sum(len(session.turns) for session in conversation.sessions)
        report = new_report(BuildReport, conversation, graph_id, turns)
        statements = self.statements(conversation)
        report.statements = len(statements)
        if conversation.turn_ids() <= covered_turns and all((s.turn_id, s.text) in done_statements for s in statements):
            logger.debug("graph %s is already built; skipped", graph_id)
            return report.model_copy(update={"skipped": True, "seconds": time.perf_counter() - started})
        plan = self.plan(conversation, graph_id)
        pending = [
            (segment, [c for c in segment.candidates if (c.source_turn_ids[0], c.value) not in done_statements])
            for segment in plan
        ]
        self._warm_cache([candidate for _, todo in pending for candidate in todo], plan)
        done_turns = 0
        for segment, todo in pending:
            if segment.episode.id not in done_episodes:
                store.add_episode(segment.episode)
                report.episodes_added += 1
            for candidate in todo:
                upsert_counted(store, graph_id, candidate, self.decider, report)
            done_turns += segment.turns
            if progress is not None:
                progress(done_turns, turns)
        report.seconds = time.perf_counter() - started
        return report

    def statements(self, conversation: Conversation) -> list[Statement]:
        """The salient statements of every turn, in conversation order (pure; no embedding)."""
        names = speaker_name_tokens(conversation.speakers)
        config = self.config
        return [
            statement
            for turn in conversation.turns()
            for statement in turn_statements(turn, config.max_statement_words, config.min_content_words, names)
        ]

    def plan(self, conversation: Conversation, graph_id: str) -> list[PlannedSegment]:
        """Everything the build will write, computed without touching a store (deterministic)."""
        config = self.config
        names = speaker_name_tokens(conversation.speakers)
        statements = self.statements(conversation)
        seen_names = conversation_names(conversation)
        statement_vectors = self.embedder.encode([statement.text for statement in statements])  # (S, dim)
        phrases = [candidate_phrases(s.text, config.max_ngram, ignore=names) for s in statements]
        vocabulary = sorted({phrase for statement_phrases in phrases for phrase in statement_phrases})
        phrase_vectors = self.embedder.encode(vocabulary)  # (V, dim)
        row_of = {phrase: row for row, phrase in enumerate(vocabulary)}
        candidates: dict[str, list[tuple[EntryCandidate, np.ndarray, list[int]]]] = {}
        for statement, vector, statement_phrases in zip(statements, statement_vectors, phrases, strict=True):
            rows = [row_of[phrase] for phrase in statement_phrases]
            # no candidate phrase (only time words or numbers): the first content word is the aspect
            aspects = (
                self._keyphrases(vector, rows, vocabulary, phrase_vectors) or content_words(statement.text, names)[:1]
            )
            candidate = self._candidate(statement, aspects, conversation.speakers, seen_names)
            candidates.setdefault(statement.turn_id, []).append((candidate, vector, rows))
        plan: list[PlannedSegment] = []
        for session in conversation.sessions:
            for number, (start, end) in enumerate(self._segments(session.turns), start=1):
                turns = session.turns[start:end]
                episode_id = f"ep-s{session.index}-{number}"
                parts = [part for turn in turns for part in candidates.get(turn.id, [])]
                for candidate, _, _ in parts:
                    candidate.episode_ids = [episode_id]
                title = self._title(
                    [vector for _, vector, _ in parts],
                    [r for *_, rows in parts for r in rows],
                    vocabulary,
                    phrase_vectors,
                )
                episode = episode_from_turns(graph_id, episode_id, turns, raw_text(turns), title)
                plan.append(PlannedSegment(episode=episode, candidates=[c for c, _, _ in parts], turns=len(turns)))
        return plan

    def _keyphrases(
        self, vector: np.ndarray, rows: list[int], vocabulary: list[str], phrase_vectors: np.ndarray
    ) -> list[str]:
        """1..max_anchors aspects of one statement: MMR order, later ones only above `anchor_min_score`."""
        if not rows:
            return []
        candidates = phrase_vectors[rows]  # (C, dim)
        picked = mmr_select(vector, candidates, self.config.max_anchors, self.config.mmr_diversity)
        relevance = candidates @ vector  # (C,)
        kept = [picked[0]] + [index for index in picked[1:] if relevance[index] >= self.config.anchor_min_score]
        return [vocabulary[rows[index]] for index in kept]

    def _candidate(
        self, statement: Statement, aspects: list[str], speakers: Sequence[str], seen_names: Sequence[str]
    ) -> EntryCandidate:
        """The entry candidate of one statement (episode ids are filled in by `plan`)."""
        names = third_party_names(statement.text, speakers, seen_names)
        subject, topic = subject_and_topic(statement.speaker, names, statement.text, aspects)
        return EntryCandidate(
            abstraction=f"{subject} + {topic}",
            value=statement.text,
            kind=statement_kind(statement.text),
            source_turn_ids=[statement.turn_id],
            speaker=statement.speaker,
            time=statement.time,
            anchors=anchor_texts(statement.speaker, aspects, names, self.config.max_anchors) if aspects else [],
        )

    def _segments(self, turns: Sequence[Turn]) -> list[tuple[int, int]]:
        """Half-open turn ranges of one session's episodes, per the configured segmentation."""
        config = self.config
        if config.segmentation == "window":
            return window_segments(len(turns), config.window_turns)
        vectors = self.embedder.encode([turn.text for turn in turns])  # (T, dim)
        return change_point_segments(
            vectors, config.change_threshold, config.min_episode_turns, config.max_episode_turns
        )

    def _title(
        self, vectors: list[np.ndarray], rows: list[int], vocabulary: list[str], phrase_vectors: np.ndarray
    ) -> str:
        """Episode cue: the keyphrases closest to the episode's mean statement vector, MMR-diversified.

        An episode without any salient statement (greetings only) is titled "small talk".
        """
        rows = sorted(set(rows))
        if not vectors or not rows:
            return "small talk"
        centre = np.mean(vectors, axis=0)
        centre = centre / max(float(np.linalg.norm(centre)), 1e-12)
        picked = mmr_select(centre, phrase_vectors[rows], self.config.title_keyphrases, self.config.mmr_diversity)
        return ", ".join(vocabulary[rows[index]] for index in picked)

    def _warm_cache(self, candidates: list[EntryCandidate], plan: list[PlannedSegment]) -> None:
        """Embed what the store will embed in a few batched calls, so its per-entry calls hit the cache."""
        texts = {c.abstraction for c in candidates} | {a for c in candidates for a in c.anchors}
        texts |= {c.value for c in candidates} | {segment.episode.text for segment in plan}
        self.embedder.encode(sorted(texts))


def _stored_progress(store: GraphStore, graph_id: str) -> tuple[set[tuple[str, str]], set[str], set[str]]:
    """What a graph already holds: (turn id, value) pairs, episode ids, turn ids covered by episodes.

    The pairs come from every entry's current value and its history versions, so a statement
    that was merged into an older entry still counts as stored.
    """
    if graph_id not in store.graph_ids():
        return set(), set(), set()
    episodes = store.episodes(graph_id)
    covered = {turn_id for episode in episodes for turn_id in episode.source_turn_ids}
    return stored_statements(store, graph_id), {episode.id for episode in episodes}, covered
