"""The served-model check's blocking chat call: one greedy answer, the policy's connections closed after."""

from __future__ import annotations

from typing import Any

import pytest

from memora_rl.export import verify
from memora_rl.policy import llm_policy


class FakeServedPolicy:
    """Answers every chat with a fixed action and records whether it was closed."""

    def __init__(self) -> None:
        self.closed = False

    async def act(self, messages: list[dict[str, str]], info: dict[str, Any]) -> str:
        return f'{{"action": "stop"}} after {len(messages)} message(s)'

    async def aclose(self) -> None:
        self.closed = True


def test_served_chat_answers_and_closes_the_policy(monkeypatch: pytest.MonkeyPatch):
    made: list[FakeServedPolicy] = []

    def make(config: llm_policy.LLMPolicyConfig) -> FakeServedPolicy:
        made.append(FakeServedPolicy())
        return made[-1]

    monkeypatch.setattr(llm_policy, "make_llm_policy", make)
    act = verify._served_chat("http://127.0.0.1:1/v1", "policy_v1")
    assert act([{"role": "user", "content": "hi"}], {}) == '{"action": "stop"} after 1 message(s)'
    assert len(made) == 1 and made[0].closed
