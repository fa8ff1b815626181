"""Truncated importance sampling over our own rollouts, with TRL's sampler/trainer mismatch metrics.

Our rollouts come from a vLLM server (or transformers) through `rollout_func`, so TRL runs with
`use_vllm=False` and ignores the sampler's logprobs. TRL's correction (ratio of trainer to
sampler probability per token, truncated at a cap, multiplied into the loss) and its metrics
(`sampling/sampling_logp_difference/{mean,max}`, `sampling/importance_sampling_ratio/*`) are
gated on `use_vllm` only. `enable_rollout_importance_sampling` turns that gate on after the
trainer is built; TRL's other `use_vllm` branches are not reached with a `rollout_func` except
its weight sync, which is a no-op here because `AdapterSync` already hot-loads the adapter.
"""

from __future__ import annotations

from typing import Any


class _SyncedByCallback:
    """Stands in for TRL's vLLM client: weights reach the server through `AdapterSync`, not TRL."""

    def sync_weights(self) -> None:
        """Nothing to do: the adapter was saved and hot-loaded after the optimizer step."""


def enable_rollout_importance_sampling(trainer: Any) -> None:
    """Apply TRL's truncated IS correction (per `args.vllm_importance_sampling_*`) to `rollout_func` samples.

    Raises:
        ValueError: the trainer has no `rollout_func` (then TRL's own vLLM path is the one to configure).
    """
    if getattr(trainer, "rollout_func", None) is None:
        raise ValueError("Importance sampling over rollouts needs a trainer built with rollout_func.")
    trainer.use_vllm = True
    trainer.vllm_importance_sampling_correction = True
    trainer.vllm_generation = _SyncedByCallback()
    trainer._last_loaded_step = -1  # TRL's sync bookkeeping, set up only when it builds its own vLLM client
