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


@pytest.mark.slow
@pytest.mark.vllm
def test_scale_benchmark_tiny(vllm_server, second_vllm_server, tmp_path) -> None:
    out = tmp_path / "rows.json"
    done = run_benchmark("scale", "--episodes", "2", "--batch", "2",
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
