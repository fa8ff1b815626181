"""`memora-rl models` and `memora-rl serve` from the shell: fast help, one clear error line on bad input."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from memora_rl.errors import ConfigError
from memora_rl.llm.cli import parse_lora_spec

CLI = [sys.executable, "-c", "from memora_rl.cli import run; run()"]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120, check=False)


def test_help_is_fast_and_lists_the_commands() -> None:
    started = time.perf_counter()
    result = _cli("--help")
    assert result.returncode == 0
    assert "models" in result.stdout and "serve" in result.stdout
    assert time.perf_counter() - started < 10


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["models", "pull", "no-such-model"], "Unknown model 'no-such-model'"),
        (["serve", "--model", "no-such-model"], "Unknown model 'no-such-model'"),
        (["serve", "--model", "smollm2-135m-instruct", "--lora", "policy"], "is not name=path"),
        (["serve", "--model", "smollm2-135m-instruct", "--dtype", "fp7"], "option --dtype: Input should be 'auto'"),
    ],
)
def test_bad_input_gives_one_error_line(args: list[str], message: str) -> None:
    result = _cli(*args)
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines[0].startswith("error:") and message in " ".join(lines)
    assert "Traceback" not in result.stderr


def test_models_list_shows_the_registry() -> None:
    result = _cli("models", "list")
    assert result.returncode == 0 and "smollm2-135m-instruct" in result.stdout


def test_lora_spec_parsing(tmp_path: Path) -> None:
    (tmp_path / "adapter_config.json").write_text("{}")
    assert parse_lora_spec(f"policy={tmp_path}") == ("policy", tmp_path)
    with pytest.raises(ConfigError, match="not a peft adapter folder"):
        parse_lora_spec(f"policy={tmp_path / 'missing'}")
    with pytest.raises(ConfigError, match="is not name=path"):
        parse_lora_spec("=somewhere")


def test_adapters_at_start_need_lora_on(tmp_path: Path) -> None:
    (tmp_path / "adapter_config.json").write_text("{}")
    result = _cli("serve", "--model", "smollm2-135m-instruct", "--lora", f"policy={tmp_path}", "--no-enable-lora")
    assert result.returncode == 1 and "--no-enable-lora turns off" in result.stderr
    assert "Traceback" not in result.stderr


def test_lora_off_drops_the_server_flag() -> None:
    """A merged export served alone: vLLM starts without --enable-lora (its LoRA paths cost time per step)."""
    from memora_rl.llm.server import ServerConfig, VLLMServer

    assert "--enable-lora" in VLLMServer(ServerConfig()).command("model-folder")
    assert "--enable-lora" not in VLLMServer(ServerConfig(enable_lora=False)).command("model-folder")
