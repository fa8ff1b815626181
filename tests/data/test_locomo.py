"""LoCoMo loader: exact counts on the real file, and every documented quirk on small hand-made records."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest

from memora_rl.data.locomo import load_locomo, parse_locomo, split_evidence
from memora_rl.data.records import Corpus


@pytest.mark.locomo
def test_real_locomo_counts(locomo_corpus: Corpus) -> None:
    corpus = locomo_corpus
    assert len(corpus.conversations) == 10
    assert sum(len(conversation.sessions) for conversation in corpus.conversations) == 272
    assert sum(1 for conversation in corpus.conversations for _ in conversation.turns()) == 5882
    assert len(corpus.tasks) == 1986
    counts = Counter(task.category for task in corpus.tasks)
    assert [counts[name] for name in ("multi-hop", "temporal", "open-domain", "single-hop", "adversarial")] == [
        282,
        321,
        96,
        841,
        446,
    ]
    assert all(task.excluded == (task.category == "adversarial") for task in corpus.tasks)


@pytest.mark.locomo
def test_real_locomo_evidence_resolves_and_quirks_are_reported(locomo_corpus: Corpus) -> None:
    corpus = locomo_corpus
    for task in corpus.tasks:
        assert set(task.evidence) <= corpus.conversation(task.conversation_id).turn_ids(), task.id
    warnings = "\n".join(corpus.warnings)
    assert "conv-26/q0037: evidence 'D8:6; D9:17' holds 2 ids" in warnings
    assert "malformed evidence 'D'" in warnings and "malformed evidence 'D:11:26'" in warnings
    assert "'D10:19' matches no turn" in warnings and "'D4:36' matches no turn" in warnings
    split_task = next(task for task in corpus.tasks if task.id == "conv-26/q0037")
    assert split_task.evidence == ["D8:6", "D9:17"]
    ids = [task.id for task in corpus.tasks]
    assert len(set(ids)) == len(ids) and ids[0] == "conv-26/q0000"


@pytest.mark.locomo
def test_real_locomo_turns_dates_answers(locomo_corpus: Corpus) -> None:
    conversation = locomo_corpus.conversation("conv-26")
    assert conversation.speakers == ["Caroline", "Melanie"]
    assert [session.index for session in conversation.sessions] == list(range(1, 20))  # date-only keys 20..35 ignored
    assert conversation.sessions[0].time == datetime(2023, 5, 8, 13, 56)
    assert all(session.time is not None for c in locomo_corpus.conversations for session in c.sessions)
    image_turns = [turn for c in locomo_corpus.conversations for turn in c.turns() if "[shares an image: " in turn.text]
    assert len(image_turns) == 1226
    assert all(isinstance(task.answer, str) and task.answer for task in locomo_corpus.tasks)
    assert sum(task.answer.isdigit() for task in locomo_corpus.tasks) >= 6


def _record(**qa_overrides: object) -> dict:
    """A tiny LoCoMo-shaped conversation with one question."""
    qa = {"question": "Where did Ana go?", "answer": "Porto", "evidence": ["D1:2"], "category": 4}
    qa.update(qa_overrides)
    return {
        "sample_id": "mini",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "9:05 am on 3 March, 2024",
            "session_1": [
                {"speaker": "Ana", "dia_id": "D1:1", "text": "Hi Ben!"},
                {"speaker": "Ana", "dia_id": "D1:2", "text": "Back from Porto.", "blip_caption": "a photo of a bridge"},
            ],
            "session_2_date_time": "10:00 pm on 4 March, 2024",
        },
        "qa": [qa],
    }


def test_quirks_on_small_record() -> None:
    raw = [_record()]
    raw[0]["qa"] += [
        {"question": "Year?", "answer": 2022, "evidence": ["D1:2; D1:1", "D", "D9:9"], "category": 2},
        {"question": "Adv?", "answer": "No", "adversarial_answer": "Yes", "evidence": ["D1:1"], "category": 5},
    ]
    corpus = parse_locomo(raw, source="mini.json")
    conversation = corpus.conversations[0]
    assert len(conversation.sessions) == 1 and conversation.sessions[0].time == datetime(2024, 3, 3, 9, 5)
    assert conversation.sessions[0].turns[1].text == "Back from Porto. [shares an image: a photo of a bridge]"
    plain, year, adversarial = corpus.tasks
    assert (plain.id, plain.category, plain.evidence) == ("mini/q0000", "single-hop", ["D1:2"])
    assert (year.answer, year.evidence, year.category) == ("2022", ["D1:2", "D1:1"], "temporal")
    assert (adversarial.answer, adversarial.excluded, adversarial.category) == ("Yes", True, "adversarial")
    assert len(corpus.warnings) == 3 and "'D9:9' matches no turn" in corpus.warnings[2]


def test_category_name_refines_integer_category() -> None:
    corpus = parse_locomo([_record(category_name="knowledge-update")])
    assert corpus.tasks[0].category == "knowledge-update"


@pytest.mark.parametrize(
    ("raw", "ids", "dropped"),
    [("D3:7", ["D3:7"], []), ("D8:6; D9:17", ["D8:6", "D9:17"], []), ("D1:1 D2:2", ["D1:1", "D2:2"], []),
     ("D", [], ["D"]), ("D:11:26", [], ["D:11:26"]), ("", [], [])],
)  # fmt: skip
def test_split_evidence(raw: str, ids: list[str], dropped: list[str]) -> None:
    assert split_evidence(raw) == (ids, dropped)


def test_load_locomo_names_corpus_after_file(tmp_path: Path) -> None:
    path = tmp_path / "tiny_set.json"
    path.write_text(json.dumps([_record()]))
    assert load_locomo(path).name == "tiny_set"
