"""Where memora-rl keeps downloaded models, caches and runs on disk."""

from __future__ import annotations

import os
from pathlib import Path

HOME_ENV_VAR = "MEMORA_RL_HOME"


def memora_home() -> Path:
    """Return the cache root (`$MEMORA_RL_HOME`, default `~/.cache/memora_rl`), creating it."""
    root = Path(os.environ.get(HOME_ENV_VAR, Path.home() / ".cache" / "memora_rl")).expanduser()
    root.mkdir(parents=True, exist_ok=True)
    return root


def models_dir() -> Path:
    """Folder that holds models pulled by the registry."""
    path = memora_home() / "models"
    path.mkdir(parents=True, exist_ok=True)
    return path


def cache_dir(name: str) -> Path:
    """A named cache folder under the cache root (e.g. `embeddings`, `llm_responses`)."""
    path = memora_home() / "cache" / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def service_tokens_path() -> Path:
    """Default access-token file of `memora-rl serve-memory` and `memora-rl tokens` (created on first use)."""
    return memora_home() / "serve" / "tokens.sqlite"
