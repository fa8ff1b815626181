"""The eval script and the export/eval commands turn bad input into one red error line and exit code 1."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_cli(*args: str) -> tuple[int, str]:
    """Run a command line of this checkout's Python; its exit code and stderr with whitespace collapsed."""
    result = subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=300)
    return result.returncode, " ".join(result.stderr.split())


def test_eval_script_rejects_an_unknown_policy_in_one_line():
    code, stderr = run_cli("eval/offline.py", "--env", "synthetic", "--policy", "oracle")
    assert code == 1
    assert "Unknown policy 'oracle'" in stderr and "Traceback" not in stderr
    assert "prompted:<model>" in stderr


def test_cli_rejects_a_folder_that_is_not_a_run_or_an_export(tmp_path):
    code, stderr = run_cli("-m", "memora_rl.cli", "export", "--run", str(tmp_path), "--out", str(tmp_path / "x"))
    assert code == 1 and "is not a training run folder" in stderr and "Traceback" not in stderr
    code, stderr = run_cli("-m", "memora_rl.cli", "eval", "--env", "synthetic", "--policy", str(tmp_path))
    assert code == 1 and "is not a memora-rl export" in stderr and "Traceback" not in stderr
