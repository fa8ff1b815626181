"""benchmarks.train_step runs end to end on tiny synthetic episodes and reports sane figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.benchmarks.scripts import run_benchmark, table_rows


def tiny_args(out: Path, *extra: str) -> list[str]:
    """The benchmark's options for one step of tiny synthetic episodes (G=2, two turns), rows written to `out`."""
    return ["--source", "synthetic", "--steps", "1", "--generations", "2", "--turns", "2",
            "--baseline-generations", "2", "--prompt-tokens", "40", "--observation-tokens", "16",
            "--action-tokens", "4", "--json", str(out), *extra]  # fmt: skip


@pytest.mark.slow
def test_train_step_benchmark_tiny(tmp_path):
    out = tmp_path / "rows.json"
    record_args = ["--record", "train-step-tiny", "--results-dir", str(tmp_path / "results")]
    done = run_benchmark("train_step", *tiny_args(out, "--micro-batch", "1", "--max-rss-gb", "12", *record_args),
                         timeout=900)  # fmt: skip
    rows = json.loads(out.read_text())
    assert [(row["settings"], row["error"]) for row in rows] == [("current", None), ("new", None), ("new", None)]
    for row in rows:
        assert row["device"] == "cpu"
        assert len(row["steps_s"]) == 1 and row["step_s"] > 0 and row["step_cpu_s"] > 0
        assert row["peak_gb"] >= row["loaded_gb"] > 0
        assert row["prompt_tokens"] == 2 * 40
    baseline, target = rows[0], rows[2]
    assert baseline["completion_tokens"] == 2 * 4 and baseline["policy_tokens"] == 2 * 4  # one turn: no observation
    assert target["completion_tokens"] == 2 * (4 + 16 + 4) and target["policy_tokens"] == 2 * 8
    assert "new / current" in done.stdout and "target" in done.stdout
    record = json.loads((tmp_path / "results" / "train-step-tiny.json").read_text())
    assert record["command"].startswith("python -m benchmarks.train_step ")
    table = record["tables"][0]
    assert [table["columns"], *table["rows"]] == table_rows(done.stdout)
    assert len(record["notes"]) == 2 and all(note in done.stdout for note in record["notes"])  # ratio, target check


@pytest.mark.gpu
@pytest.mark.slow
def test_train_step_benchmark_on_cuda(tmp_path):
    """The same rows train in bf16 on the GPU; peak GB is then the memory torch allocated there."""
    out = tmp_path / "rows.json"
    run_benchmark("train_step", *tiny_args(out, "--rows", "target", "--device", "cuda"), timeout=900)
    (row,) = json.loads(out.read_text())
    assert row["error"] is None and row["device"] == "cuda"
    assert row["step_s"] > 0 and 0 < row["peak_gb"] < 10
