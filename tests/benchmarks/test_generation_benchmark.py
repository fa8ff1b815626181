"""benchmarks.generation samples real tokens from SmolLM2 and reports one row per batch size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.benchmarks.scripts import run_benchmark


@pytest.mark.slow
def test_generation_benchmark_tiny(tmp_path: Path) -> None:
    out = tmp_path / "rows.json"
    done = run_benchmark("generation", "--device", "cpu", "--batches", "1", "3", "--prompt-tokens", "24",
                         "--new-tokens", "4", "--repeats", "1", "--json", str(out))  # fmt: skip
    rows = json.loads(out.read_text())
    assert [row["batch"] for row in rows] == [1, 3]
    for row in rows:
        assert row["device"] == "cpu" and row["call_s"] > 0
        assert row["batch"] <= row["tokens"] <= 4 * row["batch"]  # each row samples 1 to 4 tokens
    assert "| 3 |" in done.stdout and "vs batch 1" in done.stdout
