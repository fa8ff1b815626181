"""The graph store benchmarks run end to end at a small size and report sane figures."""

from __future__ import annotations

import json

import pytest

from benchmarks.graph_search_postgres import COMPARED, SCHEMA_PREFIX
from tests.benchmarks.scripts import run_benchmark, table_rows


@pytest.mark.slow
def test_graph_search_benchmark_small(tmp_path):
    out = tmp_path / "graph.json"
    done = run_benchmark("graph_search", "--sizes", "3000", "--queries", "20", "--embed-queries", "3",
                         "--workdir", str(tmp_path), "--store", "ann_threshold=1000", "--json", str(out),
                         "--record", "graph-search", "--results-dir", str(tmp_path / "results"))  # fmt: skip
    (result,) = json.loads(out.read_text())
    assert result["ann"] and result["ann_mb"] > 0  # the HNSW path ran and its index was saved
    assert result["source_hit"] >= 0.9
    assert 0 < result["search"]["wall"][0] < result["baseline"]["wall"][0] * 20
    assert result["reopen_s"] > 0 and result["frontier"]["wall"][0] > 0
    assert not list(tmp_path.glob("bench_*.sqlite*"))  # the store and its saved indexes are removed
    record = json.loads((tmp_path / "results" / "graph-search.json").read_text())
    assert record["command"].startswith("python -m benchmarks.graph_search ")
    assert record["tables"][0]["rows"] == table_rows(done.stdout, "│")
    assert "recall@10 vs exact fused" in record["notes"][0]


@pytest.mark.slow
def test_graph_search_benchmark_small_beside_postgres(tmp_path, postgres_url):
    psycopg = pytest.importorskip("psycopg")
    out = tmp_path / "graph.json"
    assert postgres_url.startswith("postgresql://postgres:@"), postgres_url
    url = postgres_url.replace(
        "postgres:@", "postgres:hunter2@", 1
    )  # its trust login ignores it; records must not show it
    done = run_benchmark("graph_search", "--sizes", "3000", "--queries", "20", "--embed-queries", "3",
                         "--workdir", str(tmp_path), "--store", "ann_threshold=1000", "pgvector_threshold=1000", url,
                         "--json", str(out),
                         "--record", "graph-search", "--results-dir", str(tmp_path / "results"))  # fmt: skip
    sqlite, postgres = json.loads(out.read_text())
    assert (sqlite["backend"], postgres["backend"]) == ("sqlite", "postgres")
    assert postgres["ann"] and postgres["source_hit"] >= 0.9 and postgres["recall"] >= 0.8  # pgvector's HNSW ran
    for metric, _ in COMPARED:
        assert postgres[metric]["wall"][0] > 0 and sqlite[metric]["wall"][0] > 0, metric
    assert postgres["build_rate"] > 0 and postgres["index_s"] > 0 and postgres["reopen_s"] > 0 and postgres["db_mb"] > 0
    with psycopg.connect(postgres_url) as conn:
        left = conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (SCHEMA_PREFIX + "%",)).fetchall()
    assert left == []  # the benchmark's schema is dropped
    record = json.loads((tmp_path / "results" / "graph-search.json").read_text())
    assert "hunter2" not in json.dumps(record) and "hunter2" not in done.stdout + done.stderr
    assert "postgresql://postgres@" in record["command"]
    first, second = record["tables"]
    assert first["rows"] + second["rows"] == table_rows(done.stdout, "│")
    assert [row[1] for row in second["rows"]] == [label for _, label in COMPARED]
    vector_row = second["rows"][0]
    ratio = postgres["search"]["wall"][0] / sqlite["search"]["wall"][0]
    assert vector_row[4] == f"{ratio:.2f}x"
    assert record["notes"][1].startswith(f"3,000 entries, PostgreSQL / SQLite wall p50: vector search {ratio:.2f}x")


def test_graph_search_benchmark_names_an_unreachable_postgres_before_running(tmp_path):
    url = "postgresql://ann:secret@127.0.0.1:1/memory"
    done = run_benchmark("graph_search", "--sizes", "1000", "--workdir", str(tmp_path), "--store", url, check=False)
    assert done.returncode != 0
    assert "could not connect" in done.stderr and "postgresql://ann@127.0.0.1:1/memory" in done.stderr
    assert "secret" not in done.stderr and "done:" not in done.stderr  # no size ran


@pytest.mark.slow
def test_ann_recall_benchmark_on_real_embeddings(tmp_path):
    out = tmp_path / "recall.json"
    done = run_benchmark("ann_recall", "--count", "1000", "--queries", "20", "--ef", "128", "--json", str(out),
                         "--record", "ann-recall", "--results-dir", str(tmp_path))  # fmt: skip
    result = json.loads(out.read_text())
    (row,) = result["rows"]
    assert row["ef"] == 128 and row["recall10"] >= 0.95  # real MiniLM embeddings are easy for HNSW
    assert row["ann_p50_ms"] > 0 and row["exact_p50_ms"] > 0
    record = json.loads((tmp_path / "ann-recall.json").read_text())
    assert record["command"].startswith("python -m benchmarks.ann_recall ")
    assert record["tables"][0]["rows"] == table_rows(done.stdout, "│")
    assert record["notes"][0].startswith("index: ")
