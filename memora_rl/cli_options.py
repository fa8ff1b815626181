"""CLI help written once: typer options and override lists whose text and defaults come from config models.

Each config field documents itself with an attribute docstring (`StrictModel` turns it into
`Field.description`); the commands reuse it instead of a second help text and a second default.
An option built here defaults to None, meaning "the config's value" (see `given`).
"""

from __future__ import annotations

from typing import Any

import typer
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined
from rich.markup import escape


def field_help(model: type[BaseModel], name: str) -> str:
    """The docstring of `model.<name>` on one line; a field without one is a bug, not an empty help."""
    description = model.model_fields[name].description
    if not description:
        raise TypeError(f"{model.__name__}.{name} has no docstring; document the field to show it in --help.")
    return " ".join(description.split())


def field_default(field: FieldInfo) -> Any:
    """The field's default value (a factory's product), or None when the field is required."""
    default = field.get_default(call_default_factory=True)
    return None if default is PydanticUndefined else default


def config_option(model: type[BaseModel], name: str, *param_decls: str, note: str = "") -> Any:
    """A typer option for `model.<name>`: its docstring as help (plus a CLI-only `note`), its default as shown.

    Use with a None default (`Annotated[int | None, config_option(EvalConfig, "seed")] = None`)
    and pass the values through `given`, so the config model stays the one place holding defaults.
    """
    parts = [field_help(model, name), note]
    default = field_default(model.model_fields[name])
    if not (default is None or default is False or default == []):  # what an unset option means anyway
        parts.append(f"[default: {default}]")
    help_text = escape(" ".join(part for part in parts if part))
    return typer.Option(*(param_decls or [f"--{name.replace('_', '-')}"]), help=help_text, show_default=False)


def given(**values: Any) -> dict[str, Any]:
    """The options the user passed; a None one is left out so the config model's default applies."""
    return {name: value for name, value in values.items() if value is not None}


def override_keys_help(model: type[BaseModel]) -> str:
    """Help text (rich markup) listing the `key=value` override keys of `model`: each field's docstring and default."""
    lines = []
    for name, field in model.model_fields.items():
        section = field.annotation
        if isinstance(section, type) and issubclass(section, BaseModel):  # a nested section: list its keys
            keys = ", ".join(section.model_fields)
            lines.append(f"[bold]{name}.*[/]: {escape(field_help(model, name))} Keys: {keys}.")
        else:
            default = escape(str(field_default(field)))
            lines.append(f"[bold]{name}[/] [dim](default {default})[/]: {escape(field_help(model, name))}")
    return "[bold]Override keys[/] (key=value):\n\n" + "\n".join(lines)
