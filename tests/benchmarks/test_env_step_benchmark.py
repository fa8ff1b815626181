"""benchmarks.env_step: scripted episodes on a bulk-loaded graph, one table row per step kind."""

from __future__ import annotations

import json

import pytest

from tests.benchmarks.scripts import run_benchmark, table_rows


@pytest.mark.slow
def test_env_step_benchmark_small(tmp_path) -> None:
    out = tmp_path / "env.json"
    done = run_benchmark("env_step", "--sizes", "500", "--episodes", "5", "--rollout-episodes", "0",
                         "--json", str(out), "--record", "env-step", "--results-dir", str(tmp_path))  # fmt: skip
    results = json.loads(out.read_text())
    assert results["rollouts"] == []  # --rollout-episodes 0: no LLM
    (result,) = results["env_steps"]
    assert result["size"] == 500 and result["build_s"] > 0
    samples = result["samples"]
    assert len(samples["reset"]) == len(samples["final"]) == 5  # every episode resets once and ends once
    assert {"expand", "refine", "invalid"} <= set(samples)  # the script expands, refines (even) and errs (0)
    rows = {row[1]: row for row in table_rows(done.stdout, "│") if row[0] == "500"}
    assert list(rows) == ["all non-final", "expand", "refine", "invalid", "final", "reset"]
    assert rows["reset"][2] == rows["final"][2] == "5"
    non_final = sum(len(values) for kind, values in samples.items() if kind not in ("reset", "final"))
    assert rows["all non-final"][2] == str(non_final)
    for row in rows.values():
        steps_per_s, wall_p50, wall_p95 = float(row[3]), float(row[4]), float(row[5])
        assert steps_per_s > 0 and 0 < wall_p50 <= wall_p95
    assert "500 entries: bulk load" in done.stdout
    record = json.loads((tmp_path / "env-step.json").read_text())
    assert record["command"].startswith("python -m benchmarks.env_step ")
    assert len(record["tables"]) == 1  # no rollout table without rollouts
    assert record["tables"][0]["rows"] == table_rows(done.stdout, "│")
    assert record["notes"][0].startswith("500 entries: bulk load")
