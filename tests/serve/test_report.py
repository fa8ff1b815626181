"""The eval report page reads `--runs-dir`: tables and plots of each run, and nothing outside it."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.serve.conftest import make_service, running_server

PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000") + b"\x00" * 32


def test_report_page_shows_compare_tables_and_plots(tmp_path: Path, friends_store: Path, embedder) -> None:
    runs = tmp_path / "runs"
    (runs / "compare").mkdir(parents=True)
    (runs / "compare" / "compare.md").write_text("| policy | recall |\n|---|---|\n| semantic | 0.515 |\n")
    (runs / "compare" / "latency_cdf.png").write_bytes(PNG)
    (tmp_path / "secret.png").write_bytes(PNG)
    with running_server(make_service([friends_store], embedder, runs_dir=runs)) as url:
        page = httpx.get(f"{url}/report").text
        plot = httpx.get(f"{url}/report/files/compare/latency_cdf.png")
        outside = httpx.get(f"{url}/report/files/%2E%2E/secret.png")
    assert '<tr><td>semantic</td><td class="num">0.515</td></tr>' in page and "|---|" not in page
    assert 'src="/report/files/compare/latency_cdf.png"' in page
    assert plot.status_code == 200 and plot.content == PNG
    assert outside.status_code == 404
