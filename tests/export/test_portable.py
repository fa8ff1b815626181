"""Exports that travel: a warm-started run's export is the registry base + one stacked adapter, with no machine path.

The export is copied to a new folder, its run and the original export are deleted, and the copy must
still decode like the run (greedy) through eval's loader (the merged model) and the adapter on the base.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from memora_rl.errors import ExportError
from memora_rl.export.portable import named_or_bundled, portable_config
from memora_rl.export.stack import lora_scaling, stack_weights, stacked_config
from memora_rl.export.writer import ExportRequest, export_run
from memora_rl.policy.export_folder import ADAPTER_DIR, BASE_DIR, CARD_FILE, MANIFEST_FILE, load_export
from tests.export.warm_runs import GRPO_LORA, WARM_LORA, make_adapter, make_warm_run, run_policy

REGISTRY_BASE = "smollm2-135m-instruct"
ACTION_TOKENS = 24
"""Greedy tokens compared per prompt (a JSON action is 10-30 tokens)."""
PATH_IN_TEXT = re.compile(r"(?<![\w.<>/:-])(?:/|~/|[A-Za-z]:\\)[\w.-]+(?:[/\\][\w.-]+)*")
"""An absolute path in free text (`<this folder>/adapter`, `reward/total` and `a / b` are none)."""


def strings_of(value: Any) -> list[str]:
    """Every string (keys included) inside a JSON value."""
    if isinstance(value, dict):
        return [text for key, item in value.items() for text in [key, *strings_of(item)]]
    if isinstance(value, list):
        return [text for item in value for text in strings_of(item)]
    return [value] if isinstance(value, str) else []


def assert_no_machine_path(folder: Path, *machine_folders: Path) -> None:
    """export.json, the card and the adapter config name no absolute path, nor any of `machine_folders`."""
    from memora_rl.export.portable import is_absolute
    from memora_rl.paths import models_dir

    texts = {name: (folder / name).read_text() for name in (MANIFEST_FILE, CARD_FILE)}
    texts["adapter_config.json"] = (folder / ADAPTER_DIR / "adapter_config.json").read_text()
    for name in (MANIFEST_FILE, "adapter_config.json"):
        absolute = [text for text in strings_of(json.loads(texts[name])) if is_absolute(text)]
        assert absolute == [], (name, absolute)
    assert PATH_IN_TEXT.findall(texts[CARD_FILE]) == []
    for name, text in texts.items():
        for machine in (*machine_folders, models_dir(), Path.home(), Path.cwd()):
            assert str(machine) not in text, (name, machine)


def greedy_actions(model: Any, prompt: list[dict[str, str]]) -> list[str]:
    """The greedy actions of a transformers `model` on `prompt` and on the synthetic env's first observation."""
    from memora_rl.export.verify import first_step_fixture
    from memora_rl.llm.registry import load_tokenizer
    from memora_rl.policy.llm_policy import TransformersPolicy

    tokenizer = load_tokenizer(REGISTRY_BASE)
    _, messages, _ = first_step_fixture("synthetic", tokenizer)
    policy = TransformersPolicy(model, tokenizer, max_new_tokens=ACTION_TOKENS)
    return [policy.generate(prompt), policy.generate(messages)]


def moved(export: Path, run_dir: Path, new_home: Path) -> Path:
    """Copy `export` to `new_home`, then delete the original export and the run it came from."""
    copy = Path(shutil.copytree(export, new_home / "policy"))
    shutil.rmtree(export)
    shutil.rmtree(run_dir)
    return copy


def test_stacked_factors_are_the_sum_of_both_updates_module_by_module():
    """Unit check of the stacking rule on small tensors: one-adapter modules, rsLoRA, an embedding's factors."""
    import torch

    torch.manual_seed(0)
    first_config = {"r": 2, "lora_alpha": 8, "target_modules": ["q", "emb"]}
    second_config = {"r": 3, "lora_alpha": 6, "use_rslora": True, "target_modules": ["q", "k"]}
    shapes = {"q": ((5, 4), (4, 5)), "k": ((5, 4), (4, 5)), "emb": ((7, 4), (4, 7))}  # (A: r x in, B: out x r)

    def factors(config: dict[str, Any], modules: list[str]) -> dict[str, Any]:
        weights = {}
        for module in modules:
            (_, a_in), (b_out, _) = shapes[module]
            a_key, b_key = (
                ("lora_embedding_A", "lora_embedding_B") if module == "emb" else ("lora_A.weight", "lora_B.weight")
            )
            weights[f"m.{module}.{a_key}"] = torch.randn(config["r"], a_in)
            weights[f"m.{module}.{b_key}"] = torch.randn(b_out, config["r"])
        return weights

    first, second = factors(first_config, ["q", "emb"]), factors(second_config, ["q", "k"])
    stacked = stack_weights((first_config, first), (second_config, second))
    config = stacked_config(first_config, second_config, REGISTRY_BASE)
    assert (config["r"], config["lora_alpha"], config["use_rslora"]) == (5, 5, False)
    assert lora_scaling(config) == 1.0 and config["target_modules"] == ["emb", "k", "q"]

    def delta(config: dict[str, Any], weights: dict[str, Any], module: str) -> Any:
        a_key, b_key = (
            ("lora_embedding_A", "lora_embedding_B") if module == "emb" else ("lora_A.weight", "lora_B.weight")
        )
        a, b = weights.get(f"m.{module}.{a_key}"), weights.get(f"m.{module}.{b_key}")
        return 0 if a is None else lora_scaling(config) * b @ a

    for module in ("q", "k", "emb"):
        expected = delta(first_config, first, module) + delta(second_config, second, module)
        torch.testing.assert_close(delta(config, stacked, module), expected, rtol=0, atol=1e-5)


@pytest.mark.slow
def test_the_stacked_adapter_merges_to_base_plus_both_deltas(tmp_path, tiny_model_dir):
    """base + stacked adapter == (base + warm start) + GRPO, weight by weight, within 1e-5 in float32."""
    from peft import PeftModel

    from memora_rl.export.stack import stack_adapters
    from memora_rl.llm.registry import load_causal_lm

    make_adapter(tiny_model_dir, tmp_path / "warm", seed=1, **WARM_LORA)
    make_adapter(tiny_model_dir, tmp_path / "grpo", seed=2, **GRPO_LORA)
    config = stack_adapters(tmp_path / "warm", tmp_path / "grpo", tmp_path / "stacked", REGISTRY_BASE)
    assert config["r"] == WARM_LORA["r"] + GRPO_LORA["r"] and config["base_model_name_or_path"] == REGISTRY_BASE

    def merged(*adapters: str) -> dict[str, Any]:
        model = load_causal_lm(REGISTRY_BASE, dtype="float32")
        for name in adapters:  # one after the other, as the run merged the warm start, then trained on top
            model = PeftModel.from_pretrained(model, str(tmp_path / name)).merge_and_unload()
        return model.state_dict()

    sequential, stacked, base = merged("warm", "grpo"), merged("stacked"), merged()
    assert sequential.keys() == stacked.keys()
    worst = max(float((sequential[key] - stacked[key]).abs().max()) for key in sequential)
    assert worst < 1e-5
    changed = {key.split(".")[-2] for key in base if not (base[key] == sequential[key]).all()}
    assert changed == {"q_proj", "k_proj", "v_proj"}  # both adapters' modules, and only those


@pytest.mark.slow
def test_a_warm_started_export_travels_and_decodes_like_its_run(tmp_path, tiny_model_dir, fixed_prompt):
    """Copy the export away, delete the run and the export: eval (merged) and the adapter decode like the run."""
    from memora_rl.env.config import EnvConfig
    from memora_rl.evaluation.policies import make_graph_policy, parse_policy_spec
    from memora_rl.policy.export_folder import load_export_model

    prompt, _ = fixed_prompt
    run_dir = make_warm_run(tmp_path / "checkpoints", tiny_model_dir)
    expected = greedy_actions(run_policy(run_dir), prompt)
    out = tmp_path / "exports" / "warm"
    export_run(ExportRequest(run_dir=run_dir, out=out, verify="none"))  # the loads are checked below

    copy = moved(out, run_dir, tmp_path / "elsewhere")
    export = load_export(copy)
    manifest = export.manifest
    assert manifest.base_model == REGISTRY_BASE and export.base_model == REGISTRY_BASE
    assert manifest.warm_start and manifest.warm_start["how"] == "stacked"
    assert manifest.adapter["r"] == WARM_LORA["r"] + GRPO_LORA["r"] and manifest.merged
    assert manifest.train_config["model"] == REGISTRY_BASE and manifest.source_run == "warm"
    assert not (copy / BASE_DIR).exists()
    assert sum(f.stat().st_size for f in (copy / ADAPTER_DIR).iterdir()) < 10_000_000  # a few MB, not a model
    assert_no_machine_path(copy, tmp_path)
    card = (copy / CARD_FILE).read_text()
    assert f"--model {REGISTRY_BASE} --max-lora-rank 16" in card and "stacked" in card

    policy, _ = make_graph_policy(parse_policy_spec(str(copy)), EnvConfig(), max_new_tokens=ACTION_TOKENS)
    assert greedy_actions(policy.model, prompt) == expected  # eval's in-process loader: the merged model
    assert "Peft" not in type(policy.model).__name__ and export.has_merged
    assert greedy_actions(load_export_model(export, merged=False), prompt) == expected  # base + stacked adapter


@pytest.mark.slow
def test_an_older_warm_started_run_ships_its_merged_warm_start_inside(tmp_path, tiny_model_dir, fixed_prompt):
    """No warm-start adapter kept: today's adapter over the merged warm start, copied into `base/`, paths relative."""
    from memora_rl.policy.export_folder import load_export_model

    prompt, _ = fixed_prompt
    run_dir = make_warm_run(tmp_path / "checkpoints", tiny_model_dir, keep_warm_adapter=False)
    expected = greedy_actions(run_policy(run_dir), prompt)
    out = tmp_path / "exports" / "warm"
    export_run(ExportRequest(run_dir=run_dir, out=out, merge=False, verify="none"))

    copy = moved(out, run_dir, tmp_path / "elsewhere")
    export = load_export(copy)
    assert export.manifest.base_model == BASE_DIR and export.base_model == str(copy / BASE_DIR)
    assert export.manifest.warm_start and export.manifest.warm_start["how"] == "bundled"
    assert export.manifest.adapter["r"] == GRPO_LORA["r"]
    assert_no_machine_path(copy, tmp_path)
    assert f"--model <this folder>/{BASE_DIR}" in (copy / CARD_FILE).read_text()
    assert greedy_actions(load_export_model(export), prompt) == expected

    shutil.rmtree(copy / BASE_DIR)
    with pytest.raises(ExportError, match="lacks its base model"):
        load_export(copy)


def test_train_config_paths_become_portable(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = {
        "model": "/somewhere/checkpoints/run/warmstart/model",
        "server": {"model": "/somewhere/checkpoints/run/warmstart/model", "url": "http://127.0.0.1:8000/v1"},
        "output_root": str(tmp_path / "checkpoints"),
        "logging": {"log": "/var/log/x.log"},
        "env_overrides": ["env.max_steps=5"],
    }
    assert portable_config(config, REGISTRY_BASE) == {
        "model": REGISTRY_BASE,
        "server": {"model": REGISTRY_BASE, "url": "http://127.0.0.1:8000/v1"},
        "output_root": "checkpoints",
        "logging": {"log": "x.log"},
        "env_overrides": ["env.max_steps=5"],
    }


def test_a_base_is_named_when_it_can_be_and_shipped_when_it_is_a_folder(tmp_path):
    assert named_or_bundled(REGISTRY_BASE) == (REGISTRY_BASE, None)
    assert named_or_bundled("HuggingFaceTB/SmolLM2-135M-Instruct") == ("HuggingFaceTB/SmolLM2-135M-Instruct", None)
    assert named_or_bundled(str(tmp_path)) == (BASE_DIR, tmp_path)
    with pytest.raises(ExportError, match="is gone"):
        named_or_bundled(str(tmp_path / "deleted"))
