from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memora_rl.memory import StoreConfig

WRITER = Path(__file__).with_name("crash_writer.py")
REPO = Path(__file__).resolve().parents[2]


def _run_writer(location: str, progress: Path, start: int, min_steps: int) -> int:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen([sys.executable, str(WRITER), location, str(progress), str(start)], env=env)
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            if child.poll() is not None:
                pytest.fail(f"writer exited early with code {child.returncode}")
            if progress.exists() and progress.read_text() and int(progress.read_text()) >= start + min_steps:
                break
            time.sleep(0.05)
        else:
            pytest.fail("writer made no progress in 120 s")
        time.sleep(0.137)  # land somewhere inside a later write
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL
    return int(progress.read_text())


def _assert_consistent(store) -> int:
    report = store.check_integrity()
    assert report.ok, report.problems
    anchor_text = {a.id: a.text for a in store.anchors("g")}
    entries = store.entries("g")
    for entry in entries:
        named = set(entry.value.split("anchors=")[1].split("|"))
        linked = {anchor_text[a] for a in entry.anchor_ids}
        assert named <= linked, (entry.id, named, linked)
    assert all(a.entry_ids for a in store.anchors("g"))
    return len(entries)


@pytest.mark.slow
def test_sigkill_mid_write_leaves_a_consistent_store_and_writing_resumes(stores, tmp_path):
    location, progress = str(stores.location("crash")), tmp_path / "progress.txt"
    last = _run_writer(location, progress, start=0, min_steps=60)
    store = stores.open("crash", config=StoreConfig(bm25=False))
    first_count = _assert_consistent(store)
    assert first_count > 30
    store.close()
    _run_writer(location, progress, start=last + 1, min_steps=20)
    store = stores.open("crash", config=StoreConfig(bm25=False))
    assert _assert_consistent(store) > first_count
    store.close()
