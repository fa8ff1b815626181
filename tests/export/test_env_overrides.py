"""A run's env_overrides travel into its export: the manifest, the model card and the one-step check."""

from __future__ import annotations

import json
from pathlib import Path

from memora_rl.export import verify
from memora_rl.export.card import render_model_card
from memora_rl.export.portable import BasePlan
from memora_rl.export.run_folder import RunSource
from memora_rl.export.writer import ExportRequest, build_manifest
from memora_rl.policy.export_folder import ADAPTER_FILES, Export

OVERRIDES = ["env.max_steps=5", "env.judge.cost_weight=0.2"]


def manifest_of(tmp_path: Path, config: dict):
    adapter_dir = tmp_path / "run" / "final"
    adapter_dir.mkdir(parents=True)
    (adapter_dir / ADAPTER_FILES[0]).write_text(json.dumps({"r": 8, "lora_alpha": 16}))
    (adapter_dir / ADAPTER_FILES[1]).write_bytes(b"weights")
    source = RunSource(tmp_path / "run", adapter_dir, None, config, {"env": "synthetic", "task_ids": []}, {})
    request = ExportRequest(run_dir=tmp_path / "run", out=tmp_path / "export", verify="none")
    return build_manifest(source, request, adapter_dir, BasePlan("smollm2-135m-instruct"))


def test_manifest_and_card_carry_the_runs_env_overrides(tmp_path):
    manifest = manifest_of(tmp_path, {"env": "synthetic", "env_overrides": OVERRIDES})
    assert manifest.env_overrides == OVERRIDES and manifest.train_config["env_overrides"] == OVERRIDES
    card = render_model_card(manifest)
    assert "memora-rl eval --env synthetic --policy <this folder> --split test  # plays the run's env" in card
    assert "overrides `env.max_steps=5 env.judge.cost_weight=0.2`" in card
    assert manifest_of(tmp_path / "old", {"env": "synthetic"}).env_overrides == []  # runs from before the field


def test_the_one_step_check_plays_the_runs_env_settings(tmp_path, monkeypatch):
    export = Export(tmp_path, manifest_of(tmp_path, {"env": "synthetic", "env_overrides": OVERRIDES}))
    calls = []

    def fake_check(export: Export, env: str, overrides: list[str] = ()) -> list:
        calls.append((env, overrides))
        return []

    monkeypatch.setattr(verify, "verify_transformers", fake_check)
    verify.verify_export(export, "transformers")
    verify.verify_export(export, "transformers", env_name="locomo")
    assert calls == [("synthetic", OVERRIDES), ("locomo", [])]
