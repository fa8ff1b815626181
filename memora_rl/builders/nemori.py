"""The NEMORI builder: message buffer -> episodes -> continuation merging -> prediction-error facts.

The conversation's turns fill a buffer of `buffer_messages`; each full buffer (and the
partial one left at the end: the flush) is processed as follows:

1. **Group** (`nemori/group`): the LLM groups the numbered messages into episodes by
   index, non-consecutive groups allowed; `segmentation.clean_groups` repairs the answer
   (out of range, duplicates, uncovered messages join a neighbour; one episode when unusable).
2. **Episode** (`nemori/episode`): a cue and a narrative per group, relative dates
   resolved from each message's own date (fallback: the topic and the raw messages).
3. **Continuation** (`nemori/continue`): the new episode is compared (cosine of
   cue + narrative embeddings) with every earlier episode of the graph; the `merge_candidates`
   most similar ones reaching `merge_min_cosine` go, best first, to the LLM, which says whether
   it is the same event; at the first yes the narratives merge into that earlier episode,
   which keeps every source message of both.
4. **Prediction error** (`nemori/predict`, `nemori/distill`): the related stored facts are
   retrieved, the LLM predicts the episode from its cue and those facts only (never the
   narrative), then lists the useful facts the real messages hold that the prediction missed
   (possibly none): candidate semantic facts with source turn ids.
5. **Reconcile** (`nemori/reconcile`): each candidate goes through `store.upsert_entry`, which
   finds the stored facts by the fact's own embedding (value against values, the store's gamma
   and top-k), with `ReconcileDecider`: add (new entry), merge (combined fact) or replace
   (contradiction); merge and replace keep the old value in the entry's history.
6. Episodes are written last (the store embeds their cue + narrative), so a buffer is done exactly
   when its turns are covered; a re-run skips done buffers and replays cached LLM answers.

Facts are entries of kind "semantic" whose abstraction is the "<entity> + <aspect>" topic,
which is also their cue anchor, so the env and evaluation run on NEMORI graphs unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
from pydantic import Field

from memora_rl.builders.base import LazyEmbedder, episode_from_turns, raw_text
from memora_rl.builders.batched import BatchedLLMBuilder, BatchSink, LLMBuildReport
from memora_rl.builders.llm_config import LLMBuilderConfig
from memora_rl.builders.nemori_prompts import (
    ContinueAnswer,
    DistillAnswer,
    EpisodeAnswer,
    GroupAnswer,
    ReconcileAnswer,
    continue_messages,
    distill_messages,
    episode_messages,
    group_messages,
    predict_messages,
    reconcile_messages,
)
from memora_rl.builders.segmentation import clean_groups, clean_message_refs
from memora_rl.builders.structured import StructuredAsker
from memora_rl.builders.text import batches, normalise_anchor, render_messages
from memora_rl.data.records import Conversation, Turn
from memora_rl.embedding import DEFAULT_EMBEDDER, Embedder
from memora_rl.errors import GraphError
from memora_rl.llm.client import LLMClient
from memora_rl.memory.records import EntryCandidate, Episode, MemoryEntry
from memora_rl.memory.store import GraphStore, MergeDecision

logger = logging.getLogger(__name__)


class NemoriConfig(LLMBuilderConfig):
    """Every default of the NEMORI builder (YAML: configs/builders/nemori.yaml)."""

    buffer_messages: int = Field(default=20, ge=1, le=60)
    """Messages buffered before they are grouped into episodes (the last partial buffer is flushed)."""
    max_message_chars: int = Field(default=300, ge=20)
    """Longer messages are cut to this many characters in prompts."""
    merge_candidates: int = Field(default=3, ge=0)
    """Earlier episodes of the graph most similar to a new one (cue + narrative cosine) that the LLM checks,
    best first, for a continuation of the same event (0 turns merging off)."""
    merge_min_cosine: float = Field(default=0.6, ge=-1.0, le=1.0)
    """Cosine (cue + narrative embeddings) an earlier episode needs before the LLM is asked to merge."""
    related_facts: int = Field(default=5, ge=0)
    """Stored facts retrieved to predict an episode from its cue."""
    group_max_tokens: int = Field(default=200, ge=16)
    """Completion token limit of a grouping answer."""
    episode_max_tokens: int = Field(default=160, ge=16)
    """Completion token limit of a cue + narrative answer."""
    continue_max_tokens: int = Field(default=200, ge=16)
    """Completion token limit of a continuation answer."""
    predict_max_tokens: int = Field(default=96, ge=16)
    """Completion token limit of a prediction (plain text)."""
    distill_max_tokens: int = Field(default=320, ge=16)
    """Completion token limit of a distillation answer."""
    reconcile_max_tokens: int = Field(default=120, ge=16)
    """Completion token limit of a reconciliation answer."""
    embedder: str = DEFAULT_EMBEDDER
    """Sentence-transformers model comparing episodes for continuation (the store embeds with its own)."""
    show_progress: bool = False
    """Draw rich progress bars (one per conversation and per LLM phase)."""


def reconcile_decision(
    answer: ReconcileAnswer | None, candidate: EntryCandidate, similar: Sequence[MemoryEntry]
) -> MergeDecision:
    """A store decision from the reconciliation verdict; invalid or missing verdicts add a new fact.

    "replace" makes the candidate the current value; "merge" uses the combined fact (or both
    values joined when it is empty). Both keep the old value in history (the store does it).
    """
    if answer is None or answer.action == "add" or not 1 <= answer.target <= len(similar):
        return MergeDecision(action="create")
    target = similar[answer.target - 1]
    if answer.action == "replace":
        return MergeDecision(action="merge", target_id=target.id, merged_value=candidate.value)
    merged = answer.merged_fact.strip() or f"{target.value} {candidate.value}"
    return MergeDecision(action="merge", target_id=target.id, merged_value=merged)


class ReconcileDecider:
    """Decider asking the LLM to add, merge or replace (phase `nemori/reconcile`)."""

    def __init__(self, asker: StructuredAsker, max_tokens: int) -> None:
        self.asker = asker
        self.max_tokens = max_tokens

    def __call__(self, candidate: EntryCandidate, similar: Sequence[MemoryEntry]) -> MergeDecision:
        """Add, merge into, or replace one of `similar`."""
        messages = reconcile_messages(candidate.value, [entry.value for entry in similar])
        answer = self.asker.ask_sync(messages, ReconcileAnswer, phase="nemori/reconcile", max_tokens=self.max_tokens)
        return reconcile_decision(answer, candidate, similar)


def fact_candidates(answer: DistillAnswer | None, turns: Sequence[Turn], episode_id: str) -> list[EntryCandidate]:
    """Semantic entry candidates from distilled facts; message numbers map to turn ids (all when unusable)."""
    candidates: list[EntryCandidate] = []
    for item in answer.facts if answer is not None else []:
        fact = item.fact.strip()
        if not fact:
            continue
        sources = [turns[index] for index in clean_message_refs(item.messages, len(turns))] or list(turns)
        speaker = sources[0].speaker
        topic = normalise_anchor(item.topic, speaker) or f"{speaker} + {fact[:40]}"
        candidates.append(
            EntryCandidate(
                abstraction=topic, value=fact, kind="semantic", episode_ids=[episode_id],
                source_turn_ids=[turn.id for turn in sources], speaker=speaker, time=sources[0].time,
                anchors=[topic],
            )
        )  # fmt: skip
    return candidates


def merge_episodes(earlier: Episode, later: Episode, narrative: str) -> Episode:
    """`earlier` extended by `later`: merged narrative, every source turn of both, widened time span."""
    times = [t for t in (earlier.start_time, earlier.end_time, later.start_time, later.end_time) if t is not None]
    return earlier.model_copy(
        update={
            "text": narrative.strip() or f"{earlier.text} {later.text}",
            "source_turn_ids": list(dict.fromkeys([*earlier.source_turn_ids, *later.source_turn_ids])),
            "start_time": min(times) if times else None,
            "end_time": max(times) if times else None,
        }
    )


class NemoriBuilder(LazyEmbedder, BatchedLLMBuilder):
    """LLM builder following the NEMORI pipeline; see the module docstring for every step."""

    name = "nemori"
    config: NemoriConfig

    def __init__(
        self, config: NemoriConfig | None = None, client: LLMClient | None = None, embedder: Embedder | None = None
    ) -> None:
        super().__init__(config or NemoriConfig(), client)
        self.decider = ReconcileDecider(self.asker, self.config.reconcile_max_tokens)
        self._embedder = embedder

    def _batches(self, conversation: Conversation) -> list[list[Turn]]:
        """The conversation's turns cut into buffers of at most `buffer_messages`."""
        return batches(list(conversation.turns()), self.config.buffer_messages)

    def _write_batch(self, buffer: list[Turn], sink: BatchSink) -> None:
        """Group, narrate, merge continuations, distil and reconcile facts, then write the episodes."""
        graph_id, store = sink.graph_id, sink.store
        groups = self._group(buffer, sink.report)
        sink.bars.advance("nemori/group")
        episodes = self._narrate(graph_id, buffer[0].id, groups)
        sink.bars.advance("nemori/episode", len(episodes))
        candidates = self._distill(graph_id, store, episodes, groups)
        sink.bars.advance("nemori/distill", len(episodes))
        final = self._merge_continuations(graph_id, store, episodes, {turn.id for turn in buffer})
        owner = {episode.id: target.id for target, members in final for episode in members}
        for candidate in candidates:
            candidate.episode_ids = [owner.get(episode_id, episode_id) for episode_id in candidate.episode_ids]
            sink.report.statements += 1
            sink.upsert(candidate, self.decider, "nemori/reconcile", similar_by="value")
        sink.add_episodes([target for target, _ in final])

    def _group(self, buffer: list[Turn], report: LLMBuildReport) -> list[tuple[list[Turn], str]]:
        """The buffer's episodes as (turns in order, topic); one group when the answer is unusable."""
        messages = group_messages(render_messages(buffer, self.config.max_message_chars, dated=True), len(buffer))
        answer = self.asker.ask_sync(
            messages, GroupAnswer, phase="nemori/group", max_tokens=self.config.group_max_tokens
        )
        items = answer.episodes if answer is not None else []
        outcome = clean_groups([item.messages for item in items], len(buffer))
        report.index_repairs += int(outcome.repaired and answer is not None)
        topics = {}
        for item in items:
            refs = clean_message_refs(item.messages, len(buffer))
            if refs:
                topics.setdefault(refs[0], item.topic.strip())
        return [
            ([buffer[i] for i in group], next((topics[i] for i in group if i in topics), ""))
            for group in outcome.groups
        ]

    def _narrate(self, graph_id: str, first_id: str, groups: list[tuple[list[Turn], str]]) -> list[Episode]:
        """One episode per group: LLM cue + narrative, or the topic and raw messages when unusable."""
        answers = self.asker.gather(
            [
                self.asker.ask(
                    episode_messages(render_messages(turns, self.config.max_message_chars, dated=True)),
                    EpisodeAnswer,
                    phase="nemori/episode",
                    max_tokens=self.config.episode_max_tokens,
                )
                for turns, _ in groups
            ]
        )
        episodes: list[Episode] = []
        for number, ((turns, topic), answer) in enumerate(zip(groups, answers, strict=True), start=1):
            usable = answer is not None and answer.narrative.strip()
            text = answer.narrative.strip() if usable else raw_text(turns)
            cue = (answer.cue.strip() if usable else "") or topic or " ".join(turns[0].text.split()[:8])
            episodes.append(episode_from_turns(graph_id, f"ep-{first_id}-{number}", turns, text, cue))
        return episodes

    def _related_facts(self, graph_id: str, store: GraphStore, query: str, buffer_ids: set[str]) -> list[str]:
        """Values of the stored facts most related to `query`, leaving out facts of the current buffer.

        Facts of the current buffer exist only when a killed build is resumed; ignoring them keeps
        the prompts (hence the cached answers) identical to an uninterrupted build.
        """
        if self.config.related_facts == 0 or graph_id not in store.graph_ids():
            return []
        try:
            hits = store.search(graph_id, query, k=self.config.related_facts + len(buffer_ids))
            entries = store.get_entries(graph_id, [hit.entry_id for hit in hits])
        except GraphError:
            return []
        kept = [entry.value for entry in entries if not buffer_ids & set(entry.source_turn_ids)]
        return kept[: self.config.related_facts]

    def _distill(
        self, graph_id: str, store: GraphStore, episodes: list[Episode], groups: list[tuple[list[Turn], str]]
    ) -> list[EntryCandidate]:
        """Prediction-error distillation for every episode of the buffer (predictions, then differences)."""
        buffer_ids = {turn.id for turns, _ in groups for turn in turns}
        facts = [self._related_facts(graph_id, store, f"{e.title} {e.text}", buffer_ids) for e in episodes]
        predictions = self.asker.gather(
            [
                self.asker.ask_text(
                    predict_messages(e.title, related),
                    phase="nemori/predict",
                    max_tokens=self.config.predict_max_tokens,
                )
                for e, related in zip(episodes, facts, strict=True)
            ]
        )
        answers = self.asker.gather(
            [
                self.asker.ask(
                    distill_messages(prediction, render_messages(turns, self.config.max_message_chars, dated=True)),
                    DistillAnswer,
                    phase="nemori/distill",
                    max_tokens=self.config.distill_max_tokens,
                )
                for prediction, (turns, _) in zip(predictions, groups, strict=True)
            ]
        )
        return [
            candidate
            for episode, (turns, _), answer in zip(episodes, groups, answers, strict=True)
            for candidate in fact_candidates(answer, turns, episode.id)
        ]

    def _merge_continuations(
        self, graph_id: str, store: GraphStore, episodes: list[Episode], buffer_ids: set[str]
    ) -> list[tuple[Episode, list[Episode]]]:
        """Final episodes to write, each with the new episodes merged into it (itself included when new).

        Every earlier episode of the graph is a candidate (stored ones, then this buffer's), not only
        the latest: an event resumed sessions later still merges into its episode.
        """
        stored: list[Episode] = []
        if self.config.merge_candidates and graph_id in store.graph_ids():
            stored = [e for e in store.episodes(graph_id) if not buffer_ids & set(e.source_turn_ids)]
        final: list[tuple[Episode, list[Episode]]] = [(episode, []) for episode in stored]
        for episode in episodes:
            target = self._continuation_target(episode, [target for target, _ in final])
            if target is None:
                final.append((episode, [episode]))
                continue
            position = next(i for i, (old, _) in enumerate(final) if old.id == target[0].id)
            old, members = final[position]
            final[position] = (merge_episodes(old, episode, target[1]), [*members, episode])
        return [(target, members) for target, members in final if members]

    def _continuation_target(self, episode: Episode, candidates: list[Episode]) -> tuple[Episode, str] | None:
        """The earlier episode `episode` continues and their merged narrative, or None.

        The `merge_candidates` candidates most similar to `episode` (cue + narrative embeddings) that
        reach `merge_min_cosine` are asked about best first; the first one the LLM calls the same event wins.
        """
        if not candidates or self.config.merge_candidates == 0:
            return None
        vectors = self.embedder.encode([e.embedding_text for e in [episode, *candidates]])  # (1 + C, dim)
        scores = vectors[1:] @ vectors[0]  # (C,)
        for index in np.argsort(-scores, kind="stable")[: self.config.merge_candidates]:
            if float(scores[index]) < self.config.merge_min_cosine:
                return None
            earlier = candidates[int(index)]
            answer = self.asker.ask_sync(
                continue_messages(earlier.title, earlier.text, episode.title, episode.text),
                ContinueAnswer, phase="nemori/continue", max_tokens=self.config.continue_max_tokens,
            )  # fmt: skip
            if answer is not None and answer.same_event:
                return earlier, answer.narrative
        return None
