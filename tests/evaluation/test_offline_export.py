"""Offline evaluation of an exported policy with the transformers backend (one question, one step)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memora_rl.evaluation.config import EvalConfig
from memora_rl.evaluation.offline import run_eval
from memora_rl.evaluation.report import read_records


def tiny_run_folder(root: Path, base_dir: Path, env_overrides: list[str] | None = None) -> Path:
    """A run folder with one random LoRA checkpoint, laid out like `memora_rl.training.run`."""
    import torch
    from peft import LoraConfig, get_peft_model

    from memora_rl.config import dump_config
    from memora_rl.llm.registry import load_causal_lm
    from memora_rl.training.config import TrainConfig

    run_dir = root / "tiny"
    run_dir.mkdir(parents=True)
    train_config = TrainConfig(run_name="tiny", env="synthetic", env_overrides=env_overrides or [])
    dump_config(train_config, run_dir / "config.yaml")
    (run_dir / "data_split.json").write_text(json.dumps({"env": "synthetic", "split": "train", "task_ids": []}))
    torch.manual_seed(0)
    config = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"])
    get_peft_model(load_causal_lm(str(base_dir), dtype="float32"), config).save_pretrained(
        str(run_dir / "checkpoint-1")
    )
    return run_dir


@pytest.mark.slow
def test_exported_policy_is_evaluated_with_transformers(tmp_path, tiny_model_dir):
    from memora_rl.export.writer import ExportRequest, export_run

    export = export_run(
        ExportRequest(
            run_dir=tiny_run_folder(tmp_path, tiny_model_dir), out=tmp_path / "export", verify="none", merge=False
        )
    )
    out = tmp_path / "eval"
    result = run_eval(
        EvalConfig(env="synthetic", policy=str(export.path), limit=1, out=out, env_overrides=["env.max_steps=1"])
    )
    records = read_records(out)
    name = f"tiny-{export.manifest.source_checkpoint}"  # the run and checkpoint, not the folder (`export-export`)
    assert result.policy == name and [r.policy for r in records] == [name]
    assert records[0].steps == 1 and sum(records[0].action_counts.values()) == 1


@pytest.mark.slow
def test_an_export_is_evaluated_in_its_training_env_settings(tmp_path, tiny_model_dir):
    """No --set: the run's overrides apply (one step here, not the env's default five); --set comes after them."""
    from memora_rl.export.writer import ExportRequest, export_run

    run_dir = tiny_run_folder(tmp_path, tiny_model_dir, env_overrides=["env.max_steps=1"])
    export = export_run(ExportRequest(run_dir=run_dir, out=tmp_path / "export", verify="none", merge=False))
    run_eval(EvalConfig(env="synthetic", policy=str(export.path), limit=1, out=tmp_path / "eval"))
    assert read_records(tmp_path / "eval")[0].steps == 1
    assert json.loads((tmp_path / "eval" / "results.json").read_text())["meta"]["env_overrides"] == ["env.max_steps=1"]
    config = EvalConfig(env="synthetic", policy=str(export.path), limit=1, out=tmp_path / "eval2",
                        env_overrides=["env.max_steps=2"])  # fmt: skip
    run_eval(config)
    meta = json.loads((tmp_path / "eval2" / "results.json").read_text())["meta"]
    assert meta["env_overrides"] == ["env.max_steps=1", "env.max_steps=2"]  # --set wins: it comes last
    assert read_records(tmp_path / "eval2")[0].steps <= 2


@pytest.mark.slow
@pytest.mark.vllm
def test_export_on_a_server_of_other_weights_is_refused(tmp_path, tiny_model_dir, vllm_server):
    """A warm-started run's adapter belongs on the warm start: a server of the plain base must not take it."""
    from memora_rl.errors import EvalError
    from memora_rl.export.writer import ExportRequest, export_run
    from memora_rl.policy.export_folder import MANIFEST_FILE

    export = export_run(
        ExportRequest(
            run_dir=tiny_run_folder(tmp_path, tiny_model_dir), out=tmp_path / "export", verify="none", merge=False
        )
    )
    warm = tmp_path / "warmstart-model"
    warm.mkdir()
    manifest = json.loads((export.path / MANIFEST_FILE).read_text())
    (export.path / MANIFEST_FILE).write_text(json.dumps({**manifest, "base_model": str(warm)}))
    config = EvalConfig(env="synthetic", policy=str(export.path), limit=1, out=tmp_path / "eval",
                        base_url=vllm_server.base_url, env_overrides=["env.max_steps=1"])  # fmt: skip
    with pytest.raises(EvalError, match="does not serve the base model"):
        run_eval(config)


@pytest.mark.slow
@pytest.mark.vllm
def test_export_whose_merged_weights_are_served_plays_them_without_an_adapter(tmp_path, tiny_model_dir, vllm_server):
    """A server of the export's merged weights (what `serve-memory --policy llm` plays) is used as it is."""
    from memora_rl.export.writer import ExportRequest, export_run
    from memora_rl.llm.server_api import list_served_models
    from memora_rl.policy.export_folder import MANIFEST_FILE

    export = export_run(
        ExportRequest(
            run_dir=tiny_run_folder(tmp_path, tiny_model_dir), out=tmp_path / "export", verify="none", merge=False
        )
    )
    manifest = json.loads((export.path / MANIFEST_FILE).read_text())
    (export.path / MANIFEST_FILE).write_text(json.dumps({**manifest, "merged": True}))
    (export.path / "merged").symlink_to(tiny_model_dir)  # the served folder stands for the merged weights
    adapters_before = {m["id"] for m in list_served_models(vllm_server.base_url) if m.get("parent")}
    config = EvalConfig(env="synthetic", policy=str(export.path), limit=1, out=tmp_path / "eval",
                        base_url=vllm_server.base_url, env_overrides=["env.max_steps=1"])  # fmt: skip
    run_eval(config)
    assert read_records(tmp_path / "eval")[0].steps == 1
    adapters_after = {m["id"] for m in list_served_models(vllm_server.base_url) if m.get("parent")}
    assert adapters_after == adapters_before  # no adapter hot-loaded
