"""Config of the LLM builders: the shared fields, the client they imply, and loading from a request."""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, Field, ValidationError

from memora_rl.builders.request import BuilderRequest
from memora_rl.config import StrictModel, load_config
from memora_rl.errors import ConfigError
from memora_rl.llm.client import LLMConfig

ConfigT = TypeVar("ConfigT", bound=BaseModel)


class LLMBuilderConfig(StrictModel):
    """The settings every LLM builder config starts with (subclasses add their own)."""

    llm: LLMConfig = Field(default_factory=LLMConfig)
    """The OpenAI-compatible endpoint and sampling settings (temperature 0 keeps builds reproducible)."""
    repetition_penalty: float | None = Field(default=1.15, gt=0.0)
    """vLLM sampling parameter added to every request: small models otherwise loop on whitespace inside
    guided JSON until max_tokens. None sends nothing (for endpoints that reject the field, e.g. OpenAI)."""


def client_config(llm: LLMConfig, repetition_penalty: float | None) -> LLMConfig:
    """`llm` with the builder's `repetition_penalty` added to its extra request fields (when set)."""
    if repetition_penalty is None:
        return llm
    return llm.model_copy(update={"extra_body": {**llm.extra_body, "repetition_penalty": repetition_penalty}})


def load_llm_builder_config(model: type[ConfigT], request: BuilderRequest) -> ConfigT:
    """A builder config from the request's YAML and overrides, then its endpoint and model name.

    Raises:
        ConfigError: the YAML, an override, or the endpoint URL is invalid (the message names it).
    """
    config = load_config(model, request.config_path, request.overrides)
    updates = {"base_url": request.llm_base_url, "model": request.llm_model}
    updates = {key: value for key, value in updates.items() if value is not None}
    if updates:
        llm: LLMConfig = config.llm  # type: ignore[attr-defined]
        try:
            merged = LLMConfig.model_validate({**llm.model_dump(), "api_key": llm.api_key, **updates})
        except ValidationError as error:
            raise ConfigError(f"Invalid --llm-base-url/--llm-model {updates}: {error}") from error
        config.llm = merged  # type: ignore[attr-defined]
    return config
