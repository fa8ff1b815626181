"""Export: round trip through transformers (adapter and merged), atomic publish, --force, bad inputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memora_rl.errors import ExportError
from memora_rl.export.writer import ExportRequest, export_run
from memora_rl.policy.export_folder import MANIFEST_FILE, load_export, load_export_model


def leftovers(parent: Path) -> list[str]:
    """Hidden staging or retired folders an export left next to its target."""
    return [p.name for p in parent.iterdir() if p.name.startswith(".") and (".partial-" in p.name or ".old-" in p.name)]


@pytest.mark.slow
def test_round_trip_adapter_and_merged_decode_like_the_checkpoint(tiny_run, tmp_path, greedy, checkpoint_text):
    out = tmp_path / "exports" / "tiny"
    result = export_run(ExportRequest(run_dir=tiny_run, out=out, merge=True, verify="transformers"))

    export = load_export(out)
    manifest = export.manifest
    assert manifest.source_checkpoint == "checkpoint-2" and manifest.step == 2
    assert manifest.base_model == "smollm2-135m-instruct" and manifest.env == "synthetic"
    assert manifest.source_run == "tiny" and manifest.warm_start is None  # the run's name: no path of this machine
    assert manifest.train_config["run_name"] == "tiny" and manifest.data_split["task_count"] == 2
    assert manifest.git_sha and len(manifest.git_sha) == 40
    assert [(c.backend, c.weights) for c in result.manifest.verification] == [
        ("transformers", "adapter"),
        ("transformers", "merged"),
    ]
    for name in ("tokenizer.json", "chat_template.jinja", "generation_config.json", "README.md"):
        assert (out / name).is_file(), name
    assert (out / "merged" / "model.safetensors").is_file()
    card = (out / "README.md").read_text()
    assert "smollm2-135m-instruct" in card and "reward/total" in card and "transformers (merged)" in card

    from memora_rl.llm.registry import load_tokenizer

    tokenizer = load_tokenizer(str(out))
    assert greedy(load_export_model(export), tokenizer) == checkpoint_text
    assert greedy(load_export_model(export, merged=True), tokenizer) == checkpoint_text
    assert leftovers(out.parent) == []


def test_refuses_to_overwrite_without_force_and_replaces_with_it(tiny_run, tmp_path):
    out = tmp_path / "tiny"
    first = export_run(ExportRequest(run_dir=tiny_run, out=out, step=1, verify="none", merge=False))
    with pytest.raises(ExportError, match="--force"):
        export_run(ExportRequest(run_dir=tiny_run, out=out, step=2, verify="none", merge=False))
    assert load_export(out).manifest.export_id == first.manifest.export_id

    second = export_run(ExportRequest(run_dir=tiny_run, out=out, step=2, force=True, verify="none", merge=False))
    assert second.manifest.export_id != first.manifest.export_id
    assert load_export(out).manifest.step == 2
    assert leftovers(tmp_path) == []


def test_failed_export_leaves_nothing_under_the_final_name(tiny_run, tmp_path, monkeypatch):
    import memora_rl.export.writer as writer

    def killed(*args, **kwargs):
        raise KeyboardInterrupt  # as if the user pressed Ctrl-C in the middle of writing

    monkeypatch.setattr(writer, "_copy_tokenizer", killed)
    out = tmp_path / "tiny"
    with pytest.raises(KeyboardInterrupt):
        export_run(ExportRequest(run_dir=tiny_run, out=out, verify="none", merge=False))
    assert not out.exists()
    assert leftovers(tmp_path) == []


def test_failed_forced_export_keeps_the_old_folder(tiny_run, tmp_path, monkeypatch):
    import memora_rl.export.writer as writer

    out = tmp_path / "tiny"
    first = export_run(ExportRequest(run_dir=tiny_run, out=out, step=1, verify="none", merge=False))

    def broken_check(*args, **kwargs):
        raise ExportError("simulated verification failure")

    monkeypatch.setattr(writer, "verify_export", broken_check)
    with pytest.raises(ExportError, match="simulated"):
        export_run(ExportRequest(run_dir=tiny_run, out=out, step=2, force=True, verify="transformers", merge=False))
    assert load_export(out).manifest.export_id == first.manifest.export_id
    assert leftovers(tmp_path) == []


def test_bad_run_folders_raise_one_clear_error(tiny_run, tmp_path):
    with pytest.raises(ExportError, match="not a training run folder"):
        export_run(ExportRequest(run_dir=tmp_path, out=tmp_path / "x"))
    with pytest.raises(ExportError, match="No run folder"):
        export_run(ExportRequest(run_dir=tmp_path / "missing", out=tmp_path / "x"))
    with pytest.raises(ExportError, match="steps available: 1, 2"):
        export_run(ExportRequest(run_dir=tiny_run, out=tmp_path / "x", step=7))
    empty_run = tmp_path / "empty"
    empty_run.mkdir()
    (empty_run / "config.yaml").write_text("run_name: empty\n")
    with pytest.raises(ExportError, match="holds no adapter"):
        export_run(ExportRequest(run_dir=empty_run, out=tmp_path / "x"))
    assert not (tmp_path / "x").exists()


def test_a_folder_that_is_not_an_export_is_rejected(tmp_path):
    with pytest.raises(ExportError, match="not a memora-rl export"):
        load_export(tmp_path)
    (tmp_path / MANIFEST_FILE).write_text(json.dumps({"format": "something else"}))
    with pytest.raises(ExportError, match="not a valid export manifest"):
        load_export(tmp_path)


def test_an_export_without_its_tokenizer_is_rejected(tiny_run, tmp_path):
    out = tmp_path / "tiny"
    export_run(ExportRequest(run_dir=tiny_run, out=out, verify="none", merge=False))
    (out / "tokenizer.json").unlink()
    with pytest.raises(ExportError, match=r"lacks its tokenizer \(tokenizer.json\).*--force"):
        load_export(out)


@pytest.mark.slow
def test_an_adapter_on_another_base_model_fails_naming_the_base(tiny_run, tmp_path):
    """A manifest naming a base of other shapes: an ExportError naming that base and the fix, not a torch trace."""
    from transformers import LlamaConfig, LlamaForCausalLM

    other = tmp_path / "other-base"
    config = LlamaConfig(vocab_size=49152, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=4)  # fmt: skip
    LlamaForCausalLM(config).save_pretrained(str(other))
    out = tmp_path / "tiny"
    export_run(ExportRequest(run_dir=tiny_run, out=out, verify="none", merge=False))
    manifest = json.loads((out / MANIFEST_FILE).read_text())
    (out / MANIFEST_FILE).write_text(json.dumps({**manifest, "base_model": str(other)}))
    with pytest.raises(ExportError, match=f"does not fit the base model its manifest names \\({other}\\)"):
        load_export_model(load_export(out))
