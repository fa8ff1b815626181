"""One subprocess smoke test per entry point: the real command line, checked by what it wrote.

`accelerate launch train/grpo.py`, `memora-rl train`, `memora-rl eval` (context baselines and a
prompted model on the shared vLLM server) and `memora-rl quickstart` each run as a user would run
them, with the smallest settings they accept and every output under `tmp_path`. In-process tests
cover the logic; these catch what only a real launch shows (console scripts, the accelerate
launcher, argument parsing, relative paths, outputs landing where the README says).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
"""The venv's `bin/`: console scripts (`memora-rl`, `accelerate`) sit beside its Python."""
TINY_CONFIG = "configs/grpo/tiny.yaml"
TINY_STEP = [
    "backend=transformers",
    "grpo.max_steps=1",
    "grpo.num_generations=2",
    "grpo.per_device_batch_size=2",
    "grpo.max_turns=1",
    "grpo.max_new_tokens=24",
    "grpo.max_completion_tokens=32",
    "max_tasks=8",
    "save_steps=1",
    "logging.wandb=disabled",
    "logging.sample_every=0",
    "env_overrides=[env.compact=true, env.few_shot=false]",
]
"""One optimizer step of 2 one-turn episodes on short prompts (compact, no few-shot): the cheapest real GRPO step."""
QUICKSTART_SET = [
    "grpo.max_steps=1",
    "grpo.num_generations=2",
    "grpo.per_device_batch_size=2",
    "grpo.max_turns=1",
    "grpo.max_new_tokens=24",
    "grpo.max_completion_tokens=64",
    "warm_start.max_tasks=2",
    "warm_start.epochs=1",
    "save_steps=1",
    "logging.wandb=disabled",
    "logging.sample_every=0",
]
"""The quickstart's training cut to 2 warm-start walks and 1 GRPO step of 2 one-turn episodes."""
EVAL_LIMIT = 2


def run_command(command: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Run `command` from the repo root (configs are relative paths); fail with its output tail if it fails."""
    env = {
        **os.environ,
        "COLUMNS": "250",  # rich wraps long paths at the terminal width
        "OMP_WAIT_POLICY": "PASSIVE",  # as the Makefile sets it: spinning torch threads starve 2 cores
        "WANDB_MODE": "disabled",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("MEMORA_RL_VLLM_URL", None)  # each command gets its server explicitly, or none
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env)
    assert result.returncode == 0, (
        f"{command} exited {result.returncode}:\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
    )
    return result


def read_jsonl(path: Path) -> list[dict]:
    """The records of a JSON-lines file."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def check_one_step_run(run_dir: Path, stdout: str) -> None:
    """A finished 1-step run: one finite metrics record with the judge's rewards, a checkpoint and a final adapter."""
    records = read_jsonl(run_dir / "metrics.jsonl")
    assert [record["step"] for record in records] == [1]
    assert math.isfinite(records[0]["train/loss"])
    assert {"reward/total", "reward/correctness", "reward/format"} <= set(records[0])
    final = run_dir / "final"
    assert (final / "adapter_model.safetensors").stat().st_size > 0
    assert json.loads((final / "adapter_config.json").read_text())["r"] == 8  # tiny.yaml's LoRA rank
    assert (run_dir / "checkpoint-1" / "optimizer.pt").is_file()
    assert f"done: 1 steps; adapter at {final}" in " ".join(stdout.split())


def check_eval_run(out: Path, policy: str, questions: int = EVAL_LIMIT) -> list[dict]:
    """An eval folder of `questions` records of `policy`, with results.json and results.md saying the same."""
    records = read_jsonl(out / "records.jsonl")
    assert len(records) == questions and len({r["task_id"] for r in records}) == questions
    assert {record["policy"] for record in records} == {policy}
    results = json.loads((out / "results.json").read_text())
    assert results["meta"]["policy"] == policy and results["meta"]["questions"] == questions
    assert results["metrics"]["overall"]["questions"] == questions
    assert (out / "results.md").is_file()
    return records


@pytest.mark.slow
def test_accelerate_launch_train_script_trains_one_step(tmp_path: Path) -> None:
    """`accelerate launch train/grpo.py` (README's launcher, CPU accelerate config) trains and saves an adapter."""
    launch = [str(BIN / "accelerate"), "launch", "--config_file", "configs/accelerate/cpu.yaml"]
    overrides = [*TINY_STEP, f"output_root={tmp_path}", "run_name=launched"]
    result = run_command([*launch, "train/grpo.py", "--config", TINY_CONFIG, *overrides], timeout=1200)
    check_one_step_run(tmp_path / "launched", result.stdout)


@pytest.mark.slow
def test_memora_rl_train_trains_one_step(tmp_path: Path) -> None:
    """The `memora-rl train` console script runs the same tiny step and writes the same run folder."""
    overrides = [*TINY_STEP, f"output_root={tmp_path}", "run_name=cli"]
    result = run_command([str(BIN / "memora-rl"), "train", "--config", TINY_CONFIG, *overrides], timeout=1200)
    check_one_step_run(tmp_path / "cli", result.stdout)


@pytest.mark.slow
@pytest.mark.parametrize(("spec", "policy"), [("rag", "rag"), ("full-context", "full_context")])
def test_memora_rl_eval_runs_a_context_baseline(tmp_path: Path, spec: str, policy: str) -> None:
    """`memora-rl eval` of a non-graph baseline (no LLM) records each held-out question under its policy name."""
    command = ["eval", "--env", "synthetic", "--policy", spec, "--split", "test", "--limit", str(EVAL_LIMIT)]
    run_command([str(BIN / "memora-rl"), *command, "--out", str(tmp_path)], timeout=600)
    records = check_eval_run(tmp_path, policy)
    assert all(record["context_tokens"] > 0 for record in records)
    assert json.loads((tmp_path / "run.json").read_text())["split"] == "test"


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory: pytest.TempPathFactory, vllm_server: Any) -> tuple[Path, str]:
    """One tiny `memora-rl quickstart` (the base baseline on the shared server, its own server for the warm-started
    model; training under tmp): its folder and stdout."""
    root = tmp_path_factory.mktemp("quickstart")
    out = root / "out"
    settings = [item for value in [*QUICKSTART_SET, f"output_root={root / 'checkpoints'}"] for item in ("--set", value)]
    command = [str(BIN / "memora-rl"), "quickstart", "--out", str(out), "--eval-limit", str(EVAL_LIMIT), *settings]
    command += ["--base-url", vllm_server.base_url]
    result = run_command(command, timeout=2400)
    return out, " ".join(result.stdout.split())


@pytest.mark.slow
def test_quickstart_evaluates_baselines_and_the_trained_export(quickstart: tuple[Path, str]) -> None:
    """The quickstart's three eval runs hold the same questions under the semantic, base and trained names."""
    out, _ = quickstart
    manifest = json.loads((out / "export" / "export.json").read_text())
    trained = f"{Path(manifest['source_run']).name}-{manifest['source_checkpoint']}"
    assert trained.startswith("quickstart-")
    policies = {"semantic": "semantic", "prompted-base": "prompted-smollm2", "trained": trained}  # shared server's name
    questions = [
        {r["task_id"] for r in check_eval_run(out / "eval" / name, policy)} for name, policy in policies.items()
    ]
    assert questions[0] == questions[1] == questions[2]


@pytest.mark.slow
def test_quickstart_trains_under_the_given_output_root(quickstart: tuple[Path, str]) -> None:
    """`--set output_root=...` reaches both stages: the warm start and the GRPO step land there, not in the repo."""
    out, _ = quickstart
    run_dir = out.parent / "checkpoints" / "quickstart"
    assert (run_dir / "warmstart" / "model" / "warmstart.json").is_file()  # the warm start finished and merged
    assert [record["step"] for record in read_jsonl(run_dir / "metrics.jsonl")] == [1]
    assert (run_dir / "final" / "adapter_model.safetensors").is_file()


@pytest.mark.slow
def test_quickstart_prints_and_writes_the_comparison(quickstart: tuple[Path, str]) -> None:
    """The quickstart ends with compare.md over its three runs, the recall gains and where the plots are."""
    out, stdout = quickstart
    table = (out / "compare" / "compare.md").read_text()
    assert "semantic" in table and "prompted-smollm2" in table and "quickstart-" in table
    assert list((out / "compare").glob("*.png"))
    for name in ("semantic", "prompted-base"):
        assert f"Evidence recall gain of the trained policy over {name}:" in stdout
    assert f"Plots and compare.md: {out / 'compare'}" in stdout


@pytest.mark.slow
@pytest.mark.vllm
def test_memora_rl_eval_runs_a_prompted_model_on_the_server(tmp_path: Path, vllm_server: object) -> None:
    """`memora-rl eval --policy prompted:<served name> --base-url` plays the shared server's model on real episodes."""
    model, url = vllm_server.model, vllm_server.base_url  # type: ignore[attr-defined]
    command = ["eval", "--env", "synthetic", "--policy", f"prompted:{model}", "--split", "test"]
    # 2 steps: the opener plus 5 steps of observations outgrows the shared server's 2048-token context
    options = ["--limit", str(EVAL_LIMIT), "--base-url", url, "--out", str(tmp_path), "--set", "env.max_steps=2"]
    run_command([str(BIN / "memora-rl"), *command, *options], timeout=900)
    records = check_eval_run(tmp_path, f"prompted-{model}")
    assert all(record["steps"] >= 1 for record in records)  # the LLM acted at least once per question
