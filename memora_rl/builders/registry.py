"""Builder names -> factories. Adding a builder (e.g. "memora", "nemori") is one line in `BUILDERS`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, Field

from memora_rl.builders.base import Builder
from memora_rl.errors import ConfigError


class BuilderRequest(BaseModel):
    """Everything a factory may need; each builder reads the fields it uses."""

    config_path: Path | None = None
    """Optional YAML file with the builder's config (e.g. configs/builders/extractive.yaml)."""
    overrides: list[str] = Field(default_factory=list)
    """`key=value` overrides applied on top of the YAML (e.g. `segmentation=change_point`)."""
    llm_base_url: str | None = None
    """OpenAI-compatible endpoint (".../v1") for LLM builders; ignored by the extractive one."""
    llm_model: str | None = None
    """Served model name for LLM builders; ignored by the extractive one."""


def _make_extractive(request: BuilderRequest) -> Builder:
    """The LLM-free extractive builder, configured from the request's YAML and overrides."""
    from memora_rl.builders.extractive import ExtractiveBuilder, ExtractiveConfig
    from memora_rl.config import load_config

    return ExtractiveBuilder(load_config(ExtractiveConfig, request.config_path, request.overrides))


def _make_memora(request: BuilderRequest) -> Builder:
    """The Memora LLM builder (YAML + overrides, then `--llm-base-url`/`--llm-model`)."""
    from memora_rl.builders.llm_common import load_llm_builder_config
    from memora_rl.builders.memora import MemoraBuilder, MemoraConfig

    return MemoraBuilder(load_llm_builder_config(MemoraConfig, request))


def _make_nemori(request: BuilderRequest) -> Builder:
    """The NEMORI LLM builder (YAML + overrides, then `--llm-base-url`/`--llm-model`)."""
    from memora_rl.builders.llm_common import load_llm_builder_config
    from memora_rl.builders.nemori import NemoriBuilder, NemoriConfig

    return NemoriBuilder(load_llm_builder_config(NemoriConfig, request))


BUILDERS: dict[str, Callable[[BuilderRequest], Builder]] = {
    "extractive": _make_extractive,
    "memora": _make_memora,
    "nemori": _make_nemori,
}
"""Registered builders by name."""


def builder_names() -> list[str]:
    """Names accepted by `make_builder`, sorted."""
    return sorted(BUILDERS)


def make_builder(name: str, request: BuilderRequest | None = None) -> Builder:
    """Build the builder registered as `name`.

    Raises:
        ConfigError: `name` is not registered; the message lists the valid names.
    """
    factory = BUILDERS.get(name)
    if factory is None:
        raise ConfigError(f"Unknown builder {name!r}. Valid builders: {', '.join(builder_names())}.")
    return factory(request or BuilderRequest())
