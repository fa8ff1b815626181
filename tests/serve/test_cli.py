"""`memora-rl serve-memory` as users start it: a subprocess answering on loopback, and its option errors."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.serve.conftest import GRAPH, free_port

MEMORA_RL = str(Path(sys.executable).with_name("memora-rl"))


@pytest.mark.slow
def test_serve_memory_command_serves_the_store(friends_store: Path) -> None:
    port = free_port()
    environment = {**os.environ, "HF_HUB_OFFLINE": "1"}
    command = [MEMORA_RL, "serve-memory", "--store", str(friends_store), "--port", str(port), "--policy", "heuristic"]
    process = subprocess.Popen(command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 180
        while True:
            assert process.poll() is None, process.stdout.read().decode()
            assert time.monotonic() < deadline, "serve-memory did not answer /healthz within 180 s"
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).json()
                break
            except httpx.HTTPError:
                time.sleep(0.5)
        assert health == {"status": "ok", "policy": "heuristic", "graphs": 2}
        body = {"graph": GRAPH, "question": "Where is Carla visiting from?"}
        found = httpx.post(f"http://127.0.0.1:{port}/v1/retrieve", json=body, timeout=60).json()
        assert any("Lisbon" in entry["value"] for entry in found["entries"])
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_serve_memory_rejects_llm_policy_without_endpoint(tmp_path: Path) -> None:
    command = [MEMORA_RL, "serve-memory", "--store", str(tmp_path / "s.sqlite"), "--policy", "llm"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert result.returncode == 1
    assert "llm_base_url" in result.stdout + result.stderr


def test_serve_memory_rejects_unknown_policy(tmp_path: Path) -> None:
    command = [MEMORA_RL, "serve-memory", "--store", str(tmp_path / "s.sqlite"), "--policy", "oracle"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert result.returncode == 1
    assert "--policy" in result.stdout + result.stderr and "semantic" in result.stdout + result.stderr
