"""The `learned` feature set's relevance model: it learns from pairs, and its training column is out-of-fold."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from memora_rl.experiments.relevance_model import fit_relevance, fold_of, out_of_fold_scores, training_pairs

QUESTION = "What did Sam say about the {}?"
TEMPLATES = [
    "Sam talked about the {} at dinner.",
    "Last week Sam mentioned a {} to Ana.",
    "Ana asked Sam about his {} again.",
]
TRAIN_WORDS = ["kayak", "violin", "tulips", "lasagna", "telescope", "saxophone", "origami", "pottery", "bonsai",
               "falcon", "glacier", "harmonica", "lantern", "marathon", "nebula", "orchid", "pelican", "quartz",
               "raccoon", "sapphire", "tornado", "ukulele", "volcano", "walrus"]  # fmt: skip
HELD_OUT_WORDS = ["zeppelin", "cactus", "igloo", "yoga"]


def rare_word_pairs(words: Sequence[str]) -> tuple[list[str], list[str], list[bool]]:
    """Per word, its question and four texts alike but for their rare word: only the first holds the question's."""
    questions, texts, labels = [], [], []
    for i, word in enumerate(words):
        for j in range(4):
            questions.append(QUESTION.format(word))
            texts.append(TEMPLATES[(i + j) % len(TEMPLATES)].format(words[(i + j) % len(words)]))
            labels.append(j == 0)
    return questions, texts, labels


@pytest.mark.slow
def test_the_relevance_model_ranks_a_held_out_text_sharing_the_questions_rare_word_first() -> None:
    model = fit_relevance(*rare_word_pairs(TRAIN_WORDS), seed=0, epochs=4, negatives_per_positive=3, batch_size=8,
                          learning_rate=1e-4)  # fmt: skip
    questions, texts, _ = rare_word_pairs(HELD_OUT_WORDS)  # words the model never saw in training
    scores = model.score(questions, texts)
    assert scores.shape == (len(texts),) and scores.dtype == np.float32 and ((scores > 0) & (scores < 1)).all()
    by_question = scores.reshape(len(HELD_OUT_WORDS), 4)
    assert (by_question.argmax(axis=1) == 0).all(), by_question  # chance: 1 in 4**4
    assert np.array_equal(model.score(questions[::-1], texts[::-1]), scores[::-1])  # batching does not matter


def test_training_pairs_are_distinct_positive_if_any_copy_is_and_negatives_subsampled() -> None:
    questions = ["q"] * 6 + ["r"] * 20
    texts = ["a", "a", "b", "c", "d", "e"] + [f"n{i}" for i in range(20)]
    labels = [False, True, False, False, False, False] + [False] * 19 + [True]
    pairs, targets = training_pairs(questions, texts, labels, negatives_per_positive=3, seed=0)
    assert len(pairs) == len(set(pairs)) == 2 + 2 * 3 and targets.sum() == 2
    assert dict(zip(pairs, targets.tolist(), strict=True))[("q", "a")] == 1.0  # one positive copy of two
    assert training_pairs(questions, texts, labels, 3, seed=0)[0] == pairs  # seeded
    assert training_pairs(questions, texts, labels, 3, seed=1)[0] != pairs


def test_folds_keep_each_group_whole_and_balance_rows() -> None:
    groups = ["conv-1"] * 50 + ["conv-2"] * 40 + ["conv-3"] * 30 + ["conv-4"] * 20 + ["conv-5"] * 10
    fold = fold_of(groups)
    for group in set(groups):
        assert len({int(f) for f, g in zip(fold, groups, strict=True) if g == group}) == 1, group
    assert sorted(np.bincount(fold).tolist()) == [70, 80]
    assert fold_of(groups[::-1])[::-1].tolist() == fold.tolist()  # by group, not by row order
    with pytest.raises(ValueError, match="at least 2 groups"):
        out_of_fold_scores(["q"], ["t"], [True], ["conv-1"], seed=0, fit=lambda *a, **k: None)


class SeenGroups:
    """A stand-in relevance model that remembers the questions it was fit on (each question names its group)."""

    def __init__(self, questions: Sequence[str]) -> None:
        self.trained_on = set(questions)

    def score(self, questions: Sequence[str], texts: Sequence[str]) -> np.ndarray:
        """1 for a pair whose question the model was fit on (a leak), else 0."""
        return np.asarray([question in self.trained_on for question in questions], dtype=np.float32)


def test_each_training_row_is_scored_by_a_model_that_never_saw_its_group() -> None:
    groups = [f"conv-{i % 5}" for i in range(60)]
    questions = [f"question of {group}" for group in groups]
    fits: list[dict[str, object]] = []

    def fit(questions: list[str], texts: list[str], labels: list[bool], seed: int, **options: object) -> SeenGroups:
        fits.append({"seed": seed, "rows": len(questions)} | options)
        return SeenGroups(questions)

    scores, models = out_of_fold_scores(questions, ["text"] * 60, [True] * 60, groups, seed=7, fit=fit, epochs=3)
    assert len(models) == 2 and [f["seed"] for f in fits] == [7, 8] and all(f["epochs"] == 3 for f in fits)
    assert sum(f["rows"] for f in fits) == 60  # each model fit on the other fold only
    assert not scores.any(), "a row was scored by a model fit on its own group"
    assert all(model.trained_on for model in models)
