"""Counting tokens of a whole conversation (full context) is quiet: no "indexing errors" warning."""

from __future__ import annotations

import pytest

from memora_rl.evaluation.policies import make_context_policy, parse_policy_spec, token_counter
from memora_rl.llm.registry import load_tokenizer

WARNING_FLAG = "sequence-length-is-longer-than-the-specified-maximum"
"""Key transformers sets in `tokenizer.deprecation_warnings` when it logs the too-long-sequence warning."""


@pytest.fixture
def fresh_tokenizer():
    """A newly loaded SmolLM2 tokenizer (the warning fires once per instance, so each test needs its own)."""
    return load_tokenizer("smollm2-135m-instruct")


def test_counting_past_the_model_maximum_does_not_warn(fresh_tokenizer, capfd):
    text = "Alma said she moved to Porto in spring. " * 2000  # ~20k tokens, past the 8192 maximum
    assert fresh_tokenizer.model_max_length < 20_000
    count = token_counter(fresh_tokenizer)(text)
    assert count == len(fresh_tokenizer.encode(text, add_special_tokens=False, verbose=False)) > 8192
    assert not fresh_tokenizer.deprecation_warnings.get(WARNING_FLAG)
    assert "indexing errors" not in capfd.readouterr().err


def test_the_full_context_baseline_counts_with_the_quiet_counter(fresh_tokenizer):
    baseline = make_context_policy(parse_policy_spec("full-context"), fresh_tokenizer)
    text = "word " * 10_000
    assert baseline.count_tokens(text) > 8192
    assert not fresh_tokenizer.deprecation_warnings.get(WARNING_FLAG)


def test_plain_encoding_still_warns_so_the_check_above_can_fail(fresh_tokenizer):
    fresh_tokenizer.encode("word " * 10_000, add_special_tokens=False)
    assert fresh_tokenizer.deprecation_warnings.get(WARNING_FLAG)
