"""Result records and `docs/results.md`: the page is what the records render, and records round-trip."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from memora_rl.cli import app
from memora_rl.errors import ConfigError
from memora_rl.experiments.records import (
    ResultRecord,
    ResultTable,
    new_record,
    read_records,
    render_results,
    write_record,
)

REPO = Path(__file__).resolve().parents[2]


def _record(name: str = "demo") -> ResultRecord:
    table = ResultTable(title="Recall", columns=["policy", "recall"], rows=[["semantic", "0.500"], ["GRPO", "0.750"]])
    return new_record(name, "A demo", "memora-rl experiment learning --skip-train", [table], split="validation")


def test_docs_results_md_is_what_its_records_render():
    records = read_records(REPO / "docs" / "results")
    assert records, "docs/results/ holds no record"
    assert (REPO / "docs" / "results.md").read_text() == render_results(records), (
        "docs/results.md differs from its records: run `memora-rl experiment results`"
    )
    for record in records:  # every figure a page shows is beside its record
        assert record.figure is None or (REPO / "docs" / "results" / record.figure).is_file()


def test_a_record_round_trips_and_renders_its_provenance_and_tables(tmp_path):
    figure = tmp_path / "plot.png"
    figure.write_bytes(b"\x89PNG\r\n\x1a\n")
    path = write_record(_record(), tmp_path / "results", figure=figure)
    (loaded,) = read_records(tmp_path / "results")
    assert path.name == "demo.json" and loaded.figure == "demo.png" and (tmp_path / "results" / "demo.png").is_file()
    assert loaded.command == "memora-rl experiment learning --skip-train" and loaded.split == "validation"
    assert "CPU cores" in loaded.machine and loaded.date.endswith("+00:00")
    page = render_results([loaded])
    assert "### A demo" in page and "| GRPO | 0.750 |" in page and "![A demo](results/demo.png)" in page
    assert "```bash\nmemora-rl experiment learning --skip-train\n```" in page


def test_records_render_in_name_order_and_a_bad_record_names_its_file(tmp_path):
    write_record(_record("b-second"), tmp_path)
    write_record(_record("a-first"), tmp_path)
    assert [r.name for r in read_records(tmp_path)] == ["a-first", "b-second"]
    (tmp_path / "broken.json").write_text('{"name": "broken"}')
    with pytest.raises(ConfigError, match=r"broken\.json is not a result record"):
        read_records(tmp_path)
    with pytest.raises(ValueError):
        _record("Not A Name")


def test_the_results_command_writes_and_checks_the_page(tmp_path):
    write_record(_record(), tmp_path / "results")
    page = tmp_path / "results.md"
    args = ["experiment", "results", "--results-dir", str(tmp_path / "results"), "--page", str(page)]
    check = CliRunner().invoke(app, [*args, "--check"])
    assert check.exit_code == 1 and "differs" in check.output
    assert CliRunner().invoke(app, args).exit_code == 0
    assert page.read_text() == render_results(read_records(tmp_path / "results"))
    assert CliRunner().invoke(app, [*args, "--check"]).exit_code == 0


def test_learning_records_come_before_the_benchmarks_under_their_own_sections():
    benchmark = _record("a-bench").model_copy(update={"title": "Env step", "split": None})
    page = render_results([benchmark, _record("z-learning")])
    learning, speed = page.index("## Learning"), page.index("## Speed, memory and service")
    assert learning < page.index("### A demo") < speed < page.index("### Env step")
    assert render_results([benchmark]).count("## Learning") == 0  # no empty section
