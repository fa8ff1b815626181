"""The one policy interface: chat so far + the env's info dict in, the next action text out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

Message = dict[str, str]
"""One chat message: `{"role": "system" | "user" | "assistant", "content": "..."}`."""


class Policy(ABC):
    """A retrieval policy over `memora_rl.env.RetrievalEnv`.

    `messages` is the chat so far (`memora_rl.policy.chat.initial_messages(observation)`, then
    an assistant turn with each action and a user turn with each next observation); `info` is
    the env's latest `StepInfo` (`working_set_ids`, `frontier` as `[{id, anchor}]`, `budget_left`,
    `step`, ...). The returned text goes to `env.step` unchanged: policies never pre-validate it,
    so a malformed action is the env's to record and the judge's to penalise.
    """

    name: str = "policy"
    """Short name used in logs, reports and eval tables."""
    reads_frontier: bool = True
    """False for a policy that never reads the frontier (it stops at once): a server skips computing it."""

    @abstractmethod
    async def act(self, messages: list[Message], info: dict[str, Any]) -> str:
        """Return the next action text for the current state."""

    async def aclose(self) -> None:  # noqa: B027 (optional hook, deliberately empty)
        """Release resources (HTTP connections, models); the default has none."""
