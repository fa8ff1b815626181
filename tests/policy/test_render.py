"""Observation rendering: layout, the token budget (real SmolLM2 tokenizer), and the chat prompt."""

from __future__ import annotations

import pytest

from memora_rl.core import prompts
from memora_rl.core.observation import render_observation
from memora_rl.core.parse import ActionParseError, parse_action
from memora_rl.core.state import FrontierView, ObservationState
from memora_rl.core.tokens import count_tokens
from memora_rl.memory.records import MemoryEntry
from memora_rl.policy.chat import initial_messages

QUESTION = "Where did Alma’s sister move — and when? 🙂"


def make_state(entries: int = 3, value_words: int = 8, frontier: int = 3, error: str | None = None) -> ObservationState:
    working = [
        MemoryEntry(
            id=f"e{i}",
            graph_id="g",
            abstraction=f"Alma's fact number {i}",
            value=" ".join(f"word{i}_{j}" for j in range(value_words)),
        )
        for i in range(entries)
    ]
    items = [
        FrontierView(entry_id=f"e{100 + i}", anchor=f"Alma + topic {i}", abstraction=f"Linked fact {i}")
        for i in range(frontier)
    ]
    return ObservationState(
        question=QUESTION,
        query="Alma sister city",
        working_set=working,
        frontier=items,
        budget=8.0,
        budget_left=5.5,
        step=2,
        max_steps=6,
        expand_cost_per_id=1.0,
        refine_cost=1.0,
        max_ids_per_expand=3,
        last_error=error,
    )


@pytest.fixture(scope="module")
def tokenizer():
    """The real SmolLM2 tokenizer. `make setup` pulls the model, so its absence is a failure, never a skip."""
    from memora_rl.llm.registry import load_tokenizer

    loaded = load_tokenizer("smollm2-135m-instruct")
    assert len(loaded) == 49152 and "<|im_start|>" in loaded.get_vocab(), "not the SmolLM2 ChatML tokenizer"
    return loaded


def test_layout_lists_every_part() -> None:
    text = render_observation(make_state(error="e9 not in the frontier"), max_prompt_tokens=10_000)
    lines = text.splitlines()
    assert lines[0] == f"Question: {QUESTION}"
    assert "Current query: Alma sister city" in lines
    assert "[e1] Alma's fact number 1: " + " ".join(f"word1_{j}" for j in range(8)) in lines
    assert '[e102] via "Alma + topic 2": Linked fact 2' in lines
    assert any(line.startswith("Budget left: 5.5 of 8") and "Step 2 of 6" in line for line in lines)
    assert "Your last action was invalid: e9 not in the frontier" in lines
    assert lines[-1] == prompts.INSTRUCTION


def test_query_line_hidden_until_refined_and_empty_sets_named() -> None:
    state = make_state(entries=0, frontier=0).model_copy(update={"query": QUESTION})
    text = render_observation(state)
    assert "Current query" not in text
    assert prompts.WORKING_SET_EMPTY in text and prompts.FRONTIER_EMPTY in text


def test_entry_newlines_are_flattened() -> None:
    state = make_state(entries=1)
    entry = state.working_set[0].model_copy(update={"value": "line one\nline two\n\n"})
    text = render_observation(state.model_copy(update={"working_set": [entry]}), max_prompt_tokens=10_000)
    assert "[e0] Alma's fact number 0: line one line two" in text.splitlines()


@pytest.mark.parametrize("limit", [200, 256, 512])
def test_budget_respected_with_smollm2_tokenizer(tokenizer, limit: int) -> None:
    state = make_state(entries=12, value_words=60, frontier=8)
    text = render_observation(state, tokenizer=tokenizer, max_prompt_tokens=limit)
    used = len(tokenizer.encode(text, add_special_tokens=False))
    assert used <= limit
    assert text.startswith(f"Question: {QUESTION}")
    assert all(f"[e{i}]" in text for i in range(12))  # ids are never dropped from the working set


def test_values_cut_before_abstractions(tokenizer) -> None:
    state = make_state(entries=6, value_words=80, frontier=4)
    text = render_observation(state, tokenizer=tokenizer, max_prompt_tokens=300)
    assert count_tokens(text, tokenizer) <= 300
    assert prompts.ELLIPSIS in text
    assert all(f"Alma's fact number {i}:" in text for i in range(6))  # abstractions intact
    assert "Linked fact 3" in text


def test_nothing_cut_when_it_fits(tokenizer) -> None:
    state = make_state()
    assert render_observation(state, tokenizer, 2_000) == render_observation(state, None, 10_000)


def test_budget_respected_without_tokenizer() -> None:
    state = make_state(entries=10, value_words=100, frontier=10)
    text = render_observation(state, max_prompt_tokens=200)
    assert count_tokens(text) <= 200
    assert prompts.ELLIPSIS in text


def test_over_budget_fixed_part_drops_frontier_then_warns(caplog: pytest.LogCaptureFixture) -> None:
    state = make_state(entries=2, value_words=5, frontier=30)
    text = render_observation(state, max_prompt_tokens=90)
    assert count_tokens(text) <= 90
    assert "[e129]" not in text  # lowest-ranked frontier items dropped first
    tiny = render_observation(make_state(entries=40, frontier=0), max_prompt_tokens=64)
    assert tiny.startswith("Question:")
    assert "raise max_prompt_tokens" in caplog.text


def test_initial_messages_are_system_few_shot_then_observation() -> None:
    messages = initial_messages("OBSERVATION")
    assert messages[0] == {"role": "system", "content": prompts.SYSTEM_PROMPT}
    assert messages[-1] == {"role": "user", "content": "OBSERVATION"}
    roles = [m["role"] for m in messages[1:-1]]
    assert roles == ["user", "assistant"] * len(prompts.FEW_SHOT_EPISODE)
    for message in messages[1:-1]:
        if message["role"] == "assistant":
            assert not isinstance(parse_action(message["content"]), ActionParseError)
        else:
            assert message["content"].startswith("Question: ")


def test_initial_messages_fit_the_chat_template(tokenizer) -> None:
    observation = render_observation(make_state(), tokenizer, 512)
    ids = tokenizer.apply_chat_template(initial_messages(observation), add_generation_prompt=True, tokenize=True)
    ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
    assert len(ids) < 2048 - 512  # room for later turns in SmolLM2's 2048-token serving context
