"""benchmarks.query_likelihood: both precisions score the same pairs, and the table compares them to bfloat16."""

from __future__ import annotations

import json
import sys

import pytest

from benchmarks import query_likelihood as bench
from tests.benchmarks.scripts import table_rows


@pytest.mark.slow
def test_a_short_run_prints_both_precisions_with_agreeing_scores(tmp_path, monkeypatch, capsys) -> None:
    argv = [bench.__file__, "--pairs", "8", "--record", "query-likelihood", "--results-dir", str(tmp_path)]
    monkeypatch.setattr(sys, "argv", argv)
    bench.main()
    header, base, contender = table_rows(capsys.readouterr().out)
    assert header[0] == "precision" and base[0] == "bfloat16 (baseline)" and contender[0] == "float32"
    assert base[3] == "1.00" and float(contender[3]) > 0
    assert float(contender[4]) < 0.5 and float(contender[5]) > 0.8  # the same ranking, up to bfloat16's rounding
    record = json.loads((tmp_path / "query-likelihood.json").read_text())
    assert record["command"].startswith("python -m benchmarks.query_likelihood ")
    assert [record["tables"][0]["columns"], *record["tables"][0]["rows"]] == [header, base, contender]


def test_fewer_than_two_pairs_is_refused(monkeypatch) -> None:
    monkeypatch.setattr(sys, "argv", ["query_likelihood.py", "--pairs", "1"])
    with pytest.raises(SystemExit):
        bench.main()
