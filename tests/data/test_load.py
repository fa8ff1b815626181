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


def test_one_locomo_default_for_the_loader_and_the_envs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from memora_rl.data import load
    from memora_rl.env.sources import resolve_data_path
    from memora_rl.env.spec import LocomoSource

    shared = tmp_path / "shared" / "data" / "locomo" / "locomo10.json"
    shared.parent.mkdir(parents=True)
    shared.write_text(dumps(generate(SynthConfig(seed=5, conversations=1))))
    monkeypatch.delenv(load.LOCOMO_ENV_VAR, raising=False)
    monkeypatch.setenv("MEMORA_RL_HOME", str(tmp_path / "home"))  # the cache root holds no copy
    monkeypatch.setattr(load, "SHARED_LOCOMO_PATH", shared)
    assert resolve_data_path(LocomoSource()) == shared  # the `locomo` env
    assert load_corpus("locomo").conversations[0].id == "synth-5-000"  # `graph build --data locomo`
    home_copy = tmp_path / "home" / "data" / "locomo10.json"
    home_copy.parent.mkdir(parents=True)
    home_copy.write_text(shared.read_text())
    shared.unlink()
    assert resolve_data_path(LocomoSource()) == home_copy == load.default_locomo_path()  # the same fallback
    home_copy.unlink()
    for find in (lambda: resolve_data_path(LocomoSource()), lambda: load_corpus("locomo")):
        with pytest.raises(DataError, match=r"looked at .*shared.*locomo10\.json, .*home.*MEMORA_RL_LOCOMO"):
            find()


@pytest.mark.locomo
def test_locomo_by_name_finds_the_shared_copy_the_readme_names(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, locomo_path: Path
) -> None:
    monkeypatch.delenv("MEMORA_RL_LOCOMO", raising=False)
    monkeypatch.setenv("MEMORA_RL_HOME", str(tmp_path))  # as on a new user's machine: an empty cache root
    assert len(load_corpus("locomo").conversations) == 10


def _edit_locomo(data: list, edit: str) -> None:
    """One malformation of a LoCoMo-shaped record (the rows of the bad-input matrix)."""
    conversation = data[0]["conversation"]
    sessions = [key for key in conversation if key.startswith("session_") and not key.endswith("date_time")]
    if edit == "missing key":
        del data[0]["qa"][1]["question"]
    elif edit == "wrong type":
        data[0]["qa"][1]["category"] = "two"
    elif edit == "every session empty":
        for key in sessions:
            conversation[key] = []
    elif edit == "qa not a list":
        data[0]["qa"] = {"question": "?"}


@pytest.mark.parametrize(
    ("edit", "pattern"),
    [
        (
            "missing key",
            r"edited\.json: conversation 'synth-4-000', qa\[1\]: key 'question' is missing.*Fix the record",
        ),
        ("wrong type", r"edited\.json: conversation 'synth-4-000', qa\[1\]: key 'category' has type str.*Fix the"),
        ("every session empty", r"edited\.json: conversation 'synth-4-000': key 'conversation' holds no turns.*Fill"),
        ("qa not a list", r"edited\.json: conversation 'synth-4-000': key 'qa' has type object.*Fix the record"),
    ],
)
def test_bad_locomo_input_names_file_record_key_and_fix(
    tmp_path: Path, synthetic_file: Path, edit: str, pattern: str
) -> None:
    data = json.loads(synthetic_file.read_text())
    _edit_locomo(data, edit)
    with pytest.raises(DataError, match=pattern):
        load_corpus(_write(tmp_path, data))


def test_tolerated_locomo_problems_are_warnings_naming_file_record_and_key(
    tmp_path: Path, synthetic_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = json.loads(synthetic_file.read_text())
    data[0]["qa"][0]["evidence"] = ["D99:1"]  # an id of no turn (the public file has a few)
    data[0]["conversation"]["session_3"] = []  # one empty session: loaded, and said
    corpus = load_corpus(_write(tmp_path, data))
    unknown, emptied = [w for w in corpus.warnings if w.startswith("synth-4-000/q0000:")]
    assert "'D99:1' matches no turn; dropped [" in unknown
    assert "edited.json: conversation 'synth-4-000', qa[0], key 'evidence[0]'" in unknown
    assert "evidence recall 1.0" in emptied and "key 'evidence']" in emptied and "dia_ids" in emptied
    assert corpus.tasks[0].evidence == []
    assert "edited.json: conversation 'synth-4-000': key 'session_3' is an empty session" in caplog.text


@pytest.mark.parametrize(
    ("edit", "pattern"),
    [
        ("missing key", r"edited\.json: question 'fx_s_ms_01': key 'question_date' is missing.*Fix the record"),
        ("wrong type", r"edited\.json: question 'fx_s_ms_01': key 'question' has type int.*Fix the record"),
        ("every session empty", r"edited\.json: question 'fx_s_ms_01': key 'haystack_sessions' holds no turns.*Fill"),
        ("lengths differ", r"edited\.json: question 'fx_s_ms_01': .* must be equal\. Give every haystack session"),
    ],
)
def test_bad_longmemeval_input_names_file_record_key_and_fix(tmp_path: Path, edit: str, pattern: str) -> None:
    data = json.loads((FIXTURES / "longmemeval_s.json").read_text())
    record = data[0]
    if edit == "missing key":
        del record["question_date"]
    elif edit == "wrong type":
        record["question"] = 7
    elif edit == "every session empty":
        record["haystack_sessions"] = [[] for _ in record["haystack_sessions"]]
    else:
        record["haystack_dates"] = record["haystack_dates"][:-1]
    with pytest.raises(DataError, match=pattern):
        load_corpus(_write(tmp_path, data))


def test_longmemeval_answer_session_outside_the_haystack_is_a_located_warning(tmp_path: Path) -> None:
    data = json.loads((FIXTURES / "longmemeval_s.json").read_text())
    for session in data[0]["haystack_sessions"]:
        for turn in session:
            turn.pop("has_answer", None)  # evidence then comes from answer_session_ids
    data[0]["answer_session_ids"] = ["no-such-session"]
    corpus = load_corpus(_write(tmp_path, data))
    joined = "\n".join(corpus.warnings)
    assert "answer session 'no-such-session' is not in the haystack [" in joined
    assert "edited.json: question 'fx_s_ms_01', key 'answer_session_ids']" in joined
    assert "evidence recall 1.0" in joined
