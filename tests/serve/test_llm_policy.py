"""serve-memory with policy=llm: the walk's actions come from a model served by vLLM (the session's server)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from memora_rl.errors import LLMError
from memora_rl.policy.base import Policy
from tests.serve.conftest import GRAPH, make_service, running_server


@pytest.mark.slow
@pytest.mark.vllm
def test_retrieve_walks_with_the_served_model(friends_store: Path, embedder, vllm_server) -> None:
    service = make_service([friends_store], embedder, policy="llm", llm_base_url=vllm_server.base_url,
                           llm_model=vllm_server.model, budget=3.0)  # fmt: skip
    with running_server(service) as url:
        response = httpx.post(f"{url}/v1/retrieve", json={"graph": GRAPH, "question": "Who is Carla?"}, timeout=300)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["policy"] == "llm"
    actions = [step for step in body["walk"] if step["action_text"] is not None]
    assert actions and all(step["action_text"].strip() for step in actions)  # the model's raw turns
    assert {step["action"] for step in actions} <= {"expand", "refine", "stop", "invalid"}
    assert body["stop_reason"] in {"stop", "budget", "max_steps"}
    assert body["entries"]  # the first search's working set is always returned


class _FailingEndpointPolicy(Policy):
    """Stands in for an LLM policy whose server refuses the chat (the error text is vLLM's)."""

    name = "llm"

    async def act(self, messages: list, info: dict) -> str:
        raise LLMError("LLM request failed: HTTP 400: This model's maximum context length is 4096 tokens.")


def test_a_failing_policy_server_is_a_502_that_names_the_cause_and_the_fix(friends_store: Path, embedder) -> None:
    from memora_rl.serve.config import ServeConfig
    from memora_rl.serve.service import MemoryService

    service = MemoryService(ServeConfig(stores=[friends_store]), embedder=embedder, policy=_FailingEndpointPolicy())
    with running_server(service) as url:
        response = httpx.post(f"{url}/v1/retrieve", json={"graph": GRAPH, "question": "Who is Carla?"}, timeout=60)
        healthy = httpx.get(f"{url}/healthz", timeout=10).status_code
    assert response.status_code == 502, response.text  # was a bare 500 "Internal Server Error"
    error = response.json()["error"]
    assert "maximum context length" in error and "--max-model-len" in error
    assert healthy == 200  # the service keeps serving
