"""BM25 keyword ranking of one graph's entries with that graph's own statistics.

FTS5's `bm25()` takes its statistics (row count, average length, document frequency of
each word) from the whole `entries_fts` index, i.e. from every graph of the store, so a
graph's keyword ranking changed when other graphs were built into the same file. Here the
counts still come from the FTS5 index (`fts5vocab` instances and the `docsize` table) but
only the graph's entries are counted; the formula is FTS5's: k1 = 1.2, b = 0.75, an entry's
length is its token count over abstraction and value, and an IDF at or below 0 becomes 1e-6.
"""

from __future__ import annotations

import math
import re
import sqlite3
import unicodedata
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol

K1 = 1.2
B = 0.75
MIN_IDF = 1e-6
"""FTS5's floor for the IDF of a word found in half the entries or more."""
_SEPARATORS = re.compile(r"[\W_]+", re.UNICODE)
_INSTANCES = "temp.entries_vocab_instance"
_ROWS = "temp.entries_vocab"
_CHUNK = 900  # bound parameters per query, under SQLite's default limit


def fts_terms(word: str) -> list[str]:
    """The index terms of a query word as FTS5's unicode61 tokenizer makes them (lower case, no accents).

    >>> fts_terms("Café")
    ['cafe']
    >>> fts_terms("naïve_x")
    ['naive', 'x']
    """
    decomposed = unicodedata.normalize("NFKD", word.lower())
    plain = "".join(char for char in decomposed if not unicodedata.combining(char))
    return [term for term in _SEPARATORS.split(plain) if term]


def _varints(blob: bytes) -> Iterator[int]:
    """The integers of an SQLite varint sequence (as FTS5 stores per-column token counts)."""
    value, length = 0, 0
    for byte in blob:
        if length == 8:  # the ninth byte carries 8 bits
            yield (value << 8) | byte
            value, length = 0, 0
            continue
        value, length = (value << 7) | (byte & 0x7F), length + 1
        if byte < 0x80:
            yield value
            value, length = 0, 0


def ensure_vocab(conn: sqlite3.Connection) -> None:
    """Create the connection's `fts5vocab` views of the index (temp schema; once per connection)."""
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {_INSTANCES} USING fts5vocab(main, entries_fts, 'instance')")
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {_ROWS} USING fts5vocab(main, entries_fts, 'row')")


def store_doc_count(conn: sqlite3.Connection, term: str) -> int:
    """Entries of the whole store holding an index term (an upper bound of any graph's count; cheap)."""
    row = conn.execute(f"SELECT doc FROM {_ROWS} WHERE term = ?", (term,)).fetchone()
    return int(row[0]) if row else 0


def graph_doc_count(conn: sqlite3.Connection, graph_id: str, term: str) -> int:
    """Entries of the graph holding an index term."""
    return conn.execute(
        f"SELECT count(DISTINCT v.doc) FROM {_INSTANCES} v JOIN entries e ON e.seq = v.doc "
        "WHERE v.term = ? AND e.graph_id = ?",
        (term, graph_id),
    ).fetchone()[0]


def term_frequencies(conn: sqlite3.Connection, graph_id: str, term: str) -> dict[int, int]:
    """Occurrences of an index term per entry seq of the graph (entries without it are absent)."""
    return dict(
        conn.execute(
            f"SELECT v.doc, count(*) FROM {_INSTANCES} v JOIN entries e ON e.seq = v.doc "
            "WHERE v.term = ? AND e.graph_id = ? GROUP BY v.doc",
            (term, graph_id),
        ).fetchall()
    )


def token_total(conn: sqlite3.Connection, graph_id: str) -> int:
    """Tokens (abstraction + value) of all the graph's entries together."""
    sizes = conn.execute(
        "SELECT d.sz FROM entries_fts_docsize d JOIN entries e ON e.seq = d.id WHERE e.graph_id = ?", (graph_id,)
    )
    return sum(sum(_varints(blob)) for (blob,) in sizes)


def entry_lengths(conn: sqlite3.Connection, seqs: Sequence[int]) -> dict[int, int]:
    """Token count (abstraction + value) of the given entries, by seq."""
    lengths: dict[int, int] = {}
    for start in range(0, len(seqs), _CHUNK):
        part = list(seqs[start : start + _CHUNK])
        marks = ",".join("?" * len(part))
        for seq, blob in conn.execute(f"SELECT id, sz FROM entries_fts_docsize WHERE id IN ({marks})", part):
            lengths[seq] = sum(_varints(blob))
    return lengths


def bm25_scores(
    frequencies: Sequence[Mapping[int, int]], lengths: Mapping[int, int], entries: int, average_length: float
) -> dict[int, float]:
    """BM25 score (higher is better) of every entry holding a query term.

    Args:
        frequencies: per query term, its occurrences per entry seq of the graph.
        lengths: token count of each entry in `frequencies`.
        entries: how many entries the graph holds.
        average_length: their mean token count.

    >>> scores = bm25_scores([{1: 2}, {2: 1}], {1: 4, 2: 4}, entries=4, average_length=4.0)
    >>> scores[1] > scores[2] > 0
    True
    """
    average_length = average_length or 1.0
    scores: dict[int, float] = {}
    for per_entry in frequencies:
        found = len(per_entry)
        idf = math.log((entries - found + 0.5) / (found + 0.5))
        idf = idf if idf > 0.0 else MIN_IDF
        for seq, count in per_entry.items():
            norm = K1 * (1 - B + B * lengths.get(seq, 0) / average_length)
            scores[seq] = scores.get(seq, 0.0) + idf * count * (K1 + 1) / (count + norm)
    return scores


class KeywordIndex(Protocol):
    """Where a backend keeps the keyword statistics BM25 reads, and how it keeps them current.

    SQLite: the FTS5 index, kept by triggers (`Fts5Keywords`). PostgreSQL: term and length rows
    written beside each entry by the store itself (`memory.pg_keywords.PgKeywords`). Both count
    the terms of FTS5's unicode61 tokenizer, so a graph's ranking is the same on either backend.
    """

    def index(self, conn: Any, graph_id: str, rows: Sequence[tuple[int, str, str]]) -> None:
        """(Re)index entries written in the caller's transaction, as (seq, abstraction, value)."""
        ...

    def prepare(self, conn: Any) -> None:
        """Make the statistics readable on this connection (once per connection)."""
        ...

    def store_doc_counts(self, conn: Any, terms: Sequence[str]) -> dict[str, int]:
        """Entries of the whole store holding each term (a cheap upper bound of any graph's count)."""
        ...

    def graph_doc_counts(self, conn: Any, graph_id: str, terms: Sequence[str]) -> dict[str, int]:
        """Entries of the graph holding each term."""
        ...

    def term_frequencies(self, conn: Any, graph_id: str, terms: Sequence[str]) -> dict[str, dict[int, int]]:
        """Occurrences of each term per entry seq of the graph (terms in no entry map to nothing)."""
        ...

    def token_total(self, conn: Any, graph_id: str) -> int:
        """Tokens (abstraction + value) of all the graph's entries together."""
        ...

    def entry_lengths(self, conn: Any, seqs: Sequence[int]) -> dict[int, int]:
        """Token count of the given entries, by seq."""
        ...


class Fts5Keywords:
    """The SQLite store's `KeywordIndex`: the FTS5 index, which triggers keep in step with `entries`."""

    def index(self, conn: sqlite3.Connection, graph_id: str, rows: Sequence[tuple[int, str, str]]) -> None:
        """Nothing to do: the `entries_fts` triggers index every insert and update."""

    def prepare(self, conn: sqlite3.Connection) -> None:
        """Create the connection's `fts5vocab` views (`ensure_vocab`)."""
        ensure_vocab(conn)

    def store_doc_counts(self, conn: sqlite3.Connection, terms: Sequence[str]) -> dict[str, int]:
        """See `store_doc_count` (a lookup each: the connection is in-process)."""
        return {term: store_doc_count(conn, term) for term in terms}

    def graph_doc_counts(self, conn: sqlite3.Connection, graph_id: str, terms: Sequence[str]) -> dict[str, int]:
        """See `graph_doc_count`."""
        return {term: graph_doc_count(conn, graph_id, term) for term in terms}

    def term_frequencies(
        self, conn: sqlite3.Connection, graph_id: str, terms: Sequence[str]
    ) -> dict[str, dict[int, int]]:
        """See `term_frequencies`."""
        return {term: term_frequencies(conn, graph_id, term) for term in terms}

    def token_total(self, conn: sqlite3.Connection, graph_id: str) -> int:
        """See `token_total`."""
        return token_total(conn, graph_id)

    def entry_lengths(self, conn: sqlite3.Connection, seqs: Sequence[int]) -> dict[int, int]:
        """See `entry_lengths`."""
        return entry_lengths(conn, seqs)
