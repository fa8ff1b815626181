"""`memora-rl serve-memory` as users start it: a subprocess answering on loopback, and its option errors."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.serve.conftest import GRAPH, free_port, ingest_concurrently

MEMORA_RL = str(Path(sys.executable).with_name("memora-rl"))


def wait_for_health(process: subprocess.Popen, port: int, timeout_s: float = 180) -> dict:
    """The /healthz answer of a starting serve-memory process (fails with its output if it exits or stays silent)."""
    deadline = time.monotonic() + timeout_s
    while True:
        assert process.poll() is None, process.stdout.read().decode() if process.stdout else ""
        assert time.monotonic() < deadline, f"serve-memory did not answer /healthz within {timeout_s:g} s"
        try:
            return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).json()
        except httpx.HTTPError:
            time.sleep(0.5)


def child_pids(pid: int) -> list[int]:
    """Ids of a process's children (Linux /proc)."""
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def rss_mb(pid: int) -> float:
    """Resident memory of a process in MB (Linux /proc)."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))) / 1024


@pytest.mark.slow
def test_serve_memory_command_serves_the_store(friends_store: Path) -> None:
    port = free_port()
    environment = {**os.environ, "HF_HUB_OFFLINE": "1"}
    command = [MEMORA_RL, "serve-memory", "--store", str(friends_store), "--port", str(port), "--policy", "heuristic",
               "--no-auth"]  # fmt: skip
    process = subprocess.Popen(command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        health = wait_for_health(process, port)
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


@pytest.mark.slow
def test_worker_processes_take_turns_to_ingest_and_lose_nothing(tmp_path: Path) -> None:
    """With --workers 2, concurrent ingests land on both processes; the store's file lock keeps every batch."""
    port, store = free_port(), tmp_path / "workers.sqlite"
    command = [MEMORA_RL, "serve-memory", "--store", str(store), "--port", str(port), "--workers", "2", "--no-auth"]
    environment = {**os.environ, "HF_HUB_OFFLINE": "1"}
    process = subprocess.Popen(command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    batches = [[{"speaker": f"Keeper{w}", "text": f"Keeper {w} rang bell number {w + 40} at the lighthouse."}]
               for w in range(8)]  # fmt: skip
    try:
        wait_for_health(process, port)
        parent_mb, worker_mb = rss_mb(process.pid), max(map(rss_mb, child_pids(process.pid)))
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as http:
            results = ingest_concurrently(http, "lighthouse", batches)
            summaries = [http.get("/v1/graphs/lighthouse").json() for _ in range(4)]
            found = http.post("/v1/retrieve", json={"graph": "lighthouse", "question": "Who rang bell number 45?"})
    finally:
        process.terminate()
        process.wait(timeout=60)
    assert sorted(result["session_index"] for result in results) == list(range(1, 9))
    assert {summary["entries"] for summary in summaries} == {8}
    assert found.status_code == 200 and any("bell number 45" in e["value"] for e in found.json()["entries"])
    assert parent_mb < 0.6 * worker_mb, (parent_mb, worker_mb)  # the supervising parent loads no embedder


def test_serve_memory_refuses_a_limit_below_one_naming_its_option(tmp_path: Path) -> None:
    command = [MEMORA_RL, "serve-memory", "--store", str(tmp_path / "s.sqlite"), "--max-question-chars", "0"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert result.returncode == 1
    assert "--max-question-chars" in result.stdout + result.stderr
    assert not (tmp_path / "s.sqlite").exists()  # refused before any store is opened


def test_mcp_stdio_refuses_worker_processes(tmp_path: Path) -> None:
    command = [MEMORA_RL, "serve-memory", "--store", str(tmp_path / "s.sqlite"), "--mcp-stdio", "--workers", "2"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert result.returncode == 1
    assert "--workers" in result.stdout + result.stderr
