"""The builders import one way: the registry and the CLI import builders, never the reverse."""

from __future__ import annotations

import ast
from pathlib import Path

import memora_rl.builders

PACKAGE = Path(memora_rl.builders.__file__).parent
TOP = {"memora_rl.builders.registry", "memora_rl.builders.cli"}


def _imported_modules(path: Path) -> set[str]:
    """Every module named by an import statement of a file, lazy (in-function) imports included."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_no_builder_module_imports_the_registry_or_the_cli():
    offenders = {
        path.name: sorted(_imported_modules(path) & TOP)
        for path in sorted(PACKAGE.glob("*.py"))
        if f"memora_rl.builders.{path.stem}" not in TOP and _imported_modules(path) & TOP
    }
    assert offenders == {}
