"""`memora-rl serve-memory`: start the memory service (HTTP API, web page, MCP at /mcp) with uvicorn."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Annotated

import typer

from memora_rl.cli_options import config_option, given
from memora_rl.serve.config import ServeConfig

logger = logging.getLogger(__name__)


def serve_memory(
    store: Annotated[
        list[str],
        typer.Option(
            "--store",
            help="Graph store: a SQLite file or a postgresql://user@host:port/db URL, which several serve-memory "
            "replicas may share (repeatable).",
        ),
    ],
    policy: Annotated[str, typer.Option(help="Retrieval policy: semantic, heuristic or llm.")] = "semantic",
    llm_base_url: Annotated[str | None, typer.Option(help="policy=llm: endpoint serving the export (.../v1).")] = None,
    llm_model: Annotated[str | None, typer.Option(help="policy=llm: served model or adapter name.")] = None,
    export: Annotated[
        Path | None,
        typer.Option(help="policy=llm: the export being served; walks use its training env's layout and costs."),
    ] = None,
    constrained: Annotated[
        bool,
        typer.Option(help="policy=llm: decode each action under the schema of the valid actions (vLLM guided)."),
    ] = True,
    builder: Annotated[str, typer.Option(help="Ingest builder: extractive, memora or nemori.")] = "extractive",
    builder_llm_base_url: Annotated[str | None, typer.Option(help="memora/nemori: LLM endpoint (.../v1).")] = None,
    builder_llm_model: Annotated[str | None, typer.Option(help="memora/nemori: served model name.")] = None,
    budget: Annotated[float, typer.Option(help="Default walk budget of a retrieve.")] = 8.0,
    runs_dir: Annotated[Path | None, typer.Option(help="Eval runs folder: report page and record walks.")] = None,
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(help="Host header to answer besides loopback and --host (NAME:PORT or NAME:*); repeatable."),
    ] = None,
    port: Annotated[int, typer.Option(help="TCP port.")] = 8700,
    mcp_stdio: Annotated[bool, typer.Option(help="Serve only the MCP tools over stdin/stdout.")] = False,
    workers: Annotated[
        int, typer.Option(help="Worker processes (about one per core); each loads its own embedder.")
    ] = 1,
    torch_threads: Annotated[
        int,
        typer.Option(help="Threads per query embedding (PyTorch or ONNX Runtime); 1 avoids oversubscribing cores."),
    ] = 1,
    read_connections: Annotated[int | None, config_option(ServeConfig, "read_connections")] = None,
    max_body_bytes: Annotated[int | None, config_option(ServeConfig, "max_body_bytes")] = None,
    max_question_chars: Annotated[int | None, config_option(ServeConfig, "max_question_chars")] = None,
    max_ingest_turns: Annotated[int | None, config_option(ServeConfig, "max_ingest_turns")] = None,
    max_ingest_chars: Annotated[int | None, config_option(ServeConfig, "max_ingest_chars")] = None,
    request_timeout_s: Annotated[float | None, config_option(ServeConfig, "request_timeout_s")] = None,
    no_auth: Annotated[
        bool,
        typer.Option(
            "--no-auth", help="Serve without tokens: anyone may read and write every graph (loopback --host only)."
        ),
    ] = False,
    tokens: Annotated[
        Path | None,
        typer.Option(help="Access-token file (`memora-rl tokens`); default $MEMORA_RL_HOME/serve/tokens.sqlite."),
    ] = None,
) -> None:
    """Serve retrieval and ingest over graph stores: JSON API (/docs), web page (/), MCP tools (/mcp)."""
    from pydantic import ValidationError

    from memora_rl.errors import ConfigError
    from memora_rl.serve.service import MemoryService

    try:
        config = ServeConfig(
            stores=store, policy=policy, llm_base_url=llm_base_url, llm_model=llm_model,  # type: ignore[arg-type]
            export=export, constrained=constrained,
            builder=builder, builder_llm_base_url=builder_llm_base_url, builder_llm_model=builder_llm_model,
            budget=budget, runs_dir=runs_dir, host=host, port=port, workers=workers, threads=torch_threads,
            allowed_hosts=allowed_host or [], no_auth=no_auth, tokens=tokens,
            **given(read_connections=read_connections, max_body_bytes=max_body_bytes,
                    max_question_chars=max_question_chars,
                    max_ingest_turns=max_ingest_turns, max_ingest_chars=max_ingest_chars,
                    request_timeout_s=request_timeout_s),
        )  # fmt: skip
    except ValidationError as error:
        problems = "; ".join(f"--{'-'.join(map(str, e['loc'])).replace('_', '-')}: {e['msg']}" for e in error.errors())
        raise ConfigError(
            f"serve-memory options are invalid: {problems}. See `memora-rl serve-memory --help`."
        ) from None
    if mcp_stdio and config.workers > 1:
        raise ConfigError("--mcp-stdio serves one client over stdin/stdout; drop --workers (or set it to 1).")
    from memora_rl.serve.app import set_embed_threads

    set_embed_threads(config.threads)
    service = MemoryService(config)  # with --workers, made once here so bad stores or settings fail before any fork
    if config.workers == 1:
        service.warm_up()  # worker processes load their own; this one then only supervises them
    if mcp_stdio:
        from memora_rl.serve.mcp_server import build_mcp_server

        try:
            build_mcp_server(service, local=True).run("stdio")
        finally:
            service.close()
        return
    import uvicorn

    from memora_rl.serve.app import CONFIG_ENV, create_app

    log_access(config)
    logger.info(
        "serving %s with the %s policy at http://%s:%d/ (%d worker%s)",
        service.graphs.graph_ids(), policy, host, port, config.workers, "s" if config.workers > 1 else "",
    )  # fmt: skip
    if config.workers == 1:
        uvicorn.run(create_app(service), host=host, port=port, log_level="warning")
        return
    service.close()
    os.environ[CONFIG_ENV] = config.model_dump_json()
    uvicorn.run("memora_rl.serve.app:app_from_environment", factory=True, workers=config.workers,
                host=host, port=port, log_level="warning")  # fmt: skip


def log_access(config: ServeConfig) -> None:
    """Say at start who may call the service: anyone on loopback (`--no-auth`), or the holders of how many tokens."""
    from memora_rl.serve.auth import open_tokens

    tokens = open_tokens(config)
    if tokens is None:
        logger.warning("--no-auth: anyone who can reach %s:%d reads and writes every graph.", config.host, config.port)
        return
    count = tokens.active_count()
    if count == 0:
        logger.warning(
            "No valid token in %s: every request but /healthz will be refused (401). Create one with "
            "`memora-rl tokens create --name NAME --scope read:* --tokens %s`, or start with --no-auth on loopback.",
            tokens.path, tokens.path,
        )  # fmt: skip
    else:
        logger.info("Requests need a token: %d valid in %s (`memora-rl tokens list`).", count, tokens.path)
