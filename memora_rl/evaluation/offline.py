"""Offline evaluation: run one policy over an env's held-out tasks; write records, results, tables and plots.

`run_eval(EvalConfig(...))` is what `memora-rl eval` and `eval/offline.py` call. An output
folder holds `records.jsonl` (one line per question, appended as questions finish: a rerun
skips the task ids already recorded), `results.json`, `results.md` and PNG plots. With an
answerer endpoint, each question's context is answered and judged (answers cached on disk,
see `EvalConfig.llm_cache`), and `llm_usage.json` sums the answerer's and judge's tokens over
the folder's invocations. `compare_eval_dirs` puts finished runs side by side with paired
bootstrap intervals. With `EvalConfig.shard`, a run plays one shard of the tasks; `shards.merge_shards`
joins the shards' folders into one run.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memora_rl.async_bridge import run_sync
from memora_rl.data.records import Task
from memora_rl.errors import EvalError
from memora_rl.evaluation.config import EvalConfig, shard_jobs
from memora_rl.evaluation.metrics import OVERALL, summarize_by_category
from memora_rl.evaluation.policies import (
    PolicySpec,
    make_context_policy,
    make_graph_policy,
    needs_graph_store,
    parse_policy_spec,
    use_constrained_decoding,
)
from memora_rl.evaluation.records import QuestionRecord
from memora_rl.evaluation.report import RECORDS_FILE, read_records, write_run_plots, write_run_report

if TYPE_CHECKING:
    from memora_rl.evaluation.records import Throughput
    from memora_rl.judge.answer import AnswerGrader

logger = logging.getLogger(__name__)

RUN_FILE = "run.json"
"""What run an output folder holds (policy, env, split, overrides, export id, answerer): resuming checks it."""
USAGE_FILE = "llm_usage.json"
"""Answerer and judge LLM usage by phase, summed over the folder's invocations (tokens the endpoints reported)."""


@dataclass(frozen=True)
class EvalRun:
    """Where a finished evaluation wrote its outputs, and its metrics."""

    out: Path
    policy: str
    metrics: dict[str, dict]
    resumed: int
    """Questions already recorded before this call (skipped)."""
    llm_usage: dict[str, dict[str, float]] = field(default_factory=dict)
    """Answerer and judge usage by phase, summed over the folder's invocations (empty without an answerer)."""


def _check_split(env_name: str, split: str, overrides: list[str]) -> None:
    """Refuse an env whose spec gives the requested split no share."""
    from memora_rl.env.registry import resolve_env_spec

    spec = resolve_env_spec(env_name, overrides)
    if split in ("train", "validation", "test") and getattr(spec.split, split) <= 0:
        raise EvalError(
            f"Env {env_name!r} has no {split} split (its split shares are train={spec.split.train}, "
            f"validation={spec.split.validation}, test={spec.split.test}); evaluate an env with held-out tasks "
            "or pass --split validation."
        )


def _claim_folder(out: Path, identity: dict[str, Any], restart: bool) -> None:
    """Record what run the folder holds (`run.json`); resuming a folder of another run is an error."""
    import json

    path = out / RUN_FILE
    if restart:
        for name in (RECORDS_FILE, USAGE_FILE, RUN_FILE):
            (out / name).unlink(missing_ok=True)
    if path.is_file():
        previous = json.loads(path.read_text())
        if previous != identity:
            changed = sorted(key for key in identity.keys() | previous.keys() if previous.get(key) != identity.get(key))
            raise EvalError(
                f"{out} holds an eval run with other settings ({', '.join(changed)} differ); pass --restart to "
                "discard it, or another --out."
            )
    path.write_text(json.dumps(identity, indent=1, sort_keys=True))


def _recorded(records_path: Path, policy: str) -> list[QuestionRecord]:
    """Records already in the run folder (torn last line dropped and rewritten), checked to be this policy's."""
    if not records_path.is_file():
        return []
    records = read_records(records_path)
    others = sorted({record.policy for record in records if record.policy != policy})
    if others:
        raise EvalError(
            f"{records_path.parent} holds records of policy {', '.join(others)}, not {policy!r}; "
            "pass another --out (or delete the folder)."
        )
    records_path.write_text("".join(record.model_dump_json() + "\n" for record in records))
    return records


def answerer_identity(config: EvalConfig) -> dict[str, Any]:
    """What shapes the answer metrics of a run (endpoints, models, token limits); empty without an answerer."""
    if not config.answers:
        return {}
    return {
        "answerer": {
            "base_url": config.answerer_base_url,
            "model": config.answerer_model,
            "judge_base_url": config.judge_base_url or config.answerer_base_url,
            "judge_model": config.judge_model or config.answerer_model,
            "answer_max_tokens": config.answer_max_tokens,
            "judge_max_tokens": config.judge_max_tokens,
        }
    }


def answer_grader(config: EvalConfig) -> AnswerGrader | None:
    """The answerer/judge pair of any OpenAI-compatible endpoints (cached on disk), or None without an answerer."""
    if not config.answers:
        return None
    from memora_rl.judge.answer import AnswerGrader
    from memora_rl.llm.client import LLMClient, LLMConfig

    def client(base_url: str, model: str, max_tokens: int) -> LLMClient:
        return LLMClient(LLMConfig(base_url=base_url, model=model, max_tokens=max_tokens, cache_path=config.llm_cache))

    answerer = client(config.answerer_base_url, config.answerer_model, config.answer_max_tokens)  # type: ignore[arg-type]
    judge = None
    if config.judge_base_url or config.judge_model:
        judge = client(
            config.judge_base_url or config.answerer_base_url,  # type: ignore[arg-type]
            config.judge_model or config.answerer_model,  # type: ignore[arg-type]
            config.judge_max_tokens,
        )
    return AnswerGrader(
        answerer, judge, answer_max_tokens=config.answer_max_tokens, judge_max_tokens=config.judge_max_tokens
    )


def add_usage(out: Path, usage: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Add one invocation's LLM usage by phase to the folder's `llm_usage.json`; returns the sums.

    Returns an empty dict (and writes nothing) when no invocation of the folder used an LLM.
    """
    import json

    path = out / USAGE_FILE
    totals: dict[str, dict[str, float]] = json.loads(path.read_text()) if path.is_file() else {}
    for phase, counters in usage.items():
        summed = totals.setdefault(phase, {})
        for name, value in counters.items():
            summed[name] = summed.get(name, 0) + value
    if totals:
        path.write_text(json.dumps(totals, indent=1, sort_keys=True))
    return totals


def _limit(tasks: list[Task], config: EvalConfig) -> list[Task]:
    """A seeded sample of `limit` tasks stratified by category and conversation (`memora_rl.data.sample`).

    Raises:
        EvalError: the split is empty (the message names the env and split).
    """
    from memora_rl.data.sample import sample_tasks

    tasks = sample_tasks(tasks, config.limit, seed=config.seed)
    if not tasks:
        raise EvalError(f"Env {config.env!r} has no {config.split} tasks to evaluate; pick another env or split.")
    return tasks


def _load_tokenizer(name: str) -> Any:
    """The tokenizer that counts baseline context tokens."""
    from memora_rl.llm.registry import load_tokenizer

    return load_tokenizer(name)


def _eval_graph(
    config: EvalConfig, spec: PolicySpec, records_path: Path, done: set[str], grader: AnswerGrader | None
) -> tuple[list[Task], Throughput]:
    """Play the graph policy over the split's remaining tasks; returns all tasks of the (limited) split."""
    from memora_rl.env.registry import resolve_env_spec
    from memora_rl.evaluation.graphs import make_eval_env
    from memora_rl.evaluation.playback import play_graph_tasks

    env_config = resolve_env_spec(config.env, config.env_overrides).env
    policy, tokenizer = make_graph_policy(
        spec, env_config, base_url=config.base_url, seed=config.seed,
        max_new_tokens=config.max_new_tokens, constrained=config.constrained,
    )  # fmt: skip
    tokenizer = tokenizer or _load_tokenizer(config.tokenizer)
    from memora_rl.judge import TrajectoryJudge

    judge = TrajectoryJudge(env_config.judge)  # model-free (evidence recall); shared by every worker's env
    picked: list[tuple[int, Task]] = []  # the shard's tasks with their position in the sample (episode seeds)

    def choose(split: list[Task]) -> list[Task]:
        picked.extend(shard_jobs(_limit(split, config), config.shard))
        return [task for _, task in picked]

    env, tasks = make_eval_env(  # builds only the graphs of the chosen tasks, with a progress bar
        config.env, config.split, config.env_overrides, choose, tokenizer=tokenizer, judge=judge
    )
    jobs = [(index, task) for index, task in picked if task.id not in done]
    envs = [env] + [env.sibling() for _ in range(min(config.concurrency, max(len(jobs), 1)) - 1)]
    play = play_graph_tasks(envs, jobs, policy, records_path, grader, config.seed, config.latency_questions)

    async def close() -> None:
        await policy.aclose()
        if grader is not None:
            await grader.aclose()

    return tasks, run_sync(play, cleanup=close)


def _eval_context(
    config: EvalConfig, spec: PolicySpec, records_path: Path, done: set[str], grader: AnswerGrader | None
) -> tuple[list[Task], Throughput]:
    """Run a context baseline over the split's remaining tasks.

    No graph is built for RAG and full context; NEMORI retrieval reads the env's cached store, with
    the graphs of the chosen tasks built first (`make_eval_env` does the same for graph policies).
    """
    from memora_rl.env.registry import graph_cache_path, resolve_env_spec, select_conversations, split_tasks
    from memora_rl.env.sources import load_corpus
    from memora_rl.evaluation.playback import play_context_tasks

    env_spec = resolve_env_spec(config.env, config.env_overrides)
    corpus = select_conversations(env_spec, load_corpus(env_spec.data))
    picked = shard_jobs(_limit(split_tasks(env_spec, corpus, config.split), config), config.shard)
    tasks = [task for _, task in picked]
    jobs = [(index, task) for index, task in picked if task.id not in done]
    store = None
    if needs_graph_store(spec):
        from memora_rl.evaluation.graphs import build_needed_graphs, corpus_for_tasks
        from memora_rl.memory import open_store

        store = open_store(graph_cache_path(env_spec), config=env_spec.store)
        build_needed_graphs(env_spec, corpus_for_tasks(corpus, tasks), store)
    baseline = make_context_policy(spec, _load_tokenizer(config.tokenizer), store)
    conversations = {conversation.id: conversation for conversation in corpus.conversations}
    play = play_context_tasks(
        baseline, conversations, jobs, records_path, grader, config.concurrency, config.latency_questions
    )
    try:
        return tasks, run_sync(play, cleanup=grader.aclose if grader is not None else None)
    finally:
        if store is not None:
            store.close()


def with_trained_env(config: EvalConfig, trained_overrides: Sequence[str]) -> EvalConfig:
    """An export is evaluated in the env settings it was trained with: its run's overrides, then `--set`.

    A policy trained on compact observations without the few-shot episode sees another prompt in
    the env's defaults, so evaluating it there measures the prompt change, not the policy.
    `trained_overrides` is `ExportManifest.overrides_for(config.env)`: empty on another env.
    """
    if not trained_overrides:
        return config
    added = [override for override in trained_overrides if override not in config.env_overrides]
    if added:
        logger.info("Evaluating the export in its training env settings: %s", ", ".join(added))
    return config.model_copy(update={"env_overrides": [*added, *config.env_overrides]})


def run_eval(config: EvalConfig) -> EvalRun:
    """Evaluate `config.policy` on `config.env`'s split; resumes a run folder that already holds records.

    Raises:
        EvalError: unknown policy name (lists the valid ones), an env without the split, or an out
            folder holding another policy's records.
        ExportError: the policy is a folder that is not a memora-rl export.
        ConfigError: unknown env name or bad env override.
    """
    spec = parse_policy_spec(config.policy)
    export_id = None
    if spec.kind == "export":
        from memora_rl.policy.export_folder import load_export

        manifest = load_export(Path(spec.target)).manifest  # fails before anything is written
        export_id = manifest.export_id
        config = with_trained_env(config, manifest.overrides_for(config.env))
    _check_split(config.env, config.split, config.env_overrides)
    identity: dict[str, Any] = {"policy": spec.name, "env": config.env, "split": config.split}
    identity["env_overrides"] = list(config.env_overrides)
    identity.update(answerer_identity(config))
    if export_id is not None:
        identity["export_id"] = export_id
    if config.shard is not None:  # a shard's tasks follow from the sample: `eval merge` checks its siblings' match
        identity.update(shard=config.shard, limit=config.limit, seed=config.seed)
    out = config.output_dir(spec)
    out.mkdir(parents=True, exist_ok=True)
    _claim_folder(out, identity, config.restart)
    records_path = out / RECORDS_FILE
    done = {record.task_id for record in _recorded(records_path, spec.name)}
    if done:
        logger.info("Resuming %s: %d questions already recorded.", out, len(done))
    runner = _eval_context if spec.kind == "context_baseline" else _eval_graph
    grader = answer_grader(config)
    tasks, throughput = runner(config, spec, records_path, done, grader)
    usage = add_usage(out, grader.usage() if grader is not None else {})
    wanted = {task.id for task in tasks}
    records = [record for record in read_records(records_path) if record.task_id in wanted]
    meta = {"policy": spec.name, "policy_spec": config.policy, "env": config.env, "split": config.split}
    meta.update({"limit": config.limit, "questions": len(records), "env_overrides": config.env_overrides})
    meta.update({**answerer_identity(config), "llm_usage": usage})
    if spec.kind in ("prompted", "export"):  # whether the LLM's actions were decoded under the action schema
        meta["constrained"] = use_constrained_decoding(spec, config.base_url, config.constrained)
    if config.shard is not None:
        meta["shard"] = config.shard
    metrics = write_run_report(out, records, meta, throughput)
    logger.info("Evaluated %s on %d %s questions of %s -> %s", spec.name, len(records), config.split, config.env, out)
    return EvalRun(out=out, policy=spec.name, metrics=metrics, resumed=len(done), llm_usage=usage)


def _run_name(run_dir: Path) -> str:
    """A run's policy name from its results.json, else its folder name."""
    import json

    from memora_rl.evaluation.report import RESULTS_FILE

    results = run_dir / RESULTS_FILE
    if results.is_file():
        name = json.loads(results.read_text()).get("meta", {}).get("policy")
        if name:
            return str(name)
    return run_dir.name


def compare_eval_dirs(run_dirs: list[Path], out: Path | None = None, seed: int = 0) -> tuple[str, Path]:
    """Side-by-side Markdown tables of eval runs and their plots.

    The tables: overall metrics on the shared questions, paired deltas against the first run, and
    per category (abstention apart) the judge score, F1, BLEU-1, context tokens and evidence recall.

    Only questions every run recorded are compared; the table ends with the questions left out of
    each run, so a 308-question run shown as n = 40 says why.

    Returns:
        The Markdown table and the folder holding `compare.md` and the PNG plots.
    """
    from memora_rl.evaluation.compare import check_unique_task_ids, compare_runs, split_shared_tasks
    from memora_rl.evaluation.report import category_comparison_table, comparison_table, dropped_tasks_note

    if len(run_dirs) < 2:
        raise EvalError(f"compare needs at least two eval folders, got {len(run_dirs)}.")
    names = [_run_name(path) for path in run_dirs]
    if len(set(names)) < len(names):
        names = [f"{name} ({path.name})" for name, path in zip(names, run_dirs, strict=True)]
    runs = {name: read_records(path) for name, path in zip(names, run_dirs, strict=True)}
    for name, path in zip(names, run_dirs, strict=True):
        check_unique_task_ids(runs[name], f"{name} ({path})")
    shared, dropped = split_shared_tasks(runs)
    if not shared:
        raise EvalError("The eval runs share no task ids; evaluate them on the same env, split and limit.")
    for name, task_ids in dropped.items():
        if task_ids:
            logger.warning("compare: %s has %d questions the other runs lack; left out.", name, len(task_ids))
    runs = {name: [r for r in records if r.task_id in shared] for name, records in runs.items()}
    metrics = {name: summarize_by_category(records) for name, records in runs.items()}
    first = names[0]
    deltas = {name: compare_runs(runs[first], runs[name], seed=seed) for name in names[1:]}
    table = comparison_table(names, [metrics[name][OVERALL] for name in names], deltas)
    table += category_comparison_table(names, [metrics[name] for name in names])
    table += dropped_tasks_note(len(shared), dropped)
    target = out or run_dirs[0].parent / "compare"
    target.mkdir(parents=True, exist_ok=True)
    (target / "compare.md").write_text(table)
    write_run_plots(target, metrics, runs)
    return table, target
