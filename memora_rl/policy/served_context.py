"""Does a served policy model's context hold an episode's chat? Checked before playing, by eval and serve-memory.

vLLM lists each served model's `max_model_len` and folder (`root`); an episode that outgrows it
fails at that step with an error about token counts, so saying so up front names the real cause.
"""

from __future__ import annotations

import logging
from typing import Any

from memora_rl.env.config import EnvConfig

logger = logging.getLogger(__name__)

FALLBACK_TOKENIZER = "smollm2-135m-instruct"


def served_tokenizer(root: str) -> Any:
    """The served model's tokenizer (from the server's model root), else SmolLM2's with a warning."""
    from memora_rl.errors import ModelError
    from memora_rl.llm.registry import load_tokenizer

    try:
        return load_tokenizer(root)
    except ModelError:
        logger.warning("No tokenizer for %s here; counting prompt tokens with %s.", root, FALLBACK_TOKENIZER)
        return load_tokenizer(FALLBACK_TOKENIZER)


def warn_if_context_short(
    base_url: str, served_name: str, env_config: EnvConfig, tokenizer: Any | None, max_new_tokens: int
) -> bool:
    """Warn when the server cannot hold the env's longest chat; returns True when it warned.

    `tokenizer` None loads the served model's own (its `root` on the server).
    """
    from memora_rl.llm.server_api import list_served_models
    from memora_rl.policy.chat import chat_token_bound

    entry = next((m for m in list_served_models(base_url) if m["id"] == served_name), None)
    limit = int((entry or {}).get("max_model_len") or 0)
    if not limit:
        return False
    if tokenizer is None:
        tokenizer = served_tokenizer(str((entry or {}).get("root") or served_name))
    needed = chat_token_bound(env_config, tokenizer, max_new_tokens)
    if needed <= limit:
        return False
    logger.warning(
        "The server at %s holds %d tokens (max_model_len), but an episode's chat can reach %d (the opener, then "
        "%d steps of an observation of up to %d tokens and an action of up to %d): long episodes will fail. "
        "Restart it with `--max-model-len %d`, or play fewer steps.",
        base_url, limit, needed, env_config.max_steps, env_config.max_prompt_tokens, max_new_tokens,
        -(-needed // 1024) * 1024,
    )  # fmt: skip
    return True
