"""The `likelihood` feature set's zero-shot relevance: the real base LLM's query likelihood, cached in SQLite."""

from __future__ import annotations

import numpy as np
import pytest

from memora_rl.embedding.caches import EmbeddingCache
from memora_rl.env.query_likelihood import QueryLikelihood
from tests.conftest import TINY_MODEL

QUESTIONS = ["What did Sam plant in the garden?", "Where did Ana go sailing?"]
ANSWERS = ["Sam: I planted tulips and a row of basil in the garden on Sunday.",
           "Ana: we went sailing around the islands off Split last July."]  # fmt: skip
UNRELATED = ["Sam: the printer at work jammed again this morning.", "Ana: my cousin bakes bread every Friday."]


@pytest.fixture(scope="module")
def likelihood(tmp_path_factory) -> QueryLikelihood:
    return QueryLikelihood(TINY_MODEL, cache=EmbeddingCache(tmp_path_factory.mktemp("ql") / "scores.sqlite"))


def test_a_text_that_answers_the_question_scores_above_an_unrelated_one(likelihood) -> None:
    answers = likelihood.score(QUESTIONS, ANSWERS)
    unrelated = likelihood.score(QUESTIONS, UNRELATED)
    assert answers.shape == (2,) and answers.dtype == np.float32
    assert (answers > unrelated + 0.5).all(), (answers, unrelated)
    no_text = likelihood.score(QUESTIONS, ["", ""])
    assert np.allclose(no_text, 0.0, atol=1e-6)  # the question's likelihood over itself: no gain


def test_scores_are_read_back_from_the_cache_without_the_model(likelihood, tmp_path, monkeypatch) -> None:
    first = likelihood.score(QUESTIONS, ANSWERS)
    again = QueryLikelihood.__new__(QueryLikelihood)  # a second process: same cache, no forward pass allowed
    again.__dict__ |= likelihood.__dict__
    again._read = {}  # nothing in memory: every score comes from the SQLite file

    def no_forward(batch):
        raise AssertionError(f"{len(batch)} pairs recomputed")

    monkeypatch.setattr(again, "_forward", no_forward)
    assert np.array_equal(again.score(QUESTIONS[::-1], ANSWERS[::-1]), first[::-1])
    with pytest.raises(AssertionError, match="recomputed"):
        again.score(["What did Sam say about the weather?"], ANSWERS[:1])


def test_a_left_padded_batch_scores_each_pair_as_it_scores_alone(likelihood) -> None:
    short = likelihood._encode(QUESTIONS[0], "Sam: tulips.")
    long = likelihood._encode("Which islands did Ana sail around last July with her friends?", ANSWERS[1] * 3)
    alone = likelihood._forward([short])[0]
    batched = likelihood._forward([short, long])
    assert len(short[0]) < len(long[0]) and batched[0] == pytest.approx(alone, abs=0.05)
    assert batched[1] == pytest.approx(likelihood._forward([long])[0], abs=0.05)
