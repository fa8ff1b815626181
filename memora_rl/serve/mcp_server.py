"""The MCP server: `retrieve` and `remember` as MCP tools over the same `MemoryService`.

Served over Streamable HTTP at `/mcp` by the serve-memory process, or over stdio with
`memora-rl serve-memory --mcp-stdio` for agents that launch their tools as subprocesses.
"""

from __future__ import annotations

import logging
from datetime import datetime

import anyio.to_thread
from mcp.server.mcpserver import MCPServer

from memora_rl.serve.schemas import IngestRequest, IngestTurn, RetrieveRequest
from memora_rl.serve.service import MemoryService
from memora_rl.serve.tools import REMEMBER_DESCRIPTION, RETRIEVE_DESCRIPTION

logger = logging.getLogger(__name__)


def build_mcp_server(service: MemoryService) -> MCPServer:
    """An MCP server whose tools call `service` (each on a worker thread, like the HTTP routes)."""
    server = MCPServer(name="memora-memory", instructions="Long-term memory: retrieve memories, remember turns.")

    @server.tool(name="retrieve", description=RETRIEVE_DESCRIPTION)
    async def retrieve(graph: str, question: str, budget: float | None = None) -> dict:
        request = RetrieveRequest(graph=graph, question=question, budget=budget)
        result = await anyio.to_thread.run_sync(service.retrieve_sync, request, service.act_via_loop())
        return {
            "context": result.context,
            "entries": [{"id": e.id, "abstraction": e.abstraction, "value": e.value} for e in result.entries],
            "stop_reason": result.stop_reason,
        }

    @server.tool(name="remember", description=REMEMBER_DESCRIPTION)
    async def remember(graph: str, speaker: str, texts: list[str], time: datetime | None = None) -> dict:
        request = IngestRequest(graph=graph, turns=[IngestTurn(speaker=speaker, text=t, time=time) for t in texts])
        result = await anyio.to_thread.run_sync(service.ingest_sync, request)
        return result.model_dump(mode="json")

    return server
