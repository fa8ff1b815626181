"""The quickstart's summary line: the trained policy's evidence-recall gain over each other run."""

from __future__ import annotations

from pathlib import Path

import pytest

from memora_rl.evaluation.records import QuestionRecord
from memora_rl.evaluation.report import RECORDS_FILE, append_record
from memora_rl.quickstart import recall_gains


def write_run(folder: Path, policy: str, recalls: dict[str, float]) -> Path:
    folder.mkdir(parents=True)
    for task_id, recall in recalls.items():
        fields = {"conversation_id": "c", "category": "multi-hop", "question": "q?", "gold_answer": "a", "steps": 1}
        record = QuestionRecord(task_id=task_id, policy=policy, evidence_recall=recall, context_tokens=10, **fields)
        append_record(folder / RECORDS_FILE, record)
    return folder


def test_gains_are_paired_on_the_questions_every_run_recorded(tmp_path):
    runs = {
        "trained": write_run(tmp_path / "trained", "trained", {"t1": 1.0, "t2": 0.5, "t3": 1.0}),
        "semantic": write_run(tmp_path / "semantic", "semantic", {"t1": 0.5, "t2": 0.5, "t3": 0.0}),
        "prompted-base": write_run(tmp_path / "base", "base", {"t1": 0.0, "t2": 1.0}),  # t3 missing: left out
    }
    gains = recall_gains(runs)
    assert gains["semantic"] == pytest.approx(0.25)  # (1.0 + 0.5) / 2 - (0.5 + 0.5) / 2 on t1, t2
    assert gains["prompted-base"] == pytest.approx(0.25)
    assert "trained" not in gains
