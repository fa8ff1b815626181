"""`make test`'s worker groups: tests of the vLLM server all run on one worker, other tests a module at a time."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONFTEST = """
import pytest
from tests.conftest import pytest_collection_modifyitems  # noqa: F401  (the suite's grouping hook)

@pytest.fixture(scope="session")
def vllm_server():
    return "a stand-in: only the fixture's name decides the group"
"""
MODULE = """
def test_{name}_a(vllm_server): pass
def test_{name}_b(vllm_server): pass
def test_{name}_c(): pass
def test_{name}_d(): pass
def test_{name}_e(): pass
"""


def test_vllm_tests_share_a_worker_and_modules_stay_whole(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    for name in ("one", "two", "three"):
        (tmp_path / f"test_{name}.py").write_text(MODULE.format(name=name))
    command = [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v", "-p", "no:cacheprovider",
               "--rootdir", str(tmp_path), str(tmp_path)]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path,
                            env={"PYTHONPATH": str(REPO), "PATH": ""})  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    ran = re.findall(r"\[(gw\d)\] .*?PASSED (\S+)", result.stdout)
    assert len(ran) == 15
    workers_of: dict[str, set[str]] = {}
    for worker, nodeid in ran:
        group = "vllm" if nodeid.endswith("@vllm") else nodeid.split("::")[0]
        workers_of.setdefault(group, set()).add(worker)
    assert {group for group in workers_of} == {"vllm", "test_one.py", "test_two.py", "test_three.py"}
    assert all(len(workers) == 1 for workers in workers_of.values()), workers_of  # no group split across workers
