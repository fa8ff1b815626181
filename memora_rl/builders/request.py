"""`BuilderRequest`: what a builder factory may be given (config file, overrides, LLM endpoint)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field


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
