"""MCP tool errors carry the HTTP API's words: the field and the fix, not only `Error executing tool <name>`."""

from __future__ import annotations

import asyncio

import pytest

from tests.serve.conftest import GRAPH, LiveServer


@pytest.mark.parametrize(
    ("tool", "arguments", "words"),
    [
        ("retrieve", {"graph": "nobody", "question": "who?"}, ["'nobody' is not served", GRAPH, "POST /v1/ingest"]),
        ("retrieve", {"graph": GRAPH, "question": "x" * 4001}, ["question:", "fix: send the", "max_question_chars"]),
        ("retrieve", {"graph": GRAPH, "question": "x", "budget": -1}, ["budget:", "fix: send a positive number"]),
        ("retrieve", {"graph": GRAPH, "question": "x", "budget": 1000}, ["budget: 1000 is above", "budget <= 32"]),
        ("retrieve", {"graph": GRAPH, "question": "  "}, ["question:", "blank", "fix:"]),
        ("remember", {"graph": "mcp-empty", "speaker": "Ivy", "texts": []}, ["texts:", "fix: send"]),
        ("remember", {"graph": "mcp-empty", "speaker": "Ivy", "texts": ["ok", " "]}, ["texts.1:", "blank", "fix:"]),
        ("remember", {"graph": "bad id!", "speaker": "Ivy", "texts": ["ok"]}, ["graph:", "fix: send the id"]),
    ],
)  # fmt: skip
def test_mcp_tool_errors_name_the_field_and_the_fix(
    live_server: LiveServer, tool: str, arguments: dict, words: list[str]
) -> None:
    from mcp import Client

    async def call() -> tuple[bool, str]:
        async with Client(f"{live_server.url}/mcp") as client:
            result = await client.call_tool(tool, arguments)
            return result.is_error, result.content[0].text

    is_error, text = asyncio.run(call())
    assert is_error, text
    assert all(word in text for word in words), text
