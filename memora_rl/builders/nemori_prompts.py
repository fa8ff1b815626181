"""Every prompt and answer schema of the NEMORI builder (templates with named fields).

The steps: group buffered messages into episodes, write each episode's narrative and cue,
decide whether it continues a recent episode, predict an episode from its cue and known
facts, distil what the prediction missed into facts, and reconcile each fact with the
facts already stored. Lists and strings are bounded so guided JSON stays within limits.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from memora_rl.llm.client import Message

GROUP_SYSTEM = (
    "You group chat messages into episodes. An episode is one topic or event; its messages need not be "
    'consecutive when topics interleave. Answer JSON: {{"episodes": [{{"messages": [message numbers], '
    '"topic": "a few words"}}]}}. Every message number from 1 to {count} must appear in exactly one episode.'
)
GROUP_USER = "{messages}"

EPISODE_SYSTEM = (
    "You write the memory of one chat episode: a cue (a short title of the event) and a narrative (two or three "
    "third-person sentences saying who did what, when). Each message shows the date it was sent: replace "
    "relative dates (yesterday, last week) with absolute dates counted from that message's date. "
    'Answer JSON: {{"cue": "...", "narrative": "..."}}.'
)
EPISODE_USER = "{messages}"

CONTINUE_SYSTEM = (
    "Decide whether the new episode continues the same event as the earlier one. If it does, write one narrative "
    'covering both. Answer JSON: {{"same_event": true or false, "narrative": "the merged narrative, or empty"}}.'
)
CONTINUE_USER = "Earlier episode ({old_cue}):\n{old_narrative}\n\nNew episode ({new_cue}):\n{new_narrative}"

PREDICT_SYSTEM = (
    "Using only the cue and the known facts, guess in two or three sentences what was said in the conversation."
)
PREDICT_USER = "Cue: {cue}\nKnown facts:\n{facts}"
NO_FACTS = "(none)"

DISTILL_SYSTEM = (
    "Compare a guess of a conversation with the real messages. List the useful facts in the messages that the "
    'guess missed or got wrong. Each fact has a topic "<entity> + <aspect>" (e.g. "Alice + job"), one sentence '
    "with names and absolute dates (count relative dates from the date shown on the message), and the numbers "
    "of its messages. When the guess missed nothing useful, answer an empty list. "
    'Answer JSON: {{"facts": [{{"topic": "...", "fact": "...", "messages": [1]}}]}}.'
)
DISTILL_USER = "Guess:\n{prediction}\n\nReal messages:\n{messages}"

RECONCILE_SYSTEM = (
    "You maintain a set of facts. Compare a new fact with similar stored facts. Answer JSON "
    '{{"action": "add" | "merge" | "replace", "target": <stored fact number or 0>, "merged_fact": "..."}}: '
    '"add" when it is about something else, "merge" when it adds detail to a stored fact (write the combined '
    'fact), "replace" when it contradicts or updates a stored fact.'
)
RECONCILE_USER = "New fact: {fact}\n\nStored facts:\n{existing}"
EXISTING_LINE = "[{number}] {fact}"


class GroupItem(BaseModel):
    """One episode: its message numbers (any order) and a short topic."""

    messages: list[int] = Field(min_length=1, max_length=30)
    topic: str = Field(max_length=60)


class GroupAnswer(BaseModel):
    """Episodes of a buffer as groups of message numbers (validated by `segmentation.clean_groups`)."""

    episodes: list[GroupItem] = Field(min_length=1, max_length=10)


class EpisodeAnswer(BaseModel):
    """An episode's cue and narrative."""

    cue: str = Field(max_length=80)
    narrative: str = Field(max_length=600)


class ContinueAnswer(BaseModel):
    """Whether a new episode continues an earlier one, and their merged narrative."""

    same_event: bool
    narrative: str = Field(max_length=800)


class FactItem(BaseModel):
    """One distilled fact: a topic cue, the statement, and its source message numbers."""

    topic: str = Field(max_length=80)
    fact: str = Field(max_length=300)
    messages: list[int] = Field(min_length=1, max_length=10)


class DistillAnswer(BaseModel):
    """The facts a prediction missed; an empty list when the prediction missed nothing (a perfect guess)."""

    facts: list[FactItem] = Field(max_length=6)


class ReconcileAnswer(BaseModel):
    """How a new fact relates to the stored similar facts."""

    action: Literal["add", "merge", "replace"]
    target: int
    """1-based number of the stored fact to merge into or replace; 0 for "add"."""
    merged_fact: str = Field(max_length=400)


def _pair(system: str, user: str) -> list[Message]:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def group_messages(rendered: str, count: int) -> list[Message]:
    """The grouping request for a buffer of `count` numbered messages."""
    return _pair(GROUP_SYSTEM.format(count=count), GROUP_USER.format(messages=rendered))


def episode_messages(rendered: str) -> list[Message]:
    """The narrative + cue request for one episode's messages, each rendered with its own date."""
    return _pair(EPISODE_SYSTEM.format(), EPISODE_USER.format(messages=rendered))


def continue_messages(old_cue: str, old_narrative: str, new_cue: str, new_narrative: str) -> list[Message]:
    """The continuation request: an earlier episode and a new one."""
    user = CONTINUE_USER.format(
        old_cue=old_cue, old_narrative=old_narrative, new_cue=new_cue, new_narrative=new_narrative
    )
    return _pair(CONTINUE_SYSTEM, user)


def predict_messages(cue: str, facts: list[str]) -> list[Message]:
    """The prediction request: an episode's cue and the related stored facts only."""
    listed = "\n".join(f"- {fact}" for fact in facts) or NO_FACTS
    return _pair(PREDICT_SYSTEM, PREDICT_USER.format(cue=cue, facts=listed))


def distill_messages(prediction: str, rendered: str) -> list[Message]:
    """The distillation request: the prediction against the real numbered messages, each with its own date."""
    return _pair(DISTILL_SYSTEM.format(), DISTILL_USER.format(prediction=prediction, messages=rendered))


def reconcile_messages(fact: str, existing: list[str]) -> list[Message]:
    """The reconciliation request: a candidate fact and its similar stored facts numbered from 1."""
    lines = "\n".join(EXISTING_LINE.format(number=n, fact=old) for n, old in enumerate(existing, start=1))
    return _pair(RECONCILE_SYSTEM, RECONCILE_USER.format(fact=fact, existing=lines))
