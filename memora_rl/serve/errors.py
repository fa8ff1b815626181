"""HTTP error bodies naming the field and the fix.

Bad input is 422 or 400, unknown ids 404, an ingest another process raced 409, the policy's LLM down 502.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from memora_rl.errors import ConfigError, GraphError, LLMError
from memora_rl.serve.eval_runs import EvalRunError
from memora_rl.serve.graphs import UnknownGraphError
from memora_rl.serve.ingest import IngestConflictError

logger = logging.getLogger(__name__)

FIXES: dict[str, str] = {
    "graph": "send the id of a served graph (GET /v1/graphs lists them); new ids use letters, digits and _ . : -",
    "question": "send the question as a non-blank string (at most 4000 characters)",
    "budget": "send a positive number, or leave budget out for the server's default",
    "top_k": "send an integer from 1 to 50, or leave it out",
    "context_mode": "send one of factual, episodic, episodic+factual",
    "turns": "send a non-empty list of {speaker, text} objects (time and id optional)",
    "speaker": "send the speaker's name as a non-blank string (at most 200 characters)",
    "text": "send the message text as a non-blank string (at most 20000 characters)",
    "idempotency_key": "send a new key for a new batch, or the same batch again with this key (a retry)",
    "texts": "send a non-empty list of non-blank message texts (the MCP tool remember)",
    "time": "send an ISO 8601 date-time such as 2026-05-09T14:00:00 (read as UTC) or 2026-05-09T14:00:00+02:00",
}
"""Fix hints by field name (the last part of the error location)."""


def describe_validation_error(error: dict[str, Any]) -> dict[str, str]:
    """One pydantic error as {field, message, fix}: the dotted field path, pydantic's reason and what to send.

    >>> describe_validation_error({"loc": ("body", "question"), "msg": "Field required", "type": "missing"})["field"]
    'question'
    """
    location = [str(part) for part in error.get("loc", ()) if part not in ("body", "query", "path")]
    field = ".".join(location) or "body"
    name = next((part for part in reversed(location) if not part.isdigit()), "body")
    if error.get("type") == "extra_forbidden":
        fix = f"remove {name!r}; it is not a field of this request (see /docs)"
    else:
        fix = FIXES.get(name, "see the request schema at /docs")
    return {"field": field, "message": str(error.get("msg", "invalid")), "fix": fix}


def validation_text(details: list[dict[str, str]]) -> str:
    """The one-line error of described validation errors: `field: reason (fix: what to send)` each, `; `-joined."""
    return "; ".join(f"{d['field']}: {d['message']} (fix: {d['fix']})" for d in details)


LLM_FIX = (
    "the policy's LLM server failed on this walk. When it names the context length, restart it with a larger "
    "--max-model-len (memora-rl serve) or send a smaller budget (fewer steps, a shorter chat)"
)
"""What to do when the policy's LLM fails (HTTP 502)."""

EXPECTED_ERRORS = (ConfigError, GraphError, LLMError, EvalRunError)
"""Errors of bad input or a failed dependency, whose text an HTTP client or an MCP agent should read."""


def error_text(error: Exception) -> str:
    """The `error` text the HTTP API answers for one of `EXPECTED_ERRORS` (MCP tools reuse it)."""
    return f"{error} (fix: {LLM_FIX})" if isinstance(error, LLMError) else str(error)


def _body(status: int, message: str, details: list[dict[str, str]] | None = None) -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": message, "details": details or []})


async def _on_validation(_: Request, error: RequestValidationError) -> JSONResponse:
    details = [describe_validation_error(dict(item)) for item in error.errors()]
    return _body(422, validation_text(details), details)


async def _on_unknown_graph(_: Request, error: UnknownGraphError) -> JSONResponse:
    return _body(404, str(error))


async def _on_ingest_conflict(_: Request, error: IngestConflictError) -> JSONResponse:
    return _body(409, str(error))


async def _on_graph_error(_: Request, error: GraphError) -> JSONResponse:
    text = str(error)
    return _body(404 if "not in graph" in text or "not in store" in text else 400, text)


async def _on_eval_run_error(_: Request, error: EvalRunError) -> JSONResponse:
    return _body(error.status, str(error))


async def _on_config_error(_: Request, error: ConfigError) -> JSONResponse:
    field = str(error).split(":", 1)[0] if ":" in str(error) else "body"
    return _body(422, str(error), [{"field": field, "message": str(error), "fix": FIXES.get(field, "see /docs")}])


async def _on_llm_error(_: Request, error: LLMError) -> JSONResponse:
    return _body(502, error_text(error), [{"field": "policy", "message": str(error), "fix": LLM_FIX}])


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers above on `app`."""
    app.add_exception_handler(RequestValidationError, _on_validation)  # type: ignore[arg-type]
    app.add_exception_handler(UnknownGraphError, _on_unknown_graph)  # type: ignore[arg-type]
    app.add_exception_handler(IngestConflictError, _on_ingest_conflict)  # type: ignore[arg-type]
    app.add_exception_handler(GraphError, _on_graph_error)  # type: ignore[arg-type]
    app.add_exception_handler(ConfigError, _on_config_error)  # type: ignore[arg-type]
    app.add_exception_handler(EvalRunError, _on_eval_run_error)  # type: ignore[arg-type]
    app.add_exception_handler(LLMError, _on_llm_error)  # type: ignore[arg-type]
