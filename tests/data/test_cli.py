"""`memora-rl data stats|synth` through typer's runner."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from memora_rl.data.cli import data_app

runner = CliRunner()


def test_synth_then_stats(tmp_path: Path) -> None:
    out = tmp_path / "synth.json"
    args = ["synth", "--out", str(out), "--seed", "5", "--conversations", "2", "--sessions", "4", "--turns", "8"]
    result = runner.invoke(data_app, args)
    assert result.exit_code == 0, result.output
    first = out.read_bytes()
    assert runner.invoke(data_app, args).exit_code == 0 and out.read_bytes() == first
    result = runner.invoke(data_app, ["stats", str(out)])
    assert result.exit_code == 0, result.output
    assert "conversations" in result.output and "tokens (whitespace words)" in result.output
    assert "knowledge-update" in result.output
    assert re.search(r"sessions\s*│\s*8\s*│", result.output)  # 2 conversations x 4 sessions


def test_synth_rejects_bad_options(tmp_path: Path) -> None:
    result = runner.invoke(data_app, ["synth", "--out", str(tmp_path / "x.json"), "--sessions", "1"])
    assert result.exit_code != 0 and "sessions_per_conversation" in str(result.exception)
    result = runner.invoke(data_app, ["synth", "--out", str(tmp_path / "x.json"), "--start-date", "May 1"])
    assert "YYYY-MM-DD" in str(result.exception)


def test_stats_missing_file(tmp_path: Path) -> None:
    result = runner.invoke(data_app, ["stats", str(tmp_path / "absent.json")])
    assert result.exit_code != 0 and "file not found" in str(result.exception)
