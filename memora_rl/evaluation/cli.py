"""`memora-rl eval`: evaluate a policy offline on held-out tasks; `memora-rl eval compare` puts runs side by side."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

console = Console()

eval_app = typer.Typer(
    help="Offline evaluation: `memora-rl eval --env E --policy P` runs one policy; `eval compare A B` compares runs.",
    invoke_without_command=True,
    no_args_is_help=False,
)


def evaluate(
    ctx: typer.Context,
    env: Annotated[str | None, typer.Option("--env", help="Env name, e.g. synthetic, locomo.")] = None,
    policy: Annotated[
        str | None,
        typer.Option(
            "--policy",
            help="semantic | heuristic | random | rag | full-context | prompted:<model> | an export folder.",
        ),
    ] = None,
    split: Annotated[
        str, typer.Option("--split", help="Task split: test (held out), validation, train, all.")
    ] = "test",
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            help="Evaluate N tasks: a sample drawn with --seed, stratified by category and conversation.",
        ),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Output folder (default runs/eval/<env>-<split>/<policy>).")
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url",
            help="vLLM /v1 URL for prompted/export policies (default $MEMORA_RL_VLLM_URL/v1; none: transformers).",
        ),
    ] = None,
    answerer_base_url: Annotated[str | None, typer.Option("--answerer-base-url", help="Answerer LLM /v1 URL.")] = None,
    answerer_model: Annotated[str | None, typer.Option("--answerer-model", help="Answerer served model name.")] = None,
    judge_model: Annotated[
        str | None, typer.Option("--judge-model", help="Judge served model (default: answerer).")
    ] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", help="Episodes in flight at once.")] = 8,
    seed: Annotated[int, typer.Option("--seed", help="Base seed of the episodes.")] = 0,
    transformers: Annotated[
        bool, typer.Option("--transformers", help="Generate in-process even if a server URL is set.")
    ] = False,
    restart: Annotated[
        bool, typer.Option("--restart", help="Discard records already in --out instead of resuming.")
    ] = False,
    override: Annotated[
        list[str] | None, typer.Option("--set", help="Env spec override key=value, e.g. env.budget=4 (repeatable).")
    ] = None,
) -> None:
    """Run one policy over the held-out tasks; write records.jsonl, results.json/.md and PNG plots."""
    if ctx.invoked_subcommand is not None:
        return
    from memora_rl.errors import EvalError
    from memora_rl.evaluation.offline import EvalConfig, run_eval
    from memora_rl.evaluation.report import metrics_table

    if env is None or policy is None:
        raise EvalError("memora-rl eval needs --env and --policy (or a subcommand: `memora-rl eval compare A B`).")
    if base_url is None and not transformers and os.environ.get("MEMORA_RL_VLLM_URL"):
        base_url = os.environ["MEMORA_RL_VLLM_URL"].rstrip("/").removesuffix("/v1") + "/v1"
    config = EvalConfig(
        env=env,
        policy=policy,
        split=split,  # type: ignore[arg-type]
        limit=limit,
        out=out,
        base_url=None if transformers else base_url,
        answerer_base_url=answerer_base_url,
        answerer_model=answerer_model,
        judge_model=judge_model,
        concurrency=concurrency,
        seed=seed,
        restart=restart,
        env_overrides=list(override or []),
    )
    result = run_eval(config)
    console.print(metrics_table(result.metrics, title=f"{result.policy} on {env}/{split}"))
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
