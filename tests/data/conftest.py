"""Fixtures of the data tests: the real LoCoMo corpus (skipped when absent) and small synthetic sets."""

from __future__ import annotations

from pathlib import Path

import pytest

from memora_rl.data.locomo import load_locomo
from memora_rl.data.records import Corpus
from memora_rl.data.synthetic import SynthConfig, generate_corpus

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="session")
def locomo_corpus(locomo_path: Path) -> Corpus:
    """The public LoCoMo file, loaded once per session."""
    return load_locomo(locomo_path)


@pytest.fixture(scope="session")
def small_synthetic() -> Corpus:
    """A small synthetic corpus (4 conversations) for split and dataset tests."""
    return generate_corpus(SynthConfig(seed=3, conversations=4))
