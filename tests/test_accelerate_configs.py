"""The accelerate configs and the commands quoted beside them would run: checked against the installed launcher.

No GPU is needed. Each `configs/accelerate/*.yaml` goes through accelerate's own config loader and launcher
argument handling (and, for FSDP, the plugin that reads the launcher's environment), and every command its
comments or docs/gpu.md quote is parsed by the program it names: `accelerate launch`'s parser, the
`memora-rl serve` options, `train/grpo.py`'s options and the `TrainConfig` its overrides build. A renamed
option, recipe or config key fails here, not on a rented GPU. `benchmarks.gpu_check` is checked where it
can be: it says "no CUDA device" without one, and its CPU variant passes (and fails when ranks diverge).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
import typer
from accelerate.commands.config.config_args import ClusterConfig, load_config_from_file
from accelerate.commands.launch import _validate_launch_command, launch_command_parser
from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin, patch_environment
from accelerate.utils.launch import prepare_multi_gpu_env

from memora_rl.cli import app
from memora_rl.config import load_config
from memora_rl.training.cli import train_app
from memora_rl.training.config import TrainConfig

REPO = Path(__file__).resolve().parents[1]
CONFIGS = sorted((REPO / "configs" / "accelerate").glob("*.yaml"))
KNOWN_TYPES = {DistributedType.NO, DistributedType.MULTI_GPU, DistributedType.FSDP}
NO_CUDA = "no CUDA device: nothing to check here"
SCALING = "## Scaling out: several GPUs and nodes"


def precision(path: Path) -> str:
    """The mixed precision a multi-process config trains in: bf16 on GPUs, none on the CPU (`cpu_*.yaml`)."""
    return "no" if path.name.startswith("cpu") else "bf16"


def quoted_commands(text: str, comments_only: bool) -> list[list[str]]:
    r"""Shell commands quoted in `text`, continuation lines joined, as tokens: those naming a launch or the server.

    In YAML (`comments_only`) a command is an indented comment line; in Markdown, a line of a fenced block.
    A `machine N:` label before it and a trailing `&` are dropped.

    >>> quoted_commands("# run `memora-rl serve`\n#   accelerate launch x.py \\\n#       --config c.yaml\nk: 1", True)
    [['accelerate', 'launch', 'x.py', '--config', 'c.yaml']]
    """
    lines, fenced = [], False
    for line in text.splitlines():
        if comments_only and line.startswith("#  "):
            lines.append(line[1:].strip())
        elif not comments_only and line.startswith("```"):
            fenced = not fenced
        elif not comments_only and fenced:
            lines.append(line.strip())
    joined, pending = [], ""
    for line in lines:
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        joined.append(pending + line)
        pending = ""
    commands = []
    for line in joined:
        if "accelerate launch" in line or "memora-rl serve" in line:
            line = re.sub(r"^machine \d+:\s*", "", line).removesuffix("&").strip()
            commands.append(shlex.split(line))
    return commands


def split_command(tokens: list[str]) -> tuple[str, list[str]]:
    """(program, its arguments) with leading `NAME=value` environment assignments dropped."""
    while tokens and re.match(r"^[A-Z_]+=", tokens[0]):
        tokens = tokens[1:]
    if tokens[:2] == ["accelerate", "launch"]:
        return "accelerate launch", tokens[2:]
    if tokens[:2] == ["memora-rl", "serve"]:
        return "memora-rl serve", tokens[2:]
    raise AssertionError(f"not a quoted launch or serve command: {tokens}")


def check_launch(arguments: list[str]) -> tuple[Path, str]:
    """Parse an `accelerate launch` command as accelerate does and validate the training command it runs.

    Returns the accelerate config it names and the recipe it trains.
    """
    parsed = launch_command_parser().parse_args(arguments)
    config = REPO / parsed.config_file
    assert config.is_file() and config.parent.name == "accelerate", parsed.config_file
    script = REPO / parsed.training_script
    assert script.is_file() and parsed.training_script == "train/grpo.py", parsed.training_script
    context = typer.main.get_command(train_app()).make_context("grpo.py", list(parsed.training_script_args))
    recipe = context.params["config"]
    assert (REPO / recipe).is_file() and recipe.parent == Path("configs/grpo"), recipe
    run = load_config(TrainConfig, REPO / recipe, context.params["overrides"])
    assert run.backend == "vllm"
    return config, run.model


def check_serve(arguments: list[str]) -> str:
    """Parse a `memora-rl serve` command with the real CLI's options; return the model it serves."""
    serve = typer.main.get_command(app).commands["serve"]  # type: ignore[attr-defined]
    return serve.make_context("serve", arguments).params["model"]


@pytest.mark.parametrize("path", CONFIGS, ids=lambda path: path.name)
def test_config_loads_with_accelerates_loader(path: Path) -> None:
    config = load_config_from_file(str(path))
    assert isinstance(config, ClusterConfig)
    assert config.distributed_type in KNOWN_TYPES
    if config.distributed_type != DistributedType.NO:
        assert config.mixed_precision == precision(path) and config.use_cpu is False  # torchrun starts them
        assert config.num_processes >= 2


@pytest.mark.parametrize("path", CONFIGS, ids=lambda path: path.name)
def test_launcher_takes_every_option(path: Path) -> None:
    """accelerate launch turns the file into its settings; the fsdp_config keys are launcher options."""
    config = load_config_from_file(str(path))
    parser = launch_command_parser()
    options = {action.dest for action in parser._actions}
    assert {key if key.startswith("fsdp_") else f"fsdp_{key}" for key in config.fsdp_config} <= options
    extra = ["--main_process_port", "0"]
    if config.num_machines > 1:
        extra = ["--machine_rank", "1", "--main_process_ip", "10.0.0.1"]
    args = parser.parse_args(["--config_file", str(path), *extra, "train/grpo.py"])
    args, _, _ = _validate_launch_command(args)
    if config.distributed_type == DistributedType.NO:
        return
    env = prepare_multi_gpu_env(args)
    assert env["ACCELERATE_MIXED_PRECISION"] == precision(path)
    assert int(args.nproc_per_node) * config.num_machines == config.num_processes
    if config.distributed_type != DistributedType.FSDP:
        return
    import accelerate.utils.dataclasses as accelerate_dataclasses

    cuda_host = mock.patch.object(accelerate_dataclasses, "get_torch_accelerator_backend", return_value=("cuda", None))
    with patch_environment(**env), cuda_host:  # the plugin refuses sync_module_states on a CPU-only host
        plugin = FullyShardedDataParallelPlugin()
    fsdp = config.fsdp_config
    assert plugin.fsdp_version == 1 and plugin.use_orig_params is True
    assert plugin.sharding_strategy.name == fsdp["fsdp_sharding_strategy"] == fsdp["fsdp_reshard_after_forward"]
    assert plugin.state_dict_type.name == fsdp["fsdp_state_dict_type"] == "FULL_STATE_DICT"
    assert plugin.auto_wrap_policy is not None and plugin.sync_module_states is True


def test_fsdp_sharding_comes_from_the_sharding_strategy_key(tmp_path: Path) -> None:
    """Why gpu_fsdp.yaml writes fsdp_sharding_strategy: under FSDP1, reshard_after_forward alone is ignored."""
    source = (REPO / "configs" / "accelerate" / "gpu_fsdp.yaml").read_text()
    alone = tmp_path / "alone.yaml"
    alone.write_text(
        source.replace("  fsdp_sharding_strategy: FULL_SHARD\n", "").replace(
            "fsdp_reshard_after_forward: FULL_SHARD", "fsdp_reshard_after_forward: SHARD_GRAD_OP"
        )
    )
    args, _, _ = _validate_launch_command(
        launch_command_parser().parse_args(["--config_file", str(alone), "--main_process_port", "0", "x.py"])
    )
    import accelerate.utils.dataclasses as accelerate_dataclasses

    cuda_host = mock.patch.object(accelerate_dataclasses, "get_torch_accelerator_backend", return_value=("cuda", None))
    with patch_environment(**prepare_multi_gpu_env(args)), cuda_host:
        assert FullyShardedDataParallelPlugin().sharding_strategy.name == "FULL_SHARD"


@pytest.mark.parametrize("path", CONFIGS, ids=lambda path: path.name)
def test_quoted_commands_name_real_files_and_options(path: Path) -> None:
    """Each command in the file's comments parses; a multi-process file quotes its own launch, a GPU one the server.

    On the CPU the main process starts the one rollout server; on GPUs the server gets a GPU of its own.
    """
    config = load_config_from_file(str(path))
    commands = [split_command(tokens) for tokens in quoted_commands(path.read_text(), comments_only=True)]
    launched = [check_launch(arguments) for program, arguments in commands if program == "accelerate launch"]
    served = [check_serve(arguments) for program, arguments in commands if program == "memora-rl serve"]
    if config.distributed_type == DistributedType.NO:
        return
    assert launched and all(config_path == path for config_path, _ in launched), launched
    if precision(path) == "bf16":
        assert served and {model for _, model in launched} <= set(served), (launched, served)


def test_gpu_doc_commands_parse() -> None:
    """docs/gpu.md's launch and serve commands parse like the configs' own; its scaling section cites repo files."""
    text = (REPO / "docs" / "gpu.md").read_text()
    commands = [split_command(tokens) for tokens in quoted_commands(text, comments_only=False)]
    launched = [check_launch(arguments) for program, arguments in commands if program == "accelerate launch"]
    served = {check_serve(arguments) for program, arguments in commands if program == "memora-rl serve"}
    assert {config.name for config, _ in launched} >= {"gpu_multi.yaml", "gpu_fsdp.yaml", "gpu_multi_2nodes.yaml"}
    assert {model for _, model in launched} <= served
    section = text[text.index(SCALING) :]
    for cited in re.findall(r"`((?:configs|train|benchmarks|memora_rl|docs|tests)/[\w./-]+\.(?:py|yaml|md))`", section):
        assert (REPO / cited).is_file(), cited


def gpu_check(*args: str, hide_cuda: bool = False) -> subprocess.CompletedProcess[str]:
    """`python -m benchmarks.gpu_check ARGS` from the repo root (with no GPU visible when `hide_cuda`)."""
    env = {**os.environ, **({"CUDA_VISIBLE_DEVICES": ""} if hide_cuda else {})}
    command = [sys.executable, "-m", "benchmarks.gpu_check", *args]
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)


def test_gpu_check_without_cuda_says_so() -> None:
    done = gpu_check(hide_cuda=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith(NO_CUDA)


def test_the_library_never_imports_the_check() -> None:
    for module in (REPO / "memora_rl").rglob("*.py"):
        assert "benchmarks" not in re.findall(r"^\s*(?:from|import) (\w+)", module.read_text(), re.MULTILINE), module


@pytest.mark.slow
def test_gpu_check_on_cpu_passes_and_catches_diverged_ranks() -> None:
    """Two gloo ranks on the CPU through `accelerate launch`: equal adapters pass; skipping the all-reduce fails."""
    done = gpu_check("--cpu", "--tiny", "--timeout", "240")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "PASS: the 2 ranks hold the same adapter" in done.stdout
    assert re.search(r"^\| 1 \| cpu \|", done.stdout, re.MULTILINE)
    diverged = gpu_check("--cpu", "--tiny", "--no-reduce", "--timeout", "240")
    assert diverged.returncode != 0 and "FAIL: the adapters differ across ranks" in diverged.stdout


@pytest.mark.gpu
@pytest.mark.slow
def test_gpu_check_on_the_gpus() -> None:
    done = gpu_check("--timeout", "280")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "PASS" in done.stdout
