"""`create_app`: the FastAPI application of serve-memory (JSON API, web page, MCP at /mcp, OpenAPI at /docs).

Every request passes the host check (DNS rebinding, `hosts`), then the token check (`auth`: 401 before the body
is read), then the body limit (`limits`), before any route; routes check the token's scopes on their graph.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline

from memora_rl.serve.api import router as api_router
from memora_rl.serve.auth import AuthMiddleware, open_tokens
from memora_rl.serve.config import ServeConfig
from memora_rl.serve.errors import install_error_handlers
from memora_rl.serve.hosts import HostCheckMiddleware, transport_security
from memora_rl.serve.limits import BodyLimitMiddleware
from memora_rl.serve.login import router as login_router
from memora_rl.serve.mcp_server import build_mcp_server
from memora_rl.serve.service import MemoryService
from memora_rl.serve.web import router as web_router

logger = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).parent / "static"
CONFIG_ENV = "MEMORA_RL_SERVE_CONFIG"
"""Where `serve-memory --workers N` hands its settings (JSON) to the worker processes it starts."""


def create_app(service: MemoryService, close_service: bool = True) -> FastAPI:
    """The app over `service`; its lifespan runs the MCP session manager and closes the service at shutdown."""
    mcp = build_mcp_server(service)
    security = transport_security(service.config)
    mcp_app = mcp.streamable_http_app(
        streamable_http_path="/mcp", stateless_http=True, json_response=True, transport_security=security
    )

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with mcp.session_manager.run():
            yield
        await service.policy.aclose()
        if close_service:
            service.close()

    app = FastAPIOffline(  # FastAPI whose /docs and /redoc serve Swagger UI and ReDoc from the package, no CDN
        title="memora-rl memory service",
        description="Retrieve memories by walking a harmonic memory graph with a trained policy; ingest turns.",
        version="0.1.0",
        lifespan=lifespan,
    )
    app.state.service = service
    app.state.tokens = open_tokens(service.config)  # None with --no-auth
    app.add_middleware(BodyLimitMiddleware, max_bytes=service.config.max_body_bytes)  # 413 before parsing
    app.add_middleware(AuthMiddleware, tokens=app.state.tokens)  # 401 before the body is read
    app.add_middleware(HostCheckMiddleware, settings=security)  # every route, as /mcp: DNS-rebinding protection
    install_error_handlers(app)
    app.include_router(api_router)
    app.include_router(web_router)
    app.include_router(login_router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    app.router.routes.extend(mcp_app.routes)  # the MCP endpoint at /mcp, served by this app's lifespan
    return app


def set_embed_threads(threads: int) -> None:
    """Threads of one query embedding; set before the embedder is made (its ONNX session reads it)."""
    import torch

    torch.set_num_threads(max(1, threads))


def app_from_environment() -> FastAPI:
    """The app of one uvicorn worker process: settings from `$MEMORA_RL_SERVE_CONFIG`, its own service."""
    config = ServeConfig.model_validate_json(os.environ[CONFIG_ENV])
    set_embed_threads(config.threads)
    service = MemoryService(config)
    service.warm_up()
    return create_app(service)
