"""Synthetic generator: determinism, exact evidence, answers supported by evidence, LoCoMo compatibility."""

from __future__ import annotations

import itertools
import json
from collections import Counter

import pytest

from memora_rl.data.locomo import parse_locomo
from memora_rl.data.synthetic import SynthConfig, answer_supported, content_words, dumps, generate, generate_corpus
from memora_rl.errors import ConfigError


def test_same_seed_gives_identical_bytes() -> None:
    config = SynthConfig(seed=11, conversations=3)
    assert dumps(generate(config)) == dumps(generate(SynthConfig(seed=11, conversations=3)))


def test_different_seed_differs() -> None:
    first, second = (dumps(generate(SynthConfig(seed=seed, conversations=2))) for seed in (1, 2))
    assert first != second


def test_adding_conversations_keeps_the_first_ones() -> None:
    short = generate(SynthConfig(seed=5, conversations=2))
    longer = generate(SynthConfig(seed=5, conversations=4))
    assert dumps(longer[:2]) == dumps(short)


def test_thousand_questions_have_existing_evidence_and_supported_answers() -> None:
    corpus = generate_corpus(SynthConfig(seed=123, conversations=40, questions_per_conversation=25))
    assert len(corpus.tasks) >= 1000
    assert corpus.warnings == []
    for task in corpus.tasks:
        conversation = corpus.conversation(task.conversation_id)
        texts = {turn.id: turn.text for turn in conversation.turns()}
        assert task.evidence, task.id
        assert all(turn_id in texts for turn_id in task.evidence), task.id
        evidence_words = {word for turn_id in task.evidence for word in content_words(texts[turn_id])}
        assert set(content_words(task.answer)) <= evidence_words, (task.id, task.answer)


def test_categories_and_structure() -> None:
    document = generate(SynthConfig(seed=0, conversations=5))
    corpus = parse_locomo(json.loads(dumps(document)))
    counts = Counter(task.category for task in corpus.tasks)
    assert set(counts) == {"single-hop", "multi-hop", "temporal", "knowledge-update", "preference"}
    for record in document:
        assert {qa["category"] for qa in record["qa"]} <= {1, 2, 4}
    for conversation in corpus.conversations:
        assert len(conversation.sessions) == 12
        times = [session.time for session in conversation.sessions]
        assert all(a < b for a, b in itertools.pairwise(times))
        assert all(len(session.turns) >= 16 for session in conversation.sessions)
        assert set(conversation.speakers) == {turn.speaker for turn in conversation.turns()}
    multi_hop = [task for task in corpus.tasks if task.category == "multi-hop"]
    assert all(len({turn_id.split(":")[0] for turn_id in task.evidence}) == 2 for task in multi_hop)


def test_knowledge_updates_come_after_the_old_value() -> None:
    config = SynthConfig(seed=9, conversations=3, update_probability=1.0, questions_per_conversation=500)
    corpus = generate_corpus(config)
    updates = [task for task in corpus.tasks if task.category == "knowledge-update"]
    before = [task for task in updates if len(task.evidence) == 2]
    assert len(before) == 3 * 2 * 3  # every job, city and partner of both speakers changed once
    for task in before:
        session_of = {turn.id: turn.session_index for turn in corpus.conversation(task.conversation_id).turns()}
        old_turn, new_turn = task.evidence
        assert session_of[old_turn] < session_of[new_turn]
        now = [t for t in updates if t.conversation_id == task.conversation_id and t.evidence == [new_turn]]
        assert len(now) == 1 and now[0].answer != task.answer


def test_answer_supported_is_strict() -> None:
    assert answer_supported("8 May 2023", ["On Monday, 8 May 2023, I ran."])
    assert not answer_supported("9 May 2023", ["On Monday, 8 May 2023, I ran."])
    assert not answer_supported("the", ["the"])  # no content words -> not supported


@pytest.mark.parametrize(
    "options",
    [{"sessions_per_conversation": 2}, {"min_days_between_sessions": 9, "max_days_between_sessions": 3}, {"seed": -1}],
)
def test_invalid_config_is_rejected(options: dict) -> None:
    with pytest.raises((ConfigError, ValueError)):
        SynthConfig(**options)


def test_generate_corpus_names_bad_option() -> None:
    with pytest.raises(ConfigError, match="turns_per_sesion"):
        generate_corpus(turns_per_sesion=3)
