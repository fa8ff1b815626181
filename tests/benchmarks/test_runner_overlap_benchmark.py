"""The runner-overlap benchmark (where the runner's concurrency speed-up is measured) runs and reports rows."""

from __future__ import annotations

import json

from tests.benchmarks.scripts import run_benchmark, table_rows


def test_runner_overlap_benchmark_reports_a_row_per_concurrency(tmp_path):
    out = tmp_path / "overlap.json"
    done = run_benchmark("runner_overlap", "--episodes", "4", "--concurrency", "1", "4", "--delay-s", "0.01",
                         "--json", str(out), "--record", "runner-overlap", "--results-dir", str(tmp_path),
                         timeout=120)  # fmt: skip
    rows = json.loads(out.read_text())
    assert [row["concurrency"] for row in rows] == [1, 4]
    assert all(row["seconds"] > 0 and row["speedup"] > 0 for row in rows)  # figures only: speed is not asserted
    record = json.loads((tmp_path / "runner-overlap.json").read_text())
    assert record["command"].startswith("python -m benchmarks.runner_overlap ")
    (table,) = record["tables"]
    assert [table["columns"], *table["rows"]] == table_rows(done.stdout)  # the header row, then one per concurrency
