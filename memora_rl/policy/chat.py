"""Build the policy's chat: system prompt, few-shot turns rendered like live observations, then the first one.

The observation itself is rendered by `memora_rl.core.observation`; every player opens the chat through
`chat_opener`, so training, evaluation, export checks and serving show the policy the same chat.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache, partial
from typing import TYPE_CHECKING, Any, Protocol

from memora_rl.core import prompts
from memora_rl.core.observation import render_observation
from memora_rl.core.parse import format_action

if TYPE_CHECKING:
    from memora_rl.env.config import EnvConfig

TURN_OVERHEAD_TOKENS = 8
"""Chat-template tokens around one turn (role markers, end of turn), counted generously."""


@cache
def few_shot_messages(compact: bool = False) -> tuple[tuple[str, str], ...]:
    """The few-shot episode as (user, assistant) text pairs, rendered like live observations (same layout)."""
    return tuple(
        (render_observation(state, max_prompt_tokens=10_000, compact=compact), format_action(action))
        for state, action in prompts.FEW_SHOT_EPISODE
    )


def system_prompt(compact: bool = False) -> str:
    """The policy's system prompt (`COMPACT_SYSTEM_PROMPT` in compact mode)."""
    return prompts.COMPACT_SYSTEM_PROMPT if compact else prompts.SYSTEM_PROMPT


def initial_messages(observation: str, compact: bool = False, few_shot: bool = True) -> list[dict[str, str]]:
    """System prompt, the few-shot turns as real chat turns (unless `few_shot` is off), then the first observation.

    The few-shot turns appear once, in this prompt; later turns only append to it:
    `{"role": "assistant", "content": action_text}` and `{"role": "user", "content": next_observation}`.
    `compact` must match how the env renders its observations (`render_observation(compact=...)`).
    """
    messages = [{"role": "system", "content": system_prompt(compact)}]
    for user_text, assistant_text in few_shot_messages(compact) if few_shot else ():
        messages.append({"role": "user", "content": user_text})
        messages.append({"role": "assistant", "content": assistant_text})
    messages.append({"role": "user", "content": observation})
    return messages


FEW_SHOT_OVERRIDE = "env.few_shot=true"
"""Env override under which a prompted (untrained) model is played: the few-shot episode is all it has to go on."""


class PromptFormat(Protocol):
    """How an env shows itself to the policy (`memora_rl.env.config.EnvConfig` has both fields)."""

    compact: bool
    few_shot: bool


def chat_opener(prompt: PromptFormat | None = None) -> Callable[[str], list[dict[str, str]]]:
    """The one-argument `initial_messages` for an env with config `prompt` (None: the defaults).

    Training, evaluation, export checks and serving all open the chat through this, so a
    policy always sees the layout and few-shot choice of the env it was trained on.
    """
    if prompt is None:
        return initial_messages
    return partial(initial_messages, compact=prompt.compact, few_shot=prompt.few_shot)


def chat_token_bound(config: EnvConfig, tokenizer: Any, max_new_tokens: int) -> int:
    """Most tokens an episode's chat can reach: the opener, then `max_steps` full observations and actions.

    A server must hold this many (its `max_model_len`) to play every episode of the env to the end.
    """
    messages = chat_opener(config)("")
    opener = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True)
    per_step = config.max_prompt_tokens + max_new_tokens + 2 * TURN_OVERHEAD_TOKENS
    return len(opener["input_ids"]) + config.max_steps * per_step
