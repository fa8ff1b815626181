"""Gymnasium text spaces for prompts and actions that hold any Unicode text, not only ASCII."""

from __future__ import annotations

import string
from typing import Any

from gymnasium import spaces

SAMPLE_CHARSET = string.ascii_letters + string.digits + string.punctuation + " \n"
"""Characters `sample()` draws from (printable ASCII): enough to produce random and JSON-like actions."""


class UnicodeText(spaces.Text):
    """A `Text` space whose members are any UTF-8-encodable string within the length bounds.

    Questions and memories hold accents, curly quotes and emoji, so a fixed charset cannot
    describe the observations; `contains` accepts every character except lone surrogates,
    while `sample` still draws from `SAMPLE_CHARSET`.
    """

    def __init__(self, max_length: int, *, min_length: int = 0, seed: int | None = None) -> None:
        super().__init__(max_length, min_length=min_length, charset=SAMPLE_CHARSET, seed=seed)

    def contains(self, x: Any) -> bool:
        """True for a `str` of allowed length that encodes to UTF-8."""
        if not isinstance(x, str) or not self.min_length <= len(x) <= self.max_length:
            return False
        try:
            x.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"
