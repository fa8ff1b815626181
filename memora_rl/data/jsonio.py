"""Read dataset JSON files and check their fields, with errors that name the file, the record and the key.

Loaders call `read_json` once at the edge, then `require` for every field they use, so a
missing key or a wrong type becomes one `DataError` such as
``locomo10.json: conversation 'conv-26', qa[3]: key 'question' is missing (expected str)``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from memora_rl.errors import DataError

ModelT = TypeVar("ModelT", bound=BaseModel)

_TYPE_NAMES = {str: "str", int: "int", float: "float", bool: "bool", list: "list", dict: "object"}


def read_json(path: str | Path) -> Any:
    """Parse a JSON file, raising `DataError` naming the file when it is missing or malformed.

    Args:
        path: The JSON file to read.

    Returns:
        The decoded JSON value.

    Raises:
        DataError: The file does not exist, is not UTF-8, or is not valid (e.g. truncated) JSON.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: file not found. Pass the path of a LoCoMo- or LongMemEval-shaped JSON file.")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as error:
        raise DataError(f"{path}: not UTF-8 text ({error}). Re-download or regenerate the file.") from error
    except json.JSONDecodeError as error:
        raise DataError(
            f"{path}: invalid JSON at line {error.lineno}, column {error.colno} ({error.msg}); "
            "the file may be truncated. Re-download or regenerate it."
        ) from error


def _type_label(expected: type | tuple[type, ...]) -> str:
    """Human name of an expected type or tuple of types ("str or int")."""
    types = expected if isinstance(expected, tuple) else (expected,)
    return " or ".join(_TYPE_NAMES.get(kind, kind.__name__) for kind in types)


def _json_type(value: Any) -> str:
    """JSON-ish name of a received value's type."""
    if value is None:
        return "null"
    return _TYPE_NAMES.get(type(value), type(value).__name__)


def check_type(value: Any, expected: type | tuple[type, ...], where: str, key: str) -> Any:
    """Return `value` if it has the expected type, else raise `DataError` naming `where` and `key`.

    `bool` never passes for `int` (JSON `true` is not a number).
    """
    types = expected if isinstance(expected, tuple) else (expected,)
    is_bad_bool = isinstance(value, bool) and bool not in types
    if is_bad_bool or not isinstance(value, types):
        raise DataError(
            f"{where}: key {key!r} has type {_json_type(value)}, expected {_type_label(expected)}. "
            "Fix the record or regenerate the file."
        )
    return value


def require(record: Any, key: str, expected: type | tuple[type, ...], where: str) -> Any:
    """Return `record[key]` checked against `expected`; a missing key or wrong type raises `DataError`.

    Args:
        record: The JSON object holding the field.
        key: The field name.
        expected: Allowed Python type(s) of the value.
        where: Location prefix for messages: file plus conversation/question id.

    Raises:
        DataError: `record` is not an object, the key is missing, or the value has another type.
    """
    if not isinstance(record, dict):
        raise DataError(f"{where}: expected a JSON object holding key {key!r}, got {_json_type(record)}.")
    if key not in record:
        raise DataError(f"{where}: key {key!r} is missing (expected {_type_label(expected)}). Fix the record.")
    return check_type(record[key], expected, where, key)


def answer_text(value: Any, where: str, key: str) -> str:
    """Normalise an answer that may be a string or a number (some datasets store years as ints)."""
    check_type(value, (str, int, float), where, key)
    return value if isinstance(value, str) else str(value)


def read_model_lines(
    path: Path, model: type[ModelT], damaged: Callable[[int, ValidationError], Exception]
) -> list[ModelT]:
    """One `model` per non-blank line of an appended JSONL file, in file order.

    A bad last line is a writer killed mid-line and is skipped; a bad earlier line is damage and
    raises `damaged(line_number, error)`.
    """
    lines = path.read_text(encoding="utf-8").splitlines()
    items = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            items.append(model.model_validate_json(line))
        except ValidationError as error:
            if number != len(lines):
                raise damaged(number, error) from error
    return items
