"""benchmarks.warm_start: the oracle episodes' SFT steps at each precision, with the speed-up over float32."""

from __future__ import annotations

import json

import pytest

from benchmarks import warm_start
from benchmarks.common import markdown
from tests.benchmarks.scripts import run_benchmark, table_rows


def test_the_table_compares_each_precision_with_fp32_and_keeps_failures() -> None:
    fp32 = {"step_s": 2.0, "peak_rss_gb": 1.5, "first_loss": 3.0, "last_loss": 2.0}
    measured = warm_start.table({"fp32": fp32, "bf16": {**fp32, "step_s": 1.6}, "x": {"error": "boom"}}, 400.0)
    rows = table_rows(markdown(measured))
    assert rows == [measured.columns, *measured.rows]
    assert [cells[0] for cells in rows] == ["precision", "fp32", "bf16", "x"]
    assert rows[1][1:] == ["2.00", "200", "1.50", "3.000, 2.000", "1.00x"]
    assert rows[2][-1] == "1.25x" and rows[3][1] == "failed: boom"


@pytest.mark.slow
def test_warm_start_benchmark_tiny(tmp_path) -> None:
    out = tmp_path / "warm.json"
    record_args = ["--record", "warm-start-tiny", "--results-dir", str(tmp_path / "results")]
    done = run_benchmark("warm_start", "--tasks", "1", "--steps", "1", "--json", str(out), *record_args)
    result = json.loads(out.read_text())
    assert result["rows"]["rows"] == 1 and result["rows"]["tokens"] > result["rows"]["policy_tokens"] > 0
    precisions = result["results"]
    assert list(precisions) == ["fp32", "bf16"]
    for measured in precisions.values():
        assert "error" not in measured
        assert measured["steps"] == 1 and measured["step_s"] > 0 and measured["peak_rss_gb"] > 0
        assert measured["first_loss"] > 0
    rows = {cells[0]: cells for cells in table_rows(done.stdout)}
    assert rows["fp32"][-1] == "1.00x"
    assert rows["bf16"][-1] == f"{precisions['fp32']['step_s'] / precisions['bf16']['step_s']:.2f}x"
    assert "1 oracle episodes" in done.stdout
    record = json.loads((tmp_path / "results" / "warm-start-tiny.json").read_text())
    assert record["command"].startswith("python -m benchmarks.warm_start ")
    table = record["tables"][0]
    assert [table["columns"], *table["rows"]] == table_rows(done.stdout)
    assert all(note in done.stdout for note in record["notes"]) and "1 oracle episodes" in record["notes"][1]
