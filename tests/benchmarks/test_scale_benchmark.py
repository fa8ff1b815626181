"""benchmarks.scale: rollouts over one and two vLLM servers, the ratio line and the record, on real servers."""

from __future__ import annotations

import json

import pytest

from benchmarks import scale
from tests.benchmarks.scripts import run_benchmark, table_rows

HEADER = ["servers", "episodes", "s", "rollouts/min", "steps/rollout", "requests per server"]


def row(label: str, per_min: float, requests: list[int]) -> dict:
    return {"label": label, "episodes": 4, "seconds": 240 / per_min, "per_min": per_min, "steps": 2.0,
            "invalid": 0.0, "tokens_per_s": 10.0, "requests": requests}  # fmt: skip


def test_the_table_gives_two_servers_over_one(capsys) -> None:
    part = scale.print_servers_table([row("1 server", 20.0, [9]), row("2 servers", 30.0, [5, 4])])
    out = capsys.readouterr().out
    assert table_rows(out, "│") == [["1 server", "4", "12.0", "20.0", "2.00", "9"],
                                    ["2 servers", "4", "8.0", "30.0", "2.00", "5 / 4"]]  # fmt: skip
    assert part.table.columns == HEADER
    assert part.notes == ["servers: 2 / 1 = 1.50x rollouts per minute (same episodes and seeds)"]
    assert part.notes[0] in out
    assert part.table.rows == table_rows(out, "│")


def test_the_processes_table_gives_the_two_process_overhead(capsys) -> None:
    rows = [{"label": "1 process", "processes": 1, "walks": 8, "steps": 3, "step_s": 40.0, "peak_rss_gb": [5.1]},
            {"label": "2 processes", "processes": 2, "walks": 4, "steps": 3, "step_s": 48.0,
             "peak_rss_gb": [3.2, 3.0]}]  # fmt: skip
    part = scale.print_processes_table(rows)
    out = capsys.readouterr().out
    assert table_rows(out, "│") == [["1 process", "8", "3", "40.0", "90", "5.10"],
                                    ["2 processes", "4", "3", "48.0", "75", "3.20 / 3.00"]]  # fmt: skip
    assert part.notes == ["processes: 2 / 1 = 1.20x time a step at the same global batch (+20% overhead)"]
    assert part.notes[0] in out and part.table.rows == table_rows(out, "│")


def test_one_timed_step_is_needed() -> None:
    done = run_benchmark("scale", "--parts", "processes", "--steps", "1", check=False)
    assert done.returncode == 2 and "--steps 1: the first step is not timed; give 2 or more" in done.stderr


@pytest.mark.slow
@pytest.mark.vllm
def test_scale_benchmark_tiny(vllm_server, second_vllm_server, tmp_path) -> None:
    out = tmp_path / "rows.json"
    done = run_benchmark("scale", "--parts", "servers", "--episodes", "2", "--batch", "2",
                         "--server-url", vllm_server.base_url, "--server-url", second_vllm_server.base_url,
                         "--json", str(out), "--record", "scale", "--results-dir", str(tmp_path))  # fmt: skip
    one, two = json.loads(out.read_text())["servers"]
    assert (one["label"], two["label"]) == ("1 server", "2 servers")
    assert one["episodes"] == two["episodes"] == 2 and one["per_min"] > 0 and two["per_min"] > 0
    assert len(one["requests"]) == 1 and one["requests"][0] >= 2
    assert len(two["requests"]) == 2 and min(two["requests"]) >= 1  # both servers answered rollout requests
    ratio = two["per_min"] / one["per_min"]
    assert f"servers: 2 / 1 = {ratio:.2f}x rollouts per minute" in done.stdout
    record = json.loads((tmp_path / "scale.json").read_text())
    assert record["command"].startswith("python -m benchmarks.scale ")
    assert record["tables"][0]["rows"] == table_rows(done.stdout, "│")
    assert record["notes"] == [f"servers: 2 / 1 = {ratio:.2f}x rollouts per minute (same episodes and seeds)"]
