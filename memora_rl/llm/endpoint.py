"""What an OpenAI-compatible chat endpoint's replies mean: the completion body, what to retry and when, the fix.

`LLMClient` (`memora_rl.llm.client`) sends the requests; these rules read what comes back.
"""

from __future__ import annotations

import random
from typing import Any

import httpx

from memora_rl.llm.response_cache import CachedAnswer


def is_retryable(status: int) -> bool:
    """True for 429 (rate limit) and 5xx (server error) but 501; other 4xx would fail again the same way.

    >>> [is_retryable(code) for code in (400, 404, 429, 500, 501, 503)]
    [False, False, True, True, False, True]
    """
    return status == 429 or (500 <= status < 600 and status != 501)


def backoff_delay(attempt: int, base_s: float, max_s: float, rng: random.Random | None = None) -> float:
    """Full-jitter exponential backoff: uniform in [0, min(max_s, base_s * 2**attempt)] seconds.

    >>> 0.0 <= backoff_delay(3, 0.5, 2.0) <= 2.0
    True
    """
    ceiling = min(max_s, base_s * (2.0**attempt))
    return (rng or random).uniform(0.0, ceiling)


def fix_hint(status: int | None, detail: str = "") -> str:
    """What the user can do about a failed request, by HTTP status (None = no HTTP response) and reply.

    >>> fix_hint(400, "This model's maximum context length is 2048 tokens.")[:48]
    'The prompt and max_tokens do not fit the served '
    """
    if status == 400 and "context length" in detail.lower():
        return (
            "The prompt and max_tokens do not fit the served model's context (the server's max_model_len): "
            "a multi-step chat grows with every observation. Restart the server with a larger --max-model-len "
            "(`memora-rl serve --max-model-len 8192`), or shorten the chat (fewer env steps: --set env.max_steps=3)."
        )
    if status is None:
        return (
            "Is a server running at base_url? Start one (e.g. `memora-rl serve --model smollm2-135m-instruct "
            "--port 8000`), or fix base_url / raise timeout_s."
        )
    if status in (401, 403):
        return "Set a valid api_key (or the OPENAI_API_KEY environment variable)."
    if status == 404:
        return "Check base_url ends in /v1 and model matches a served name (GET <base_url>/models lists them)."
    if status == 429:
        return "The endpoint is rate limiting: lower max_concurrency or raise max_retries / backoff_max_s."
    if status >= 500:
        return "The server failed: read its log; lower max_concurrency if it ran out of memory."
    return (
        "The request was rejected: check max_tokens against the model's context length and the messages; "
        "if the endpoint does not support response_format, set use_response_format=False."
    )


def parse_completion(payload: Any) -> CachedAnswer:
    """Read text, token usage and finish reason out of a `/chat/completions` JSON body."""
    try:
        choice = payload["choices"][0]
        text = choice["message"].get("content") or ""
    except (KeyError, IndexError, TypeError, AttributeError) as error:
        raise ValueError(f"no choices[0].message.content in the response ({str(payload)[:200]})") from error
    usage = payload.get("usage") or {}
    return CachedAnswer(
        text=text,
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        finish_reason=choice.get("finish_reason"),
    )


def retry_after_s(response: httpx.Response) -> float | None:
    """The server's Retry-After header in seconds, when it is a number."""
    try:
        return float(response.headers["retry-after"])
    except (KeyError, ValueError):
        return None
