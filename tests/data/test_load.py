"""`load_corpus`: shape detection and bad-input errors that name the file, the record id and the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memora_rl.data.load import load_corpus
from memora_rl.data.synthetic import SynthConfig, dumps, generate
from memora_rl.errors import DataError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture
def synthetic_file(tmp_path: Path) -> Path:
    path = tmp_path / "synth.json"
    path.write_text(dumps(generate(SynthConfig(seed=4, conversations=2))))
    return path


def test_detects_both_shapes(synthetic_file: Path) -> None:
    assert load_corpus(synthetic_file).tasks[0].id == "synth-4-000/q0000"
    assert load_corpus(FIXTURES / "longmemeval_s.json").tasks[0].category == "multi-session"
    assert load_corpus(str(FIXTURES / "longmemeval_oracle.json")).name == "longmemeval_oracle"


def test_named_synthetic() -> None:
    assert load_corpus("synthetic:3").name == "synthetic-3"
    with pytest.raises(DataError, match="synthetic:x"):
        load_corpus("synthetic:x")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"nowhere\.json: file not found"):
        load_corpus(tmp_path / "nowhere.json")


def test_truncated_json(tmp_path: Path, synthetic_file: Path) -> None:
    path = tmp_path / "cut.json"
    path.write_text(synthetic_file.read_text()[:5000])
    with pytest.raises(DataError, match=r"cut\.json: invalid JSON at line \d+.*truncated"):
        load_corpus(path)


def _write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data))
    return path


def test_missing_key_names_file_conversation_and_key(tmp_path: Path, synthetic_file: Path) -> None:
    data = json.loads(synthetic_file.read_text())
    del data[1]["qa"][2]["answer"]
    with pytest.raises(DataError, match=r"edited\.json: conversation 'synth-4-001', qa\[2\]: key 'answer' is missing"):
        load_corpus(_write(tmp_path, data))


def test_wrong_type_names_file_turn_and_key(tmp_path: Path, synthetic_file: Path) -> None:
    data = json.loads(synthetic_file.read_text())
    data[0]["conversation"]["session_2"][3]["text"] = ["not", "a", "string"]
    pattern = r"edited\.json: conversation 'synth-4-000', session_2\[3\] \(D2:4\): key 'text' has type list"
    with pytest.raises(DataError, match=pattern):
        load_corpus(_write(tmp_path, data))


def test_wrong_type_in_longmemeval_names_question(tmp_path: Path) -> None:
    data = json.loads((FIXTURES / "longmemeval_oracle.json").read_text())
    data[1]["answer_session_ids"] = "fx_s_plants_new"
    with pytest.raises(DataError, match=r"edited\.json: question 'fx_ku_02': key 'answer_session_ids' has type str"):
        load_corpus(_write(tmp_path, data))


def test_missing_key_in_longmemeval_turn(tmp_path: Path) -> None:
    data = json.loads((FIXTURES / "longmemeval_oracle.json").read_text())
    del data[0]["haystack_sessions"][0][1]["content"]
    with pytest.raises(DataError, match=r"question 'fx_ssu_01'.*\(fx_s_bike\)\[1\]: key 'content' is missing"):
        load_corpus(_write(tmp_path, data))


@pytest.mark.parametrize("data", [[], {"a": 1}, [{"foo": 1}], [1, 2]])
def test_unknown_shape(tmp_path: Path, data: object) -> None:
    with pytest.raises(DataError, match=r"edited\.json"):
        load_corpus(_write(tmp_path, data))
