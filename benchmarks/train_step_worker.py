"""One row of the GRPO step benchmark: its settings and workload, the replayed episodes, and the worker that trains it.

`benchmarks.train_step` runs each job here in a fresh `python -m benchmarks.train_step --worker SPEC`
process (so a row's peak RSS is its own): `play` records a workload's episodes, `train` measures one row.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.common import REPO_ROOT
from memora_rl.training.distributed import peak_rss_gb

QUICKSTART = REPO_ROOT / "configs" / "grpo" / "tiny.yaml"
MODEL = "smollm2-135m-instruct"


@dataclass(frozen=True)
class Workload:
    """What one optimizer step trains on: G episodes of one task, their turn and token limits, the layout."""

    name: str
    generations: int
    turns: int
    max_new_tokens: int
    max_completion_tokens: int
    compact: bool
    env_overrides: tuple[str, ...] = ()
    """`make_env` overrides of the synthetic env (e.g. `env.frontier_limit=5`)."""


@dataclass(frozen=True)
class Settings:
    """Trainer settings of one row (`memora_rl.training.trainer.StepSettings`, plus TRL's own logprob pass)."""

    name: str
    micro_batch_size: int | None
    share_prompt_prefix: bool
    gradient_checkpointing: bool
    checkpoint_every_n_layers: int = 1
    fast_logprobs: bool = True


@dataclass
class Row:
    """One measured configuration."""

    settings: str
    workload: str
    steps_s: list[float] = field(default_factory=list)
    steps_cpu_s: list[float] = field(default_factory=list)
    """CPU seconds of the process (all threads) per step: steadier than wall time on a shared machine."""
    threads: int = 1
    device: str = "cpu"
    peak_gb: float = 0.0
    """Peak RSS of the process on CPU; peak memory torch allocated on the GPU on CUDA."""
    loaded_gb: float = 0.0
    prompt_tokens: float = 0.0
    completion_tokens: float = 0.0
    policy_tokens: float = 0.0
    turns: float = 0.0
    error: str | None = None

    @property
    def step_s(self) -> float:
        """Median seconds per optimizer step."""
        return statistics.median(self.steps_s) if self.steps_s else float("nan")

    @property
    def step_cpu_s(self) -> float:
        """Median CPU seconds per optimizer step."""
        return statistics.median(self.steps_cpu_s) if self.steps_cpu_s else float("nan")

    @property
    def quiet_s(self) -> float:
        """Wall seconds per step on an otherwise idle machine, estimated as CPU seconds / torch threads."""
        return self.step_cpu_s / self.threads


# ---- episodes ----------------------------------------------------------------------------------


class ScriptedGenerator:
    """A seeded stand-in for the policy: expand linked ids, refine or stop, so lengths and rewards vary."""

    def __init__(self, tokenizer: Any, stop_id: int, turns: int, seed: int) -> None:
        self.tokenizer = tokenizer
        self.stop_id = stop_id
        self.turns = turns
        self.random = random.Random(seed)

    def generate(
        self, prompts: list[list[int]], max_new_tokens: int, temperature: float, keys: list[Any] | None = None
    ) -> list[Any]:
        """One action per prompt, tokenized and closed with the end-of-turn id."""
        from memora_rl.training.generation import Generated

        results = []
        for ids in prompts:
            text = self.tokenizer.decode(ids)
            turn = text.count("<|im_start|>assistant") - 3  # the few-shot turns and the generation prompt
            action = self._action(text.rsplit("<|im_start|>user", 1)[-1], last=turn >= self.turns - 1)
            tokens = [*self.tokenizer.encode(action, add_special_tokens=False), self.stop_id][:max_new_tokens]
            reason = "stop" if tokens[-1] == self.stop_id else "length"
            results.append(Generated(tokens, [-0.5] * len(tokens), reason))
        return results

    def _action(self, observation: str, last: bool) -> str:
        """Stop (half the time on the last turn, 10% before); else expand one or two linked ids (70%) or refine."""
        linked = re.split(r"^(?:Frontier|Linked)", observation, flags=re.M)[-1]
        ids = re.findall(r"^\[?(e\d+)\]?\s", linked, flags=re.M)
        if self.random.random() < (0.5 if last else 0.1):
            return '{"action": "stop"}'
        if ids and self.random.random() < 0.7:
            chosen = self.random.sample(ids, k=min(len(ids), self.random.choice([1, 2])))
            return json.dumps({"action": "expand", "ids": chosen})
        words = re.findall(r"[A-Za-z]+", observation)
        return json.dumps({"action": "refine", "query": " ".join(self.random.sample(words, k=min(4, len(words))))})


def env_episodes(workload: Workload, steps: int, seed: int) -> dict[str, Any]:
    """Play `steps` groups of G scripted episodes on distinct synthetic train tasks; ids, masks, rewards."""
    from memora_rl.env.registry import make_env
    from memora_rl.llm.registry import load_tokenizer
    from memora_rl.policy.chat import chat_opener
    from memora_rl.training.rewards import judge_weights
    from memora_rl.training.rollout import EpisodePlayer, RolloutSettings, end_of_turn_ids

    tokenizer = load_tokenizer(MODEL)
    overrides = [f"env.compact={str(workload.compact).lower()}", *workload.env_overrides]
    env, tasks = make_env("synthetic", split="train", overrides=overrides, tokenizer=tokenizer)
    limits = RolloutSettings(workload.turns, workload.max_new_tokens, workload.max_completion_tokens)
    player = EpisodePlayer(tokenizer, chat_opener(env.config), limits)
    stop_id = end_of_turn_ids(tokenizer, player.turn_format)[0]
    groups = []
    for step in range(steps):
        task = tasks[(seed + step) % len(tasks)]
        generator = ScriptedGenerator(tokenizer, stop_id, workload.turns, seed * 1000 + step)
        episodes = [player.play([player.start(env, task)], generator, 1.0)[0] for _ in range(workload.generations)]
        groups.append([_episode_record(episode) for episode in episodes])
    return {"weights": judge_weights(env.config.judge), "groups": groups}


def _episode_record(episode: Any) -> dict[str, Any]:
    """The parts of a played episode the trainer needs, as JSON."""
    return {
        "task_id": episode.task.id,
        "prompt_ids": episode.prompt_ids,
        "completion_ids": episode.completion_ids,
        "logprobs": episode.logprobs,
        "env_mask": episode.env_mask,
        "reward_components": episode.reward_components,
        "turns": len(episode.actions),
    }


def synthetic_episodes(workload: Workload, steps: int, seed: int, sizes: argparse.Namespace) -> dict[str, Any]:
    """Random-id episodes of the given sizes (prompt, then turns of action + observation), random rewards."""
    rng = random.Random(seed)
    groups = []
    for step in range(steps):
        prompt = [rng.randrange(100, 49_000) for _ in range(sizes.prompt_tokens)]
        group = []
        for _ in range(workload.generations):
            completion, mask = [], []
            for turn in range(workload.turns):
                completion += [rng.randrange(100, 49_000) for _ in range(sizes.action_tokens)]
                mask += [1] * sizes.action_tokens
                if turn < workload.turns - 1:
                    completion += [rng.randrange(100, 49_000) for _ in range(sizes.observation_tokens)]
                    mask += [0] * sizes.observation_tokens
            reward = {"correctness": float(rng.random() < 0.5), "total": 0.0}
            group.append({"task_id": f"s{step}", "prompt_ids": prompt, "completion_ids": completion,
                          "logprobs": [-0.5] * len(completion), "env_mask": mask,
                          "reward_components": reward, "turns": workload.turns})  # fmt: skip
        groups.append(group)
    return {"weights": {"correctness": 1.0, "total": 0.0}, "groups": groups}


# ---- one row (worker process) ------------------------------------------------------------------


class ReplayRollout:
    """TRL `rollout_func` that serves the recorded episodes of the requested task, in order."""

    def __init__(self, groups: list[list[dict[str, Any]]]) -> None:
        self.pending = {f"[{group[0]['task_id']}/{index}]": list(group) for index, group in enumerate(groups)}
        self.served: list[list[dict[str, Any]]] = []

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        """The next recorded episode for each (group-repeated) prompt."""
        episodes = [self.pending[str(prompt)].pop(0) for prompt in prompts]
        self.served.append(episodes)
        keys = ("prompt_ids", "completion_ids", "logprobs", "env_mask", "reward_components")
        return {key: [episode[key] for episode in episodes] for key in keys}


def rss_gb() -> float:
    """Resident set size of this process now, in GB (Linux /proc)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1e6
    return 0.0


def guard_memory(limit_gb: float) -> None:
    """Exit the worker (status 3) once its RSS passes `limit_gb`, before it starves a shared machine."""

    def watch() -> None:
        while True:
            if rss_gb() > limit_gb:
                print(json.dumps({"error": f"RSS passed {limit_gb:g} GB"}), flush=True)
                os._exit(3)
            time.sleep(0.2)

    threading.Thread(target=watch, daemon=True).start()


def run_row(
    settings: Settings,
    workload: Workload,
    episodes: dict[str, Any],
    steps: int,
    seed: int,
    importance: bool = True,
    device: str = "cpu",
) -> Row:
    """Train `steps` optimizer steps on the recorded episodes with `settings`; time and RSS per step.

    `importance`: as with the vLLM backend (the default), TRL's importance-sampling correction is
    on, which costs one more no-gradient policy pass per step (`memora_rl.training.importance`).
    """
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback

    from memora_rl.config import load_config
    from memora_rl.training.config import TrainConfig
    from memora_rl.training.importance import enable_rollout_importance_sampling
    from memora_rl.training.rewards import make_component_rewards
    from memora_rl.training.trainer import StepSettings, build_grpo_config, build_policy, build_trainer

    row = Row(settings.name, workload.name, threads=torch.get_num_threads(), device=device)
    groups = episodes["groups"][:steps]
    rollout = ReplayRollout(groups)
    with tempfile.TemporaryDirectory(prefix="memora-train-step-") as root:
        overrides = [
            f"grpo.num_generations={workload.generations}",
            f"grpo.per_device_batch_size={workload.generations}",
            f"grpo.max_steps={steps}",
            f"grpo.max_turns={workload.turns}",
            f"grpo.max_new_tokens={workload.max_new_tokens}",
            f"grpo.max_completion_tokens={workload.max_completion_tokens}",
            f"output_root={root}",
            f"seed={seed}",
            "save_steps=100000",
            "logging.wandb=disabled",
            f"backend={'vllm' if importance else 'transformers'}",  # no server starts; transformers: no IS pass
        ]
        config = load_config(TrainConfig, QUICKSTART, overrides)
        model, tokenizer, lora = build_policy(config, device)
        step = StepSettings(settings.micro_batch_size, settings.share_prompt_prefix,
                            settings.gradient_checkpointing, settings.checkpoint_every_n_layers)  # fmt: skip
        funcs, weights = make_component_rewards(episodes["weights"])
        args = build_grpo_config(config, weights, device, step)
        args.shuffle_dataset = False
        dataset = Dataset.from_list([{"prompt": prompt} for prompt in rollout.pending])

        class Timer(TrainerCallback):
            def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                self.started, self.started_cpu = time.perf_counter(), time.process_time()

            def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                row.steps_s.append(time.perf_counter() - self.started)
                row.steps_cpu_s.append(time.process_time() - self.started_cpu)

        trainer = build_trainer(
            model, lora, tokenizer, args, dataset, funcs, rollout, [Timer()], step.share_prompt_prefix
        )
        trainer.fast_logprobs = settings.fast_logprobs
        if importance:
            enable_rollout_importance_sampling(trainer)
        row.loaded_gb = rss_gb()
        trainer.train()
    row.peak_gb = torch.cuda.max_memory_allocated() / 1e9 if device == "cuda" else peak_rss_gb()
    served = [episode for batch in rollout.served for episode in batch]
    per_step = len(served) / max(1, len(rollout.served))
    row.prompt_tokens = sum(len(e["prompt_ids"]) for e in served) / len(served) * per_step
    row.completion_tokens = sum(len(e["completion_ids"]) for e in served) / len(served) * per_step
    row.policy_tokens = sum(sum(e["env_mask"]) for e in served) / len(served) * per_step
    row.turns = statistics.fmean(e["turns"] for e in served)
    return row


def worker(spec: dict[str, Any]) -> None:
    """Subprocess entry: play episodes, or measure one row; print one JSON line."""
    import torch

    torch.manual_seed(spec["seed"])
    if spec.get("threads"):
        torch.set_num_threads(spec["threads"])
    if spec["job"] == "play":
        workload = Workload(**{**spec["workload"], "env_overrides": tuple(spec["workload"]["env_overrides"])})
        if spec["source"] == "env":
            result = env_episodes(workload, spec["steps"], spec["seed"])
        else:
            result = synthetic_episodes(workload, spec["steps"], spec["seed"], argparse.Namespace(**spec["sizes"]))
        Path(spec["out"]).write_text(json.dumps(result))
        print(json.dumps({"ok": True}))
        return
    guard_memory(spec["max_rss_gb"])
    episodes = json.loads(Path(spec["episodes"]).read_text())
    settings, workload = Settings(**spec["settings"]), Workload(**spec["workload"])
    row = run_row(settings, workload, episodes, spec["steps"], spec["seed"], spec["importance"], spec["device"])
    print(json.dumps(asdict(row)))
