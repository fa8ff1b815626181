"""Text helpers of the LLM builders: dates, numbered message listings, turn batches, anchor cues."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from memora_rl.data.records import Turn


def format_day(moment: datetime | None) -> str:
    """A date as "8 May 2023" (or "unknown date").

    >>> format_day(datetime(2023, 5, 8, 13, 56))
    '8 May 2023'
    """
    return f"{moment.day} {moment:%B %Y}" if moment is not None else "unknown date"


def render_messages(turns: Sequence[Turn], max_chars: int, dated: bool = False) -> str:
    """Numbered lines "[1] Speaker: text" (1-based), texts cut at `max_chars`.

    With `dated`, every line carries its own message's date ("[1] (8 May 2023) Speaker: text"), so
    relative dates of a buffer spanning several sessions resolve against the right day.
    """
    lines: list[str] = []
    for number, turn in enumerate(turns, start=1):
        text = turn.text if len(turn.text) <= max_chars else turn.text[: max_chars - 3] + "..."
        date = f"({format_day(turn.time)}) " if dated else ""
        lines.append(f"[{number}] {date}{turn.speaker}: {text}")
    return "\n".join(lines)


def batches(turns: Sequence[Turn], size: int) -> list[list[Turn]]:
    """Consecutive slices of at most `size` turns.

    >>> [len(b) for b in batches(list(range(5)), 2)]
    [2, 2, 1]
    """
    return [list(turns[start : start + size]) for start in range(0, len(turns), size)]


def normalise_anchor(text: str, entity: str) -> str | None:
    """An "<entity> + <aspect>" cue from an LLM's anchor text, or None when nothing usable is left.

    >>> normalise_anchor("Alice + new job", "Bob")
    'Alice + new job'
    >>> normalise_anchor("hiking", "Bob")
    'Bob + hiking'
    >>> normalise_anchor(" + ", "Bob") is None
    True
    """
    parts = [part.strip(" .\"'") for part in text.split("+")]
    parts = [part for part in parts if part]
    if not parts:
        return None
    if len(parts) == 1:
        return f"{entity} + {parts[0][:60]}" if entity else parts[0][:60]
    return f"{parts[0][:40]} + {' '.join(parts[1:])[:60]}"
