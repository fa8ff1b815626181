"""The MCP server: `retrieve` and `remember` as MCP tools over the same `MemoryService`.

Served over Streamable HTTP at `/mcp` by the serve-memory process, or over stdio with
`memora-rl serve-memory --mcp-stdio` for agents that launch their tools as subprocesses.

Errors: the SDK shows an agent only `Error executing tool <name>` for an exception it does not
expect (a crash), and the message of a `ToolError`. So each tool turns bad input (a pydantic
`ValidationError` of the request record) and the service's expected errors (unknown graph, budget
over the limit, ingest conflict, the policy's LLM down, a question or batch over the service's limits,
a request past `request_timeout_s`) into a `ToolError` carrying the words the HTTP API answers: the
field and the fix (and, for a limit, the setting that raises it).

Access: over HTTP a call reaches a tool only with a valid token (`auth.AuthMiddleware` answers 401 first);
`retrieve` then needs read on its graph and `remember` write, else the tool answers the HTTP API's 403 words.
Over stdio the agent launched the service itself, with its owner's rights on the store files: no token.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError
from starlette.requests import Request

from memora_rl.serve.auth import TOKEN_FIX, AccessError, check_scope, principal_of
from memora_rl.serve.config import ServeConfig
from memora_rl.serve.errors import EXPECTED_ERRORS, describe_validation_error, error_text, hide_paths, validation_text
from memora_rl.serve.schemas import IngestRequest, RetrieveRequest
from memora_rl.serve.service import MemoryService
from memora_rl.serve.tokens import EVERYONE, Action
from memora_rl.serve.tools import REMEMBER_DESCRIPTION, RETRIEVE_DESCRIPTION

logger = logging.getLogger(__name__)

Location = tuple[Any, ...]


def remember_location(location: Location) -> Location:
    """An `IngestRequest` error location in the `remember` tool's argument names (`texts`, `speaker`, `time`).

    >>> [remember_location(location) for location in [("turns", 1, "text"), ("turns", 0, "speaker"), ("turns",)]]
    [('texts', 1), ('speaker',), ('texts',)]
    """
    if location[:1] != ("turns",):
        return location
    if len(location) >= 3:
        return ("texts", location[1]) if location[2] == "text" else tuple(location[2:])
    return ("texts",)


@contextmanager
def tool_errors(
    config: ServeConfig, rename: Callable[[Location], Location] = lambda location: location
) -> Iterator[None]:
    """Raise bad input and the service's expected errors as `ToolError`s with the HTTP API's text.

    Args:
        config: the service's settings (their store and runs paths are shown by name only, as over HTTP).
        rename: maps a request record's error location to the tool's argument names.

    Raises:
        ToolError: the request record was invalid (each field, reason and fix), or the service raised
            one of `EXPECTED_ERRORS` (its message, as the HTTP API's `error`: a limit names its setting).
    """
    try:
        yield
    except ValidationError as error:
        details = [describe_validation_error({**item, "loc": rename(tuple(item["loc"]))}) for item in error.errors()]
        raise ToolError(hide_paths(validation_text(details), config)) from error
    except EXPECTED_ERRORS as error:
        raise ToolError(hide_paths(error_text(error), config)) from error


def check_caller(ctx: Context, local: bool, action: Action, graph: str, tool: str) -> None:
    """Raise `AccessError` (403, logged) unless the tool's caller may `action` on `graph`.

    Args:
        ctx: the tool call's context; over HTTP its request carries the principal `AuthMiddleware` set.
        local: whether the server runs over stdio (the caller is the local user: every scope).
        action: read or write.
        graph: the graph the call touches.
        tool: the tool's name, as logged.
    """
    if local:
        principal = EVERYONE
    else:
        request = ctx.request_context.request
        if not isinstance(request, Request):  # over HTTP every call carries its request: refuse rather than guess
            raise AccessError(401, f"the MCP tool {tool} was called without an HTTP request to check", TOKEN_FIX)
        principal = principal_of(request)
    check_scope(principal, action, graph, f"MCP tool {tool}")


def build_mcp_server(service: MemoryService, local: bool = False) -> MCPServer:
    """An MCP server whose tools call `service` (each on a worker thread, like the HTTP routes).

    Args:
        service: the served stores, policy and builder.
        local: serve over stdio, where no token is asked (see the module docstring); False: over HTTP at /mcp.
    """
    server = MCPServer(name="memora-memory", instructions="Long-term memory: retrieve memories, remember turns.")

    @server.tool(name="retrieve", description=RETRIEVE_DESCRIPTION)
    async def retrieve(graph: str, question: str, ctx: Context, budget: float | None = None) -> dict:
        deadline = service.deadline()
        with tool_errors(service.config):
            check_caller(ctx, local, "read", graph, "retrieve")
            request = RetrieveRequest(graph=graph, question=question, budget=budget)
            act = service.act_via_loop()  # retrieve_sync checks the limits before any work
            result = await anyio.to_thread.run_sync(service.retrieve_sync, request, act, deadline)
        return {
            "context": result.context,
            "entries": [{"id": e.id, "abstraction": e.abstraction, "value": e.value} for e in result.entries],
            "stop_reason": result.stop_reason,
        }

    @server.tool(name="remember", description=REMEMBER_DESCRIPTION)
    async def remember(
        graph: str,
        speaker: str,
        texts: list[str],
        ctx: Context,
        time: datetime | None = None,
        idempotency_key: str | None = None,
    ) -> dict:
        deadline = service.deadline()
        with tool_errors(service.config, remember_location):
            check_caller(ctx, local, "write", graph, "remember")
            turns = [{"speaker": speaker, "text": text, "time": time} for text in texts]
            request = IngestRequest.model_validate({"graph": graph, "turns": turns, "idempotency_key": idempotency_key})
            result = await anyio.to_thread.run_sync(service.ingest_sync, request, deadline)
        return result.model_dump(mode="json")

    return server
