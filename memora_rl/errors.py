"""Typed errors: each says what was expected, what was received, and what to do."""

from __future__ import annotations

from pydantic import ValidationError


class MemoraError(Exception):
    """Base class of every error memora-rl raises on purpose."""


class ConfigError(MemoraError):
    """A config file, a `key=value` override or a CLI option is invalid."""


class DataError(MemoraError):
    """A dataset file is missing, truncated or does not match its schema."""


class GraphError(MemoraError):
    """A memory-graph store is missing, inconsistent, or was asked for something absent."""


class ModelError(MemoraError):
    """A model name, path or hub id cannot be resolved or loaded."""


class ServerError(MemoraError):
    """A vLLM server failed to start, died, or did not answer its health check."""


class LLMError(MemoraError):
    """A call to an OpenAI-compatible endpoint failed after its retries."""


class StructuredOutputError(LLMError):
    """An LLM answer did not match the requested JSON schema, even after one repair retry."""

    def __init__(self, message: str, raw_text: str = "") -> None:
        super().__init__(message)
        self.raw_text = raw_text
        """The last answer the model wrote, unparsed (for logs and debugging)."""


class RolloutError(MemoraError):
    """An episode could not be played (generation backend failure, broken token alignment)."""


class ExportError(MemoraError):
    """A training run cannot be exported, or an export folder is not valid."""


class EvalError(MemoraError):
    """An offline evaluation was asked for something it cannot do (unknown policy, no split)."""


def describe_validation_error(error: ValidationError, root: str = "<root>") -> str:
    """One line listing each invalid field of a pydantic error and its reason (`root` names a top-level error).

    >>> from pydantic import BaseModel
    >>> class Turn(BaseModel):
    ...     speaker: str
    >>> try:
    ...     Turn.model_validate({})
    ... except ValidationError as error:
    ...     describe_validation_error(error)
    'speaker: Field required'
    """
    return "; ".join(f"{'.'.join(str(p) for p in item['loc']) or root}: {item['msg']}" for item in error.errors())
