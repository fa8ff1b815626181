"""Start-up checks of the policy server behind `serve-memory --policy llm`: warnings that name the fix.

A walk that the server cannot hold, or a served name that is missing or is not the export's weights,
would otherwise show up only as failed or wrong walks once requests come in.
"""

from __future__ import annotations

import logging

from memora_rl.env.config import EnvConfig
from memora_rl.serve.config import ServeConfig
from memora_rl.serve.retrieve import walk_env

logger = logging.getLogger(__name__)


def warn_if_policy_context_short(config: ServeConfig, base: EnvConfig) -> None:
    """At start, warn when the policy server's context cannot hold a walk at the default budget (or is unreachable)."""
    from memora_rl.errors import MemoraError
    from memora_rl.policy.llm_policy import LLMPolicyConfig
    from memora_rl.policy.served_context import warn_if_context_short

    env_config = walk_env(base, config.budget, config.top_k)
    max_new_tokens = LLMPolicyConfig.model_fields["max_new_tokens"].default  # what make_policy's policy uses
    try:
        warn_if_context_short(config.llm_base_url or "", config.llm_model or "", env_config, None, max_new_tokens)
    except MemoraError as error:
        logger.warning("Could not check the policy server's context length: %s", error)


def warn_if_not_the_export(config: ServeConfig) -> bool:
    """At start, warn when the server does not serve `llm_model`, or serves it from other weights than the export's.

    vLLM lists each served model's folder (`root`): the export's `merged/` for its merged model, its
    `adapter/` for a hot-loaded adapter. Returns True when it warned; an unreachable server is left to
    the context check's warning.
    """
    from memora_rl.errors import MemoraError
    from memora_rl.llm.server_api import list_served_models, same_folder

    try:
        served = list_served_models(config.llm_base_url or "")
    except MemoraError:
        return False
    entry = next((model for model in served if model["id"] == config.llm_model), None)
    if entry is None:
        names = ", ".join(model["id"] for model in served) or "nothing"
        logger.warning("The server at %s does not serve %r (it serves %s): every llm walk will fail; pass one of "
                       "those as --llm-model.", config.llm_base_url, config.llm_model, names)  # fmt: skip
        return True
    if config.export is None or not entry.get("root"):
        return False
    from memora_rl.policy.export_folder import load_export

    export = load_export(config.export)
    root = str(entry["root"])
    if same_folder(root, export.merged_dir) or same_folder(root, export.adapter_dir):
        return False
    logger.warning(
        "%r on %s is served from %s, not from the export %s (its merged/ or adapter/): walks would play other "
        "weights than the export's. Serve the export (`memora-rl serve --model %s`) or pass its served name.",
        config.llm_model, config.llm_base_url, root, config.export, export.merged_dir,
    )  # fmt: skip
    return True
