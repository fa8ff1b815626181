"""Dialogue turn ids `D<session>:<turn>`: the provenance id every dataset here gives its turns.

One parser for the loaders (which ids are turns), the graph cache (turn neighbours) and the
service's ingest (the next session number).
"""

from __future__ import annotations

import re

TurnKey = tuple[int, int]
"""(session, turn) of a dialogue turn id."""

_TURN_ID_RE = re.compile(r"^D(\d+):(\d+)$")


def turn_key(turn_id: str) -> TurnKey | None:
    """(session, turn) of a turn id like `D3:12`; None for an id of any other form.

    >>> turn_key("D3:12"), turn_key("note-1"), turn_key("D3:")
    ((3, 12), None, None)
    """
    match = _TURN_ID_RE.match(turn_id)
    return (int(match[1]), int(match[2])) if match else None
