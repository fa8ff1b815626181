"""Deterministic train/val/test splits of tasks: by question (stratified by category) or by conversation.

A `Split` records the task ids of each part plus how it was made (method, seed,
fractions), and is saved next to a run so the run can be reproduced. Both methods sort
ids before shuffling with `random.Random(seed)`, so the result does not depend on the
order tasks were loaded in. Tasks flagged `excluded` (LoCoMo adversarial) are left out
unless `include_excluded=True`.
"""

from __future__ import annotations

import json
import math
import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ValidationError

from memora_rl.data.jsonio import read_json
from memora_rl.data.records import Task
from memora_rl.errors import ConfigError, DataError

SplitName = Literal["train", "validation", "test", "all"]
"""A task split an env draws from (`all`: every task of the corpus)."""

SplitPart = Literal["train", "val", "test"]
DEFAULT_FRACTIONS = (0.1, 0.1, 0.8)
"""The Memora paper's GRPO split: 10% train, 10% validation, 80% test."""


class Split(BaseModel):
    """Task ids of each part, and the recipe that produced them."""

    method: Literal["by-question", "by-conversation"]
    """How tasks were assigned: per question (stratified by category) or per whole conversation."""
    seed: int
    """Seed of the shuffle."""
    fractions: tuple[float, float, float]
    """Requested (train, val, test) shares, summing to 1."""
    train: list[str]
    val: list[str]
    test: list[str]

    def part(self, name: SplitPart) -> list[str]:
        """Task ids of one part."""
        return {"train": self.train, "val": self.val, "test": self.test}[name]

    def select(self, tasks: Iterable[Task], name: SplitPart) -> list[Task]:
        """The tasks of one part, in the split's order."""
        by_id = {task.id: task for task in tasks}
        missing = [task_id for task_id in self.part(name) if task_id not in by_id]
        if missing:
            raise DataError(
                f"Split part {name!r} names {len(missing)} task ids not in the given tasks, e.g. {missing[:3]}."
            )
        return [by_id[task_id] for task_id in self.part(name)]

    def save(self, path: str | Path) -> Path:
        """Write the split as JSON (sorted keys, stable bytes) and return the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.model_dump(mode="json"), indent=1, sort_keys=True) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path) -> Split:
        """Read a split written by `save`; a malformed file raises `DataError` naming it."""
        raw = read_json(path)
        try:
            return cls.model_validate(raw)
        except ValidationError as error:
            raise DataError(f"{path}: not a valid split file: {error}") from error


def check_fractions(fractions: Sequence[float]) -> tuple[float, float, float]:
    """Validate (train, val, test) fractions: three non-negative numbers summing to 1.

    >>> check_fractions([0.1, 0.1, 0.8])
    (0.1, 0.1, 0.8)
    """
    values = tuple(float(value) for value in fractions)
    if len(values) != 3 or any(value < 0 or math.isnan(value) for value in values):
        raise ConfigError(f"Split fractions {list(fractions)} must be three non-negative numbers (train, val, test).")
    if not math.isclose(sum(values), 1.0, abs_tol=1e-6):
        raise ConfigError(
            f"Split fractions {list(fractions)} sum to {sum(values):g}; they must sum to 1, e.g. 0.1,0.1,0.8."
        )
    return values  # type: ignore[return-value]


def allocate(count: int, fractions: Sequence[float]) -> tuple[int, int, int]:
    """Split `count` items into three sizes by largest remainder (sizes sum to `count`).

    >>> allocate(10, (0.1, 0.1, 0.8))
    (1, 1, 8)
    >>> allocate(7, (0.5, 0.25, 0.25))
    (3, 2, 2)
    """
    exact = [count * fraction for fraction in fractions]
    sizes = [math.floor(value) for value in exact]
    order = sorted(range(3), key=lambda index: (-(exact[index] - sizes[index]), index))
    for index in order[: count - sum(sizes)]:
        sizes[index] += 1
    return sizes[0], sizes[1], sizes[2]


def _eligible(tasks: Iterable[Task], include_excluded: bool) -> list[Task]:
    """Tasks that take part in a split, sorted by id."""
    return sorted((task for task in tasks if include_excluded or not task.excluded), key=lambda task: task.id)


def split_by_question(
    tasks: Iterable[Task],
    fractions: Sequence[float] = DEFAULT_FRACTIONS,
    seed: int = 42,
    include_excluded: bool = False,
) -> Split:
    """Assign questions to train/val/test, the same fractions within every category."""
    shares = check_fractions(fractions)
    rng = random.Random(seed)
    by_category: dict[str, list[str]] = defaultdict(list)
    for task in _eligible(tasks, include_excluded):
        by_category[task.category].append(task.id)
    parts: tuple[list[str], list[str], list[str]] = ([], [], [])
    for category in sorted(by_category):
        ids = by_category[category]
        rng.shuffle(ids)
        train_size, val_size, _ = allocate(len(ids), shares)
        parts[0].extend(ids[:train_size])
        parts[1].extend(ids[train_size : train_size + val_size])
        parts[2].extend(ids[train_size + val_size :])
    train, val, test = (sorted(part) for part in parts)
    return Split(method="by-question", seed=seed, fractions=shares, train=train, val=val, test=test)


def split_by_conversation(
    tasks: Iterable[Task],
    fractions: Sequence[float] = DEFAULT_FRACTIONS,
    seed: int = 42,
    include_excluded: bool = False,
) -> Split:
    """Assign whole conversations to train/val/test, so no test conversation is seen in training.

    Fractions apply to the number of conversations (e.g. 10 LoCoMo conversations -> 1/1/8).
    """
    shares = check_fractions(fractions)
    eligible = _eligible(tasks, include_excluded)
    conversation_ids = sorted({task.conversation_id for task in eligible})
    random.Random(seed).shuffle(conversation_ids)
    train_size, val_size, _ = allocate(len(conversation_ids), shares)
    part_of = {cid: 0 for cid in conversation_ids[:train_size]}
    part_of |= {cid: 1 for cid in conversation_ids[train_size : train_size + val_size]}
    part_of |= {cid: 2 for cid in conversation_ids[train_size + val_size :]}
    parts: tuple[list[str], list[str], list[str]] = ([], [], [])
    for task in eligible:
        parts[part_of[task.conversation_id]].append(task.id)
    return Split(method="by-conversation", seed=seed, fractions=shares, train=parts[0], val=parts[1], test=parts[2])


SPLIT_METHODS = {
    "by-question": split_by_question,
    "by_task": split_by_question,
    "by-conversation": split_by_conversation,
    "by_conversation": split_by_conversation,
}
"""Method names accepted by `split_tasks` (the env specs spell them with underscores)."""


def split_tasks(
    tasks: Iterable[Task], method: str = "by-question", fractions: Sequence[float] = DEFAULT_FRACTIONS, seed: int = 42
) -> dict[str, list[Task]]:
    """Split exactly the given tasks (filter excluded ones first) and return them by part name.

    Returns:
        ``{"train": [...], "validation": [...], "test": [...]}``, each in the split's order.

    Raises:
        ConfigError: Unknown method (the message lists the valid ones) or invalid fractions.
    """
    if method not in SPLIT_METHODS:
        raise ConfigError(f"Unknown split method {method!r}. Valid methods: {sorted(SPLIT_METHODS)}.")
    task_list = list(tasks)
    split = SPLIT_METHODS[method](task_list, fractions=fractions, seed=seed, include_excluded=True)
    return {
        "train": split.select(task_list, "train"),
        "validation": split.select(task_list, "val"),
        "test": split.select(task_list, "test"),
    }
