"""A prompted policy against a server too short for the env's chat: warned before playing, and a failing
request names the real cause (the server's context length), not `max_tokens` or `response_format`."""

from __future__ import annotations

import logging

import pytest

from memora_rl.env.config import EnvConfig
from memora_rl.errors import LLMError
from memora_rl.evaluation.policies import make_graph_policy, parse_policy_spec


@pytest.mark.slow
@pytest.mark.vllm
def test_a_server_shorter_than_the_envs_chat_is_named_before_playing(vllm_server, caplog):
    """The session server has the default size: it holds the default env's chat, not 1024-token observations."""
    spec = parse_policy_spec(f"prompted:{vllm_server.model}")
    with caplog.at_level(logging.WARNING, logger="memora_rl.policy.served_context"):
        make_graph_policy(spec, EnvConfig(), base_url=vllm_server.base_url)  # the defaults fit each other
    assert not caplog.records

    with caplog.at_level(logging.WARNING, logger="memora_rl.policy.served_context"):
        make_graph_policy(spec, EnvConfig(max_prompt_tokens=1024), base_url=vllm_server.base_url)
    warning = " ".join(record.getMessage() for record in caplog.records)
    assert "holds 4096 tokens (max_model_len)" in warning and "--max-model-len 7168" in warning


@pytest.mark.slow
@pytest.mark.vllm
def test_a_chat_past_the_servers_context_fails_naming_max_model_len(vllm_server):
    """A real over-long request: the error says the prompt outgrew max_model_len and how to fix it."""
    from memora_rl.llm.client import LLMClient, LLMConfig

    client = LLMClient(LLMConfig(base_url=vllm_server.base_url, model=vllm_server.model, cache=False, max_retries=0))
    long_chat = [{"role": "user", "content": "memory " * 4200}]  # over 4096 tokens on its own
    with pytest.raises(LLMError) as error:
        client.chat_sync(long_chat, phase="test/context", max_tokens=16)
    message = str(error.value)
    assert "HTTP 400" in message and "do not fit the served model's context" in message
    assert "--max-model-len" in message and "use_response_format" not in message  # the old hint blamed that


@pytest.mark.slow
@pytest.mark.vllm
def test_serve_memory_warns_at_start_when_the_policy_server_is_short_for_its_walks(vllm_server, caplog, tmp_path):
    """serve-memory's walks at budget 6 take 8 steps, past the session server's 4096 tokens; budget 2 fits."""
    from memora_rl.memory import open_store
    from memora_rl.serve.checks import warn_if_policy_context_short
    from memora_rl.serve.config import ServeConfig
    from memora_rl.serve.service import served_env

    store = tmp_path / "graphs.sqlite"
    open_store(store).close()
    for budget, warned in ((6.0, True), (2.0, False)):
        config = ServeConfig(stores=[store], policy="llm", llm_base_url=vllm_server.base_url,
                             llm_model=vllm_server.model, budget=budget)  # fmt: skip
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="memora_rl.policy.served_context"):
            warn_if_policy_context_short(config, served_env(config))
        assert any("--max-model-len" in record.getMessage() for record in caplog.records) is warned, budget
