"""Structured output helpers: the `response_format` payload, tolerant JSON parsing and the repair prompt.

Pure functions used by `LLMClient.chat_json`. Parsing tolerates what small models wrap
around their JSON (code fences, a sentence before or after) but never guesses fields:
the object must validate against the pydantic schema.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from memora_rl.errors import describe_validation_error

SchemaT = TypeVar("SchemaT", bound=BaseModel)

REPAIR_PROMPT = (
    "Your previous answer could not be used: {error}. "
    "Reply again with only one JSON object that matches the requested schema, and nothing else."
)
"""Sent after a bad answer; `{error}` names what was wrong (no JSON object, or the validation errors)."""

SCHEMA_INSTRUCTION = "\n\nReply with only one JSON object matching this JSON schema:\n{schema}"
"""Appended to the last message when the endpoint gets no `response_format`."""

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)


def schema_name(schema: type[BaseModel]) -> str:
    """The schema's name as OpenAI allows it (letters, digits, `_`, `-`; at most 64 characters).

    >>> class Answer_v2(BaseModel):
    ...     text: str
    >>> schema_name(Answer_v2)
    'Answer_v2'
    """
    return re.sub(r"[^A-Za-z0-9_-]", "_", schema.__name__)[:64] or "answer"


def response_format(schema: type[BaseModel]) -> dict[str, Any]:
    """The OpenAI / vLLM `response_format` asking for a strict JSON object of `schema`."""
    return {
        "type": "json_schema",
        "json_schema": {"name": schema_name(schema), "schema": schema.model_json_schema(), "strict": True},
    }


def json_objects(text: str) -> Iterator[dict[str, Any]]:
    r"""Every JSON object in `text`: first inside code fences, then anywhere, in order of appearance.

    >>> list(json_objects('Sure! ```json\n{"a": 1}\n``` done'))[0]
    {'a': 1}
    >>> list(json_objects('The answer is {"a": {"b": 2}} ok'))[0]
    {'a': {'b': 2}}
    """
    decoder = json.JSONDecoder()
    candidates = [match.group(1) for match in _FENCE.finditer(text)] + [text]
    for candidate in candidates:
        start = candidate.find("{")
        while start != -1:
            try:
                value, _ = decoder.raw_decode(candidate, start)
            except json.JSONDecodeError:
                value = None
            if isinstance(value, dict):
                yield value
            start = candidate.find("{", start + 1)


def parse_structured(text: str, schema: type[SchemaT]) -> SchemaT:
    r"""The first JSON object in `text` that validates against `schema`.

    Raises:
        ValueError: no JSON object in `text`, or none validates (naming the first one's errors).

    >>> class Fact(BaseModel):
    ...     subject: str
    >>> parse_structured('```json\n{"subject": "Alice"}\n```', Fact).subject
    'Alice'
    """
    first_error: ValidationError | None = None
    for value in json_objects(text):
        try:
            return schema.model_validate(value)
        except ValidationError as error:
            first_error = first_error or error
    if first_error is None:
        raise ValueError("the answer holds no JSON object")
    raise ValueError(f"the JSON object does not match {schema.__name__}: {describe_validation_error(first_error)}")


def repair_messages(messages: list[dict[str, str]], bad_answer: str, error: Exception) -> list[dict[str, str]]:
    """The conversation for the repair request: the bad answer, then a message naming the error."""
    return [
        *messages,
        {"role": "assistant", "content": bad_answer},
        {"role": "user", "content": REPAIR_PROMPT.format(error=error)},
    ]


def with_schema_instruction(messages: list[dict[str, str]], schema: type[BaseModel]) -> list[dict[str, str]]:
    """A copy of `messages` whose last message asks for a JSON object of `schema` (no `response_format`)."""
    if not messages:
        return messages
    instruction = SCHEMA_INSTRUCTION.format(schema=json.dumps(schema.model_json_schema()))
    last = {**messages[-1], "content": messages[-1].get("content", "") + instruction}
    return [*messages[:-1], last]
