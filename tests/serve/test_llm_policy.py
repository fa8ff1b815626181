"""serve-memory with policy=llm: the walk's actions come from a model served by vLLM (the session's server)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

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
