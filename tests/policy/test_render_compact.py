"""Compact observation layout: same facts and ids as the default one, fewer tokens, same token budget rules."""

from __future__ import annotations

import pytest

from memora_rl.core import prompts
from memora_rl.core.observation import render_observation
from memora_rl.core.parse import ActionParseError, parse_action
from memora_rl.core.state import FrontierView, ObservationState
from memora_rl.core.tokens import count_tokens
from memora_rl.memory.records import MemoryEntry
from memora_rl.policy.chat import initial_messages


def make_state(value_words: int = 8, error: str | None = None) -> ObservationState:
    working = [
        MemoryEntry(id=f"e{i}", graph_id="g", abstraction=f"Alma + fact {i}",
                    value=" ".join(f"word{i}_{j}" for j in range(value_words)))
        for i in range(3)
    ]  # fmt: skip
    frontier = [FrontierView(entry_id=f"e{100 + i}", anchor=f"Alma + topic {i}", abstraction=f"Alma + linked {i}")
                for i in range(4)]  # fmt: skip
    return ObservationState(question="Where did Alma's sister move?", query="Alma sister city", working_set=working,
                            frontier=frontier, budget=8.0, budget_left=5.5, step=2, max_steps=6, expand_cost_per_id=1.0,
                            refine_cost=1.0, max_ids_per_expand=3, last_error=error)  # fmt: skip


@pytest.fixture(scope="module")
def tokenizer():
    registry = pytest.importorskip("memora_rl.llm.registry")
    try:
        return registry.load_tokenizer("smollm2-135m-instruct")
    except Exception as error:  # pulled by `make setup`; skip where it is absent
        pytest.skip(f"SmolLM2 tokenizer unavailable ({error})")


def test_compact_layout_keeps_every_id_and_fact() -> None:
    text = render_observation(make_state(error="e9 not linked"), max_prompt_tokens=10_000, compact=True)
    lines = text.splitlines()
    assert lines[0] == "Q: Where did Alma's sister move?"
    assert "Query: Alma sister city" in lines
    assert "e1 Alma + fact 1: " + " ".join(f"word1_{j}" for j in range(8)) in lines
    assert "Linked (expand up to 3):" in lines
    assert "e102 Alma + linked 2" in lines
    assert "topic" not in text  # anchors are dropped
    assert lines[-2] == "Budget 5.5/8 (expand 1/id, refine 1), step 2/6."
    assert lines[-1] == "Invalid last action: e9 not linked"
    assert prompts.INSTRUCTION not in text


def test_compact_is_shorter_and_caps_values(tokenizer) -> None:
    state = make_state(value_words=60)
    full = render_observation(state, tokenizer, 10_000)
    compact = render_observation(state, tokenizer, 10_000, compact=True)
    assert count_tokens(compact, tokenizer) < 0.75 * count_tokens(full, tokenizer)
    for line in compact.splitlines()[3:6]:
        value = line.split(": ", 1)[1]
        assert value.endswith(prompts.ELLIPSIS)
        assert count_tokens(value, tokenizer) <= prompts.COMPACT_VALUE_TOKENS + 2


@pytest.mark.parametrize("limit", [80, 120])
def test_compact_respects_the_token_budget(tokenizer, limit: int) -> None:
    text = render_observation(make_state(value_words=40), tokenizer, limit, compact=True)
    assert count_tokens(text, tokenizer) <= limit
    assert "e0 " in text and "Budget" in text


def test_compact_initial_messages_use_the_compact_system_prompt_and_few_shot() -> None:
    messages = initial_messages("OBS", compact=True)
    assert messages[0] == {"role": "system", "content": prompts.COMPACT_SYSTEM_PROMPT}
    assert messages[-1] == {"role": "user", "content": "OBS"}
    users = [m["content"] for m in messages[1:-1] if m["role"] == "user"]
    assert users and all(text.startswith("Q: ") and "Linked" in text for text in users)
    for message in messages[1:-1]:
        if message["role"] == "assistant":
            assert not isinstance(parse_action(message["content"]), ActionParseError)
    assert initial_messages("OBS")[0]["content"] == prompts.SYSTEM_PROMPT  # the default is unchanged


def test_compact_prompt_is_shorter_with_the_chat_template(tokenizer) -> None:
    def prompt_tokens(compact: bool) -> int:
        observation = render_observation(make_state(), tokenizer, 512, compact=compact)
        ids = tokenizer.apply_chat_template(initial_messages(observation, compact=compact), add_generation_prompt=True)
        return len(ids["input_ids"] if hasattr(ids, "keys") else ids)

    assert prompt_tokens(True) < 0.8 * prompt_tokens(False)


def test_dates_go_before_abstractions_only_when_shown() -> None:
    from datetime import datetime

    state = make_state()
    dated_working = [entry.model_copy(update={"created_at": datetime(2023, 5, day)}) for day, entry in
                     enumerate(state.working_set, start=1)]  # fmt: skip
    dated_frontier = [item.model_copy(update={"date": "2023-08-19"}) for item in state.frontier[:1]]
    hidden = state.model_copy(update={"working_set": dated_working})
    shown = state.model_copy(update={"working_set": dated_working, "frontier": dated_frontier, "show_dates": True})
    assert "2023-05" not in render_observation(hidden, max_prompt_tokens=10_000, compact=True)
    compact = render_observation(shown, max_prompt_tokens=10_000, compact=True).splitlines()
    assert "e1 2023-05-02 Alma + fact 1: " + " ".join(f"word1_{j}" for j in range(8)) in compact
    assert "e100 2023-08-19 Alma + linked 0" in compact
    full = render_observation(shown, max_prompt_tokens=10_000)
    assert "[e0] 2023-05-01 Alma + fact 0: " in full
    assert '[e100] via "Alma + topic 0": 2023-08-19 Alma + linked 0' in full
