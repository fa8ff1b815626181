"""`memora-rl env list|play`: see the named envs, and play one by hand (type actions, read observations)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from memora_rl.errors import ConfigError

env_app = typer.Typer(
    help="Named retrieval environments: list them, measure their headroom, or play one by hand.", no_args_is_help=True
)
console = Console()

SHORTHAND_HELP = (
    "Type a JSON action, or a shorthand: `:expand e1 e2`, `:refine new query`, `:stop`. "
    "Anything else is sent as written (and may be invalid). Ctrl-D quits."
)


@env_app.command("list")
def list_command() -> None:
    """List the registered envs with their data, builder and budget."""
    from memora_rl.env.registry import get_env_spec, list_envs

    table = Table(title="memora-rl envs")
    for column in ("name", "data", "builder", "budget", "expand/refine/invalid", "steps"):
        table.add_column(column)
    specs = [get_env_spec(name) for name in list_envs()]
    for spec in specs:
        env = spec.env
        costs = f"{env.expand_cost_per_id:g}/{env.refine_cost:g}/{env.invalid_cost:g}"
        table.add_row(spec.name, spec.data.kind, spec.builder, f"{env.budget:g}", costs, str(env.max_steps))
    console.print(table)
    for spec in specs:
        console.print(f"[bold]{spec.name}[/]: {spec.description}")


def expand_shorthand(text: str) -> str:
    """Turn `:expand e1 e2`, `:refine words`, `:stop` into canonical JSON; return other text unchanged."""
    from memora_rl.core.parse import ExpandAction, RefineAction, StopAction, format_action

    command, _, rest = text.strip().partition(" ")
    if command == ":expand" and rest.split():
        return format_action(ExpandAction(ids=rest.split()))
    if command == ":refine" and rest.strip():
        return format_action(RefineAction(query=rest.strip()))
    if command == ":stop":
        return format_action(StopAction())
    return text


def _frontier_table(info: dict[str, Any]) -> Table:
    """The frontier as a table of id and anchor."""
    table = Table(title=f"frontier (budget left {info['budget_left']:g}, step {info['step']})")
    table.add_column("id")
    table.add_column("anchor")
    for item in info["frontier"]:
        table.add_row(item["id"], item["anchor"])
    return table


def _show_result(reward: float, info: dict[str, Any]) -> None:
    """The judge's breakdown and the trajectory summary at the end of an episode."""
    table = Table(title=f"episode over: {info['stop_reason']} - reward {reward:.3f}")
    table.add_column("component")
    table.add_column("value", justify="right")
    for name, value in info["reward_components"].items():
        table.add_row(name, f"{value:.3f}")
    console.print(table)
    trajectory = info["trajectory"]
    if trajectory is not None:
        console.print(
            f"gold answer: [bold]{trajectory.task.answer}[/]  evidence: {', '.join(trajectory.task.evidence)}"
        )


@env_app.command("play")
def play_command(
    env_name: Annotated[str, typer.Option("--env", help="Env name (see `memora-rl env list`).")] = "synthetic",
    task_id: Annotated[
        str | None, typer.Option("--task-id", help="Play this task (any split); default: a seeded draw.")
    ] = None,
    split: Annotated[str, typer.Option(help="Split to draw from: train, validation, test or all.")] = "train",
    seed: Annotated[int, typer.Option(help="Seed of the task draw.")] = 0,
    override: Annotated[
        list[str] | None, typer.Option("--override", "-o", help="Env spec override key=value, e.g. env.budget=4.")
    ] = None,
) -> None:
    """Play one episode by hand: read each observation, type the policy's action, see the judge's verdict."""
    from memora_rl.env.registry import make_env

    env, tasks = make_env(env_name, split="all" if task_id else split, overrides=override or [])  # type: ignore[arg-type]
    options: dict[str, Any] = {}
    if task_id is not None:
        matches = [task for task in tasks if task.id == task_id]
        if not matches:
            raise ConfigError(f"No task {task_id!r} in env {env_name!r}; e.g. {', '.join(t.id for t in tasks[:5])}.")
        options["task"] = matches[0]
    observation, info = env.reset(seed=seed, options=options)
    console.print(SHORTHAND_HELP, style="dim")
    done = False
    while not done:
        console.print(Panel(observation, title=f"observation (task {info['task_id']})"))
        console.print(_frontier_table(dict(info)))
        try:
            text = console.input("[bold cyan]action> [/]")
        except EOFError:
            console.print("quit")
            return
        action = expand_shorthand(text)
        if action != text:
            console.print(f"sent: {action}", style="dim")
        observation, reward, terminated, truncated, info = env.step(action)
        if info["parse_error"]:
            console.print(f"invalid action: {info['parse_error']}", style="red")
        done = terminated or truncated
    console.print(Panel(observation, title="final state"))
    _show_result(reward, dict(info))
    env.close()


@env_app.command("stats")
def stats_command(
    env_name: Annotated[str, typer.Argument(help="Env name (see `memora-rl env list`).")],
    split: Annotated[str, typer.Option(help="Split: train, validation, test or all.")] = "test",
    limit: Annotated[int | None, typer.Option(help="Only the first N tasks of the split.")] = None,
    max_refines: Annotated[int, typer.Option(help="Visible refines the oracle may use per walk.")] = 2,
    beam_width: Annotated[int, typer.Option(help="Oracle beam width (states kept per depth).")] = 6,
    override: Annotated[
        list[str] | None, typer.Option("--override", "-o", help="Env spec override key=value, e.g. env.budget=4.")
    ] = None,
    json_path: Annotated[Path | None, typer.Option("--json", help="Also write the report (with every walk).")] = None,
) -> None:
    """Headroom of an env: G0 (recall after reset) and oracle recall per category, and whether it is trainable."""
    from rich.progress import Progress

    from memora_rl.env.registry import make_env
    from memora_rl.env.stats import HEADROOM_G0_SHARE, HEADROOM_ORACLE_SHARE, headroom

    env, tasks = make_env(env_name, split=split, overrides=override or [])  # type: ignore[arg-type]
    tasks = tasks[:limit] if limit else tasks
    with Progress(console=console, transient=True) as progress:
        bar = progress.add_task(f"oracle walks on {env_name}/{split}", total=len(tasks))
        report = headroom(
            env,
            tasks,
            env_name,
            split,
            max_refines=max_refines,
            beam_width=beam_width,
            progress=lambda done: progress.update(bar, completed=done),
        )
    env.close()
    table = Table(title=f"headroom of {env_name} ({split}, {len(tasks)} tasks, oracle <= {max_refines} refines)")
    table.add_column("category", no_wrap=True, min_width=16)
    for column in ("tasks", "G0", "G0<1", "expand oracle", "oracle", "oracle=1", "oracle cost"):
        table.add_column(column, justify="right")
    for row in [*report.rows, report.overall]:
        table.add_row(
            row.group,
            str(row.tasks),
            f"{row.initial_recall:.3f}",
            f"{row.below_one:.0%}",
            f"{row.expand_oracle:.3f}",
            f"{row.oracle:.3f}",
            f"{row.oracle_full:.0%}",
            f"{row.oracle_cost:.2f}",
        )
    console.print(table)
    verdict = "trainable" if report.trainable else "not trainable"
    console.print(
        f"{env_name}: {verdict} (needs G0 < 1 on >= {HEADROOM_G0_SHARE:.0%} of tasks and oracle = 1 on "
        f">= {HEADROOM_ORACLE_SHARE:.0%})"
    )
    if json_path is not None:
        json_path.write_text(report.model_dump_json(indent=1))
        console.print(f"report written to {json_path}")
