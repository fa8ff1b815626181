"""`memora-rl eval`: evaluate a policy offline on held-out tasks (or one `--shard i/n` of them).

`memora-rl eval compare` puts runs side by side; `memora-rl eval merge` joins shard runs into one run.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from memora_rl.cli_options import config_option, given
from memora_rl.evaluation.config import EvalConfig

console = Console()

eval_app = typer.Typer(
    help=(
        "Offline evaluation: `memora-rl eval --env E --policy P` runs one policy; `eval compare A B` compares runs; "
        "`eval merge S0 S1 --out D` joins --shard runs."
    ),
    invoke_without_command=True,
    no_args_is_help=False,
)


def evaluate(
    ctx: typer.Context,
    env: Annotated[str | None, config_option(EvalConfig, "env")] = None,
    policy: Annotated[str | None, config_option(EvalConfig, "policy")] = None,
    split: Annotated[str | None, config_option(EvalConfig, "split")] = None,
    limit: Annotated[int | None, config_option(EvalConfig, "limit")] = None,
    out: Annotated[Path | None, config_option(EvalConfig, "out")] = None,
    base_url: Annotated[
        list[str] | None,
        config_option(
            EvalConfig,
            "base_url",
            note="Repeatable. Default: $MEMORA_RL_VLLM_URL/v1 when set (see --transformers).",
        ),
    ] = None,
    answerer_base_url: Annotated[str | None, config_option(EvalConfig, "answerer_base_url")] = None,
    answerer_model: Annotated[str | None, config_option(EvalConfig, "answerer_model")] = None,
    judge_base_url: Annotated[str | None, config_option(EvalConfig, "judge_base_url")] = None,
    judge_model: Annotated[str | None, config_option(EvalConfig, "judge_model")] = None,
    answer_max_tokens: Annotated[int | None, config_option(EvalConfig, "answer_max_tokens")] = None,
    judge_max_tokens: Annotated[int | None, config_option(EvalConfig, "judge_max_tokens")] = None,
    llm_cache: Annotated[Path | None, config_option(EvalConfig, "llm_cache")] = None,
    concurrency: Annotated[int | None, config_option(EvalConfig, "concurrency")] = None,
    latency_questions: Annotated[int | None, config_option(EvalConfig, "latency_questions")] = None,
    seed: Annotated[int | None, config_option(EvalConfig, "seed")] = None,
    shard: Annotated[str | None, config_option(EvalConfig, "shard")] = None,
    constrained: Annotated[
        bool | None, config_option(EvalConfig, "constrained", "--constrained/--unconstrained")
    ] = None,
    transformers: Annotated[
        bool, typer.Option("--transformers", help="Generate in-process even if a server URL is set.")
    ] = False,
    restart: Annotated[bool, config_option(EvalConfig, "restart", "--restart")] = False,
    override: Annotated[
        list[str] | None, config_option(EvalConfig, "env_overrides", "--set", note="Repeatable.")
    ] = None,
) -> None:
    """Run one policy over the held-out tasks; write records.jsonl, results.json/.md and PNG plots."""
    if ctx.invoked_subcommand is not None:
        return
    from memora_rl.errors import EvalError
    from memora_rl.evaluation.offline import run_eval
    from memora_rl.evaluation.report import metrics_table, usage_table

    if env is None or policy is None:
        raise EvalError("memora-rl eval needs --env and --policy (or a subcommand: `memora-rl eval compare A B`).")
    if not base_url and not transformers and os.environ.get("MEMORA_RL_VLLM_URL"):
        base_url = [os.environ["MEMORA_RL_VLLM_URL"].rstrip("/").removesuffix("/v1") + "/v1"]
    config = EvalConfig(
        **given(
            env=env,
            policy=policy,
            split=split,
            limit=limit,
            out=out,
            base_url=None if transformers or not base_url else ",".join(base_url),
            answerer_base_url=answerer_base_url,
            answerer_model=answerer_model,
            judge_base_url=judge_base_url,
            judge_model=judge_model,
            answer_max_tokens=answer_max_tokens,
            judge_max_tokens=judge_max_tokens,
            llm_cache=llm_cache,
            concurrency=concurrency,
            latency_questions=latency_questions,
            seed=seed,
            shard=shard,
            constrained=constrained,
            restart=restart,
            env_overrides=override,
        )
    )
    result = run_eval(config)
    console.print(metrics_table(result.metrics, title=f"{result.policy} on {env}/{config.split}"))
    if result.llm_usage:
        console.print(usage_table(result.llm_usage))
    console.print(f"[green]wrote[/] {result.out} (records, results.json, results.md, plots)")


eval_app.callback()(evaluate)


@eval_app.command("compare")
def compare(
    runs: Annotated[list[Path], typer.Argument(help="Eval output folders; deltas are against the first.")],
    out: Annotated[
        Path | None, typer.Option("--out", help="Folder for compare.md and plots (default <first>/../compare).")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Bootstrap seed.")] = 0,
) -> None:
    """Side-by-side table of eval runs with paired bootstrap CIs for each metric's difference, plus plots."""
    from memora_rl.evaluation.offline import compare_eval_dirs

    table, target = compare_eval_dirs(list(runs), out, seed)
    console.print(table)
    console.print(f"[green]wrote[/] {target}/compare.md and plots")


@eval_app.command("merge")
def merge(
    shards: Annotated[list[Path], typer.Argument(help="Run folders of `--shard 0/n` to `--shard n-1/n`, each once.")],
    out: Annotated[Path, typer.Option("--out", help="Folder for the merged run (records, results, plots).")],
) -> None:
    """Join shard runs into one run folder whose results equal the unsharded run's (timings aside)."""
    from memora_rl.evaluation.report import metrics_table
    from memora_rl.evaluation.shards import merge_shards

    result = merge_shards(list(shards), out)
    console.print(metrics_table(result.metrics, title=f"{result.policy}: {len(shards)} shards merged"))
    console.print(f"[green]wrote[/] {result.out} (records, results.json, results.md, plots)")
