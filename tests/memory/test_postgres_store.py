"""What only the PostgreSQL store has: URL dispatch, its errors, its keyword index, pgvector's HNSW index.

The store contract itself runs on both backends in the other modules of this folder (`stores`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memora_rl.errors import GraphError
from memora_rl.memory import (
    EntryCandidate,
    PostgresGraphStore,
    SQLiteGraphStore,
    StoreConfig,
    always_create,
    open_store,
    pg_schema,
    store_exists,
)
from memora_rl.memory.bm25 import fts_terms
from memora_rl.memory.pg_ann import PgVectorIndex
from memora_rl.memory.search import query_words
from memora_rl.memory.sql_io import blob
from tests.memory.helpers import random_unit
from tests.postgres_fixtures import with_schema

psycopg = pytest.importorskip("psycopg")

TEXTS = [
    ("Alice's employer", "Alice works at Nova as a backend engineer since 2023-05-01"),
    ("Bob's café", "Bob runs a naïve little café in São Paulo; the café is Bob's"),
    ("Carol's e-mail", "Carol's address is carol@example.com, snake_case and hyphen-ated words"),
    ("Full width", "Ｆｕｌｌ width ＡＢＣ, the ﬁne ligature and Straße"),
    ("Greek", "Ελληνικά ΣΊΣΥΦΟΣ and x² + y³ = ½"),
    ("CJK", "日本語のテキスト と 中文 and an emoji 😀 for Alice"),
]
QUERIES = ["Alice", "café Bob", "carol example com", "ＡＢＣ fine", "Straße", "Ελληνικά", "日本語のテキスト", "2023 05"]


def _fill(store: object, vectors: np.ndarray) -> list[str]:
    candidates = [EntryCandidate(abstraction=a, value=v, anchors=[a.split()[0]]) for a, v in TEXTS]
    anchors = {c.anchors[0]: vectors[i] for i, c in enumerate(candidates)}
    return store.add_entries_bulk("g", candidates, vectors, vectors, anchors)


def test_open_store_picks_the_backend_from_the_location(pg_stores, tmp_path: Path) -> None:
    with open_store(tmp_path / "a.sqlite") as local:
        assert isinstance(local, SQLiteGraphStore)
    shared = pg_stores.open("picked")
    assert isinstance(shared, PostgresGraphStore) and shared.graph_ids() == []
    with pytest.raises(GraphError, match="Pass the URL as a string"):
        open_store(Path("postgresql://ann@db.example/memory"))  # pathlib turned '//' into '/'


def test_an_unreachable_server_names_the_fix_and_never_the_password(tmp_path: Path) -> None:
    url = f"postgresql://ann:secret@/memory?host={tmp_path}&port=1"  # no server listens on that socket
    with pytest.raises(GraphError, match="Check the URL") as caught:
        open_store(url)
    assert "secret" not in str(caught.value) and "ann@" in str(caught.value)


class _NoPgvector:
    """A connection to a server whose catalogue has no pgvector anywhere."""

    def execute(self, *_: object) -> _NoPgvector:
        return self

    def fetchone(self) -> None:
        return None


def test_a_server_without_pgvector_is_named_with_the_fix() -> None:
    with pytest.raises(GraphError, match=r"no pgvector extension.*pgserver"):
        pg_schema.ensure_pgvector(_NoPgvector(), "postgresql://ann@db.example/memory")


def test_a_schema_of_another_application_another_version_or_none_is_refused(pg_stores, postgres_url: str) -> None:
    foreign = pg_stores.location("foreign")
    with psycopg.connect(foreign, autocommit=True) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER)")
    with pytest.raises(GraphError, match="another application"):
        open_store(foreign)
    old = pg_stores.location("old")
    open_store(old).close()
    with psycopg.connect(old, autocommit=True) as conn:
        conn.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    with pytest.raises(GraphError, match=r"schema version 999.*graph copy"):
        open_store(old)
    with pytest.raises(GraphError, match="no existing schema"):
        open_store(with_schema(postgres_url, "never_created"))


def test_store_exists_only_where_a_store_was_opened(pg_stores, sqlite_stores, postgres_url: str) -> None:
    for stores in (pg_stores, sqlite_stores):
        location = stores.location("probe")
        assert not store_exists(location)
        stores.open("probe").close()
        assert store_exists(location)
    assert not store_exists(with_schema(postgres_url, "never_created"))  # no such schema: nothing there either
    with pytest.raises(GraphError, match="Check the URL"):
        store_exists("postgresql://ann:secret@127.0.0.1:1/memory?connect_timeout=2")


def test_keyword_statistics_and_rankings_equal_sqlites(sqlite_stores, pg_stores, embedder) -> None:
    """The terms come from FTS5's own tokenizer: accents, ligatures, full-width letters and all rank alike."""
    vectors = embedder.encode([value for _, value in TEXTS])
    local, shared = sqlite_stores.open("kw", embedder=embedder), pg_stores.open("kw", embedder=embedder)
    assert _fill(local, vectors) == _fill(shared, vectors)
    ids = {store: {seq: store._cache("g").entry_ids[row] for seq, row in store._cache("g").seq_row.items()}
           for store in (local, shared)}  # fmt: skip
    for store in (local, shared):
        store._search.keywords.prepare(store._db.conn)

    def stats(store: object, terms: list[str]) -> tuple:
        keywords, conn = store._search.keywords, store._db.conn
        frequencies = keywords.term_frequencies(conn, "g", terms)
        by_id = {term: {ids[store][seq]: count for seq, count in frequencies[term].items()} for term in terms}
        return by_id, keywords.store_doc_counts(conn, terms), keywords.graph_doc_counts(conn, "g", terms)

    terms = [*sorted({term for query in QUERIES for term in store_terms(query)}), "absentterm"]
    assert stats(local, terms) == stats(shared, terms)
    assert any(stats(local, terms)[0].values()) and stats(local, terms)[1]["absentterm"] == 0
    for store in (local, shared):
        lengths = store._search.keywords.entry_lengths(store._db.conn, list(ids[store]))
        ids[store] = {"total": store._search.keywords.token_total(store._db.conn, "g"),
                      **{ids[store][seq]: length for seq, length in lengths.items()}}  # fmt: skip
    assert ids[local] == ids[shared]
    for query in QUERIES:
        rankings = [
            [
                store._cache("g").entry_ids[row]
                for row in store._search.bm25_ranking(store._cache("g"), "g", query, 6, None)
            ]
            for store in (local, shared)
        ]
        assert rankings[0] == rankings[1], query
        hits = [store.search("g", query, k=4) for store in (local, shared)]
        assert [h.entry_id for h in hits[0]] == [h.entry_id for h in hits[1]]
        assert [h.score for h in hits[0]] == pytest.approx([h.score for h in hits[1]])


def store_terms(query: str) -> list[str]:
    """The index terms of a query as both stores look them up."""
    return [term for word in query_words(query) for term in fts_terms(word)]


def test_a_graph_under_the_pgvector_threshold_is_searched_in_memory(pg_stores) -> None:
    """Past `ann_threshold` but under `pgvector_threshold`: exact search over the view, no index, no round trip."""
    rng = np.random.default_rng(6)
    store = pg_stores.open("memory", config=StoreConfig(bm25=False, ann_threshold=5, pgvector_threshold=1000))
    vectors = random_unit(rng, 40)
    candidates = [EntryCandidate(abstraction=f"a{i}", value=f"v{i}") for i in range(40)]
    ids = store.add_entries_bulk("g", candidates, vectors, vectors)
    asked: list[str] = []
    real = store._db.conn.execute
    store._db.conn.execute = lambda sql, *args: asked.append(sql) or real(sql, *args)
    assert store.search("g", vectors[7], k=3)[0].entry_id == ids[7]
    assert not store._cache("g").abstractions.uses_ann and not any("<=>" in sql for sql in asked)
    index = "SELECT to_regclass('entries_abstraction_vector_hnsw') IS NOT NULL"
    assert real(index).fetchone()[0] is False


def test_the_hnsw_index_is_made_on_first_need_and_searched(pg_stores) -> None:
    rng = np.random.default_rng(5)
    store = pg_stores.open("ann", config=StoreConfig(bm25=False, pgvector_threshold=20))
    vectors = random_unit(rng, 40)
    candidates = [EntryCandidate(abstraction=f"a{i}", value=f"v{i}") for i in range(40)]  # no anchor channel
    ids = store.add_entries_bulk("g", candidates[:10], vectors[:10], vectors[:10])
    store.search("g", vectors[0], k=3)
    index = "SELECT to_regclass('entries_abstraction_vector_hnsw') IS NOT NULL"
    assert store._db.conn.execute(index).fetchone()[0] is False  # 10 live rows: exact search, no index yet
    ids += store.add_entries_bulk("g", candidates[10:], vectors[10:], vectors[10:])
    assert store.search("g", vectors[25], k=1)[0].entry_id == ids[25]
    assert store._db.conn.execute(index).fetchone()[0] is True
    table = store._cache("g").abstractions
    assert table.uses_ann and isinstance(table._ann, PgVectorIndex)
    for query in vectors[:5]:
        assert list(table.top_k(query, 5)[0]) == list(table._exact_top_k(query, 5, table.alive)[0])
    store._db.conn.execute("SET enable_sort = off")  # a 40-row table: the planner would rather sort it exactly
    plan = store._db.conn.execute(
        "EXPLAIN SELECT id FROM entries WHERE graph_id = ? ORDER BY abstraction_vector <=> ? LIMIT 5",
        ("g", blob(vectors[0])),
    ).fetchall()
    assert "entries_abstraction_vector_hnsw" in " ".join(row[0] for row in plan)
    store._db.conn.execute("RESET enable_sort")
    store.delete_entry("g", ids[25])
    assert ids[25] not in [hit.entry_id for hit in store.search("g", vectors[25], k=5)]
    assert store.check_integrity().ok


def test_integrity_check_finds_planted_problems(pg_stores) -> None:
    rng = np.random.default_rng(6)
    store = pg_stores.open("planted", config=StoreConfig(bm25=False))
    vectors = random_unit(rng, 2)
    ids = store.add_entries_bulk(
        "g", [EntryCandidate(abstraction="a", value="b", anchors=["x"])], vectors[:1], vectors[:1], {"x": vectors[1]}
    )
    assert store.check_integrity().ok
    with store._views.transaction() as conn:
        conn.execute("DELETE FROM entry_tokens")
        conn.execute(
            "INSERT INTO anchors(seq, graph_id, id, text, norm_text, vector) VALUES (99, 'g', 'a99', 'z', 'z', ?)",
            (blob(vectors[1]),),
        )
    text = " | ".join(store.check_integrity().problems)
    assert "anchors without entries: g:a99" in text
    assert f"entries missing from the keyword index: g:{ids[0]}" in text


def test_a_rolled_back_first_write_records_no_dimension(pg_stores) -> None:
    rng = np.random.default_rng(7)
    store = pg_stores.open("first", config=StoreConfig(bm25=False))
    vectors = random_unit(rng, 1)
    candidate = EntryCandidate(abstraction="a", value="b")
    with pytest.raises(RuntimeError, match="injected"), store.batch():
        store.upsert_entry("g", candidate, always_create, abstraction_vector=vectors[0], value_vector=vectors[0])
        raise RuntimeError("injected")
    assert store._db.dim is None and store.graph_ids() == []
    store.upsert_entry("g", candidate, always_create, abstraction_vector=vectors[0], value_vector=vectors[0])
    column = (
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = 'entries'::regclass AND attname = 'abstraction_vector'"
    )
    assert store._db.conn.execute(column).fetchone()[0] == "vector(384)"
    assert open_store(pg_stores.location("first")).dim == 384


def test_an_hnsw_build_gets_the_memory_its_graph_needs(pg_stores, monkeypatch, caplog) -> None:
    """A graph that outgrows maintenance_work_mem is finished on disk, twice as slowly: the build raises it."""
    rng = np.random.default_rng(8)
    config = StoreConfig(bm25=False, pgvector_threshold=100)
    store = pg_stores.open("memory", config=config)
    vectors = random_unit(rng, 1500)
    candidates = [EntryCandidate(abstraction=f"a{i}", value=f"v{i}") for i in range(1500)]
    ids = store.add_entries_bulk("g", candidates, vectors, vectors)
    raw = store._db.raw
    raw.execute("SET maintenance_work_mem = '1MB'")  # the least PostgreSQL takes: it holds ~400 of these vectors
    notices: list[str] = []
    raw.add_notice_handler(lambda diagnostic: notices.append(diagnostic.message_primary or ""))
    pg_schema._create_hnsw_index(raw, "probe_hnsw", "entries", "abstraction_vector", 16, 64, None)
    assert any("no longer fits into maintenance_work_mem" in notice for notice in notices)  # the slow path, seen
    notices.clear()
    assert pg_schema._build_memory_kb(raw, "entries", 384, 16) == pg_schema.hnsw_build_memory_kb(1500, 384, 16)
    assert pg_schema.ensure_hnsw_index(raw, "entries", "abstraction_vector", 384, config)
    assert notices == [] and raw.execute("SHOW maintenance_work_mem").fetchone()[0] == "1MB"  # raised for the build

    real = pg_schema._create_hnsw_index
    tried: list[int | None] = []

    def no_shared_memory(*args: object) -> None:
        tried.append(args[-1])
        if args[-1] is not None:  # as a parallel build in a container with a small /dev/shm
            raise psycopg.errors.OutOfMemory("could not resize shared memory segment")
        real(*args)

    monkeypatch.setattr(pg_schema, "_create_hnsw_index", no_shared_memory)
    assert pg_schema.ensure_hnsw_index(raw, "entries", "value_vector", 384, config)
    assert tried == [pg_schema.hnsw_build_memory_kb(1500, 384, 16), None]
    assert "building it with the server's setting" in caplog.text
    assert raw.execute("SELECT to_regclass('entries_value_vector_hnsw') IS NOT NULL").fetchone()[0]
    assert store.search("g", vectors[7], k=1)[0].entry_id == ids[7]


def test_the_planner_asks_a_new_hnsw_index_right_after_a_bulk_load(pg_stores) -> None:
    """Without statistics the planner takes a graph for 100 rows and sorts all its vectors: the build analyzes."""
    rng = np.random.default_rng(9)
    store = pg_stores.open("planner", config=StoreConfig(bm25=False, pgvector_threshold=1000))
    raw = store._db.raw
    raw.execute("ALTER TABLE entries SET (autovacuum_enabled = false)")  # only the build may analyze it here
    vectors = random_unit(rng, 3000)
    candidates = [EntryCandidate(abstraction=f"a{i}", value=f"v{i}") for i in range(3000)]
    ids = store.add_entries_bulk("g", candidates, vectors, vectors)
    stats = (
        "SELECT count(*) FROM pg_stats WHERE schemaname = current_schema() AND tablename = 'entries' "
        "AND attname = 'graph_id'"
    )
    assert raw.execute(stats).fetchone()[0] == 0
    assert store.search("g", vectors[3], k=1)[0].entry_id == ids[3]  # builds the indexes
    assert raw.execute(stats).fetchone()[0] == 1
    plan = store._db.conn.execute(
        "EXPLAIN SELECT id FROM entries WHERE graph_id = ? ORDER BY abstraction_vector <=> ? LIMIT 100",
        ("g", blob(vectors[0])),
    ).fetchall()
    assert "entries_abstraction_vector_hnsw" in " ".join(row[0] for row in plan)
