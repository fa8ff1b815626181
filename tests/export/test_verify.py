"""The export check: loads of the same weights must write the same greedy action, or the export fails."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from memora_rl.errors import ExportError
from memora_rl.export.verify import divergence_gap, verify_export
from memora_rl.export.writer import ExportRequest, export_run
from memora_rl.policy.export_folder import load_export, load_export_model


@pytest.mark.slow
def test_a_merged_model_that_is_not_the_adapter_fails_the_check(tiny_run, tmp_path, tiny_model_dir):
    """Merged weights swapped for the plain base write another action than the adapter: an error, not a warning."""
    out = tmp_path / "tiny"
    export_run(ExportRequest(run_dir=tiny_run, out=out, merge=True, verify="none"))
    export = load_export(out)
    records = verify_export(export, "transformers")
    assert [r.weights for r in records] == ["adapter", "merged"]
    assert records[0].action_text == records[1].action_text  # the honest export agrees with itself

    shutil.copy2(Path(tiny_model_dir) / "model.safetensors", out / "merged" / "model.safetensors")
    with pytest.raises(ExportError, match="not the trained policy"):
        verify_export(load_export(out), "transformers")


@pytest.mark.slow
def test_divergence_gap_is_the_adapters_preference_where_two_texts_part(tiny_run, tmp_path, fixed_prompt):
    """The gap is > 0 against the adapter's own greedy token, and 0 for texts that never part."""
    import torch

    from memora_rl.llm.registry import load_tokenizer

    out = tmp_path / "tiny"
    export_run(ExportRequest(run_dir=tiny_run, out=out, verify="none", merge=False))
    export = load_export(out)
    tokenizer, model = load_tokenizer(str(out)), load_export_model(export)
    messages, _ = fixed_prompt
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=True, return_tensors="pt")
    with torch.inference_mode():
        greedy_id = int(model(**prompt).logits[0, -1].argmax())
    greedy = tokenizer.decode([greedy_id])
    other_id = (greedy_id + 1) % len(tokenizer)
    assert divergence_gap(model, tokenizer, messages, greedy, tokenizer.decode([other_id])) > 0
    assert divergence_gap(model, tokenizer, messages, greedy, greedy) == 0.0


@pytest.mark.slow
@pytest.mark.vllm
def test_vllm_check_serves_the_adapter_and_agrees_with_transformers(tiny_run, tmp_path, vllm_server):
    """`verify=vllm` hot-loads the adapter on a running server, plays one step, agrees, and unloads it."""
    from memora_rl.llm.server_api import list_served_models

    out = tmp_path / "tiny"
    export_run(ExportRequest(run_dir=tiny_run, out=out, verify="none", merge=False))
    records = verify_export(load_export(out), "vllm", base_url=vllm_server.base_url)
    assert [(r.backend, r.weights) for r in records] == [("transformers", "adapter"), ("vllm", "adapter")]
    assert records[1].action_text.strip() == records[0].action_text.strip()
    assert records[1].action_kind is not None
    assert not any(m["id"].startswith("export-check") for m in list_served_models(vllm_server.base_url))
