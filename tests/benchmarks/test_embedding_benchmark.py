"""benchmarks.embedding: both backends run on the same texts, and the table compares them to PyTorch."""

from __future__ import annotations

import json
import sys

import pytest

from benchmarks import embedding as bench
from tests.benchmarks.scripts import table_rows


def test_the_texts_are_distinct_and_passages_are_longer_than_queries() -> None:
    questions, statements = bench.queries(16, "x"), bench.passages(16, "x")
    assert len(set(questions)) == len(set(statements)) == 16
    assert min(len(text.split()) for text in statements) > max(len(text.split()) for text in questions) / 2


@pytest.mark.slow
def test_a_short_run_prints_every_shape_for_both_backends_with_agreeing_vectors(tmp_path, monkeypatch, capsys) -> None:
    out = tmp_path / "rows.json"
    argv = [bench.__file__, "--queries", "8", "--passages", "16", "--json", str(out)]
    monkeypatch.setattr(sys, "argv", [*argv, "--record", "embedding", "--results-dir", str(tmp_path)])
    bench.main()
    table = capsys.readouterr().out
    assert table.count("| torch (baseline) |") == table.count("| onnx |") == 3
    rows = json.loads(out.read_text())
    assert [row["cpu_ratio"] for row in rows if row["backend"].startswith("torch")] == [1.0, 1.0, 1.0]
    assert min(row["min_cosine"] for row in rows) > 0.99999
    record = json.loads((tmp_path / "embedding.json").read_text())
    assert record["command"].startswith("python -m benchmarks.embedding ")
    (recorded,) = record["tables"]
    assert [recorded["columns"], *recorded["rows"]] == table_rows(table)  # the header row, then one per row


def test_a_query_count_that_is_not_a_multiple_of_8_is_refused(monkeypatch) -> None:
    monkeypatch.setattr(sys, "argv", ["embedding.py", "--queries", "12"])
    with pytest.raises(SystemExit):
        bench.main()
