"""Splits: deterministic, stratified by category, no conversation leakage, validated fractions, save/load."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from memora_rl.data.records import Corpus, Task
from memora_rl.data.splits import Split, allocate, split_by_conversation, split_by_question, split_tasks
from memora_rl.data.synthetic import SynthConfig, generate_corpus
from memora_rl.errors import ConfigError, DataError


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return generate_corpus(SynthConfig(seed=21, conversations=10))


def _with_excluded(tasks: list[Task]) -> list[Task]:
    return [*tasks, tasks[0].model_copy(update={"id": "adv/q0000", "category": "adversarial", "excluded": True})]


def test_by_question_is_deterministic_and_order_independent(corpus: Corpus) -> None:
    shuffled = list(corpus.tasks)
    random.Random(0).shuffle(shuffled)
    assert split_by_question(corpus.tasks) == split_by_question(shuffled)
    assert split_by_question(corpus.tasks, seed=1) != split_by_question(corpus.tasks, seed=2)


def test_by_question_is_stratified(corpus: Corpus) -> None:
    split = split_by_question(corpus.tasks, fractions=(0.1, 0.1, 0.8), seed=42)
    by_id = {task.id: task for task in corpus.tasks}
    total = Counter(task.category for task in corpus.tasks)
    for part, fraction in (("train", 0.1), ("val", 0.1), ("test", 0.8)):
        counts = Counter(by_id[task_id].category for task_id in split.part(part))
        for category, count in total.items():
            assert abs(counts[category] - fraction * count) < 1, (part, category)
    ids = split.train + split.val + split.test
    assert sorted(ids) == sorted(by_id)  # a partition


def test_excluded_tasks_left_out_by_default(corpus: Corpus) -> None:
    tasks = _with_excluded(list(corpus.tasks))
    for method in (split_by_question, split_by_conversation):
        assert "adv/q0000" not in method(tasks).train + method(tasks).val + method(tasks).test
    kept = split_by_question(tasks, include_excluded=True)
    assert "adv/q0000" in kept.train + kept.val + kept.test


def test_by_conversation_has_no_leakage(corpus: Corpus) -> None:
    split = split_by_conversation(corpus.tasks, fractions=(0.2, 0.1, 0.7), seed=7)
    conversation_of = {task.id: task.conversation_id for task in corpus.tasks}
    parts = [{conversation_of[task_id] for task_id in split.part(name)} for name in ("train", "val", "test")]
    assert [len(part) for part in parts] == [2, 1, 7]
    assert not (parts[0] & parts[2]) and not (parts[0] & parts[1]) and not (parts[1] & parts[2])
    assert split == split_by_conversation(list(reversed(corpus.tasks)), fractions=(0.2, 0.1, 0.7), seed=7)


@pytest.mark.parametrize("fractions", [(0.5, 0.5, 0.5), (-0.1, 0.3, 0.8), (0.5, 0.5), (float("nan"), 0.5, 0.5)])
def test_bad_fractions_name_them(corpus: Corpus, fractions: tuple) -> None:
    with pytest.raises(ConfigError, match="fractions"):
        split_by_question(corpus.tasks, fractions=fractions)


def test_allocate_sums_to_count() -> None:
    for count in range(0, 40):
        assert sum(allocate(count, (0.1, 0.1, 0.8))) == count


def test_save_and_load_round_trip(tmp_path: Path, corpus: Corpus) -> None:
    split = split_by_question(corpus.tasks)
    path = split.save(tmp_path / "run" / "split.json")
    assert Split.load(path) == split
    assert path.read_bytes() == split.save(tmp_path / "again.json").read_bytes()
    assert [task.id for task in split.select(corpus.tasks, "val")] == split.val
    (tmp_path / "bad.json").write_text('{"method": "by-question"}')
    with pytest.raises(DataError, match=r"bad\.json"):
        Split.load(tmp_path / "bad.json")


def test_split_tasks_by_env_method_names(corpus: Corpus) -> None:
    parts = split_tasks(corpus.tasks, method="by_conversation", fractions=(0.7, 0.1, 0.2), seed=0)
    assert sum(len(tasks) for tasks in parts.values()) == len(corpus.tasks)
    assert {t.conversation_id for t in parts["train"]}.isdisjoint({t.conversation_id for t in parts["test"]})
    with pytest.raises(ConfigError, match="by_task"):
        split_tasks(corpus.tasks, method="random")
