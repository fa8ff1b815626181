"""The graph store benchmarks run end to end at a small size and report sane figures."""

from __future__ import annotations

import json

import pytest

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
