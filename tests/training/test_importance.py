"""Truncated importance sampling over our rollouts: TRL's ratio and mismatch metrics on a scripted mismatch."""

from __future__ import annotations

import types

import pytest

from memora_rl.training.importance import enable_rollout_importance_sampling
from tests.training.test_smoke import read_jsonl, tiny_config

OFFSET = 0.7
"""The scripted sampler reports every token 0.7 nats less likely than the trainer finds it."""


def test_needs_a_rollout_func() -> None:
    with pytest.raises(ValueError, match="rollout_func"):
        enable_rollout_importance_sampling(types.SimpleNamespace(rollout_func=None))


@pytest.mark.slow
def test_scripted_sampler_mismatch_is_measured_and_truncated(tmp_path, monkeypatch) -> None:
    from memora_rl.training import run as run_module
    from memora_rl.training.generation import TransformersGenerator

    original_generate = TransformersGenerator.generate

    def mismatched(self, prompts, max_new_tokens, temperature, keys=None):
        samples = original_generate(self, prompts, max_new_tokens, temperature)
        return [
            type(sample)(sample.token_ids, [value - OFFSET for value in sample.logprobs], sample.finish_reason)
            for sample in samples
        ]

    original_config = run_module.build_grpo_config

    def with_correction(*args, **kwargs):
        grpo_args = original_config(*args, **kwargs)
        grpo_args.vllm_importance_sampling_correction = True  # the transformers backend switches it off
        return grpo_args

    monkeypatch.setattr(TransformersGenerator, "generate", mismatched)
    monkeypatch.setattr(run_module, "build_grpo_config", with_correction)
    overrides = ["backend=transformers", "run_name=is", "grpo.max_steps=1", "grpo.importance_sampling_clip=1.5"]
    config = tiny_config(tmp_path, *overrides)
    result = run_module.run(config)
    records = read_jsonl(result.metrics_path)
    assert [record["step"] for record in records] == [1]
    for record in records:  # trainer and sampler differ by exactly the scripted offset on every policy token
        assert record["sampling/sampling_logp_difference/mean"] == pytest.approx(OFFSET, abs=0.05)
        assert record["sampling/importance_sampling_ratio/max"] <= 1.5 + 1e-6  # exp(0.7) = 2.01, truncated
        assert record["sampling/importance_sampling_ratio/min"] > 1.0
