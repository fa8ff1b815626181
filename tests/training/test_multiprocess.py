"""Data-parallel GRPO with `accelerate launch --num_processes 2` on the CPU (gloo), against the session vLLM server.

One 2-process run of two steps (a checkpoint after each), a 1-process run of one step with the same global
batch (one process playing both groups), and a resume of the 2-process run from its first checkpoint. Each
process plays one group of the step's walks with the seeds its place in the whole batch gives it, so the
two topologies sample the same walks and should take the same optimizer step.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks.scale import launch_training
from tests.training.test_smoke import ROUNDING, adapter_distance, read_jsonl

pytestmark = [pytest.mark.slow, pytest.mark.vllm]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, vllm_server) -> dict[str, Path]:
    """The run folders: `two` (2 processes, 2 steps), `one` (1 process, 1 step), `resumed` (`two` from step 1)."""
    root = tmp_path_factory.mktemp("multiprocess")
    url = f"server.url={vllm_server.base_url}"  # the session server: a third one would crowd 24 GB
    launch_training(2, root, "two", url, "grpo.per_device_batch_size=4", "grpo.max_steps=2", "save_steps=1")
    launch_training(1, root, "one", url, "grpo.per_device_batch_size=8", "grpo.max_steps=1", "save_steps=1")
    resumed = root / "resumed"
    left = ("checkpoint-2", "final", "adapters", "*.jsonl", "processes.json")  # as a kill after step 1 leaves it
    shutil.copytree(root / "two", resumed, ignore=shutil.ignore_patterns(*left))
    launch_training(2, root, "resumed", url, "grpo.per_device_batch_size=4", "grpo.max_steps=2", "resume=true")
    return {name: root / name for name in ("two", "one", "resumed")}


def test_two_processes_split_each_step_and_log_once(runs):
    """Each process plays one of a step's two groups (one process plays both); metrics are one line a step."""
    two = read_jsonl(runs["two"] / "data_order.jsonl")
    assert sorted((r["step"], r["process"]) for r in two) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    by_process = {r["process"]: r["task_ids"] for r in two if r["step"] == 0}
    (one,) = read_jsonl(runs["one"] / "data_order.jsonl")
    assert one["task_ids"] == by_process[0] + by_process[1]
    assert len(set(by_process[0])) == len(set(by_process[1])) == 1 and by_process[0] != by_process[1]
    metrics = read_jsonl(runs["two"] / "metrics.jsonl")
    assert [r["step"] for r in metrics] == [1, 2]
    assert metrics[0]["train/grad_norm"] > 0  # the step had reward variance: the adapters below had work to agree on


def test_two_processes_take_the_step_one_process_takes(runs):
    """After one step at the same global batch and seeds, the 2-process adapter equals the 1-process one."""
    step = adapter_distance(runs["two"] / "checkpoint-1", runs["two"] / "checkpoint-2")
    assert step > 0.1  # a step at learning rate 1e-3 moves 2.4M weights by about 1e-3 each
    assert adapter_distance(runs["two"] / "checkpoint-1", runs["one"] / "final") < ROUNDING * step
    metrics = {name: read_jsonl(runs[name] / "metrics.jsonl")[0] for name in ("one", "two")}
    for key in ("train/loss", "train/grad_norm", "reward/total"):
        assert metrics["one"][key] == pytest.approx(metrics["two"][key], rel=1e-5), key


def test_both_processes_hold_one_adapter(runs):
    """Every process's trained LoRA has the same digest at the end of the run."""
    record = json.loads((runs["two"] / "final" / "processes.json").read_text())
    assert record["processes"] == 2
    assert len(record["adapter_sha256"]) == 2 and len(set(record["adapter_sha256"])) == 1


def test_a_resumed_two_process_run_reaches_the_uninterrupted_adapter(runs):
    """Resumed from its first checkpoint, the 2-process run's second step ends where the straight run's did."""
    step = adapter_distance(runs["two"] / "checkpoint-1", runs["two"] / "final")
    assert adapter_distance(runs["resumed"] / "final", runs["two"] / "final") < ROUNDING * step
    orders = {name: read_jsonl(runs[name] / "data_order.jsonl") for name in ("two", "resumed")}
    second = {
        name: sorted((r for r in order if r["step"] == 1), key=lambda r: r["process"]) for name, order in orders.items()
    }
    assert len(second["two"]) == 2 and second["resumed"] == second["two"]
    assert {r["step"] for r in orders["resumed"]} == {1}  # the resumed run played step 2 only
