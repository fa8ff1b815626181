"""Validation of LLM episode groupings by message index, shared by the Memora and NEMORI builders.

An LLM is asked to group the numbered messages of a batch (1-based in the prompt) into
episodes. Its answer is never trusted: `clean_groups` turns any list of index lists into
a partition of the batch. Out-of-range indices and repeated indices are dropped (first
occurrence wins), empty groups vanish, and every message nobody claimed joins the
episode of its nearest earlier neighbour (or of the next one when it comes first), so
no message is ever lost. `contiguous_groups` additionally turns a partition into
consecutive runs for Memora, whose episodes are segments of the session.
`structure_segments` segments formatted input (markdown headers, fenced code) without an LLM.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import BaseModel


class GroupingOutcome(BaseModel):
    """A cleaned partition of a batch and what had to be fixed to get it."""

    groups: list[list[int]]
    """0-based message indices per episode; together they cover 0..count-1 exactly once."""
    dropped_out_of_range: int = 0
    """Indices outside 1..count that were ignored."""
    dropped_duplicates: int = 0
    """Indices already claimed by an earlier group (or twice by the same one) that were ignored."""
    reattached: int = 0
    """Messages no group claimed, attached to a neighbour's episode."""
    fallback: bool = False
    """True when no usable group was left and the whole batch became one episode."""

    @property
    def repaired(self) -> bool:
        """True when anything in the LLM's answer had to be fixed."""
        return bool(self.dropped_out_of_range or self.dropped_duplicates or self.reattached or self.fallback)


def clean_groups(raw_groups: Sequence[Sequence[int]], count: int, base: int = 1) -> GroupingOutcome:
    """Turn an LLM's index groups into a partition of `count` messages (0-based indices out).

    Args:
        raw_groups: index lists as the LLM wrote them (numbered from `base`).
        count: messages in the batch.
        base: the number of the first message in the prompt (1 for "[1] ...").

    >>> clean_groups([[1, 2], [2, 9], [5]], count=5).groups
    [[0, 1, 2, 3], [4]]
    >>> clean_groups([], count=3).fallback
    True
    """
    if count <= 0:
        return GroupingOutcome(groups=[])
    owner: dict[int, int] = {}
    groups: list[list[int]] = []
    out_of_range = duplicates = 0
    for raw in raw_groups:
        kept: list[int] = []
        for number in raw:
            index = number - base
            if not 0 <= index < count:
                out_of_range += 1
            elif index in owner or index in kept:
                duplicates += 1
            else:
                kept.append(index)
        if kept:
            for index in kept:
                owner[index] = len(groups)
            groups.append(kept)
    if not groups:
        return GroupingOutcome(
            groups=[list(range(count))],
            dropped_out_of_range=out_of_range,
            dropped_duplicates=duplicates,
            fallback=True,
        )
    missing = [index for index in range(count) if index not in owner]
    for index in missing:
        group = _neighbour_group(index, owner, count)
        owner[index] = group
        groups[group].append(index)
    return GroupingOutcome(
        groups=[sorted(group) for group in groups],
        dropped_out_of_range=out_of_range,
        dropped_duplicates=duplicates,
        reattached=len(missing),
    )


def _neighbour_group(index: int, owner: dict[int, int], count: int) -> int:
    """The group of the nearest claimed message before `index`, else the nearest one after it."""
    for other in range(index - 1, -1, -1):
        if other in owner:
            return owner[other]
    for other in range(index + 1, count):
        if other in owner:
            return owner[other]
    raise ValueError("no claimed message in the batch")  # unreachable: clean_groups has >= 1 group


def contiguous_groups(groups: Sequence[Sequence[int]], count: int) -> list[list[int]]:
    """Consecutive runs that start where the partition's episodes start (Memora segments).

    Each group's smallest index opens a segment; message 0 always does. The result
    covers 0..count-1 in order, so interleaved groups become their nearest segmentation.

    >>> contiguous_groups([[0, 1, 4], [2, 3], [5]], count=6)
    [[0, 1], [2, 3, 4], [5]]
    """
    starts = sorted({0, *(min(group) for group in groups if group)} & set(range(count)))
    bounds = [*starts, count]
    return [list(range(bounds[i], bounds[i + 1])) for i in range(len(starts)) if bounds[i] < bounds[i + 1]]


def clean_message_refs(numbers: Sequence[int], count: int, base: int = 1) -> list[int]:
    """Valid, distinct 0-based indices among `numbers` (an LLM's "which messages" list), in order.

    >>> clean_message_refs([3, 3, 0, 7, 1], count=4)
    [2, 0]
    """
    kept: list[int] = []
    for number in numbers:
        index = number - base
        if 0 <= index < count and index not in kept:
            kept.append(index)
    return kept


HEADER = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
"""A markdown ATX header line ("## Usage"); "#tag" without a space is not one."""
FENCE = re.compile(r"^ {0,3}```")
"""A line opening or closing a fenced code block."""


def header_turns(texts: Sequence[str]) -> dict[int, str]:
    """Index -> header text of the messages whose first line is a markdown header outside a code fence.

    A fence opened in one message and closed in a later one spans them, so a "# comment"
    line of code inside it is not a header.

    >>> header_turns(["# Setup", "```", "# a comment", "```", "## Usage ##", "#tag"])
    {0: 'Setup', 4: 'Usage'}
    """
    headers: dict[int, str] = {}
    in_fence = False
    for index, text in enumerate(texts):
        lines = text.strip("\n").splitlines()
        if not in_fence and lines and (match := HEADER.match(lines[0])) and match.group(2).strip():
            headers[index] = match.group(2).strip()
        for line in lines:
            if FENCE.match(line):
                in_fence = not in_fence
    return headers


def structure_segments(texts: Sequence[str]) -> list[tuple[list[int], str]]:
    """Consecutive runs of messages, one per markdown header (its text is the topic); no LLM.

    Each header message outside a code fence opens a segment, so a fenced code block stays
    within one; messages before the first header form a segment with an empty topic.

    >>> structure_segments(["intro", "# Setup", "```", "# pip", "```", "## Usage", "run it"])
    [([0], ''), ([1, 2, 3, 4], 'Setup'), ([5, 6], 'Usage')]
    """
    headers = header_turns(texts)
    runs = contiguous_groups([[index] for index in headers], len(texts))
    return [(run, headers.get(run[0], "")) for run in runs]
