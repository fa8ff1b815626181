"""Tasks as a Hugging Face `datasets.Dataset` (the GRPO trainer's `train_dataset`) and back.

Columns: `task_id`, `conversation_id`, `question`, `answer`, `evidence` (list of turn ids),
`category`, `question_time` (ISO 8601 string, ``""`` when unknown) and `excluded` (bool),
enough for the environment to reset on a task. The trainer adds its own `prompt` column.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memora_rl.data.records import Task
from memora_rl.errors import DataError

if TYPE_CHECKING:
    import datasets

COLUMNS = ("task_id", "conversation_id", "question", "answer", "evidence", "category", "question_time", "excluded")


def task_to_row(task: Task) -> dict[str, Any]:
    """One dataset row for a task."""
    return {
        "task_id": task.id,
        "conversation_id": task.conversation_id,
        "question": task.question,
        "answer": task.answer,
        "evidence": list(task.evidence),
        "category": task.category,
        "question_time": task.question_time.isoformat() if task.question_time else "",
        "excluded": task.excluded,
    }


def row_to_task(row: dict[str, Any]) -> Task:
    """Rebuild a task from a dataset row (extra columns such as `prompt` are ignored)."""
    missing = [column for column in COLUMNS if column not in row and column != "excluded"]
    if missing:
        raise DataError(f"Dataset row {row.get('task_id', '?')!r} lacks columns {missing}; expected {list(COLUMNS)}.")
    time_text = row["question_time"]
    return Task(
        id=row["task_id"],
        conversation_id=row["conversation_id"],
        question=row["question"],
        answer=row["answer"],
        evidence=list(row["evidence"] or []),
        category=row["category"],
        question_time=datetime.fromisoformat(time_text) if time_text else None,
        excluded=bool(row.get("excluded", False)),
    )


def tasks_to_dataset(tasks: Iterable[Task]) -> datasets.Dataset:
    """Build a `datasets.Dataset` with one row per task (column types fixed even when empty)."""
    import datasets

    features = datasets.Features(
        {
            "task_id": datasets.Value("string"),
            "conversation_id": datasets.Value("string"),
            "question": datasets.Value("string"),
            "answer": datasets.Value("string"),
            "evidence": datasets.Sequence(datasets.Value("string")),
            "category": datasets.Value("string"),
            "question_time": datasets.Value("string"),
            "excluded": datasets.Value("bool"),
        }
    )
    rows = [task_to_row(task) for task in tasks]
    columns = {column: [row[column] for row in rows] for column in COLUMNS}
    return datasets.Dataset.from_dict(columns, features=features)


def dataset_to_tasks(dataset: datasets.Dataset) -> list[Task]:
    """Rebuild the tasks from a dataset made by `tasks_to_dataset`."""
    return [row_to_task(row) for row in dataset]
