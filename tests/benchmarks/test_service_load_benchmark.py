"""The service load benchmark runs end to end at a small size against a real `serve-memory` process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.benchmarks.scripts import run_benchmark, table_rows


def rows_by_label(stdout: str) -> dict[tuple[str, int], list[str]]:
    """The printed Markdown table's data rows by (what, clients), as their cells."""
    rows = {}
    for line in stdout.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) > 2 and cells[1].isdigit():
            rows[(cells[0], int(cells[1]))] = cells
    return rows


@pytest.mark.slow
def test_service_load_benchmark_small(tmp_path: Path) -> None:
    args = ["--entries", "300", "--requests", "6", "--concurrency", "1", "3", "--policies", "semantic",
            "--ingest-batches", "1", "--locomo", str(tmp_path / "absent.json"), "--workdir", str(tmp_path),
            "--record", "service-load-small", "--results-dir", str(tmp_path / "results")]  # fmt: skip
    done = run_benchmark("service_load", *args)
    rows = rows_by_label(done.stdout)
    one, three = rows[("retrieve, semantic, 300 entries", 1)], rows[("retrieve, semantic, 300 entries", 3)]
    assert one[5] == "1.00"  # throughput growth is over the fewest clients' row itself
    assert float(three[5]) == pytest.approx(float(three[4]) / float(one[4]), rel=0.1)  # req/s are rounded
    assert one[6] == three[6] == "0/6"  # no errors
    assert float(one[2]) > 0 and float(one[7]) > 0  # latency and server CPU measured
    assert ("ingest, 10 turns/batch", 4) in rows and ("GET /healthz (HTTP floor)", 3) in rows
    record = json.loads((tmp_path / "results" / "service-load-small.json").read_text())
    assert record["command"].startswith("python -m benchmarks.service_load ")
    table = record["tables"][0]
    assert [table["columns"], *table["rows"]] == table_rows(done.stdout)


@pytest.mark.slow
def test_service_load_benchmark_small_on_postgres_beside_sqlite(tmp_path: Path, postgres_url: str) -> None:
    from tests.postgres_fixtures import fresh_store_url

    store = fresh_store_url(postgres_url, "service_load")
    args = ["--entries", "200", "--requests", "4", "--concurrency", "1", "2", "--policies", "semantic",
            "--ingest-batches", "1", "--locomo", str(tmp_path / "absent.json"), "--workdir", str(tmp_path),
            "--store", store, "--record", "service-load-pg", "--results-dir", str(tmp_path / "results")]  # fmt: skip
    done = run_benchmark("service_load", *args)
    rows = rows_by_label(done.stdout)
    sqlite, one = rows[("retrieve, semantic, SQLite", 2)], rows[("retrieve, semantic, PostgreSQL", 2)]
    two = rows[("retrieve, semantic, PostgreSQL, 2 replicas", 2)]
    assert sqlite[5] == one[5] == two[5] == "0/4"  # no errors on either backend
    assert float(one[8]) == pytest.approx(float(one[2]) / float(sqlite[2]), rel=0.05)  # p50 over SQLite's
    assert float(two[9]) == pytest.approx(float(two[4]) / float(one[4]), rel=0.05)  # req/s over one replica's
    assert float(one[7]) > 0 and float(two[6]) > 0  # machine cores busy and server CPU measured
    assert "PostgreSQL semantic retrieve p50 at 2 clients" in done.stdout and "Two PostgreSQL replicas" in done.stdout
    record = json.loads((tmp_path / "results" / "service-load-pg.json").read_text())
    assert [[table["columns"], *table["rows"]] for table in record["tables"]] == [
        table_rows(part) for part in done.stdout.split("\n\n")
    ]
    assert any("Two PostgreSQL replicas" in note for note in record["notes"])
    again = run_benchmark("service_load", args[0], "500", *args[2:], timeout=300, check=False)  # another size
    assert again.returncode != 0 and "--entries 200" in again.stderr and "holds graph 'bench' with 200" in again.stderr


def test_llm_dtypes_need_an_export_with_a_merged_model(tmp_path: Path) -> None:
    """--llm-dtypes serves the export's merged model: without one, the run stops before it builds anything."""
    base = ["--entries", "50", "--requests", "2", "--policies", "--locomo", str(tmp_path / "absent.json"),
            "--workdir", str(tmp_path), "--llm-dtypes", "bfloat16"]  # fmt: skip
    no_export = run_benchmark("service_load", *base, timeout=300, check=False)
    assert no_export.returncode == 2 and "pass --llm-export too" in no_export.stderr
    (tmp_path / "export").mkdir()
    unmerged = run_benchmark("service_load", *base, "--llm-export", str(tmp_path / "export"), timeout=300, check=False)
    assert unmerged.returncode == 2 and "holds no merged model" in unmerged.stderr and "--merge" in unmerged.stderr
