"""Run a benchmark as its docstring says, `python -m benchmarks.<name> ...` from the repo root, and read its tables."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = REPO_ROOT / "benchmarks"


def run_benchmark(name: str, *args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess[str]:
    """`python -m benchmarks.<name> args` in the repo root; with `check`, a failure shows the script's stderr."""
    command = [sys.executable, "-m", f"benchmarks.{name}", *args]
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout, check=False)
    if check:
        assert done.returncode == 0, f"{' '.join(command)} exited {done.returncode}:\n{done.stderr[-4000:]}"
    return done


def table_rows(stdout: str, separator: str = "|") -> list[list[str]]:
    """The cells of each printed table row: Markdown (`|`) or rich (`│`) tables, header rows included.

    >>> table_rows("| a | b |\\n|---|---|\\n| 1 | 2 |\\ntext")
    [['a', 'b'], ['1', '2']]
    >>> table_rows("│ 1,000 │ reset │\\n└───┘", separator="│")
    [['1,000', 'reset']]
    """
    rows = []
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith(separator) and line.endswith(separator) and not set(line) <= set("|-: "):
            rows.append([cell.strip() for cell in line[1:-1].split(separator)])
    return rows
