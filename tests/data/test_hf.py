"""Tasks <-> `datasets.Dataset` round trip with the columns the env resets on."""

from __future__ import annotations

from pathlib import Path

from memora_rl.data.hf import COLUMNS, dataset_to_tasks, tasks_to_dataset
from memora_rl.data.load import load_corpus
from memora_rl.data.records import Corpus

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_round_trip_with_times_and_evidence(small_synthetic: Corpus) -> None:
    tasks = small_synthetic.tasks[:20] + load_corpus(FIXTURES / "longmemeval_oracle.json").tasks
    dataset = tasks_to_dataset(tasks)
    assert tuple(dataset.column_names) == COLUMNS
    assert len(dataset) == len(tasks)
    assert dataset[0]["question_time"] == "" and dataset[-1]["question_time"] == "2023-05-20T10:15:00"
    assert isinstance(dataset[0]["evidence"], list)
    assert dataset_to_tasks(dataset) == tasks


def test_empty_dataset_keeps_schema() -> None:
    dataset = tasks_to_dataset([])
    assert len(dataset) == 0 and tuple(dataset.column_names) == COLUMNS
