"""Graphs in one store are isolated: a graph's keyword (BM25) ranking ignores its neighbours' entries."""

from __future__ import annotations

import numpy as np
import pytest

from memora_rl.memory import EntryCandidate, SQLiteGraphStore, StoreConfig, always_create, bm25

TEXTS = [
    ("alpha alpha note", "alpha alpha here"),
    ("beta note", "beta once"),
    ("gamma note", "nothing to see"),
    ("delta note", "nothing either"),
]
"""Graph g: in g alone "alpha" and "beta" are equally rare, and the alpha entry says it more often."""


def _add(store, graph_id: str, texts: list[tuple[str, str]]) -> list[str]:
    vectors = np.ones((len(texts), store.dim), dtype=np.float32)  # one shared vector: only BM25 tells them apart
    candidates = [EntryCandidate(abstraction=abstraction, value=value) for abstraction, value in texts]
    return store.add_entries_bulk(graph_id, candidates, vectors, vectors)


def _bm25_order(store, graph_id: str, text: str) -> list[str]:
    view = store._cache(graph_id)
    return [view.entry_ids[row] for row in store._search.bm25_ranking(view, graph_id, text, 10, None)]


@pytest.fixture
def pair(stores, embedder):
    """The same graph g alone, and beside a graph h full of "alpha" entries (closed by `stores`)."""
    alone = stores.open("alone", embedder=embedder)
    shared = stores.open("shared", embedder=embedder)
    _add(alone, "g", TEXTS)
    _add(shared, "h", [(f"alpha item {i}", "alpha alpha") for i in range(30)])
    _add(shared, "g", TEXTS)
    return alone, shared


def test_keyword_ranking_of_a_graph_ignores_other_graphs(pair):
    alone, shared = pair
    assert _bm25_order(alone, "g", "alpha beta") == ["e0", "e1"]
    assert _bm25_order(shared, "g", "alpha beta") == ["e0", "e1"]


def test_search_results_of_a_graph_ignore_other_graphs(pair):
    alone, shared = pair
    for query in ("alpha beta", "beta note", "alpha"):
        assert shared.search("g", query, k=4) == alone.search("g", query, k=4)


def test_common_words_are_judged_within_the_graph(stores, embedder):
    config = StoreConfig(ann_threshold=4, bm25_max_doc_share=0.3)
    with stores.open("s", embedder=embedder, config=config) as store:
        _add(store, "h", [(f"alpha item {i}", "alpha") for i in range(30)])
        _add(store, "g", TEXTS)
        # "alpha" fills graph h but is in 1 of g's 4 entries: kept in g; "note" is in all of g's: dropped
        assert store._search.query_terms(store._cache("g"), "g", ["alpha", "note"]) == ["alpha"]


def test_a_graphs_kept_word_counts_follow_its_writes(stores, embedder):
    """The per-graph counts behind the common-word filter are kept between queries and dropped on a write."""
    config = StoreConfig(ann_threshold=4, bm25_max_doc_share=0.3)
    with stores.open("s", embedder=embedder, config=config) as store:
        _add(store, "h", [(f"alpha item {i}", "alpha") for i in range(30)])
        _add(store, "g", TEXTS)
        assert store._search.query_terms(store._cache("g"), "g", ["alpha", "note"]) == ["alpha"]
        assert store._cache("g").doc_counts["alpha"] == 1  # counted once, within g, then kept
        vector = np.ones(store.dim, dtype=np.float32)
        for i in range(4):  # upserts patch the loaded view in place: now in 5 of g's 8 entries
            candidate = EntryCandidate(abstraction=f"alpha more {i}", value="alpha")
            store.upsert_entry("g", candidate, always_create, abstraction_vector=vector, value_vector=vector)
        assert store._search.query_terms(store._cache("g"), "g", ["alpha", "zebra"]) == ["zebra"]  # a stale 1 keeps it


def test_a_kept_store_count_decides_as_a_fresh_count_after_another_graphs_writes(stores, embedder):
    """A store-wide count kept as an upper bound under the cut still decides alike once other graphs grow."""
    config = StoreConfig(ann_threshold=4, bm25_max_doc_share=0.3)
    with stores.open("s", embedder=embedder, config=config) as store:
        _add(store, "g", TEXTS)
        assert store._search.query_terms(store._cache("g"), "g", ["beta", "note"]) == ["beta"]
        assert store._cache("g").doc_counts == {"beta": 1, "note": 4}  # one graph: the store's count is g's
        _add(store, "h", [(f"beta item {i}", "beta") for i in range(30)])  # "beta" now common store-wide
        kept = store._search.query_terms(store._cache("g"), "g", ["beta", "note"])
    with stores.open("s", embedder=embedder, config=config) as fresh:
        assert kept == fresh._search.query_terms(fresh._cache("g"), "g", ["beta", "note"]) == ["beta"]
        assert fresh._cache("g").doc_counts == {"beta": 1, "note": 4}  # counted within g: 31 store-wide


def test_scores_match_fts5_bm25_in_a_store_of_one_graph(tmp_path, embedder):
    """SQLite only: the graph-own statistics give FTS5's own bm25() (PostgreSQL: test_postgres_keywords)."""
    alone = SQLiteGraphStore(tmp_path / "alone.sqlite", embedder=embedder)
    _add(alone, "g", TEXTS)
    conn = alone._db.conn
    fts = conn.execute(
        'SELECT rowid, -bm25(entries_fts) FROM entries_fts WHERE entries_fts MATCH \'"alpha" OR "beta"\' '
        "ORDER BY bm25(entries_fts)"
    ).fetchall()
    view = alone._cache("g")
    bm25.ensure_vocab(conn)
    frequencies = [bm25.term_frequencies(conn, "g", term) for term in ("alpha", "beta")]
    ours = bm25.bm25_scores(
        frequencies, bm25.entry_lengths(conn, [seq for seq, _ in fts]), 4, bm25.token_total(conn, "g") / 4
    )
    assert [seq for seq, _ in fts] == sorted(ours, key=lambda seq: -ours[seq])
    assert [score for _, score in fts] == pytest.approx([ours[seq] for seq, _ in fts])
    assert view.token_total is None  # filled by a search, not by these direct calls
    alone.close()
