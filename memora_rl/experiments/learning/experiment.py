"""The learning experiment: train each seed, play every policy on held-out tasks, and compare by dominance."""

from __future__ import annotations

import argparse
import contextlib
import functools
import logging
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from memora_rl.experiments.learning.margins import (
    CATEGORY_PREFIX,
    CATEGORY_TOKENS_PREFIX,
    TASK_PREFIX,
    bracket_settings,
    dominance_rows,
    dominating_point,
)
from memora_rl.experiments.learning.options import parse_args
from memora_rl.experiments.learning.play import (
    EvalContext,
    play_baseline,
    play_llm,
    play_oracle,
    play_ranker_teacher,
    policy_generators,
)
from memora_rl.experiments.learning.record import learning_record
from memora_rl.experiments.learning.report import (
    BASE,
    GRPO,
    HEURISTIC,
    ORACLE,
    SEMANTIC,
    TEACHER,
    WARM,
    command_line,
    grpo_gain,
    summarize_policy,
    write_outputs,
)
from memora_rl.experiments.learning.runs import (
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
from memora_rl.experiments.records import write_record

logger = logging.getLogger(__name__)

BASE_EVAL_FILE = "base_eval.json"
"""Cached evaluation of the prompted base model, in `--runs-dir`."""
POINT_PREFIXES = (CATEGORY_PREFIX, CATEGORY_TOKENS_PREFIX, TASK_PREFIX)
"""Metric key prefixes a baseline point keeps: per-category figures and per-task recall."""


def point_from(
    ctx: EvalContext, setting: str, value: float, components: Sequence[Mapping[str, float]]
) -> dict[str, Any]:
    """A curve's point from its episodes' judge components: tokens, recall, per category and per task."""
    metrics = ctx.metrics(components)
    kept = ("context_tokens", "evidence_recall")
    point = {key: v for key, v in metrics.items() if key in kept or key.startswith(POINT_PREFIXES)}
    return {"setting": setting, "value": value, **point}


def measure_point(ctx: EvalContext, curve: str, value: float) -> dict[str, Any]:
    """One baseline point: semantic at `initial_top_k` = `value`, or the heuristic at budget `value`."""
    if curve == SEMANTIC:
        setting, override = f"k={int(value)}", f"env.initial_top_k={int(value)}"
    else:
        setting, override = f"b={value:g}", f"env.budget={value:g}"
    return point_from(ctx, setting, value, play_baseline(ctx, curve, [override]))


def baseline_curves(
    ctx: EvalContext, semantic_k: Sequence[int], budgets: Sequence[float]
) -> dict[str, list[dict[str, Any]]]:
    """Semantic at each `initial_top_k` and the heuristic at each budget: tokens, recall, per category, per task."""
    return {
        SEMANTIC: [measure_point(ctx, SEMANTIC, float(k)) for k in semantic_k],
        HEURISTIC: [measure_point(ctx, HEURISTIC, float(budget)) for budget in budgets],
    }


def bracket_curves(
    ctx: EvalContext, curves: dict[str, list[dict[str, Any]]], tokens: Sequence[float], rounds: int
) -> None:
    """Measure extra settings until each curve brackets every policy's mean `tokens` (at most `rounds` a policy).

    A curve that ends below a policy's tokens is extended (twice its largest setting), so a point with at
    least the policy's tokens exists to read the margin against; then settings are bisected toward it, in whole
    units: k is a count, and the heuristic spends its budget a whole expand (one unit an id) at a time, so a
    budget between two units plays as the lower one.
    """
    for target in tokens:
        for curve, points in curves.items():
            for _ in range(rounds):
                measured = [(float(p["value"]), float(p["context_tokens"])) for p in points]
                if dominating_point(points, target) is None:
                    wanted = [2 * max(value for value, _ in measured)]
                else:
                    wanted = bracket_settings(measured, target, integer=True)
                wanted = [value for value in wanted if value not in {v for v, _ in measured}]
                if not wanted:
                    break
                logger.info("%s: measuring %s to bracket %.0f tokens", curve, wanted, target)
                points += [measure_point(ctx, curve, value) for value in wanted]


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
    experiment stopped during an evaluation keeps what was played; a policy's generator starts only when some
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
        results[label] = ctx.metrics(episodes)
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
    from memora_rl.policy.chat import FEW_SHOT_OVERRIDE

    key = eval_key(ctx, max_new_tokens, model=config.model)
    key["env_overrides"] = [*ctx.env_overrides, FEW_SHOT_OVERRIDE]

    def play(tasks: list[Any], keep: Keep) -> None:
        with policy_generators(ctx, config.model, lora_rank=config.lora.r) as generators:
            play_llm(ctx, generators["base"], max_new_tokens, BASE, (FEW_SHOT_OVERRIDE,), tasks=tasks, keep=keep)

    cache = runs_dir / BASE_EVAL_FILE if runs_dir else None
    return ctx.metrics(cached_episodes(cache, key, ctx.tasks, "prompted base", play))


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
    per_policy[SEMANTIC] = [(None, ctx.metrics(play_baseline(ctx, SEMANTIC)))]
    per_policy[HEURISTIC] = [(None, ctx.metrics(play_baseline(ctx, HEURISTIC)))]
    ws = config.warm_start
    if ws.enabled and ws.teacher == "ranker":
        teacher = play_ranker_teacher(ctx, ws.scorer_threshold, ws.scorer_max_expands)
        per_policy[TEACHER] = [(None, ctx.metrics(teacher))]
    if not args.skip_oracle:
        per_policy[ORACLE] = [(None, ctx.metrics(play_oracle(ctx, ws.beam_width, ws.max_refines)))]
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
    order = [BASE, WARM, GRPO, SEMANTIC, HEURISTIC, TEACHER, ORACLE]
    policies = {name: summarize_policy(per_policy[name]) for name in order if name in per_policy}
    curves = baseline_curves(ctx, args.semantic_k, args.heuristic_budgets)
    learned = [name for name in (BASE, WARM, GRPO, TEACHER) if name in policies]  # the baselines bracket these
    bracket_curves(ctx, curves, [policies[name]["mean"]["context_tokens"] for name in learned], args.bracket_rounds)
    report_ids = ctx.task_ids
    report: dict[str, Any] = {
        "command": command_line(argv),
        "args": {key: (str(value) if isinstance(value, Path) else value) for key, value in vars(args).items()},
        "config": str(args.config),
        "env": config.env,
        "env_overrides": list(config.env_overrides),
        "frontier_ranker": ctx.env.config.frontier_ranker,
        "split": args.eval_split,
        "tasks": len(tasks),
        "task_ids": report_ids,
        "max_turns": ctx.max_turns,
        "llm_turns": ctx.llm_turns,
        "max_new_tokens": max_new_tokens,
        "generator": None if args.no_llm else args.generator,
        "timings": ctx.timings,
        "initial_recall": policies[SEMANTIC]["mean"]["initial_recall"],
        "seeds": [] if args.skip_train else list(args.seeds),
        "policies": policies,
        "curves": curves,
        "margins": dominance_rows(
            {name: p["mean"] for name, p in policies.items()},
            curves,
            dict(zip(report_ids, ctx.categories, strict=True)),
        ),
        "training": training,
    }
    if GRPO in policies:
        report["grpo_gain"] = grpo_gain(policies)
    return report


def main(argv: Sequence[str]) -> tuple[dict[str, Any], str]:
    """Run the experiment with command-line arguments `argv`, write its outputs; returns the report and Markdown."""
    args = parse_args(argv)
    report = build_report(args, argv)
    markdown = write_outputs(report, args.out)
    if args.record:
        path = write_record(learning_record(report, args.record), figure=args.out / "recall_vs_tokens.png")
        logger.info("wrote the result record %s", path)
    return report, markdown
