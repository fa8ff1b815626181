"""Constrained decoding: eval and serve build guided LLM policies; guided, the base model writes no invalid action."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from memora_rl.core.action_schema import ActionLimits
from memora_rl.env.config import EnvConfig
from memora_rl.errors import EvalError
from memora_rl.evaluation.policies import PolicySpec, use_constrained_decoding
from memora_rl.policy.llm_policy import LLMPolicyConfig, ServerLLMPolicy, make_llm_policy

SMALL_SYNTHETIC = [
    "data.options.conversations=2",
    "data.options.sessions_per_conversation=3",
    "data.options.turns_per_session=6",
    "data.options.questions_per_conversation=5",
]
"""The small synthetic corpus of the env contract test (its graphs are cached after the first build)."""
URL = "http://policy.test/v1"


def test_eval_constrains_exports_on_a_server_by_default():
    export, prompted = PolicySpec("export", "run-final", "runs/x/export"), PolicySpec("prompted", "p", "smollm2")
    assert use_constrained_decoding(export, URL, None) is True
    assert use_constrained_decoding(prompted, URL, None) is False  # the zero-shot baseline writes freely
    assert use_constrained_decoding(prompted, URL, True) is True
    assert use_constrained_decoding(export, URL, False) is False
    assert use_constrained_decoding(export, None, None) is False  # transformers generation is never guided
    with pytest.raises(EvalError, match="--base-url"):
        use_constrained_decoding(export, None, True)


def test_make_llm_policy_carries_the_env_limits():
    config = LLMPolicyConfig(base_url=URL, model="m", max_new_tokens=48, constrained=True)
    policy = make_llm_policy(config, ActionLimits.from_env_config(EnvConfig(max_ids_per_expand=2)))
    assert isinstance(policy, ServerLLMPolicy) and policy.constrained
    assert policy.limits == ActionLimits(max_ids_per_expand=2, max_query_chars=32)  # a refine fits 48 tokens
    assert not LLMPolicyConfig(base_url=URL).constrained  # training and other callers stay free


def test_serve_memory_constrains_the_llm_policy_with_its_env(tmp_path: Path):
    from memora_rl.serve.config import ServeConfig
    from memora_rl.serve.service import make_policy

    config = ServeConfig(stores=[tmp_path / "s.sqlite"], policy="llm", llm_base_url=URL, llm_model="m")
    assert config.constrained
    policy = make_policy(config, EnvConfig(max_ids_per_expand=1, refine_cost=2.0))
    assert isinstance(policy, ServerLLMPolicy) and policy.constrained
    assert (policy.limits.max_ids_per_expand, policy.limits.refine_cost) == (1, 2.0)
    free = make_policy(config.model_copy(update={"constrained": False}))
    assert isinstance(free, ServerLLMPolicy) and not free.constrained


@pytest.mark.slow
@pytest.mark.vllm
def test_guided_base_model_writes_no_invalid_action_on_synthetic_tasks(vllm_server):
    """The untrained base model, free and guided, on synthetic tasks: guided, every action is valid."""
    from memora_rl.env.registry import make_env
    from memora_rl.llm.client import LLMClient, LLMConfig
    from memora_rl.policy.runner import run_episodes

    env, tasks = make_env("synthetic", split="all", overrides=SMALL_SYNTHETIC)
    limits = ActionLimits.from_env_config(env.config)
    rates: dict[str, tuple[int, int, float]] = {}
    for constrained in (False, True):
        client = LLMClient(LLMConfig(base_url=vllm_server.base_url, model=vllm_server.model, cache=False))
        policy = ServerLLMPolicy(client, max_new_tokens=64, constrained=constrained, limits=limits)
        results = asyncio.run(run_episodes(env.sibling, tasks[:4], policy, concurrency=4, seed=0, progress=False))
        actions = [a for r in results for a in r.trajectory.actions if a.kind != "forced"]
        invalid = [a for a in actions if a.kind == "invalid"]
        per_step = sum(r.timing.policy_s for r in results) / max(1, len(actions))
        rates["guided" if constrained else "free"] = (len(invalid), len(actions), per_step)
        if constrained:
            assert not invalid, [(a.text, a.error) for a in invalid]
    print(
        "\n".join(
            f"constrained decoding, {name}: {bad}/{total} invalid ({bad / max(1, total):.0%}), "
            f"{seconds * 1000:.0f} ms policy time per step"
            for name, (bad, total, seconds) in rates.items()
        )
    )
    (free_bad, free_total, _), (guided_bad, guided_total, _) = rates["free"], rates["guided"]
    assert guided_bad == 0 and guided_total >= len(tasks[:4])  # every episode took at least one valid action
    assert guided_bad / guided_total <= free_bad / max(1, free_total)


def test_a_request_field_is_sent_and_keys_the_cache(tmp_path: Path):
    import json

    import httpx

    from memora_rl.llm.client import LLMClient, LLMConfig

    bodies: list[dict] = []

    def endpoint(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(200, json={"choices": [{"message": {"content": '{"action": "stop"}'}}], "usage": {}})

    config = LLMConfig(base_url=URL, model="m", cache_path=tmp_path / "cache.sqlite")
    client = LLMClient(config, transport=httpx.MockTransport(endpoint))
    messages = [{"role": "user", "content": "hi"}]
    one, two = ({"structured_outputs": {"json": {"enum": [n]}}} for n in (1, 2))
    for fields in (one, one, two, None):
        client.chat_sync(messages, phase="policy/act", extra_body=fields)
    assert [body.get("structured_outputs") for body in bodies] == [
        one["structured_outputs"],
        two["structured_outputs"],
        None,
    ]
