"""Every prompt and answer schema of the Memora builder (templates with named fields).

Prompts are short on purpose: they must fit a 2,048-token context with a batch of 20
messages, and a small model follows a terse instruction with one example better than
a long one. Each answer schema bounds its lists and strings so guided JSON decoding
stays within the builder's `max_tokens`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from memora_rl.llm.client import Message

SEGMENT_SYSTEM = (
    "You split a chat into episodes. An episode is a run of consecutive messages about one topic or event. "
    'Answer JSON: {{"episodes": [{{"messages": [message numbers], "topic": "a few words"}}]}}. '
    "Every message number from 1 to {count} must appear in exactly one episode."
)
SEGMENT_TEXT_SYSTEM = (
    "You split a chat into episodes. An episode is a run of consecutive messages about one topic or event. "
    "For each episode give its message numbers, a topic and its content written out as text: who said what, "
    'message by message (e.g. "Alice told Bob she starts at Nova on Monday. Bob congratulated her."). '
    'Answer JSON: {{"episodes": [{{"messages": [message numbers], "topic": "a few words", '
    '"text": "the episode written out"}}]}}. '
    "Every message number from 1 to {count} must appear in exactly one episode."
)
"""The segmenter without offset prediction: it also writes each episode's content out (more completion tokens)."""
SEGMENT_USER = "Chat on {day}:\n{messages}"

NARRATIVE_SYSTEM = (
    "You write the episodic memory of a chat segment: a short third-person narrative of who said and did what. "
    "The chat happened on {day}: replace relative dates (yesterday, last week, next month) with absolute dates. "
    'Answer JSON: {{"title": "a few words", "narrative": "two or three sentences"}}.'
)
NARRATIVE_USER = "{messages}"

EXTRACT_SYSTEM = (
    "You extract lasting memories from a chat segment of {day}. Each memory has an abstraction (what it is "
    'about, e.g. "Alice\'s employer"), a value (the concrete fact with names and absolute dates, e.g. '
    '"Alice works at Nova since 7 May 2023"), 1 to 3 anchors written "<entity> + <aspect>" (e.g. "Alice + job") '
    "and the numbers of the messages it comes from. Skip greetings and small talk; a segment with nothing "
    "lasting gives an empty list. "
    'Answer JSON: {{"memories": [{{"abstraction": "...", "value": "...", "anchors": ["..."], "messages": [1]}}]}}.'
)
EXTRACT_USER = "{messages}"

DECIDE_SYSTEM = (
    "You maintain a memory store. Decide whether a new memory is about the same thing as one of the existing "
    'memories. If it is, answer {{"action": "merge", "target": <its number>, "merged_value": "one value combining '
    'both, newest facts first", "refined_abstraction": "a better abstraction, or empty", "anchors": [1 to 3 '
    '"<entity> + <aspect>" cues of the merged value]}}. '
    'If not, answer {{"action": "new", "target": 0, "merged_value": "", "refined_abstraction": "", "anchors": []}}.'
)
DECIDE_USER = "New memory:\n{abstraction}: {value}\n\nExisting memories:\n{existing}"
EXISTING_LINE = "[{number}] {abstraction}: {value}"


class SegmentGroup(BaseModel):
    """One episode: its message numbers and a short topic."""

    messages: list[int] = Field(min_length=1, max_length=30)
    topic: str = Field(max_length=60)


class SegmentAnswer(BaseModel):
    """Episodes of a batch as groups of message numbers (validated by `segmentation.clean_groups`)."""

    episodes: list[SegmentGroup] = Field(min_length=1, max_length=10)


class SegmentTextGroup(SegmentGroup):
    """One episode of the text-returning segmenter: its message numbers, topic and content written out."""

    text: str = Field(max_length=800)
    """About 200 tokens: 10 episodes stay within `MemoraConfig.segment_text_max_tokens` (2,000)."""


class SegmentTextAnswer(BaseModel):
    """Episodes of a batch with their text (`segment_output="text"`); the numbers still give the turns."""

    episodes: list[SegmentTextGroup] = Field(min_length=1, max_length=10)


class NarrativeAnswer(BaseModel):
    """An episode's title and narrative (relative dates resolved)."""

    title: str = Field(max_length=80)
    narrative: str = Field(max_length=600)


class MemoryItem(BaseModel):
    """One abstraction/value pair with its cue anchors and source message numbers."""

    abstraction: str = Field(max_length=80)
    value: str = Field(max_length=300)
    anchors: list[str] = Field(min_length=1, max_length=3)
    messages: list[int] = Field(min_length=1, max_length=10)


class ExtractAnswer(BaseModel):
    """The memories found in one episode; an empty list for small talk with nothing lasting."""

    memories: list[MemoryItem] = Field(max_length=6)


class DecideAnswer(BaseModel):
    """The LLM decider's verdict for one candidate against its numbered similar entries."""

    action: Literal["merge", "new"]
    target: int
    """1-based number of the existing memory to merge into; 0 for "new"."""
    merged_value: str = Field(max_length=400)
    refined_abstraction: str = Field(max_length=80)
    anchors: list[str] = Field(max_length=3)
    """Cue anchors "<entity> + <aspect>" re-derived from the merged value (they replace the entry's); [] for "new"."""


def segment_messages(
    rendered: str, count: int, day: str, output: Literal["offsets", "text"] = "offsets"
) -> list[Message]:
    """The segmentation request for a batch of `count` numbered messages: numbers only, or numbers and text."""
    system = SEGMENT_TEXT_SYSTEM if output == "text" else SEGMENT_SYSTEM
    return [
        {"role": "system", "content": system.format(count=count)},
        {"role": "user", "content": SEGMENT_USER.format(day=day, messages=rendered)},
    ]


def narrative_messages(rendered: str, day: str) -> list[Message]:
    """The narrative request for one episode's messages."""
    return [
        {"role": "system", "content": NARRATIVE_SYSTEM.format(day=day)},
        {"role": "user", "content": NARRATIVE_USER.format(messages=rendered)},
    ]


def extract_messages(rendered: str, day: str) -> list[Message]:
    """The abstraction/value extraction request for one episode's messages."""
    return [
        {"role": "system", "content": EXTRACT_SYSTEM.format(day=day)},
        {"role": "user", "content": EXTRACT_USER.format(messages=rendered)},
    ]


def decide_messages(abstraction: str, value: str, existing: list[tuple[str, str]]) -> list[Message]:
    """The create-or-update request: the candidate and its similar entries numbered from 1."""
    lines = "\n".join(
        EXISTING_LINE.format(number=number, abstraction=old_abstraction, value=old_value)
        for number, (old_abstraction, old_value) in enumerate(existing, start=1)
    )
    return [
        {"role": "system", "content": DECIDE_SYSTEM},
        {"role": "user", "content": DECIDE_USER.format(abstraction=abstraction, value=value, existing=lines)},
    ]
