"""Tiny end-to-end GRPO runs on the synthetic env with the real SmolLM2 model.

Each run is 2 optimizer steps of 4 episodes (one task, G=4), one turn of at most 24 tokens
(room for a whole `{"action": "stop"}` so rewards differ within a group), so a step costs a
few forward/backward passes over ~3k tokens on CPU.
"""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path
from typing import Any

import pytest
from transformers import TrainerCallback

from memora_rl.config import load_config
from memora_rl.training.config import TrainConfig

REPO_ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = REPO_ROOT / "configs" / "grpo" / "tiny.yaml"
TINY = [
    "grpo.max_steps=2",
    "grpo.num_generations=4",
    "grpo.per_device_batch_size=4",
    "grpo.max_turns=1",
    "grpo.max_new_tokens=24",
    "grpo.max_completion_tokens=32",
    "grpo.learning_rate=1e-3",
    "max_tasks=8",
    "save_steps=1",
    "logging.wandb=disabled",
    "logging.sample_every=0",
]


def tiny_config(root: Path, *overrides: str) -> TrainConfig:
    return load_config(TrainConfig, QUICKSTART, [*TINY, f"output_root={root}", *overrides])


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def data_order(run_dir: Path) -> dict[int, list[str]]:
    """Step -> task ids of its generation batch (a resumed run's record wins)."""
    return {record["step"]: record["task_ids"] for record in read_jsonl(run_dir / "data_order.jsonl")}


def adapter_difference(first: Path, second: Path) -> float:
    """Largest absolute difference between two saved adapters' weights (same tensor names required)."""
    from safetensors.torch import load_file

    a, b = (load_file(str(folder / "adapter_model.safetensors")) for folder in (first, second))
    assert a.keys() == b.keys()
    return max((a[name] - b[name]).abs().max().item() for name in a)


ROUNDING = 1e-3
"""Largest distance allowed between adapters that took the same steps from the same samples, as a share of the
last step's own distance (L2 over all LoRA weights). Their losses and gradient norms agree to float rounding
(sums in another order: one thread or two, one process or two, a server batching other requests); Adam
divides each gradient by its own running size, so the few weights whose gradient is near zero (about 100 of
2.4M) move by rounding-sized amounts differently, up to about the learning rate each."""


def adapter_distance(first: Path, second: Path) -> float:
    """The L2 norm of the difference between two saved adapters, over all their weights."""
    from safetensors.torch import load_file

    a, b = (load_file(str(folder / "adapter_model.safetensors")) for folder in (first, second))
    assert a.keys() == b.keys()
    return sum(float(((a[name] - b[name]) ** 2).sum()) for name in a) ** 0.5


def check_trained(result, seeded: bool = True) -> None:
    """Two logged steps with a finite loss and every judge component, and LoRA B moved off zero.

    An unseeded sampler (the vLLM server) can give a group of G identical rewards, hence no
    advantage and no gradient at all; then only steps whose groups had reward variance must
    have a gradient, and the adapter must have moved exactly when some step had one.
    """
    from safetensors.torch import load_file

    records = read_jsonl(result.metrics_path)
    assert [r["step"] for r in records] == [1, 2]
    assert all(math.isfinite(r["train/loss"]) for r in records)
    assert all({"reward/correctness", "reward/format", "reward/cost", "reward/total"} <= set(r) for r in records)
    for record in records:
        if record["train/frac_reward_zero_std"] < 1.0:
            assert record["train/grad_norm"] > 0, record
    learned = any(r["train/grad_norm"] > 0 for r in records)
    if seeded:
        assert learned  # the seeded in-process sampler gives this run reward variance
    weights = load_file(str(result.adapter_dir / "adapter_model.safetensors"))
    lora_b = [tensor for name, tensor in weights.items() if "lora_B" in name]
    assert lora_b
    assert any(tensor.abs().max().item() > 0 for tensor in lora_b) == learned  # B starts at exactly 0


@pytest.fixture(scope="module")
def trl_rewards() -> list[dict[str, Any]]:
    """Per step of `transformers_run`: TRL's reward matrix, its weights and the rollout's `judge_reward` (J)."""
    return []


@pytest.fixture(scope="module")
def transformers_run(tmp_path_factory, trl_rewards):
    """The two-step run; TRL's `_calculate_rewards` is wrapped to record each step's rewards in `trl_rewards`."""
    from trl import GRPOTrainer

    from memora_rl.training.run import run

    captured = trl_rewards
    original = GRPOTrainer._calculate_rewards

    def capture(self: Any, inputs: list[dict], *args: Any, **kwargs: Any) -> Any:
        rewards_per_func = original(self, inputs, *args, **kwargs)  # (B, F)
        captured.append({
            "rewards_per_func": rewards_per_func.detach().cpu().clone(),
            "weights": self.reward_weights.detach().cpu().clone(),  # (F,)
            "names": list(self.reward_func_names),
            "judge_reward": [row["judge_reward"] for row in inputs],
        })  # fmt: skip
        return rewards_per_func

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(GRPOTrainer, "_calculate_rewards", capture)
        return run(tiny_config(tmp_path_factory.mktemp("runs"), "backend=transformers", "run_name=tf"))


@pytest.mark.slow
def test_transformers_backend_trains_two_steps(transformers_run):
    assert transformers_run.final_step == 2
    check_trained(transformers_run)
    run_dir = transformers_run.run_dir
    assert (run_dir / "checkpoint-2" / "config.yaml").is_file()
    assert (run_dir / "checkpoint-2" / "data_split.json").is_file()
    assert (run_dir / "checkpoint-2" / "optimizer.pt").is_file()
    assert read_jsonl(run_dir / "samples.jsonl")[0]["reward_components"]


@pytest.mark.slow
def test_trls_weighted_reward_sum_is_the_envs_j_on_real_rollouts(transformers_run, trl_rewards):
    """TRL's weighted sum (`rewards_per_func @ reward_weights`) equals the env's J row by row on real
    rollouts, and the `reward` TRL logs (the batch mean of that sum) equals the mean J."""
    import torch

    assert len(trl_rewards) == 2  # one generation batch per optimizer step
    logged = read_jsonl(transformers_run.metrics_path)
    for batch, record in zip(trl_rewards, logged, strict=True):
        judge = torch.tensor(batch["judge_reward"], dtype=torch.float32)  # (B,) the env's J per episode
        trl_sum = (batch["rewards_per_func"] * batch["weights"].unsqueeze(0)).nansum(dim=1)  # (B,) TRL's formula
        assert judge.numel() == 4 and not torch.isnan(batch["rewards_per_func"]).any()
        torch.testing.assert_close(trl_sum, judge, atol=1e-5, rtol=0)
        total_column = batch["rewards_per_func"][:, batch["names"].index("total")]  # logged only, weight 0
        torch.testing.assert_close(total_column, judge, atol=1e-6, rtol=0)
        assert batch["weights"][batch["names"].index("total")] == 0.0
        assert record["train/reward"] == pytest.approx(judge.mean().item(), abs=1e-5)  # TRL's own logged sum


class _Interrupt(Exception):
    """Stands in for the process being killed."""


class _KillAfterFirstCheckpoint(TrainerCallback):
    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step == 1:  # checkpoint-1 is on disk; step 2 has not started
            raise _Interrupt


@pytest.mark.slow
def test_resume_reaches_the_same_step_with_the_same_data_order(transformers_run, tmp_path):
    """Killed after checkpoint-1 and resumed: same steps, data order and wandb run; wandb gets metrics.jsonl's keys."""
    from wandb.sdk.wandb_run import Run

    from memora_rl.training.run import run

    logged: list[tuple[int | None, dict[str, Any]]] = []
    original_log = Run.log

    def spy(self: Run, data: dict[str, Any], step: int | None = None, **kwargs: Any) -> None:
        logged.append((step, dict(data)))
        original_log(self, data, step=step, **kwargs)

    config = tiny_config(tmp_path, "backend=transformers", "run_name=resumed", "logging.wandb=offline")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Run, "log", spy)
        with pytest.raises(_Interrupt):
            run(config, callbacks=[_KillAfterFirstCheckpoint()])
        assert (config.output_dir / "checkpoint-1").is_dir() and not (config.output_dir / "final").exists()
        wandb_id = (config.output_dir / "wandb_id").read_text().strip()
        result = run(config.model_copy(update={"resume": True}))
    assert result.final_step == 2
    assert (config.output_dir / "wandb_id").read_text().strip() == wandb_id  # one wandb run across the resume
    offline_runs = sorted((config.output_dir / "wandb").glob("offline-run-*"))
    assert len(offline_runs) == 2 and all(path.name.endswith(wandb_id) for path in offline_runs)
    jsonl = read_jsonl(result.metrics_path)
    assert [step for step, _ in logged] == [r["step"] for r in jsonl] == [1, 2]
    for (_, data), record in zip(logged, jsonl, strict=True):
        assert data == {key: value for key, value in record.items() if key != "step"}  # one name per metric
        assert "reward/total" in data and "train/loss" in data and not any(k.startswith("rewards/") for k in data)
    assert data_order(result.run_dir) == data_order(transformers_run.run_dir)
    resumed, straight = jsonl, read_jsonl(transformers_run.metrics_path)
    assert [r["step"] for r in resumed] == [1, 2]
    # step 1 moved the adapter away from the reference; a resume that lost it would show KL == 0 again
    assert straight[0]["train/grad_norm"] > 0 and straight[1]["train/kl"] > 0
    assert resumed[1]["train/kl"] > 0
    assert adapter_difference(result.adapter_dir, transformers_run.adapter_dir) < 1e-5  # the same final adapter


PROBE_TEXT = 'Question: where does Alice work?\n{"action": "expand", "ids": ["e3"]}'
"""A fixed text whose token logprobs the served adapter and the trainer's model are compared on."""


class _ServedAdapterProbe(TrainerCallback):
    """After each optimizer step (and the sync, which runs first), compare the served adapter's logprobs of
    `PROBE_TEXT` with the trainer's under the adapter it just produced, and with the base model's."""

    def __init__(self, base_url: str, run_name: str, tokenizer: Any) -> None:
        self.base_url, self.run_name = base_url, run_name
        self.ids = tokenizer(PROBE_TEXT, add_special_tokens=False)["input_ids"]
        self.steps: list[dict[str, float]] = []

    def served_logprobs(self, name: str) -> list[float]:
        """Prompt-token logprobs of `PROBE_TEXT` under the served model `name` (vLLM `echo`)."""
        import httpx

        body = {"model": name, "prompt": self.ids, "max_tokens": 1, "echo": True, "logprobs": 0, "temperature": 1.0}
        response = httpx.post(f"{self.base_url}/completions", json=body, timeout=60.0)
        response.raise_for_status()
        return response.json()["choices"][0]["logprobs"]["token_logprobs"][1 : len(self.ids)]

    def on_step_end(self, args, state, control, model=None, **kwargs):
        import torch

        from memora_rl.training.sync import adapter_name

        served = torch.tensor(self.served_logprobs(adapter_name(state.global_step, self.run_name)))
        ids = torch.tensor([self.ids])
        with torch.inference_mode():
            logits = model(input_ids=ids).logits[0, :-1].float()
            with model.disable_adapter():
                base_logits = model(input_ids=ids).logits[0, :-1].float()
        target = ids[0, 1:, None]
        trainer = logits.log_softmax(-1).gather(-1, target).squeeze(-1)
        base = base_logits.log_softmax(-1).gather(-1, target).squeeze(-1)
        self.steps.append({
            "served_vs_trainer": (served - trainer).abs().max().item(),
            "trainer_vs_base": (trainer - base).abs().max().item(),
        })  # fmt: skip


VLLM_TINY = ("backend=vllm",)
"""The vLLM runs: the tiny settings on the shared server."""


class _NudgeAdapter(TrainerCallback):
    """After each optimizer step, add seeded noise to every LoRA B, so the adapter moves at every step.

    A one-task step of the untrained model often has no reward variance (every sampled action
    invalid), hence no gradient: the served and trained adapters would agree trivially. The noise
    depends on the step only, so an interrupted and resumed run nudges exactly as a straight one.
    """

    def on_optimizer_step(self, args, state, control, model=None, **kwargs):
        import torch

        generator = torch.Generator().manual_seed(state.global_step + 1)  # global_step counts the step after this
        with torch.no_grad():
            for name, param in sorted(model.named_parameters()):
                if "lora_B" in name:
                    param.add_(0.02 * torch.randn(param.shape, generator=generator, dtype=param.dtype))


@pytest.fixture(scope="module")
def vllm_run(tmp_path_factory, vllm_server):
    """The uninterrupted two-step vLLM run on the shared server, with the served-adapter probe."""
    from memora_rl.llm.registry import load_tokenizer
    from memora_rl.training.run import run

    url = vllm_server.base_url
    probe = _ServedAdapterProbe(url, "vl", load_tokenizer("smollm2-135m-instruct"))
    config = tiny_config(tmp_path_factory.mktemp("runs"), *VLLM_TINY, f"server.url={url}", "run_name=vl")
    return run(config, callbacks=[_NudgeAdapter(), probe]), probe


@pytest.mark.slow
@pytest.mark.vllm
def test_vllm_backend_trains_two_steps_with_adapter_hot_swap(vllm_run, vllm_server):
    """Two steps on the shared server; after step k the server samples from adapter k, not k - 1 or the base."""
    from memora_rl.llm.server_api import list_served_models

    result, probe = vllm_run
    assert result.final_step == 2
    records = read_jsonl(result.metrics_path)
    assert [r["step"] for r in records] == [1, 2] and all(math.isfinite(r["train/loss"]) for r in records)
    assert all({"reward/correctness", "reward/format", "reward/cost", "reward/total"} <= set(r) for r in records)
    assert len(probe.steps) == 2
    for step in probe.steps:  # float32 on both sides: the served adapter is the trainer's, to rounding
        assert step["served_vs_trainer"] < 2e-3, probe.steps
    assert all(step["trainer_vs_base"] > 0.05 for step in probe.steps), probe.steps  # a stale adapter would show
    assert all(r["time/adapter_sync_mean_s"] < 10 for r in read_jsonl(result.metrics_path))
    served = [m["id"] for m in list_served_models(vllm_server.base_url)]
    assert not any(name.startswith("vl-policy_v") for name in served)  # every adapter of the run was unloaded


class _Proxy:
    """A TCP forwarder to the vLLM server; closing it is the server dying, as the trainer's client sees it."""

    def __init__(self, target_port: int) -> None:
        import socket
        import threading

        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sockets: list[Any] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import socket
        import threading

        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # closed
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            self.sockets += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: Any, sink: Any) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                end.close()

    def close(self) -> None:
        """Refuse new connections and cut every open one."""
        import socket

        self.listener.close()
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


class _KillServerAfterFirstCheckpoint(TrainerCallback):
    def __init__(self, proxy: _Proxy) -> None:
        self.proxy = proxy

    def on_save(self, args, state, control, **kwargs):
        if state.global_step == 1:  # checkpoint-1 is on disk; step 2's rollouts hit a dead server
            self.proxy.close()


@pytest.mark.slow
@pytest.mark.vllm
def test_vllm_run_whose_server_dies_fails_clearly_and_resumes_to_the_same_run(vllm_run, vllm_server, tmp_path):
    """The server dies after checkpoint-1: a RolloutError or ServerError naming the checkpoint and `--resume`,
    not a hang; resumed on a live server, the run ends at step 2 with the uninterrupted run's data order."""
    from urllib.parse import urlparse

    from memora_rl.errors import RolloutError, ServerError
    from memora_rl.training.run import run

    straight, _ = vllm_run
    proxy = _Proxy(urlparse(vllm_server.base_url).port)
    config = tiny_config(tmp_path, *VLLM_TINY, f"server.url=http://127.0.0.1:{proxy.port}/v1", "run_name=vr")
    with pytest.raises((RolloutError, ServerError)) as error:
        run(config, callbacks=[_NudgeAdapter(), _KillServerAfterFirstCheckpoint(proxy)])
    assert "checkpoint-1" in str(error.value) and "--resume" in str(error.value)
    assert (config.output_dir / "checkpoint-1").is_dir() and not (config.output_dir / "final").exists()

    live = config.model_copy(
        update={"resume": True, "server": config.server.model_copy(update={"url": vllm_server.base_url})}
    )
    result = run(live, callbacks=[_NudgeAdapter()])
    assert result.final_step == 2
    assert data_order(result.run_dir) == data_order(straight.run_dir)
    assert [r["step"] for r in read_jsonl(result.metrics_path)] == [1, 2]
    step = adapter_distance(straight.run_dir / "checkpoint-1", straight.adapter_dir)
    assert adapter_distance(result.adapter_dir, straight.adapter_dir) < ROUNDING * step  # seeded: the same run

    def second_batch(run_dir: Path) -> list[list[str]]:
        return [r["actions"] for r in read_jsonl(run_dir / "samples.jsonl") if r["step"] == 1]

    assert second_batch(result.run_dir) == second_batch(straight.run_dir)  # the resumed step samples what it did
