"""Config as data: YAML files and `key=value` overrides loaded into typed pydantic models.

Every concern owns one pydantic model (in its own sub-package) holding its defaults;
this module only reads YAML, applies dotted overrides and reports errors that name
the file, the key and the fix.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from memora_rl.errors import ConfigError

ConfigT = TypeVar("ConfigT", bound=BaseModel)


class StrictModel(BaseModel):
    """Base for config models: unknown keys are errors; each field's docstring is its description (schema, --help)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, use_attribute_docstrings=True)


def parse_override(override: str) -> tuple[list[str], Any]:
    """Split `a.b.c=value` into (["a", "b", "c"], value), the value parsed as YAML.

    >>> parse_override("grpo.max_steps=5")
    (['grpo', 'max_steps'], 5)
    """
    if "=" not in override:
        raise ConfigError(f"Override {override!r} has no '='. Write overrides as key=value, e.g. train.max_steps=5.")
    key, raw = override.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError(f"Override {override!r} has an empty key. Write it as section.key=value.")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key.split("."), value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Return a copy of `data` with every dotted `key=value` override set."""
    result: dict[str, Any] = yaml.safe_load(yaml.safe_dump(data)) or {}
    for override in overrides:
        path, value = parse_override(override)
        node = result
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"Override {override!r}: {part!r} is a value, not a section.")
            node = child
        node[path[-1]] = value
    return result


def read_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping, with an error naming the file when it is missing or malformed."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"Config file {path} does not exist. Pass a YAML file, e.g. one under configs/.")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise ConfigError(f"Config file {path} is not valid YAML: {error}") from error
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"Config file {path} must hold a mapping at the top level, got {type(data).__name__}.")
    return data


def load_config(model: type[ConfigT], path: str | Path | None = None, overrides: list[str] | None = None) -> ConfigT:
    """Build `model` from an optional YAML file plus `key=value` overrides.

    Raises:
        ConfigError: naming the source and each offending key with pydantic's reason.
    """
    data = read_yaml(path) if path is not None else {}
    data = apply_overrides(data, overrides or [])
    try:
        return model.model_validate(data)
    except ValidationError as error:
        source = str(path) if path is not None else "defaults"
        problems = "; ".join(_problem(model, item) for item in error.errors())
        raise ConfigError(f"Invalid config ({source}): {problems}") from error


def _problem(model: type[BaseModel], item: Any) -> str:
    """One validation error as `dotted.key: reason`; an unknown key also gets the closest valid one."""
    loc = [str(part) for part in item["loc"]]
    text = f"{'.'.join(loc) or '<root>'}: {item['msg']}"
    if item["type"] != "extra_forbidden":
        return text
    section: Any = model
    for part in loc[:-1]:  # walk down to the model that owns the unknown key
        field = getattr(section, "model_fields", {}).get(part)
        section = field.annotation if field is not None else None
    valid = sorted(getattr(section, "model_fields", {}))
    if not valid:
        return text
    close = difflib.get_close_matches(loc[-1], valid, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"{text} ({hint}valid keys: {', '.join(valid)})"


def dump_config(config: BaseModel, path: str | Path) -> None:
    """Write the resolved config as YAML (saved next to runs and exports)."""
    Path(path).write_text(yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False))
