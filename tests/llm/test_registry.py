"""The model registry: pull is idempotent and cheap when complete, redoes broken folders, names errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memora_rl.errors import ModelError
from memora_rl.llm import registry

TINY = "smollm2-135m-instruct"


@pytest.fixture()
def fake_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """An empty MEMORA_RL_HOME whose `_build` writes a small fake model; returns the build calls."""
    monkeypatch.setenv("MEMORA_RL_HOME", str(tmp_path))
    calls: list[Path] = []

    def fake_build(spec: registry.ModelSpec, staging: Path) -> None:
        calls.append(staging)
        (staging / "config.json").write_text(json.dumps({"build": len(calls)}))
        (staging / "model.safetensors").write_bytes(b"\x01" * 1000)
        registry.write_marker(staging, spec.name)

    monkeypatch.setattr(registry, "_build", fake_build)
    return calls


def test_second_pull_is_fast_and_imports_no_torch(tiny_model_dir: Path) -> None:
    code = (
        "import sys, time; from memora_rl.llm.registry import pull; t = time.perf_counter(); "
        f"path = pull({TINY!r}); print(time.perf_counter() - t, path, 'torch' in sys.modules)"
    )
    started = time.perf_counter()
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    wall_s = time.perf_counter() - started
    pull_s, path, torch_imported = output.split()
    assert wall_s < 5.0 and float(pull_s) < 5.0
    assert Path(path) == tiny_model_dir
    assert torch_imported == "False"


def test_pulled_folder_is_a_plain_bf16_chatml_model(tiny_model_dir: Path) -> None:
    config = json.loads((tiny_model_dir / "config.json").read_text())
    assert "quantization_config" not in config
    assert config["architectures"] == ["LlamaForCausalLM"] and config["dtype"] == "bfloat16"
    assert registry.is_complete(tiny_model_dir, trust_unmodified=False)  # every sha256 matches
    tokenizer = registry.load_tokenizer(TINY)
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert json.loads((tiny_model_dir / "generation_config.json").read_text())["eos_token_id"] == im_end
    assert tokenizer.eos_token == "<|im_end|>"
    messages = [{"role": "user", "content": "hi"}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text.endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    assert text.startswith("<|im_start|>system\n")


@pytest.mark.slow
def test_pulled_model_answers_greedily(tiny_model_dir: Path) -> None:
    import torch

    tokenizer = registry.load_tokenizer(str(tiny_model_dir))
    model = registry.load_causal_lm(TINY, dtype="bfloat16")
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    encoded = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.no_grad():
        output = model.generate(**encoded, max_new_tokens=12, do_sample=False)
    answer = tokenizer.decode(output[0, encoded["input_ids"].shape[1] :], skip_special_tokens=True)
    assert "Paris" in answer


def test_pull_builds_once_then_is_a_noop(fake_home: list[Path]) -> None:
    first = registry.pull(TINY)
    second = registry.pull(TINY)
    assert first == second == registry.model_dir(TINY)
    assert len(fake_home) == 1
    assert not [p for p in first.parent.iterdir() if p.name.startswith(f".{TINY}.tmp-")]  # staging cleaned up


@pytest.mark.parametrize(
    "damage", ["missing_marker", "checksum_mismatch", "truncated_file", "unreadable_marker", "missing_file"]
)
def test_broken_folder_is_rebuilt(fake_home: list[Path], damage: str) -> None:
    folder = registry.pull(TINY)
    weights, marker = folder / "model.safetensors", folder / registry.MARKER_NAME
    if damage == "missing_marker":
        marker.unlink()
    elif damage == "checksum_mismatch":
        recorded = weights.stat().st_mtime_ns
        weights.write_bytes(b"\x02" * 1000)  # same size, other bytes
        os.utime(weights, ns=(recorded + 10**9, recorded + 10**9))  # a later write, even on coarse clocks
    elif damage == "truncated_file":
        weights.write_bytes(b"\x01" * 10)
    elif damage == "unreadable_marker":
        marker.write_text("{not json")
    else:
        (folder / "config.json").unlink()
    assert not registry.is_complete(folder)
    assert registry.pull(TINY) == folder
    assert len(fake_home) == 2
    assert registry.is_complete(folder)
    assert json.loads((folder / "config.json").read_text()) == {"build": 2}


def test_force_rebuilds_a_complete_folder(fake_home: list[Path]) -> None:
    registry.pull(TINY)
    registry.pull(TINY, force=True)
    assert len(fake_home) == 2


def test_resolve_model_pulls_a_missing_registry_model(fake_home: list[Path]) -> None:
    assert registry.resolve_model(TINY) == str(registry.model_dir(TINY))
    assert registry.list_models()[0]["pulled"] is True
    assert len(fake_home) == 1


def test_resolve_model_passes_local_folders_and_hub_ids_through(tmp_path: Path) -> None:
    assert registry.resolve_model(str(tmp_path)) == str(tmp_path)
    assert registry.resolve_model("HuggingFaceTB/SmolLM2-135M-Instruct") == "HuggingFaceTB/SmolLM2-135M-Instruct"


@pytest.mark.parametrize("call", [registry.pull, registry.resolve_model])
def test_unknown_registry_name_lists_known_names(call: object) -> None:
    with pytest.raises(ModelError, match=f"Unknown model 'no-such-model'.*{TINY}"):
        call("no-such-model")  # type: ignore[operator]


def test_missing_local_folder_is_a_model_error(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="does not exist"):
        registry.resolve_model(str(tmp_path / "absent"))


def test_unreachable_hub_id_points_at_models_pull(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # fail at once instead of retrying
    started = time.perf_counter()
    with pytest.raises(ModelError, match="models pull smollm2-135m-instruct"):
        registry.load_tokenizer("memora-rl-test/no-such-model")
    assert time.perf_counter() - started < 60
