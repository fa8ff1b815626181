"""Fixtures for builder tests: a small synthetic conversation (LoCoMo-shaped) and its JSON file."""

from __future__ import annotations

from pathlib import Path

import pytest

from memora_rl.data.records import Conversation, Corpus

SYNTH_SIZE = {
    "conversations": 2,
    "sessions_per_conversation": 3,
    "turns_per_session": 8,
    "questions_per_conversation": 5,
}


@pytest.fixture(scope="session")
def synthetic_corpus() -> Corpus:
    """Two short synthetic conversations (3 sessions of ~8-30 turns), generated deterministically."""
    from memora_rl.data.locomo import parse_locomo
    from memora_rl.data.synthetic import SynthConfig, generate

    return parse_locomo(generate(SynthConfig(seed=3, **SYNTH_SIZE)), name="synthetic-test")


@pytest.fixture(scope="session")
def conversation(synthetic_corpus: Corpus) -> Conversation:
    """The first synthetic conversation."""
    return synthetic_corpus.conversations[0]


@pytest.fixture(scope="session")
def synthetic_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same synthetic set written as a LoCoMo-shaped JSON file (input of `graph build`)."""
    from memora_rl.data.synthetic import SynthConfig, dumps, generate

    path = tmp_path_factory.mktemp("data") / "synthetic.json"
    path.write_text(dumps(generate(SynthConfig(seed=3, **SYNTH_SIZE))))
    return path
