"""HTTP error bodies naming the field and the fix.

Every error answer has one shape, `{"error": "<field>: <reason> (fix: <what to do>)", "details": [{field,
message, fix}, ...]}`: a body that is not JSON, or nests too deeply to parse, is 400; bad input 422; a body,
ingest batch or question over a limit 413 or 422 (`memora_rl.serve.limits`); no valid token 401 (with
`WWW-Authenticate: Bearer`), a token without the scope 403 (`memora_rl.serve.auth`); unknown ids and routes 404;
an ingest another process raced 409; the policy's LLM down 502; a request past `request_timeout_s` 503; a
crash 500. The HTML pages answer the same words as an HTML page (`memora_rl.serve.error_pages`). Answers
never show the server's filesystem paths or database URLs: stores and the runs folder appear by name
(`hide_paths`).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.responses import Response

from memora_rl.errors import ConfigError, GraphError, LLMError
from memora_rl.memory import is_postgres_url
from memora_rl.memory.pg_connection import redact
from memora_rl.serve.auth import AccessError
from memora_rl.serve.config import ServeConfig
from memora_rl.serve.error_pages import error_page, wants_html_error
from memora_rl.serve.eval_runs import EvalRunError
from memora_rl.serve.graphs import UnknownGraphError, store_name
from memora_rl.serve.ingest import IngestConflictError
from memora_rl.serve.limits import LimitError

logger = logging.getLogger(__name__)

FIXES: dict[str, str] = {
    "graph": "send the id of a served graph (GET /v1/graphs lists them); new ids use letters, digits and _ . : -",
    "question": "send the question as a non-blank string (at most the server's max_question_chars, 4000 by default)",
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

JSON_FIX = "send the request as one JSON object (see /docs); check the quotes, commas and brackets there"
"""What to do about a body that is not valid JSON."""


def json_position(document: Any, position: int) -> str:
    r"""Where character `position` of a JSON document is: `line L, column C (character P)`.

    >>> json_position('{"a":\n  }', 8)
    'line 2, column 3 (character 8)'
    """
    text = document.decode("utf-8", "replace") if isinstance(document, bytes) else str(document)
    line = text.count("\n", 0, position) + 1
    column = position - (text.rfind("\n", 0, position) + 1) + 1
    return f"line {line}, column {column} (character {position})"


def describe_validation_error(error: dict[str, Any], document: Any = "") -> dict[str, str]:
    """One pydantic error as {field, message, fix}: the dotted field path, pydantic's reason and what to send.

    A body that is not JSON is the field `body`, with the decoder's reason and where in `document` (the
    body) it failed; FastAPI reports that position as if it were a field name.

    >>> describe_validation_error({"loc": ("body", "question"), "msg": "Field required", "type": "missing"})["field"]
    'question'
    >>> describe_validation_error({"loc": ("body", 5), "type": "json_invalid", "ctx": {"error": "Expecting value"}},
    ...                           '{"a":}')["message"]
    'is not valid JSON: Expecting value at line 1, column 6 (character 5)'
    """
    if error.get("type") == "json_invalid":
        position = next((part for part in error.get("loc", ()) if isinstance(part, int)), 0)
        reason = str(error.get("ctx", {}).get("error", "invalid JSON"))
        where = json_position(document, position)
        return {"field": "body", "message": f"is not valid JSON: {reason} at {where}", "fix": JSON_FIX}
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

EXPECTED_ERRORS = (ConfigError, GraphError, LLMError, EvalRunError, LimitError, AccessError)
"""Errors of bad input, a limit or a failed dependency, whose text an HTTP client or an MCP agent should read."""


def error_text(error: Exception) -> str:
    """The `error` text the HTTP API answers for one of `EXPECTED_ERRORS` (MCP tools reuse it)."""
    return f"{error} (fix: {LLM_FIX})" if isinstance(error, LLMError) else str(error)


def hide_paths(text: str, config: ServeConfig | None) -> str:
    """`text` with the served stores and the runs folder shown by name, not by their filesystem path or URL.

    A PostgreSQL store's URL, with or without its password, becomes `postgresql:<database>[.<schema>]`.

    >>> hide_paths("no session in /srv/m/a.sqlite", ServeConfig(stores=["/srv/m/a.sqlite"]))
    'no session in a.sqlite'
    >>> hide_paths("not in postgresql://ann@db:5432/mem", ServeConfig(stores=["postgresql://ann:pw@db:5432/mem"]))
    'not in postgresql:mem'
    """
    if config is None:
        return text
    folders = [config.runs_dir] if config.runs_dir is not None else []
    names: dict[str, str] = {}
    for location in config.stores:
        if is_postgres_url(location):
            names[location] = names[redact(location)] = store_name(location)
    for path in [*(store for store in config.stores if not is_postgres_url(store)), *folders]:
        resolved = Path(path).resolve()
        for spelling in (str(path), str(resolved)):
            if os.sep in spelling:  # a bare name (`g.sqlite`, `.`) shows no folder; replacing it could garble text
                names[spelling] = resolved.name
    for spelling in sorted(names, key=len, reverse=True):  # a longer path first: it may contain a shorter one
        text = text.replace(spelling, names[spelling])
    return text


def answer(
    request: Request,
    status: int,
    message: str,
    details: list[dict[str, str]] | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    """The error answer: JSON `{error, details}`, or the HTML error page for a page route, paths hidden."""
    config = getattr(getattr(request.app.state, "service", None), "config", None)
    message = hide_paths(message, config)
    details = [{key: hide_paths(value, config) for key, value in item.items()} for item in details or []]
    page = error_page(request, status, message, details, headers) if wants_html_error(request) else None
    if page is not None:
        return page
    return JSONResponse(status_code=status, content={"error": message, "details": details}, headers=headers)


async def _on_validation(request: Request, error: RequestValidationError) -> Response:
    details = [describe_validation_error(dict(item), error.body) for item in error.errors()]
    unparsed = any(item.get("type") == "json_invalid" for item in error.errors())
    return answer(request, 400 if unparsed else 422, validation_text(details), details)


async def _on_http_error(request: Request, error: HTTPException) -> Response:
    """FastAPI's own refusals (an unparsable body, no such route or method) in the documented shape."""
    if isinstance(error.__cause__, RecursionError):
        fix = "send the request's documented shape (see /docs): its JSON nests a few levels deep at most"
        detail = {"field": "body", "message": "is JSON nested too deeply to parse", "fix": fix}
    elif error.status_code == 400 and error.__cause__ is not None:
        detail = {"field": "body", "message": f"could not be parsed ({error.__cause__!r})", "fix": JSON_FIX}
    else:
        fix = "see /docs for the API's routes and the methods they take, or / for the web page"
        detail = {"field": "request", "message": f"{request.method} {request.url.path}: {error.detail}", "fix": fix}
    return answer(request, error.status_code, validation_text([detail]), [detail], error.headers)


async def _on_limit_error(request: Request, error: LimitError) -> Response:
    headers = {"Retry-After": "1"} if error.status == 503 else None
    return answer(request, error.status, str(error), [error.detail()], headers)


async def _on_access_error(request: Request, error: AccessError) -> Response:
    return answer(request, error.status, str(error), [error.detail()], error.headers())


async def _on_unknown_graph(request: Request, error: UnknownGraphError) -> Response:
    return answer(request, 404, str(error))


async def _on_ingest_conflict(request: Request, error: IngestConflictError) -> Response:
    return answer(request, 409, str(error))


async def _on_graph_error(request: Request, error: GraphError) -> Response:
    text = str(error)
    return answer(request, 404 if "not in graph" in text or "not in store" in text else 400, text)


async def _on_eval_run_error(request: Request, error: EvalRunError) -> Response:
    return answer(request, error.status, str(error))


async def _on_config_error(request: Request, error: ConfigError) -> Response:
    field = str(error).split(":", 1)[0] if ":" in str(error) else "body"
    return answer(
        request, 422, str(error), [{"field": field, "message": str(error), "fix": FIXES.get(field, "see /docs")}]
    )


async def _on_llm_error(request: Request, error: LLMError) -> Response:
    return answer(request, 502, error_text(error), [{"field": "policy", "message": str(error), "fix": LLM_FIX}])


async def _on_crash(request: Request, error: Exception) -> Response:
    """An unexpected error: 500 in the documented shape (the server log has its traceback; no paths shown)."""
    message = f"the service failed on {request.method} {request.url.path} ({type(error).__name__})"
    fix = "retry; if it fails again, report it with the server log's traceback (it is a bug, or a damaged store)"
    return answer(request, 500, f"{message} (fix: {fix})", [{"field": "request", "message": message, "fix": fix}])


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers above on `app`."""
    app.add_exception_handler(RequestValidationError, _on_validation)  # type: ignore[arg-type]
    app.add_exception_handler(HTTPException, _on_http_error)  # type: ignore[arg-type]
    app.add_exception_handler(LimitError, _on_limit_error)  # type: ignore[arg-type]
    app.add_exception_handler(AccessError, _on_access_error)  # type: ignore[arg-type]
    app.add_exception_handler(UnknownGraphError, _on_unknown_graph)  # type: ignore[arg-type]
    app.add_exception_handler(IngestConflictError, _on_ingest_conflict)  # type: ignore[arg-type]
    app.add_exception_handler(GraphError, _on_graph_error)  # type: ignore[arg-type]
    app.add_exception_handler(ConfigError, _on_config_error)  # type: ignore[arg-type]
    app.add_exception_handler(EvalRunError, _on_eval_run_error)  # type: ignore[arg-type]
    app.add_exception_handler(LLMError, _on_llm_error)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _on_crash)
