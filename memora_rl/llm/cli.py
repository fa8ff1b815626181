"""`memora-rl models pull|list` and `memora-rl serve`: the model registry and the vLLM server from the shell."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from memora_rl.cli_options import config_option, given
from memora_rl.errors import ConfigError, ServerError
from memora_rl.llm.server import ServerConfig

console = Console()

models_app = typer.Typer(help="Pull and list the models of the built-in registry.", no_args_is_help=True)


@models_app.command("pull")
def pull_command(
    name: Annotated[str, typer.Argument(help="Registry name, e.g. smollm2-135m-instruct.")],
    force: Annotated[bool, typer.Option("--force", help="Rebuild even when a complete copy exists.")] = False,
) -> None:
    """Download and convert a registry model into the models folder (a no-op when already complete)."""
    from memora_rl.llm.registry import pull

    started = time.perf_counter()
    path = pull(name, force=force)
    console.print(f"[green]{name}[/] ready at {path} ({time.perf_counter() - started:.1f} s)")


@models_app.command("list")
def list_command() -> None:
    """Show every registry model, whether it is pulled, where, and its size on disk."""
    from memora_rl.llm.registry import list_models

    table = Table("name", "pulled", "size")
    table.add_column("path", overflow="fold")
    for row in list_models():
        size = f"{row['size_bytes'] / 1e6:.0f} MB" if row["pulled"] else "-"
        table.add_row(row["name"], "yes" if row["pulled"] else "no", size, row["path"])
    console.print(table)


def parse_lora_spec(spec: str) -> tuple[str, Path]:
    """Split a `--lora name=path` value, checking the path is a peft adapter folder.

    Raises:
        ConfigError: naming the spec and the expected form.
    """
    name, sep, raw_path = spec.partition("=")
    name, path = name.strip(), Path(raw_path.strip()).expanduser()
    if not sep or not name or not raw_path.strip():
        raise ConfigError(f"--lora {spec!r} is not name=path, e.g. --lora policy=checkpoints/run1/adapter.")
    if not (path / "adapter_config.json").is_file():
        raise ConfigError(f"--lora {spec!r}: {path} is not a peft adapter folder (no adapter_config.json).")
    return name, path


def serve(
    model: Annotated[str | None, config_option(ServerConfig, "model")] = None,
    lora: Annotated[list[str] | None, typer.Option("--lora", help="Adapter to load at start, as name=path.")] = None,
    port: Annotated[int | None, config_option(ServerConfig, "port")] = None,
    dtype: Annotated[str | None, config_option(ServerConfig, "dtype")] = None,
    served_name: Annotated[str | None, config_option(ServerConfig, "served_name")] = None,
    max_lora_rank: Annotated[int | None, config_option(ServerConfig, "max_lora_rank")] = None,
    enable_lora: Annotated[
        bool | None, config_option(ServerConfig, "enable_lora", "--enable-lora/--no-enable-lora")
    ] = None,
    max_model_len: Annotated[int | None, config_option(ServerConfig, "max_model_len")] = None,
    log_path: Annotated[Path | None, config_option(ServerConfig, "log_path", "--log")] = None,
    startup_timeout_s: Annotated[
        float | None, config_option(ServerConfig, "startup_timeout_s", "--startup-timeout")
    ] = None,
) -> None:
    """Serve a model with vLLM (OpenAI-compatible, runtime LoRA on unless --no-enable-lora) until Ctrl-C."""
    from pydantic import ValidationError

    from memora_rl.llm.server import VLLMServer
    from memora_rl.llm.server_api import load_lora_adapter

    adapters = [parse_lora_spec(spec) for spec in lora or []]
    if adapters and enable_lora is False:
        raise ConfigError("--lora loads adapters at start, which --no-enable-lora turns off; drop one of them.")
    options = given(
        model=model,
        served_name=served_name,
        port=port,
        dtype=dtype,
        max_lora_rank=max_lora_rank,
        enable_lora=enable_lora,
        max_model_len=max_model_len,
        log_path=log_path,
        startup_timeout_s=startup_timeout_s,
    )
    try:
        config = ServerConfig(**options)
    except ValidationError as error:
        problem = error.errors()[0]
        field = str(problem["loc"][0]).replace("_", "-") if problem["loc"] else "options"
        raise ConfigError(f"Invalid serve option --{field}: {problem['msg']}.") from error
    signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    server = VLLMServer(config)
    try:
        server.start()
        for name, path in adapters:
            load_lora_adapter(server.base_url, name, path)
        console.print(f"Serving [bold]{server.model}[/] at [bold]{server.base_url}[/] (log: {server.log_path})")
        console.print("Press Ctrl-C to stop.")
        while server.is_running():
            time.sleep(1.0)
        raise ServerError(f"vLLM exited unexpectedly; see {server.log_path}.")
    except KeyboardInterrupt:
        console.print("Stopping the server.")
    finally:
        server.stop()


def _raise_keyboard_interrupt(signum: int, frame: FrameType | None) -> None:
    """Treat SIGTERM like Ctrl-C so the server's process group is stopped too."""
    raise KeyboardInterrupt
