"""The Gymnasium retrieval MDP over a prebuilt memory graph (registered as `memora_rl/Retrieval-v0`)."""

from gymnasium.envs.registration import register, registry

RETRIEVAL_ENV_ID = "memora_rl/Retrieval-v0"
"""Gymnasium id of `memora_rl.env.retrieval.RetrievalEnv` (`gymnasium.make(RETRIEVAL_ENV_ID, store=...)`)."""

if RETRIEVAL_ENV_ID not in registry:
    register(id=RETRIEVAL_ENV_ID, entry_point="memora_rl.env.retrieval:RetrievalEnv")
