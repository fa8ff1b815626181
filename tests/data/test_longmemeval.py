"""LongMemEval loader on the two hand-written fixtures (oracle: unsorted sessions; S: sorted haystack)."""

from __future__ import annotations

import copy
import json
from datetime import datetime
from pathlib import Path

import pytest

from memora_rl.data.longmemeval import load_longmemeval, parse_longmemeval
from memora_rl.errors import DataError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ORACLE = FIXTURES / "longmemeval_oracle.json"
S_SPLIT = FIXTURES / "longmemeval_s.json"


def test_oracle_fixture() -> None:
    corpus = load_longmemeval(ORACLE)
    tasks = {task.id: task for task in corpus.tasks}
    assert [c.id for c in corpus.conversations] == list(tasks) and corpus.warnings == []
    assert tasks["fx_ssu_01"].evidence == ["fx_s_bike:0"] and tasks["fx_ssu_01"].category == "single-session-user"
    assert tasks["fx_ku_02"].answer == "7"  # integer answer
    assert tasks["fx_ku_02"].question_time == datetime(2023, 6, 30, 9, 0)
    # sessions listed newest first in the file come out in date order, numbered from 1
    sessions = corpus.conversation("fx_ku_02").sessions
    assert [s.index for s in sessions] == [1, 2] and sessions[0].time < sessions[1].time
    assert tasks["fx_ku_02"].evidence == ["fx_s_plants_old:0", "fx_s_plants_new:0"]
    # no has_answer mark: every turn of the answer sessions, in conversation order
    assert tasks["fx_tr_03"].evidence == ["fx_s_glass:0", "fx_s_glass:1", "fx_s_cruise:0", "fx_s_cruise:1"]
    assert tasks["fx_ssu_04_abs"].category == "abstention"
    turn = sessions[0].turns[0]
    assert (turn.speaker, turn.session_index, turn.time) == ("user", 1, sessions[0].time)


def test_s_fixture() -> None:
    corpus = load_longmemeval(S_SPLIT)
    assert len(corpus.tasks) == 2
    for conversation in corpus.conversations:
        assert len(conversation.sessions) == 10
        times = [session.time for session in conversation.sessions]
        assert times == sorted(times)
        assert len(conversation.turn_ids()) == sum(len(s.turns) for s in conversation.sessions)
    multi = corpus.tasks[0]
    assert multi.category == "multi-session"
    assert multi.evidence == ["fx_s_ms_01_hay_3:0", "fx_s_ms_01_hay_7:0"]


def test_unknown_question_type_names_question_and_key() -> None:
    raw = json.loads(ORACLE.read_text())
    broken = copy.deepcopy(raw)
    broken[1]["question_type"] = "multi-hop"
    with pytest.raises(DataError, match=r"oracle\.json: question 'fx_ku_02': key 'question_type'"):
        parse_longmemeval(broken, source="oracle.json")


def test_mismatched_haystack_lengths() -> None:
    raw = json.loads(ORACLE.read_text())
    raw[2]["haystack_dates"].pop()
    with pytest.raises(DataError, match=r"fx_tr_03.*lengths 3, 2 and 3"):
        parse_longmemeval(raw, source="oracle.json")


def test_bad_date_names_key() -> None:
    raw = json.loads(ORACLE.read_text())
    raw[0]["question_date"] = "10 April 2023"
    with pytest.raises(DataError, match=r"fx_ssu_01.*'question_date'"):
        parse_longmemeval(raw, source="oracle.json")
