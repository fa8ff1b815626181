"""`memora-rl export`: publish a training run's adapter as a verified, self-describing folder."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

console = Console()


def export(
    run: Annotated[Path, typer.Option("--run", help="Training run folder, e.g. checkpoints/quickstart.")],
    out: Annotated[Path, typer.Option("--out", help="Export folder to create, e.g. exports/quickstart.")],
    step: Annotated[
        int | None, typer.Option("--step", help="Export checkpoint-<step> (default: final/, else the latest).")
    ] = None,
    merge: Annotated[
        bool,
        typer.Option(
            "--merge/--no-merge", help="Also write the merged model (float32 safetensors), which eval and serve take."
        ),
    ] = True,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing export folder.")] = False,
    verify: Annotated[
        str, typer.Option("--verify", help="Checks before publishing: transformers | vllm (both) | none.")
    ] = "transformers",
    verify_env: Annotated[
        str | None, typer.Option("--verify-env", help="Env for the one-step check (default: the run's env).")
    ] = None,
    vllm_url: Annotated[
        str | None,
        typer.Option("--vllm-url", help="vLLM server for --verify vllm (default $MEMORA_RL_VLLM_URL, else start one)."),
    ] = None,
    eval_results: Annotated[
        list[Path] | None, typer.Option("--eval", help="`memora-rl eval` output folder to quote in the card.")
    ] = None,
) -> None:
    """Write the adapter (a warm start's stacked in), the merged model, tokenizer and card; verify; publish atomically.

    The folder holds everything it needs and names its base by registry name: it can be copied anywhere.
    """
    from memora_rl.errors import ExportError
    from memora_rl.export.writer import ExportRequest, export_run

    if verify not in ("transformers", "vllm", "none"):
        raise ExportError(f"--verify {verify!r} is not one of: transformers, vllm, none.")
    request = ExportRequest(
        run_dir=run,
        out=out,
        step=step,
        merge=merge,
        force=force,
        verify=verify,  # type: ignore[arg-type]
        verify_env=verify_env,
        vllm_url=vllm_url or os.environ.get("MEMORA_RL_VLLM_URL"),
        eval_results=list(eval_results or []),
    )
    result = export_run(request)
    for check in result.manifest.verification:
        text = check.action_text.strip()[:80]
        console.print(f"verified {check.backend} ({check.weights}): {text!r} -> {check.action_kind}")
    console.print(f"[green]exported[/] {result.manifest.source_checkpoint} of {run} to {result.path}")
