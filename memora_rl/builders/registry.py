"""Builder names -> factories. Adding a builder (e.g. "memora", "nemori") is one line in `BUILDERS`.

Dependencies run one way: this module imports each builder (only when it is made), and no
builder imports this module; `BuilderRequest` lives in `builders.request` and is re-exported
here for callers of `make_builder`.
"""

from __future__ import annotations

from collections.abc import Callable

from memora_rl.builders.base import Builder
from memora_rl.builders.request import BuilderRequest
from memora_rl.errors import ConfigError

__all__ = ["BUILDERS", "REVISIONS", "BuilderRequest", "builder_names", "make_builder"]


def _make_extractive(request: BuilderRequest) -> Builder:
    """The LLM-free extractive builder, configured from the request's YAML and overrides."""
    from memora_rl.builders.extractive import ExtractiveBuilder, ExtractiveConfig
    from memora_rl.config import load_config

    return ExtractiveBuilder(load_config(ExtractiveConfig, request.config_path, request.overrides))


def _make_memora(request: BuilderRequest) -> Builder:
    """The Memora LLM builder (YAML + overrides, then `--llm-base-url`/`--llm-model`)."""
    from memora_rl.builders.llm_config import load_llm_builder_config
    from memora_rl.builders.memora import MemoraBuilder, MemoraConfig

    return MemoraBuilder(load_llm_builder_config(MemoraConfig, request))


def _make_nemori(request: BuilderRequest) -> Builder:
    """The NEMORI LLM builder (YAML + overrides, then `--llm-base-url`/`--llm-model`)."""
    from memora_rl.builders.llm_config import load_llm_builder_config
    from memora_rl.builders.nemori import NemoriBuilder, NemoriConfig

    return NemoriBuilder(load_llm_builder_config(NemoriConfig, request))


BUILDERS: dict[str, Callable[[BuilderRequest], Builder]] = {
    "extractive": _make_extractive,
    "memora": _make_memora,
    "nemori": _make_nemori,
}
"""Registered builders by name."""

REVISIONS: dict[str, int] = {"extractive": 2}
"""Bumped when a builder's output for the same input changes; part of an env's graph cache key, so graphs
built by the old rule are rebuilt, not reused (extractive 2: an abstraction names the third party its statement
opens with, and a "<speaker> + <name>" anchor links the statements that name them)."""


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
