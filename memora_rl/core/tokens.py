"""Count and cut text in tokens of the policy's tokenizer, or one token per four characters without one.

A tokenizer is any object with Hugging Face's `encode(text, add_special_tokens=False)` and `decode(ids)`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, Protocol

from memora_rl.core import prompts

CHARS_PER_TOKEN = 4
"""Characters per token assumed when no tokenizer is given."""


class Tokenizer(Protocol):
    """The slice of a Hugging Face tokenizer the renderer uses."""

    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]:
        """Token ids of `text`."""
        ...

    def decode(self, token_ids: Sequence[int], **kwargs: Any) -> str:
        """Text of `token_ids`."""
        ...


@lru_cache(maxsize=16_384)
def _cached_token_ids(tokenizer: Tokenizer, text: str) -> tuple[int, ...]:
    """Token ids of a text, cached: working-set values are re-rendered at every step of an episode."""
    return tuple(tokenizer.encode(text, add_special_tokens=False))


class TokenMeter:
    """Counts and cuts text in tokens of one tokenizer (or the 4-characters-per-token estimate)."""

    def __init__(self, tokenizer: Tokenizer | None = None) -> None:
        self.tokenizer = tokenizer
        self._ids: dict[str, list[int]] = {}

    def _encode(self, text: str) -> list[int]:
        """Token ids of `text`, memoised for this meter and (bounded) across renders."""
        ids = self._ids.get(text)
        if ids is None:
            try:
                ids = list(_cached_token_ids(self.tokenizer, text))
            except TypeError:  # an unhashable tokenizer object: no cross-render cache
                ids = list(self.tokenizer.encode(text, add_special_tokens=False))  # type: ignore[union-attr]
            self._ids[text] = ids
        return ids

    def count(self, text: str) -> int:
        """Number of tokens in `text`."""
        if self.tokenizer is None:
            return math.ceil(len(text) / CHARS_PER_TOKEN)
        return len(self._encode(text))

    def shorten(self, text: str, max_tokens: int) -> str:
        """`text` cut to at most `max_tokens` tokens, ending in an ellipsis when cut."""
        if self.count(text) <= max_tokens:
            return text
        if max_tokens <= 0:
            return prompts.ELLIPSIS
        if self.tokenizer is None:
            return text[: max_tokens * CHARS_PER_TOKEN].rstrip() + prompts.ELLIPSIS
        head = self.tokenizer.decode(self._encode(text)[:max_tokens], skip_special_tokens=True)
        return head.rstrip() + prompts.ELLIPSIS


def count_tokens(text: str, tokenizer: Tokenizer | None = None) -> int:
    """Tokens in `text` with `tokenizer`, or the 4-characters-per-token estimate without one.

    >>> count_tokens("twelve chars")
    3
    """
    return TokenMeter(tokenizer).count(text)
