"""Export round trip through vLLM: the exported adapter, hot-loaded into the server, decodes like the checkpoint.

A warm-started run's stacked adapter (rank 8 + 8 = 16, the session server's `max_lora_rank`) is served on the
stock base model and decodes like the run: GRPO's adapter on the merged warm start.
"""

from __future__ import annotations

import pytest

from memora_rl.export.writer import ExportRequest, export_run
from memora_rl.policy.export_folder import load_export


@pytest.mark.slow
@pytest.mark.vllm
def test_exported_adapter_served_by_vllm_matches_the_checkpoint(
    tiny_run, tmp_path, vllm_server, checkpoint_text, fixed_prompt
):
    from memora_rl.llm.client import LLMClient, LLMConfig
    from memora_rl.llm.server_api import load_lora_adapter, unload_lora_adapter

    messages, new_tokens = fixed_prompt
    out = tmp_path / "tiny"
    export_run(ExportRequest(run_dir=tiny_run, out=out, verify="none", merge=False))
    export = load_export(out)
    name = f"test-export-{export.manifest.export_id}"
    load_lora_adapter(vllm_server.base_url, name, export.adapter_dir.resolve(), inplace=True)
    try:
        client = LLMClient(LLMConfig(base_url=vllm_server.base_url, model=name, cache=False, temperature=0.0))
        served = client.chat_sync(messages, phase="test/export", max_tokens=new_tokens, temperature=0.0).text
        base = LLMClient(LLMConfig(base_url=vllm_server.base_url, model=vllm_server.model, cache=False))
        base_text = base.chat_sync(messages, phase="test/export", max_tokens=new_tokens, temperature=0.0).text
    finally:
        unload_lora_adapter(vllm_server.base_url, name)
    assert served == checkpoint_text
    assert served != base_text  # the adapter really is applied by the server


@pytest.mark.slow
@pytest.mark.vllm
def test_warm_started_export_served_on_the_stock_base_matches_the_run(
    tmp_path, tiny_model_dir, vllm_server, fixed_prompt, greedy
):
    from memora_rl.llm.client import LLMClient, LLMConfig
    from memora_rl.llm.registry import load_tokenizer
    from memora_rl.llm.server_api import load_lora_adapter, unload_lora_adapter
    from tests.export.warm_runs import make_warm_run, run_policy

    messages, new_tokens = fixed_prompt
    run_dir = make_warm_run(tmp_path / "checkpoints", tiny_model_dir)
    run_text = greedy(run_policy(run_dir), load_tokenizer(str(tiny_model_dir)), messages, new_tokens)
    out = tmp_path / "warm"
    export_run(ExportRequest(run_dir=run_dir, out=out, verify="none", merge=False))
    export = load_export(out)
    assert export.manifest.adapter["r"] == 16 and export.manifest.base_model == "smollm2-135m-instruct"
    name = f"test-export-{export.manifest.export_id}"
    load_lora_adapter(vllm_server.base_url, name, export.adapter_dir.resolve(), inplace=True)
    try:
        client = LLMClient(LLMConfig(base_url=vllm_server.base_url, model=name, cache=False, temperature=0.0))
        served = client.chat_sync(messages, phase="test/export", max_tokens=new_tokens, temperature=0.0).text
    finally:
        unload_lora_adapter(vllm_server.base_url, name)
    assert served == run_text
