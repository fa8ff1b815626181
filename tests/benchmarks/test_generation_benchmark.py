"""benchmarks.generation samples real tokens from SmolLM2 and reports one row per batch size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.benchmarks.scripts import run_benchmark, table_rows


@pytest.mark.slow
def test_generation_benchmark_tiny(tmp_path: Path) -> None:
    out = tmp_path / "rows.json"
    done = run_benchmark("generation", "--device", "cpu", "--batches", "1", "3", "--prompt-tokens", "24",
                         "--new-tokens", "4", "--repeats", "1", "--json", str(out),
                         "--record", "generation-tiny", "--results-dir", str(tmp_path / "results"))  # fmt: skip
    rows = json.loads(out.read_text())
    assert [row["batch"] for row in rows] == [1, 3]
    for row in rows:
        assert row["device"] == "cpu" and row["call_s"] > 0
        assert row["batch"] <= row["tokens"] <= 4 * row["batch"]  # each row samples 1 to 4 tokens
    assert "| 3 |" in done.stdout and "vs batch 1" in done.stdout
    record = json.loads((tmp_path / "results" / "generation-tiny.json").read_text())
    assert record["command"].startswith("python -m benchmarks.generation ")
    table = record["tables"][0]
    assert [table["columns"], *table["rows"]] == table_rows(done.stdout) and table["title"] in done.stdout
