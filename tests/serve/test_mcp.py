"""The MCP server at /mcp of a real uvicorn server, through the `mcp` SDK's client."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.serve.conftest import GRAPH, LiveServer

pytestmark = pytest.mark.slow


def _payload(result) -> dict:
    """The tool's JSON result: structured content when given, else the first text block parsed."""
    if getattr(result, "structured_content", None):
        return result.structured_content
    return json.loads(result.content[0].text)


def test_mcp_lists_tools_and_calls_retrieve_and_remember(live_server: LiveServer) -> None:
    from mcp import Client

    async def session() -> tuple[list[str], dict, dict, dict]:
        async with Client(f"{live_server.url}/mcp") as client:
            tools = await client.list_tools()
            found = await client.call_tool("retrieve", {"graph": GRAPH, "question": "What is Bob's dog called?"})
            stored = await client.call_tool(
                "remember", {"graph": "mcp-notes", "speaker": "Ivy", "texts": ["I play the bassoon in a folk band."]}
            )
            again = await client.call_tool(
                "retrieve", {"graph": "mcp-notes", "question": "Which instrument does Ivy play?"}
            )
            return sorted(tool.name for tool in tools.tools), _payload(found), _payload(stored), _payload(again)

    names, found, stored, again = asyncio.run(session())
    assert names == ["remember", "retrieve"]
    assert "Biscuit" in found["context"] and found["stop_reason"] == "stop"
    assert len(stored["created"]) == 1
    assert "bassoon" in again["entries"][0]["value"]
