"""The Memora builder: segment -> episode -> abstraction/value pairs -> create-or-update -> cue anchors.

Each session is cut into batches of at most `batch_messages` consecutive turns, a batch
starting at the session's first turn not yet covered by a stored episode. For each batch:

1. **Segment** into consecutive runs of turns. `segmentation="llm"` (`memora/segment`):
   the LLM groups the numbered messages into episodes; `segmentation.clean_groups`
   repairs the indices (out of range, duplicates, uncovered messages join a neighbour)
   and `contiguous_groups` makes them consecutive runs. An answer unusable after the
   client's repair retry makes the batch one episode. `"structure"` (no LLM call):
   `segmentation.structure_segments` opens a segment at each message starting with a
   markdown header (the header is its topic) and keeps a fenced code block in one
   segment. `"auto"` (default) uses structure when the batch has at least 2 header messages.
   `segment_output="text"` (the variant without offset prediction, to measure against) asks
   for each episode's content written out beside its numbers; the turns still come from the numbers.
2. **Carry** (`carry_open_segment`, default on): when the session goes on after the batch
   and there are several segments, the last one (it reaches the batch end, so its topic
   may continue) is not written: its turns start the next batch, so an episode may span
   a batch boundary. A session's last batch writes every segment; sessions never merge.
3. **Episode** text is the raw segment taken from the source by offset, the segmenter's
   text (`segment_output="text"`; the raw segment when it holds no word), or
   (`episode_text="narrative"`, `memora/narrative`, replacing either) an LLM narrative
   with relative dates resolved from the session date.
4. **Extract** (`memora/extract`): abstraction/value pairs, each with 1-3 cue anchors
   "<entity> + <aspect>" and the message numbers it came from (mapped back to turn ids;
   all the episode's turns when the numbers are unusable).
5. **Create-or-update** through `store.upsert_entry` (gamma and top-k from the store's
   config, 0.80 / 5 by default) with `LLMDecider` (`memora/decide`): merge into one of
   the similar entries (the old value goes to history; the abstraction may be refined;
   the cue anchors are re-derived from the merged value) or create. The store
   existence-checks anchors and prunes the ones a merge leaves without entries.
6. The batch's episodes are written last, so a turn is done exactly when it is covered
   by a stored episode: a re-run starts each session at its first uncovered turn (the
   same batch an uninterrupted build would have cut), skips entries already stored,
   and gets every earlier LLM answer from the client's response cache.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from typing import Literal, NamedTuple

from pydantic import Field

from memora_rl.builders.base import episode_from_turns, raw_text
from memora_rl.builders.batched import BatchedLLMBuilder, BatchSink, LLMBuildReport
from memora_rl.builders.llm_config import LLMBuilderConfig
from memora_rl.builders.memora_prompts import (
    DecideAnswer,
    ExtractAnswer,
    MemoryItem,
    NarrativeAnswer,
    SegmentAnswer,
    SegmentTextAnswer,
    SegmentTextGroup,
    decide_messages,
    extract_messages,
    narrative_messages,
    segment_messages,
)
from memora_rl.builders.segmentation import (
    clean_groups,
    clean_message_refs,
    contiguous_groups,
    header_turns,
    structure_segments,
)
from memora_rl.builders.structured import StructuredAsker
from memora_rl.builders.text import format_day, normalise_anchor, render_messages
from memora_rl.data.records import Conversation, Turn
from memora_rl.llm.client import LLMClient
from memora_rl.memory.records import EntryCandidate, Episode, MemoryEntry
from memora_rl.memory.store import MergeDecision

logger = logging.getLogger(__name__)

WORD = re.compile(r"[^\W\d_]{2}")
"""Two letters in a row: a segment text without them is unusable."""


class Segment(NamedTuple):
    """One segment of a batch: a consecutive run of turns, its topic, and the segmenter's text if it wrote one."""

    turns: list[Turn]
    topic: str
    text: str | None = None


def usable_text(text: str) -> str | None:
    """The segmenter's episode text, stripped; None when it holds no word (the raw segment is used instead).

    >>> usable_text("  Alice told Bob she starts at Nova. ")
    'Alice told Bob she starts at Nova.'
    >>> usable_text(" 1, 2 ... ") is None
    True
    """
    stripped = text.strip()
    return stripped if WORD.search(stripped) else None


class MemoraConfig(LLMBuilderConfig):
    """Every default of the Memora builder (YAML: configs/builders/memora.yaml)."""

    batch_messages: int = Field(default=20, ge=1, le=60)
    """Consecutive turns of one session segmented per LLM call."""
    carry_open_segment: bool = True
    """Carry a batch's last segment into the next batch of the session instead of writing it:
    a topic still going at the batch end is not cut at a fixed 20-turn boundary (the paper segments the stream)."""
    segmentation: Literal["llm", "structure", "auto"] = "auto"
    """How a batch is segmented: "llm" (one call), "structure" (markdown headers open segments, fenced code
    stays in one; no call: documents, logs and code are segmented by their structure) or "auto" (structure
    when the batch has at least 2 header messages, else the LLM)."""
    segment_output: Literal["offsets", "text"] = "offsets"
    """What the segmenter returns: "offsets" (message numbers; the episode text is the raw source) or "text"
    (numbers and each episode written out, as a segmenter without offset prediction: the slower baseline)."""
    episode_text: Literal["raw", "narrative"] = "raw"
    """Episodic memory: "raw" (the segment's messages, no LLM call) or "narrative" (one LLM call per episode)."""
    max_message_chars: int = Field(default=300, ge=20)
    """Longer messages are cut to this many characters in prompts (keeps a batch inside the context)."""
    segment_max_tokens: int = Field(default=200, ge=16)
    """Completion token limit of a segmentation answer."""
    segment_text_max_tokens: int = Field(default=2000, ge=16)
    """Completion token limit of a segmentation answer with text (`segment_output="text"`; 20-message batches)."""
    narrative_max_tokens: int = Field(default=160, ge=16)
    """Completion token limit of a narrative answer."""
    extract_max_tokens: int = Field(default=320, ge=16)
    """Completion token limit of an extraction answer."""
    decide_max_tokens: int = Field(default=120, ge=16)
    """Completion token limit of a create-or-update answer."""
    show_progress: bool = False
    """Draw rich progress bars (one per conversation and per LLM phase)."""


def decision_from_answer(
    answer: DecideAnswer | None, similar: Sequence[MemoryEntry], speaker: str = ""
) -> MergeDecision:
    """A store decision from the LLM's verdict; invalid or missing verdicts create a new entry.

    A merge needs a target numbered 1..len(similar); an empty merged value keeps the
    candidate's value (the older one goes to history), an empty abstraction keeps the old one.
    The anchors re-derived from the merged value replace the entry's (a bare aspect gets
    `speaker` as its entity); when none is usable the entry keeps its anchors and gains the candidate's.
    """
    if answer is None or answer.action != "merge" or not 1 <= answer.target <= len(similar):
        return MergeDecision(action="create")
    anchors = [anchor for text in answer.anchors if (anchor := normalise_anchor(text, speaker))]
    return MergeDecision(
        action="merge",
        target_id=similar[answer.target - 1].id,
        merged_value=answer.merged_value.strip() or None,
        refined_abstraction=answer.refined_abstraction.strip() or None,
        anchors=list(dict.fromkeys(anchors)) or None,
    )


class LLMDecider:
    """The create-or-update decider that asks the LLM (phase `memora/decide`)."""

    def __init__(self, asker: StructuredAsker, max_tokens: int, phase: str = "memora/decide") -> None:
        self.asker = asker
        self.max_tokens = max_tokens
        self.phase = phase

    def __call__(self, candidate: EntryCandidate, similar: Sequence[MemoryEntry]) -> MergeDecision:
        """Merge into one of `similar` (history kept, abstraction maybe refined, anchors re-derived) or create."""
        existing = [(entry.abstraction, entry.value) for entry in similar]
        messages = decide_messages(candidate.abstraction, candidate.value, existing)
        answer = self.asker.ask_sync(messages, DecideAnswer, phase=self.phase, max_tokens=self.max_tokens)
        return decision_from_answer(answer, similar, candidate.speaker or "")


def memory_candidates(items: Sequence[MemoryItem], turns: Sequence[Turn], episode_id: str) -> list[EntryCandidate]:
    """Entry candidates from extracted items; message numbers map to turn ids (all turns when unusable)."""
    candidates: list[EntryCandidate] = []
    for item in items:
        abstraction, value = item.abstraction.strip(), item.value.strip()
        if not abstraction or not value:
            continue
        sources = [turns[index] for index in clean_message_refs(item.messages, len(turns))] or list(turns)
        speaker = sources[0].speaker
        anchors = [anchor for text in item.anchors if (anchor := normalise_anchor(text, speaker))]
        candidates.append(
            EntryCandidate(
                abstraction=abstraction,
                value=value,
                kind="factual",
                episode_ids=[episode_id],
                source_turn_ids=[turn.id for turn in sources],
                speaker=speaker,
                time=sources[0].time,
                anchors=list(dict.fromkeys(anchors))[:3] or [f"{speaker} + {abstraction[:60]}"],
            )
        )
    return candidates


class MemoraBuilder(BatchedLLMBuilder):
    """LLM builder following the Memora pipeline; see the module docstring for every step."""

    name = "memora"
    config: MemoraConfig

    def __init__(self, config: MemoraConfig | None = None, client: LLMClient | None = None) -> None:
        super().__init__(config or MemoraConfig(), client)
        self.decider = LLMDecider(self.asker, self.config.decide_max_tokens)

    def _batches(self, conversation: Conversation) -> list[list[Turn]]:
        """Each session's turns; `_write_batches` cuts them into batches while writing."""
        return [list(session.turns) for session in conversation.sessions if session.turns]

    def _write_batches(
        self, sessions: list[list[Turn]], covered: set[str], sink: BatchSink, advance: Callable[[int], None]
    ) -> None:
        """Write each session in batches of at most `batch_messages` turns, each starting at its first unwritten turn.

        Cut from the uncovered turns, a batch starts with the turns the previous one carried,
        and a killed build re-run resumes with the batch the uninterrupted build would have cut.
        """
        for session in sessions:
            pending = [turn for turn in session if turn.id not in covered]
            advance(len(session) - len(pending))
            while pending:
                batch = pending[: self.config.batch_messages]
                written = self._write_segments(batch, sink, session_goes_on=len(pending) > len(batch))
                pending = pending[written:]
                advance(written)

    def _write_segments(self, batch: list[Turn], sink: BatchSink, session_goes_on: bool) -> int:
        """Segment one batch, write its entries then its episodes; returns how many leading turns were written.

        With `carry_open_segment`, when the session goes on and there are several segments, the
        last one (it reaches the batch end) is left unwritten: the next batch starts with its turns.
        """
        segments = self._segment(batch, sink.report)
        sink.bars.advance("memora/segment")
        if self.config.carry_open_segment and session_goes_on and len(segments) > 1:
            segments = segments[:-1]
        day = format_day(batch[0].time)
        episodes = [
            episode_from_turns(sink.graph_id, f"ep-{batch[0].id}-{number}", turns, text or raw_text(turns), topic)
            for number, (turns, topic, text) in enumerate(segments, start=1)
        ]
        segments_turns = [segment.turns for segment in segments]
        if self.config.episode_text == "narrative":
            episodes = self._narrate(episodes, segments_turns, day)
            sink.bars.advance("memora/narrative", len(episodes))
        answers = self.asker.gather(
            [
                self.asker.ask(
                    extract_messages(render_messages(turns, self.config.max_message_chars), day),
                    ExtractAnswer,
                    phase="memora/extract",
                    max_tokens=self.config.extract_max_tokens,
                )
                for turns in segments_turns
            ]
        )
        sink.bars.advance("memora/extract", len(segments))
        for episode, turns, answer in zip(episodes, segments_turns, answers, strict=True):
            candidates = memory_candidates(answer.memories if answer else [], turns, episode.id)
            sink.report.statements += len(candidates)
            for candidate in candidates:
                sink.upsert(candidate, self.decider, "memora/upsert")
        sink.add_episodes(episodes)
        return sum(len(turns) for turns in segments_turns)

    def _segment(self, batch: list[Turn], report: LLMBuildReport) -> list[Segment]:
        """The batch's segments, by structure (no text) or by the LLM (`segmentation`)."""
        texts = [turn.text for turn in batch]
        mode = self.config.segmentation
        if mode == "structure" or (mode == "auto" and len(header_turns(texts)) >= 2):
            return [Segment([batch[index] for index in run], topic) for run, topic in structure_segments(texts)]
        return self._segment_llm(batch, report)

    def _segment_llm(self, batch: list[Turn], report: LLMBuildReport) -> list[Segment]:
        """The LLM's segments; one run when the answer is unusable.

        Turns come from the message numbers in both `segment_output` modes; a run's topic and
        text (text mode) are those of the group its first message belongs to.
        """
        rendered = render_messages(batch, self.config.max_message_chars)
        with_text = self.config.segment_output == "text"
        messages = segment_messages(rendered, len(batch), format_day(batch[0].time), self.config.segment_output)
        schema = SegmentTextAnswer if with_text else SegmentAnswer
        max_tokens = self.config.segment_text_max_tokens if with_text else self.config.segment_max_tokens
        answer = self.asker.ask_sync(messages, schema, phase="memora/segment", max_tokens=max_tokens)
        groups = answer.episodes if answer is not None else []
        outcome = clean_groups([group.messages for group in groups], len(batch))
        report.index_repairs += int(outcome.repaired and answer is not None)
        labels: dict[int, tuple[str, str | None]] = {}
        for group in groups:
            refs = clean_message_refs(group.messages, len(batch))
            if refs:
                text = usable_text(group.text) if isinstance(group, SegmentTextGroup) else None
                labels.setdefault(min(refs), (group.topic.strip(), text))
        runs = contiguous_groups(outcome.groups, len(batch))
        return [Segment([batch[index] for index in run], *labels.get(run[0], ("", None))) for run in runs]

    def _narrate(self, episodes: list[Episode], segments: list[list[Turn]], day: str) -> list[Episode]:
        """Episodes whose text is the LLM narrative (raw text kept when the answer is unusable)."""
        answers = self.asker.gather(
            [
                self.asker.ask(
                    narrative_messages(render_messages(turns, self.config.max_message_chars), day),
                    NarrativeAnswer,
                    phase="memora/narrative",
                    max_tokens=self.config.narrative_max_tokens,
                )
                for turns in segments
            ]
        )
        narrated: list[Episode] = []
        for episode, answer in zip(episodes, answers, strict=True):
            if answer is not None and answer.narrative.strip():
                episode = episode.model_copy(update={"text": answer.narrative.strip(), "title": answer.title.strip()})
            narrated.append(episode)
        return narrated
