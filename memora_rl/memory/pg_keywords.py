"""The PostgreSQL store's keyword index: the statistics BM25 reads, kept as rows beside the entries.

SQLite ranks keywords with FTS5's statistics (`memory.bm25`). PostgreSQL's full-text search
splits, normalises and weighs words its own way (its parser keeps e-mail addresses and
hyphenated words whole, its `ts_rank` is not BM25), so it cannot give the same ranking. This
store keeps what BM25 needs in two tables instead, written in the same transaction as the
entry (`GraphWriter` calls `index`):

- `entry_terms(graph_id, term, entry_seq, count)`: occurrences of each index term in an
  entry's abstraction and value;
- `entry_tokens(entry_seq, graph_id, tokens)`: the entry's token count (BM25's length).

The terms are made by SQLite's own FTS5 unicode61 tokenizer (`Fts5Tokenizer`, an in-memory
FTS5 table), so they are the SQLite store's index terms exactly, accents, ligatures and
full-width letters included, and `bm25.bm25_scores` computes the same scores from them: a
graph's keyword ranking is the same on both backends. Deleting an entry cascades to its rows.
"""

from __future__ import annotations

import functools
import sqlite3
import threading
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from memora_rl.memory.sql_io import chunks

if TYPE_CHECKING:
    from memora_rl.memory.pg_connection import PgConn


class Fts5Tokenizer:
    """SQLite's FTS5 unicode61 tokenizer, run through an in-memory FTS5 table (the SQLite store's own terms)."""

    def __init__(self) -> None:
        self._conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self._conn.execute("CREATE VIRTUAL TABLE texts USING fts5(abstraction, value)")
        self._conn.execute("CREATE VIRTUAL TABLE terms USING fts5vocab(texts, 'instance')")
        self._lock = threading.Lock()

    def terms(self, rows: Sequence[tuple[int, str, str]]) -> dict[int, Counter[str]]:
        """Index terms with their counts of each (key, abstraction, value) row, by key.

        >>> Fts5Tokenizer().terms([(1, "Alice's job", "Café owner")])
        {1: Counter({'alice': 1, 'cafe': 1, 'job': 1, 'owner': 1, 's': 1})}
        """
        with self._lock:
            self._conn.executemany("INSERT INTO texts(rowid, abstraction, value) VALUES (?,?,?)", rows)
            found: dict[int, Counter[str]] = {key: Counter() for key, _, _ in rows}
            for key, term, count in self._conn.execute("SELECT doc, term, count(*) FROM terms GROUP BY doc, term"):
                found[key][term] = count
            self._conn.execute("DELETE FROM texts")
        return found


@functools.cache
def tokenizer() -> Fts5Tokenizer:
    """The process's tokenizer (made on first use)."""
    return Fts5Tokenizer()


def _copy(conn: PgConn, target: str, rows: Sequence[tuple]) -> None:
    """Insert rows into `target` (`table(columns)`) with one COPY, inside the caller's transaction.

    An entry has about ten term rows, so a bulk load writes many, and one INSERT a row made this
    index 60% of a load's time: with COPY a 20k-entry bulk load took 5.8 s instead of 7.6 s here.
    """
    if rows:
        with conn.raw.cursor() as cursor, cursor.copy(f"COPY {target} FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)


class PgKeywords:
    """The PostgreSQL store's `bm25.KeywordIndex` (see the module docstring)."""

    def index(self, conn: PgConn, graph_id: str, rows: Sequence[tuple[int, str, str]]) -> None:
        """(Re)write the term and length rows of entries written in the caller's transaction."""
        if not rows:
            return
        seqs = [seq for seq, _, _ in rows]
        for part in chunks(seqs):
            marks = ",".join("?" * len(part))
            conn.execute(f"DELETE FROM entry_terms WHERE entry_seq IN ({marks})", list(part))
            conn.execute(f"DELETE FROM entry_tokens WHERE entry_seq IN ({marks})", list(part))
        terms: list[tuple[str, str, int, int]] = []
        lengths: list[tuple[int, str, int]] = []
        for seq, counts in tokenizer().terms(rows).items():
            terms += [(graph_id, term, seq, count) for term, count in counts.items()]
            lengths.append((seq, graph_id, sum(counts.values())))
        _copy(conn, "entry_terms(graph_id, term, entry_seq, count)", terms)
        _copy(conn, "entry_tokens(entry_seq, graph_id, tokens)", lengths)

    def prepare(self, conn: PgConn) -> None:
        """Nothing to prepare: the tables are always there."""

    def store_doc_counts(self, conn: PgConn, terms: Sequence[str]) -> dict[str, int]:
        """Entries of the whole store holding each term, in one round trip."""
        found = dict(
            conn.execute("SELECT term, count(*) FROM entry_terms WHERE term = ANY(?) GROUP BY term", (list(terms),))
        )
        return {term: int(found.get(term, 0)) for term in terms}

    def graph_doc_counts(self, conn: PgConn, graph_id: str, terms: Sequence[str]) -> dict[str, int]:
        """Entries of the graph holding each term, in one round trip."""
        found = dict(
            conn.execute(
                "SELECT term, count(*) FROM entry_terms WHERE graph_id = ? AND term = ANY(?) GROUP BY term",
                (graph_id, list(terms)),
            )
        )
        return {term: int(found.get(term, 0)) for term in terms}

    def term_frequencies(self, conn: PgConn, graph_id: str, terms: Sequence[str]) -> dict[str, dict[int, int]]:
        """Occurrences of each term per entry seq of the graph, in one round trip (a query's terms together)."""
        found: dict[str, dict[int, int]] = {term: {} for term in terms}
        rows = conn.execute(
            "SELECT term, entry_seq, count FROM entry_terms WHERE graph_id = ? AND term = ANY(?)",
            (graph_id, list(terms)),
        )
        for term, seq, count in rows:
            found[term][seq] = count
        return found

    def token_total(self, conn: PgConn, graph_id: str) -> int:
        """Tokens (abstraction + value) of all the graph's entries together."""
        return int(
            conn.execute(
                "SELECT COALESCE(sum(tokens), 0)::bigint FROM entry_tokens WHERE graph_id = ?", (graph_id,)
            ).fetchone()[0]
        )

    def entry_lengths(self, conn: PgConn, seqs: Sequence[int]) -> dict[int, int]:
        """Token count (abstraction + value) of the given entries, by seq."""
        lengths: dict[int, int] = {}
        for part in chunks(list(seqs)):
            marks = ",".join("?" * len(part))
            lengths.update(
                conn.execute(f"SELECT entry_seq, tokens FROM entry_tokens WHERE entry_seq IN ({marks})", list(part))
            )
        return lengths
