"""serve-memory with policy=llm: the walk's actions come from a model served by vLLM (the session's server)."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from memora_rl.errors import LLMError
from memora_rl.policy.base import Policy
from tests.serve.conftest import GRAPH, LINKED_GRAPH, make_service, running_server


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

    config = ServeConfig(stores=[friends_store], no_auth=True)  # a test of errors, not of access: no tokens
    service = MemoryService(config, embedder=embedder, policy=_FailingEndpointPolicy())
    with running_server(service) as url:
        response = httpx.post(f"{url}/v1/retrieve", json={"graph": GRAPH, "question": "Who is Carla?"}, timeout=60)
        healthy = httpx.get(f"{url}/healthz", timeout=10).status_code
    assert response.status_code == 502, response.text  # was a bare 500 "Internal Server Error"
    error = response.json()["error"]
    assert "maximum context length" in error and "--max-model-len" in error
    assert healthy == 200  # the service keeps serving


class _RecordingPolicy(Policy):
    """Stops at once and keeps the chat it was shown (what an exported model would read)."""

    name = "llm"

    def __init__(self) -> None:
        self.chats: list[list] = []

    async def act(self, messages: list, info: dict) -> str:
        self.chats.append([dict(message) for message in messages])
        return '{"action": "stop"}'


def _export_folder(path: Path, env: str, overrides: list[str]) -> Path:
    """A minimal export folder (manifest, adapter and tokenizer files) trained on `env` with `overrides`."""
    from memora_rl.policy import export_folder as layout

    (path / layout.ADAPTER_DIR).mkdir(parents=True)
    for name in layout.ADAPTER_FILES:
        (path / layout.ADAPTER_DIR / name).write_text("{}")
    for name in layout.TOKENIZER_FILES:
        (path / name).write_text("{}")
    manifest = layout.ExportManifest(export_id="0123456789ab", created_at="2026-12-02T00:00:00Z",
                                     base_model="smollm2-135m-instruct",
                                     source_run="run", source_checkpoint="final", env=env,
                                     env_overrides=overrides)  # fmt: skip
    (path / layout.MANIFEST_FILE).write_text(manifest.model_dump_json())
    return path


def test_an_export_is_served_with_the_observation_layout_it_was_trained_on(
    friends_store: Path, embedder, tmp_path: Path
) -> None:
    from memora_rl.core import prompts
    from memora_rl.serve.config import ServeConfig
    from memora_rl.serve.schemas import RetrieveRequest
    from memora_rl.serve.service import MemoryService

    export = _export_folder(tmp_path / "export", "synthetic", ["env.compact=true", "env.few_shot=false"])
    chats = {}
    for label, options in (("export", {"export": export}), ("default", {})):
        policy = _RecordingPolicy()
        config = ServeConfig(stores=[friends_store], policy="llm", llm_base_url="http://127.0.0.1:9/v1",
                             llm_model="policy", **options)  # fmt: skip
        service = MemoryService(config, embedder=embedder, policy=policy)
        response = service.retrieve_sync(RetrieveRequest(graph=GRAPH, question="Who is Carla?"), _sync(policy))
        service.close()
        chats[label] = policy.chats[0]
        assert response.walk[0].observation == chats[label][-1]["content"]  # what the walk shows is what it read
    assert chats["export"][0]["content"] == prompts.COMPACT_SYSTEM_PROMPT
    assert len(chats["export"]) == 2  # system prompt, first observation: no few-shot turns
    assert chats["default"][0]["content"] == prompts.SYSTEM_PROMPT and len(chats["default"]) > 2
    assert len(chats["export"][1]["content"]) < len(chats["default"][-1]["content"])  # the compact layout


def test_an_export_trained_over_a_learned_ranker_is_served_with_its_shown_scores(
    friends_store: Path, embedder, tmp_path: Path
) -> None:
    from memora_rl.serve.config import ServeConfig
    from memora_rl.serve.schemas import RetrieveRequest
    from memora_rl.serve.service import MemoryService

    overrides = [
        "env.compact=true",
        "env.few_shot=false",
        "env.frontier_value_tokens=12",
        "env.frontier_ranker=learned",
    ]
    export = _export_folder(tmp_path / "export", "synthetic-hard", overrides)
    policy = _RecordingPolicy()
    config = ServeConfig(stores=[friends_store], policy="llm", llm_base_url="http://127.0.0.1:9/v1",
                         llm_model="policy", export=export)  # fmt: skip
    service = MemoryService(config, embedder=embedder, policy=policy)
    assert service.ranker is not None and LINKED_GRAPH not in service.ranker.fold_of  # scored by the whole fit
    request = RetrieveRequest(graph=LINKED_GRAPH, question="Who is Priya's manager?", top_k=1)
    response = service.retrieve_sync(request, _sync(policy))
    service.close()
    lines = response.walk[0].observation.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Linked"))
    frontier_lines = [line for line in lines[start + 1 :] if not line.startswith("Budget")]
    assert frontier_lines and all(re.search(r" \(\d+%\)$", line) for line in frontier_lines)


def _sync(policy: Policy):
    """`policy.act` as the blocking callable a walk takes."""
    import asyncio

    return lambda messages, info: asyncio.run(policy.act(messages, info))


def test_an_export_needs_the_llm_policy(friends_store: Path, tmp_path: Path) -> None:
    from memora_rl.errors import ConfigError
    from memora_rl.serve.config import ServeConfig

    with pytest.raises(ConfigError, match="policy=llm"):
        ServeConfig(stores=[friends_store], policy="semantic", export=tmp_path)


@pytest.mark.slow
@pytest.mark.vllm
def test_serve_memory_warns_at_start_when_the_served_name_is_missing_or_not_the_export(
    friends_store: Path, tmp_path: Path, vllm_server, caplog
) -> None:
    """A served name the server lacks, or one served from other weights than the export's, is said at start."""
    import logging

    from memora_rl.serve.checks import warn_if_not_the_export
    from memora_rl.serve.config import ServeConfig

    other = _export_folder(tmp_path / "other", "synthetic", [])
    ours = _export_folder(tmp_path / "ours", "synthetic", [])
    root = next(m["root"] for m in httpx.get(f"{vllm_server.base_url}/models").json()["data"] if not m.get("parent"))
    (ours / "merged").symlink_to(root)  # this export's merged model is the folder the server loaded
    cases = [("absent-model", None, "does not serve 'absent-model'"), (vllm_server.model, other, "not from the export"),
             (vllm_server.model, ours, None), (vllm_server.model, None, None)]  # fmt: skip
    for name, export, said in cases:
        config = ServeConfig(stores=[friends_store], policy="llm", llm_base_url=vllm_server.base_url, llm_model=name,
                             export=export)  # fmt: skip
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="memora_rl.serve.checks"):
            warned = warn_if_not_the_export(config)
        assert warned is (said is not None), (name, export)
        assert said is None or said in caplog.text, caplog.text
