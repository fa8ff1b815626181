"""Pure steps of the extractive builder: turns -> salient statements, and sessions -> segments.

Rules (all documented here, all deterministic):

- **Salient statement**: a turn whose text holds at least `min_content_words` content words
  (see `keyphrases.is_content_word`; the speakers' own names do not count), so pure
  greetings, thanks and reactions ("Hey Mel! Good to see you!") are skipped. A turn longer
  than `max_statement_words` words is split at sentence ends into chunks of at most that
  many words (a single longer sentence stays whole); each chunk with enough content words
  is a statement, and when none qualifies the whole turn is kept, so every turn with
  content is the source of at least one statement.
- **Kind**: "episodic" when the statement mentions a time (a temporal word, a weekday or
  month, a year such as 2023), else "factual".
- **Segments** never cross a session. "window": consecutive blocks of `window_turns` turns.
  "change_point": a new segment starts at a turn whose embedding has cosine below
  `threshold` with the running segment's mean, once the segment has `min_turns` turns;
  a segment is also closed at `max_turns` turns.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from memora_rl.builders.keyphrases import TEMPORAL_WORDS, content_words, split_sentences, words
from memora_rl.data.records import Turn

_YEAR_RE = re.compile(r"\b(19|20)\d\d\b")


class Statement(BaseModel):
    """A salient piece of one turn that becomes one memory entry."""

    model_config = ConfigDict(frozen=True)

    turn_id: str
    speaker: str
    text: str
    """The statement, verbatim from the turn (the whole turn or a run of its sentences)."""
    session_index: int
    time: datetime | None = None


def statement_kind(text: str) -> Literal["episodic", "factual"]:
    """'episodic' when `text` mentions a time, else 'factual'.

    >>> statement_kind("I went to a support group yesterday.")
    'episodic'
    >>> statement_kind("My favourite book is Charlotte's Web.")
    'factual'
    """
    if _YEAR_RE.search(text) or any(word in TEMPORAL_WORDS for word in words(text)):
        return "episodic"
    return "factual"


def sentence_chunks(text: str, max_words: int) -> list[str]:
    """Greedily pack consecutive sentences into chunks of at most `max_words` words.

    >>> sentence_chunks("One two three. Four five. Six seven eight nine.", max_words=5)
    ['One two three. Four five.', 'Six seven eight nine.']
    """
    chunks: list[str] = []
    current: list[str] = []
    count = 0
    for sentence in split_sentences(text):
        length = len(sentence.split())
        if current and count + length > max_words:
            chunks.append(" ".join(current))
            current, count = [], 0
        current.append(sentence)
        count += length
    if current:
        chunks.append(" ".join(current))
    return chunks


def turn_statements(
    turn: Turn, max_statement_words: int, min_content_words: int, ignore: Iterable[str] = ()
) -> list[Statement]:
    """The salient statements of one turn (empty for a greeting or filler turn); see the module rules."""
    ignored = list(ignore)
    if len(content_words(turn.text, ignored)) < min_content_words:
        return []
    pieces = [turn.text.strip()]
    if len(turn.text.split()) > max_statement_words:
        chunks = sentence_chunks(turn.text, max_statement_words)
        kept = [chunk for chunk in chunks if len(content_words(chunk, ignored)) >= min_content_words]
        pieces = kept or pieces
    return [
        Statement(turn_id=turn.id, speaker=turn.speaker, text=piece, session_index=turn.session_index, time=turn.time)
        for piece in pieces
    ]


def window_segments(n_turns: int, window_turns: int) -> list[tuple[int, int]]:
    """Half-open (start, end) blocks of `window_turns` turns covering `n_turns`.

    >>> window_segments(7, 3)
    [(0, 3), (3, 6), (6, 7)]
    """
    return [(start, min(start + window_turns, n_turns)) for start in range(0, n_turns, window_turns)]


def change_point_segments(
    vectors: np.ndarray, threshold: float, min_turns: int, max_turns: int
) -> list[tuple[int, int]]:
    """Half-open segments split where a turn drifts from the running segment mean.

    Args:
        vectors: Unit turn embeddings of one session, shape (T, dim), in turn order.
        threshold: Cosine below which a turn opens a new segment.
        min_turns: A segment is never split before it has this many turns.
        max_turns: A segment is always closed at this many turns.

    >>> v = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    >>> change_point_segments(v, threshold=0.5, min_turns=1, max_turns=10)
    [(0, 2), (2, 4)]
    """
    segments: list[tuple[int, int]] = []
    start = 0
    total = np.zeros(vectors.shape[1], dtype=np.float64)  # (dim,) running sum of the open segment
    for index, vector in enumerate(vectors):
        length = index - start
        if length >= max_turns or (length >= min_turns and _cosine(total, vector) < threshold):
            segments.append((start, index))
            start, total = index, np.zeros_like(total)
        total += vector
    if start < len(vectors):
        segments.append((start, len(vectors)))
    return segments


def _cosine(total: np.ndarray, vector: np.ndarray) -> float:
    """Cosine between a (non-normalised) running sum and a unit vector; 1.0 for an empty sum."""
    norm = float(np.linalg.norm(total))
    return 1.0 if norm == 0.0 else float(total @ vector) / norm
