"""The service's two operations as tools an agent can call: OpenAI tool-calling schemas built from the API records."""

from __future__ import annotations

from typing import Any

from memora_rl.serve.schemas import IngestRequest, RetrieveRequest

RETRIEVE_DESCRIPTION = (
    "Search long-term memory: walk the memory graph `graph` for `question` and return the memories "
    "(abstraction: value lines) and their conversation episodes."
)
REMEMBER_DESCRIPTION = "Store new conversation turns in long-term memory graph `graph` (created when new)."


def openai_tools() -> list[dict[str, Any]]:
    """`retrieve` and `remember` in the OpenAI `tools=[...]` format; parameters are the request JSON schemas."""
    return [
        {"type": "function", "function": {"name": "retrieve", "description": RETRIEVE_DESCRIPTION,
                                          "parameters": RetrieveRequest.model_json_schema()}},
        {"type": "function", "function": {"name": "remember", "description": REMEMBER_DESCRIPTION,
                                          "parameters": IngestRequest.model_json_schema()}},
    ]  # fmt: skip
